// BertConfig: the Hugging Face config.json of a BERT-family encoder (model/model_family.h: BERT, RoBERTa, XLM-R,
// CamemBERT, Data2VecText, DistilBERT, ELECTRA) and its classification labels, validated. Fields carry BERT's names
// whatever the family (DistilBERT's dim is hidden_size here); reading and writing translate.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kernels/activation.h"
#include "model/model_family.h"

namespace bertrain {

struct BertConfig {
  static constexpr int kMaxHiddenLayers = 1024;  // validate()'s bound on num_hidden_layers

  // Defaults are transformers.BertConfig's; from_json starts from the family's own defaults (RobertaConfig's, ...)
  // for the fields config.json omits, as from_pretrained does.
  ModelType model_type = ModelType::kBert;
  int vocab_size = 30522;
  int hidden_size = 768;
  int num_hidden_layers = 12;
  int num_attention_heads = 12;
  int intermediate_size = 3072;
  std::string hidden_act = "gelu";
  int max_position_embeddings = 512;
  int type_vocab_size = 2;
  double layer_norm_eps = 1e-12;
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  std::optional<double> classifier_dropout;  // null: the classifier uses hidden_dropout_prob
  double initializer_range = 0.02;
  int pad_token_id = 0;  // -1: none (config.json's null), so no padding_idx row
  int embedding_size = 0;  // ELECTRA's embedding width when it differs from hidden_size; 0: hidden_size
  std::vector<std::string> labels;  // id2label in id order; empty when config.json names no labels
  // Hugging Face's problem_type: "single_label_classification" (softmax over the labels),
  // "multi_label_classification" (one sigmoid per label), "regression" or "" when config.json has none.
  std::string problem_type;
  nlohmann::json extra;             // every other field, kept so that writing preserves it

  const ModelFamily& family() const { return model_family(model_type); }
  Activation activation() const { return activation_from_name(hidden_act); }
  // The width of the embedding tables and their LayerNorm: hidden_size, except in an ELECTRA with embeddings_project.
  int embedding_width() const { return embedding_size > 0 ? embedding_size : hidden_size; }
  bool has_embedding_projection() const { return embedding_width() != hidden_size; }
  // The padding_idx of the position table (the RoBERTa-like families: pad_token_id; else -1, none), which is also how
  // embedding_positions (kernels/embedding.h) numbers a row's positions. Every family's word table has pad_token_id.
  int position_padding_idx() const { return family().positions_after_padding ? pad_token_id : -1; }
  // The position row of a row's first token: pad_token_id + 1 for the RoBERTa-like families (transformers numbers real
  // tokens from there), 0 otherwise.
  int position_offset() const { return position_padding_idx() + 1; }
  // Tokens a row may have: the position table less the offset (514 - 2 = 512 for roberta-base).
  int max_sequence_length() const { return max_position_embeddings - position_offset(); }
  // Token-type rows; 0 when the family has no table (DistilBERT).
  int token_type_rows() const { return family().token_types ? type_vocab_size : 0; }
  int head_dim() const { return hidden_size / num_attention_heads; }
  int num_labels() const { return static_cast<int>(labels.size()); }

  // Parses and validates; `source` (the file name) prefixes every error message.
  static BertConfig from_json(const nlohmann::json& json, const std::string& source);
  static BertConfig load(const std::string& path);
  // Throws Error, prefixed with `source`, on non-positive sizes, hidden not divisible by heads, unknown
  // activation, probabilities outside [0, 1) and inconsistent labels.
  void validate(const std::string& source) const;
  // config.json of the family's sequence classifier (BertForSequenceClassification, ...), in the family's own
  // field names (problem_type as set; when empty, single_label_classification, or multi_label_classification for one
  // label).
  nlohmann::json to_classifier_json() const;
};

}  // namespace bertrain

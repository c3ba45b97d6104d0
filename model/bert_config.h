// BertConfig: the Hugging Face config.json of a BERT encoder (and its classification labels), validated.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kernels/activation.h"

namespace bertrain {

struct BertConfig {
  // Defaults are transformers.BertConfig's, used when config.json omits a field (as from_pretrained does).
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
  std::vector<std::string> labels;  // id2label in id order; empty when config.json names no labels
  // Hugging Face's problem_type: "single_label_classification" (softmax over the labels),
  // "multi_label_classification" (one sigmoid per label), "regression" or "" when config.json has none.
  std::string problem_type;
  nlohmann::json extra;             // every other field, kept so that writing preserves it

  Activation activation() const { return activation_from_name(hidden_act); }
  int head_dim() const { return hidden_size / num_attention_heads; }
  int num_labels() const { return static_cast<int>(labels.size()); }

  // Parses and validates; `source` (the file name) prefixes every error message.
  static BertConfig from_json(const nlohmann::json& json, const std::string& source);
  static BertConfig load(const std::string& path);
  // Throws Error, prefixed with `source`, on non-positive sizes, hidden not divisible by heads, unknown
  // activation, probabilities outside [0, 1) and inconsistent labels.
  void validate(const std::string& source) const;
  // config.json of a BertForSequenceClassification (problem_type as set; single_label_classification when empty).
  nlohmann::json to_classifier_json() const;
};

}  // namespace bertrain

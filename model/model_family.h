// The members of the BERT family bertrain fine-tunes, and everything that tells them apart: config.json's
// model_type, the names their checkpoints give each tensor, their embeddings (RoBERTa's positions start after the
// padding index, DistilBERT has no token types, ELECTRA may project narrower embeddings up to the hidden size) and
// their classification heads. One encoder (model/bert_classifier*.h) runs all of them, parameterised by this table.
#pragma once

#include <string>
#include <vector>

#include "kernels/activation.h"

namespace bertrain {

enum class ModelType { kBert, kRoberta, kXlmRoberta, kCamembert, kData2VecText, kDistilBert, kElectra };
// Every type, in the order messages list them.
constexpr ModelType kModelTypes[] = {ModelType::kBert,         ModelType::kRoberta,       ModelType::kXlmRoberta,
                                     ModelType::kCamembert,    ModelType::kData2VecText,  ModelType::kDistilBert,
                                     ModelType::kElectra};

// A layer's tensors, named from the layer's prefix and without ".weight" / ".bias".
struct LayerTensorNames {
  const char *query, *key, *value, *attention_output, *attention_norm, *intermediate, *output, *output_norm;
};

struct ModelFamily {
  ModelType type;
  const char* model_type;    // config.json's model_type
  const char* architecture;  // the transformers class of the sequence classifier
  const char* base;          // the encoder's prefix in a classifier checkpoint: "bert."
  const char* layers;        // after `base`, before the layer index: "encoder.layer."
  LayerTensorNames layer;
  // The classification head reads the first token's final hidden state x:
  //   logits = out(dropout(act(dense(head_input_dropout ? dropout(x) : x))))
  // BERT: the pooler (dense, tanh), then classifier; RoBERTa-like: classifier.dense, tanh, classifier.out_proj,
  // with dropout also before the dense; DistilBERT: pre_classifier, ReLU, classifier; ELECTRA: as RoBERTa with GELU.
  const char* head_dense;  // full names, without ".weight" / ".bias"
  const char* head_out;
  Activation head_activation;
  bool head_input_dropout;
  bool attention_output_dropout;  // DistilBERT drops nothing between the attention's output dense and its LayerNorm
  bool token_types;               // DistilBERT has no token-type table
  bool positions_after_padding;   // RoBERTa-like: positions from pad_token_id + 1, padding tokens skipped
  bool embedding_projection;      // ELECTRA: embeddings_project when embedding_size != hidden_size
  // Checkpoint tensors outside the classifier that are dropped on load (pre-training heads, buffers, an unused
  // pooler), as name prefixes after the optional `base`.
  std::vector<std::string> ignored;
};

// The family of a config.json model_type; throws Error naming the supported ones for any other.
const ModelFamily& model_family(const std::string& model_type);
const ModelFamily& model_family(ModelType type);
// The family of a transformers class name ("RobertaModel", "BertForMaskedLM", ...): a family's prefix followed by
// "Model", "For..." or "LMHead..."; null for any other class (MegatronBertModel, BertGenerationEncoder, ...). For
// config.json files without model_type, which transformers' own loader refuses but which its architectures tell.
const ModelFamily* model_family_of_class(const std::string& class_name);
// "bert, roberta, xlm-roberta, camembert, data2vec-text, distilbert, electra", for messages and --help.
std::string supported_model_types();

}  // namespace bertrain

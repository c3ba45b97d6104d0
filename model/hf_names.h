// Mapping of tensor names found in Hugging Face checkpoints of a model family to the names of our layout
// (model/bert_params.h): base-model checkpoints (BertModel, RobertaModel, ...) lack the family's prefix ("bert.",
// "roberta.", ...), older ones (SciBERT's original release) call LayerNorm parameters gamma / beta, and
// pre-training checkpoints carry heads and buffers we ignore (ModelFamily::ignored).
#pragma once

#include <optional>
#include <string>

#include "model/model_family.h"

namespace bertrain {

// The layout name for a checkpoint tensor name, or nullopt when the tensor is to be ignored (the family's
// pre-training heads, position_ids buffers, RoBERTa's unused pooler).
std::optional<std::string> canonical_param_name(const std::string& checkpoint_name, const ModelFamily& family);

}  // namespace bertrain

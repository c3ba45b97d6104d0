// Mapping of tensor names found in Hugging Face BERT checkpoints to the names of our layout
// (model/bert_params.h): BertModel checkpoints lack the "bert." prefix, older ones (SciBERT's original
// release) call LayerNorm parameters gamma / beta, and pre-training checkpoints carry heads we ignore.
#pragma once

#include <optional>
#include <string>

namespace bertrain {

// The layout name for a checkpoint tensor name, or nullopt when the tensor is to be ignored
// (cls.* pre-training heads, embeddings.position_ids buffers).
std::optional<std::string> canonical_param_name(const std::string& checkpoint_name);

}  // namespace bertrain

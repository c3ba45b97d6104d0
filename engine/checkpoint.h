// Training checkpoints: a Hugging Face model directory plus, for resuming, the optimizer moments
// (optimizer.safetensors) and the trainer state (trainer_state.json). Directories are replaced atomically
// (core/files.h): an interrupted write never leaves a half-written checkpoint under the final name.
#pragma once

#include <string>

#include "core/files.h"
#include "engine/adam.h"

namespace bertrain {

// Optimizer state next to a model: exp_avg and exp_avg_sq as flat F32 tensors in the parameter buffer's layout,
// the step count and that layout's fingerprint (ParamLayout::fingerprint) in metadata.
void save_optimizer_state(const std::string& path, const AdamOptimizer<float>& optimizer,
                          const std::string& layout_fingerprint);
// Restores into `optimizer`; throws Error naming the file unless the sizes and the layout fingerprint match (flat
// moments saved in another layout, e.g. by a version that kept Q, K and V apart, would land on the wrong weights).
void load_optimizer_state(const std::string& path, AdamOptimizer<float>* optimizer,
                          const std::string& layout_fingerprint);

}  // namespace bertrain

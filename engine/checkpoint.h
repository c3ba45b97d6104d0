// Training checkpoints: a Hugging Face model directory plus, for resuming, the optimizer moments
// (optimizer.safetensors) and the trainer state (trainer_state.json). Directories are replaced atomically
// (core/files.h): an interrupted write never leaves a half-written checkpoint under the final name.
#pragma once

#include <string>

#include "core/files.h"
#include "engine/adam.h"

namespace bertrain {

// Optimizer state next to a model: exp_avg and exp_avg_sq as flat F32 tensors, the step count in metadata.
void save_optimizer_state(const std::string& path, const AdamOptimizer<float>& optimizer);
// Restores into `optimizer` (sizes must match); throws Error naming the file otherwise.
void load_optimizer_state(const std::string& path, AdamOptimizer<float>* optimizer);

}  // namespace bertrain

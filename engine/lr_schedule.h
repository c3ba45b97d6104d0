// Hugging Face Trainer's step-wise learning-rate schedules (transformers.get_scheduler's linear, cosine and
// constant-with-warmup LambdaLR), beside the epoch-wise ReduceLROnPlateau of engine/lr_scheduler.h.
#pragma once

#include <string>

namespace bertrain {

enum class LrSchedulerKind { kPlateau, kLinear, kCosine, kConstant };

LrSchedulerKind parse_lr_scheduler(const std::string& text);  // Error naming --lr-scheduler and the choices
std::string to_string(LrSchedulerKind kind);                  // "plateau" | "linear" | "cosine" | "constant"

// Trainer's get_warmup_steps: `warmup_steps` when > 0, else ceil(warmup_ratio · total_steps).
long warmup_steps_for(long warmup_steps, double warmup_ratio, long total_steps);

// The multiplier of the base rate for optimizer update `step` (0-based: the rate update `step` uses), with
// transformers' float operations: warmup step / max(1, warmup); then linear max(0, (total - step) / max(1, total -
// warmup)), cosine max(0, 0.5 · (1 + cos(π · 0.5 · 2 · progress))) with progress = (step - warmup) / max(1, total -
// warmup), constant 1. Past total_steps linear stays 0 and cosine rises again (transformers' lambdas do the same).
// Plateau: 1 (its rate comes from ReduceLROnPlateau).
double lr_multiplier(LrSchedulerKind kind, long step, long warmup_steps, long total_steps);

}  // namespace bertrain

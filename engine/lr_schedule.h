// The step-wise learning-rate schedules of Hugging Face's Trainer (--lr-scheduler linear | cosine |
// constant, with --warmup-steps / --warmup-ratio), as a pure function of the optimizer update index, so
// the trainer, a resumed run and the tests all get the same number for the same step. "plateau" is
// Made-With-ML's epoch-wise ReduceLROnPlateau (engine/lr_scheduler.h): its step-wise multiplier is 1.
//
// lr_multiplier reproduces transformers.get_scheduler(name, optimizer, num_warmup_steps,
// num_training_steps) (transformers 5.23, torch 2.15): LambdaLR sets lr = base_lr * lambda(last_epoch),
// last_epoch being 0 before the first optimizer.step() and +1 after each scheduler.step(), so update k
// (0-based) runs with base_lr * lambda(k). The lambdas, with W warmup and N total steps:
//   warmup (k < W): k / max(1, W) — so update 0 runs with lr 0 whenever W > 0, as in transformers;
//   linear:   max(0, (N - k) / max(1, N - W))
//   cosine:   max(0, 0.5 * (1 + cos(pi * 0.5 * 2 * (k - W) / max(1, N - W))))   (num_cycles 0.5)
//   constant: 1
// in transformers' operation order, so linear, constant and every warmup value are bit-identical and
// cosine differs at most by what the C library's cos() may (tests/engine/test_lr_schedule.cpp).
// "constant" with W > 0 is get_constant_schedule_with_warmup (transformers' "constant_with_warmup"):
// transformers' own "constant" ignores the warmup, bertrain's does not. With W = 0 they are the same.
//
// Past N (the trainer never goes there, but a resumed run with more epochs could): linear stays at 0;
// cosine keeps following the cosine, 0 at k = N, then climbing back to 1 at k = 2N - W; constant stays
// 1. With W >= N linear and cosine ramp up for W updates and then drop straight to 0 (linear) or follow
// the cosine from 1 (cosine, N - W clamped to 1), as transformers does.
#pragma once

#include <string>

namespace bertrain {

enum class LrSchedulerKind { kPlateau, kLinear, kCosine, kConstant };

// "plateau" | "linear" | "cosine" | "constant"; throws Error naming --lr-scheduler and the choices.
LrSchedulerKind parse_lr_scheduler(const std::string& text);
std::string to_string(LrSchedulerKind kind);

// Trainer's get_warmup_steps: `warmup_steps` when > 0, else ceil(warmup_ratio * total_steps), so a
// ratio of 0.07 over 100 steps gives ceil(7.000000000000001) = 8 warmup steps, as in transformers.
// warmup_steps >= 0, warmup_ratio in [0, 1) (Errors name --warmup-steps / --warmup-ratio),
// total_steps >= 1. A warmup longer than the run is allowed, as transformers allows it (see above).
long warmup_steps_for(long warmup_steps, double warmup_ratio, long total_steps);

// The multiplier of the base lr for optimizer update `step` (0-based: the lr that update `step` uses).
// step >= 0, warmup_steps >= 0, total_steps >= 1, else Error. Plateau: always 1.
double lr_multiplier(LrSchedulerKind kind, long step, long warmup_steps, long total_steps);

}  // namespace bertrain

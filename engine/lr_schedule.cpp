// Hugging Face Trainer's step-wise schedules (see the header): the lambdas of transformers/optimization.py
// written with the same double operations in the same order.
#include "engine/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace bertrain {

namespace {

constexpr double kPi = 3.141592653589793;  // Python's math.pi, the same double as M_PI

// The warmup ramp of every schedule. transformers divides by max(1, W) (max(1.0, W) for constant, the
// same double); inside the ramp k < W, so W >= 1 and the max never changes the value.
double warmup_ramp(long step, long warmup_steps) {
  return static_cast<double>(step) / static_cast<double>(std::max(1L, warmup_steps));
}

double linear(long step, long warmup_steps, long total_steps) {
  // Python's max(0.0, x) keeps 0.0 unless x > 0.0; std::max(0.0, x) does the same (also for -0.0).
  return std::max(0.0, static_cast<double>(total_steps - step) /
                           static_cast<double>(std::max(1L, total_steps - warmup_steps)));
}

double cosine(long step, long warmup_steps, long total_steps) {
  constexpr double kNumCycles = 0.5;  // get_scheduler's default
  const double progress =
      static_cast<double>(step - warmup_steps) / static_cast<double>(std::max(1L, total_steps - warmup_steps));
  // math.pi * float(num_cycles) * 2.0 * progress, left to right.
  const double factor = 0.5 * (1.0 + std::cos(kPi * kNumCycles * 2.0 * progress));
  // transformers 5 routes get_cosine_schedule_with_warmup through the min-lr lambda with min_lr_rate 0,
  // factor * (1 - 0) + 0: that only turns -0.0 into +0.0, which the max(0, .) below does anyway.
  return std::max(0.0, factor);
}

}  // namespace

LrSchedulerKind parse_lr_scheduler(const std::string& text) {
  if (text == "plateau") return LrSchedulerKind::kPlateau;
  if (text == "linear") return LrSchedulerKind::kLinear;
  if (text == "cosine") return LrSchedulerKind::kCosine;
  if (text == "constant") return LrSchedulerKind::kConstant;
  BERTRAIN_FAIL("--lr-scheduler must be plateau, linear, cosine or constant, got \"" << text << "\"");
}

std::string to_string(LrSchedulerKind kind) {
  switch (kind) {
    case LrSchedulerKind::kPlateau: return "plateau";
    case LrSchedulerKind::kLinear: return "linear";
    case LrSchedulerKind::kCosine: return "cosine";
    case LrSchedulerKind::kConstant: return "constant";
  }
  BERTRAIN_FAIL("invalid LrSchedulerKind " << static_cast<int>(kind));
}

long warmup_steps_for(long warmup_steps, double warmup_ratio, long total_steps) {
  BERTRAIN_CHECK(warmup_steps >= 0, "--warmup-steps must be >= 0, got " << warmup_steps);
  // The negated form also rejects NaN.
  BERTRAIN_CHECK(warmup_ratio >= 0.0 && warmup_ratio < 1.0, "--warmup-ratio must be in [0, 1), got " << warmup_ratio);
  BERTRAIN_CHECK(total_steps >= 1, "the number of training steps must be >= 1, got " << total_steps);
  if (warmup_steps > 0) return warmup_steps;
  // math.ceil(num_training_steps * ratio): the int converts to double first (exact below 2^53).
  return static_cast<long>(std::ceil(static_cast<double>(total_steps) * warmup_ratio));
}

double lr_multiplier(LrSchedulerKind kind, long step, long warmup_steps, long total_steps) {
  BERTRAIN_CHECK(step >= 0, "lr schedule: the step must be >= 0, got " << step);
  BERTRAIN_CHECK(warmup_steps >= 0, "lr schedule: warmup steps must be >= 0, got " << warmup_steps);
  BERTRAIN_CHECK(total_steps >= 1, "lr schedule: total steps must be >= 1, got " << total_steps);
  if (kind == LrSchedulerKind::kPlateau) return 1.0;
  if (step < warmup_steps) return warmup_ramp(step, warmup_steps);
  switch (kind) {
    case LrSchedulerKind::kLinear: return linear(step, warmup_steps, total_steps);
    case LrSchedulerKind::kCosine: return cosine(step, warmup_steps, total_steps);
    case LrSchedulerKind::kConstant: return 1.0;
    case LrSchedulerKind::kPlateau: break;
  }
  BERTRAIN_FAIL("invalid LrSchedulerKind " << static_cast<int>(kind));
}

}  // namespace bertrain

#include "engine/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace bertrain {

LrSchedulerKind parse_lr_scheduler(const std::string& text) {
  if (text == "plateau") return LrSchedulerKind::kPlateau;
  if (text == "linear") return LrSchedulerKind::kLinear;
  if (text == "cosine") return LrSchedulerKind::kCosine;
  if (text == "constant") return LrSchedulerKind::kConstant;
  BERTRAIN_FAIL("--lr-scheduler must be plateau, linear, cosine or constant, got '" << text << "'");
}

std::string to_string(LrSchedulerKind kind) {
  switch (kind) {
    case LrSchedulerKind::kPlateau: return "plateau";
    case LrSchedulerKind::kLinear: return "linear";
    case LrSchedulerKind::kCosine: return "cosine";
    case LrSchedulerKind::kConstant: return "constant";
  }
  return "?";
}

long warmup_steps_for(long warmup_steps, double warmup_ratio, long total_steps) {
  BERTRAIN_CHECK(warmup_steps >= 0, "--warmup-steps must be >= 0, got " << warmup_steps);
  BERTRAIN_CHECK(warmup_ratio >= 0 && warmup_ratio < 1, "--warmup-ratio must be in [0, 1), got " << warmup_ratio);
  if (warmup_steps > 0) return warmup_steps;
  return static_cast<long>(std::ceil(static_cast<double>(total_steps) * warmup_ratio));
}

double lr_multiplier(LrSchedulerKind kind, long step, long warmup_steps, long total_steps) {
  if (kind == LrSchedulerKind::kPlateau) return 1.0;
  if (step < warmup_steps) return static_cast<double>(step) / static_cast<double>(std::max(1L, warmup_steps));
  const double after = static_cast<double>(std::max(1L, total_steps - warmup_steps));
  switch (kind) {
    case LrSchedulerKind::kLinear:
      return std::max(0.0, static_cast<double>(total_steps - step) / after);
    case LrSchedulerKind::kCosine: {
      const double progress = static_cast<double>(step - warmup_steps) / after;
      const double pi = 3.141592653589793;  // Python's math.pi
      return std::max(0.0, 0.5 * (1.0 + std::cos(pi * 0.5 * 2.0 * progress)));
    }
    default:
      return 1.0;
  }
}

}  // namespace bertrain

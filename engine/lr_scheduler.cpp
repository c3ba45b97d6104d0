// ReduceLROnPlateau, a line-by-line port of torch.optim.lr_scheduler.ReduceLROnPlateau (see the header).
#include "engine/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "engine/state_json.h"

namespace bertrain {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void validate(const PlateauOptions& o) {
  // torch itself only rejects factor >= 1; the other checks catch configuration mistakes that torch
  // would silently run with (a negative patience reduces the lr every epoch, a negative factor or
  // min_lr makes the lr negative).
  BERTRAIN_CHECK(o.factor >= 0.0 && o.factor < 1.0,
                 "ReduceLROnPlateau: factor must be in [0, 1), got " << o.factor);
  BERTRAIN_CHECK(o.patience >= 0, "ReduceLROnPlateau: patience must be >= 0, got " << o.patience);
  BERTRAIN_CHECK(o.cooldown >= 0, "ReduceLROnPlateau: cooldown must be >= 0, got " << o.cooldown);
  BERTRAIN_CHECK(std::isfinite(o.threshold) && o.threshold >= 0.0,
                 "ReduceLROnPlateau: threshold must be finite and >= 0, got " << o.threshold);
  BERTRAIN_CHECK(std::isfinite(o.min_lr) && o.min_lr >= 0.0,
                 "ReduceLROnPlateau: min_lr must be finite and >= 0, got " << o.min_lr);
  BERTRAIN_CHECK(std::isfinite(o.eps) && o.eps >= 0.0,
                 "ReduceLROnPlateau: eps must be finite and >= 0, got " << o.eps);
  BERTRAIN_CHECK(o.mode == PlateauMode::kMin || o.mode == PlateauMode::kMax,
                 "ReduceLROnPlateau: invalid mode " << static_cast<int>(o.mode));
  BERTRAIN_CHECK(o.threshold_mode == ThresholdMode::kRel || o.threshold_mode == ThresholdMode::kAbs,
                 "ReduceLROnPlateau: invalid threshold mode " << static_cast<int>(o.threshold_mode));
}

PlateauOptions made_with_ml_options(double factor, int patience) {
  PlateauOptions o;
  o.factor = factor;
  o.patience = patience;
  return o;
}

}  // namespace

std::string to_string(PlateauMode mode) { return mode == PlateauMode::kMin ? "min" : "max"; }
std::string to_string(ThresholdMode mode) { return mode == ThresholdMode::kRel ? "rel" : "abs"; }

PlateauMode parse_plateau_mode(const std::string& text) {
  if (text == "min") return PlateauMode::kMin;
  if (text == "max") return PlateauMode::kMax;
  BERTRAIN_FAIL("ReduceLROnPlateau: mode must be \"min\" or \"max\", got \"" << text << "\"");
}

ThresholdMode parse_threshold_mode(const std::string& text) {
  if (text == "rel") return ThresholdMode::kRel;
  if (text == "abs") return ThresholdMode::kAbs;
  BERTRAIN_FAIL("ReduceLROnPlateau: threshold mode must be \"rel\" or \"abs\", got \"" << text << "\"");
}

ReduceLROnPlateau::ReduceLROnPlateau(double initial_lr, const PlateauOptions& options)
    : options_(options), lr_(initial_lr) {
  validate(options_);
  BERTRAIN_CHECK(std::isfinite(initial_lr) && initial_lr >= 0.0,
                 "ReduceLROnPlateau: the learning rate must be finite and >= 0, got " << initial_lr);
  best_ = options_.mode == PlateauMode::kMin ? kInf : -kInf;  // torch's mode_worse
}

ReduceLROnPlateau::ReduceLROnPlateau(double initial_lr, double factor, int patience)
    : ReduceLROnPlateau(initial_lr, made_with_ml_options(factor, patience)) {}

bool ReduceLROnPlateau::is_better(double a, double best) const {
  // Same expressions as torch (rel_epsilon computed first), so the rounding is the same.
  if (options_.mode == PlateauMode::kMin) {
    if (options_.threshold_mode == ThresholdMode::kRel) {
      const double rel_epsilon = 1.0 - options_.threshold;
      return a < best * rel_epsilon;
    }
    return a < best - options_.threshold;
  }
  if (options_.threshold_mode == ThresholdMode::kRel) {
    const double rel_epsilon = options_.threshold + 1.0;
    return a > best * rel_epsilon;
  }
  return a > best + options_.threshold;
}

double ReduceLROnPlateau::step(double metric) {
  last_epoch_ += 1;
  if (is_better(metric, best_)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    num_bad_epochs_ += 1;
  }
  if (in_cooldown()) {
    cooldown_counter_ -= 1;
    num_bad_epochs_ = 0;  // bad epochs in cooldown are ignored
  }
  if (num_bad_epochs_ > options_.patience) {
    const double old_lr = lr_;
    const double new_lr = std::max(old_lr * options_.factor, options_.min_lr);
    if (old_lr - new_lr > options_.eps) lr_ = new_lr;
    cooldown_counter_ = options_.cooldown;
    num_bad_epochs_ = 0;
  }
  return lr_;
}

nlohmann::json ReduceLROnPlateau::to_json() const {
  nlohmann::json j;
  j["mode"] = to_string(options_.mode);
  j["factor"] = options_.factor;
  j["patience"] = options_.patience;
  j["threshold"] = options_.threshold;
  j["threshold_mode"] = to_string(options_.threshold_mode);
  j["cooldown"] = options_.cooldown;
  j["min_lr"] = options_.min_lr;
  j["eps"] = options_.eps;
  j["lr"] = lr_;
  j["best"] = infinity_json(best_);
  j["num_bad_epochs"] = num_bad_epochs_;
  j["cooldown_counter"] = cooldown_counter_;
  j["last_epoch"] = last_epoch_;
  return j;
}

ReduceLROnPlateau ReduceLROnPlateau::from_json(const nlohmann::json& json) {
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  const StateFields f(json, "ReduceLROnPlateau state");
  PlateauOptions o;
  o.mode = parse_plateau_mode(f.text("mode"));
  o.factor = f.number("factor");
  o.patience = static_cast<int>(f.integer("patience", 0, kIntMax));
  o.threshold = f.number("threshold");
  o.threshold_mode = parse_threshold_mode(f.text("threshold_mode"));
  o.cooldown = static_cast<int>(f.integer("cooldown", 0, kIntMax));
  o.min_lr = f.number("min_lr");
  o.eps = f.number("eps");
  ReduceLROnPlateau s(f.number("lr"), o);  // validates the options and the lr

  s.best_ = f.number_or_infinity("best");
  // A step never leaves more than `patience` bad epochs or more than `cooldown` cooldown epochs.
  s.num_bad_epochs_ = static_cast<int>(f.integer("num_bad_epochs", 0, o.patience));
  s.cooldown_counter_ = static_cast<int>(f.integer("cooldown_counter", 0, o.cooldown));
  s.last_epoch_ = f.integer("last_epoch", 0, std::numeric_limits<int64_t>::max());
  return s;
}

}  // namespace bertrain

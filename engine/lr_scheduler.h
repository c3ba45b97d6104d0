// ReduceLROnPlateau: the learning-rate schedule of the Made-With-ML run (mode "min", factor 0.8,
// patience 3 on val_loss, once per epoch), reproducing torch.optim.lr_scheduler.ReduceLROnPlateau
// (torch 2.15) step for step, including its corner cases:
//   - best starts at +inf (mode min) / -inf (mode max); a NaN metric is never better, so it is a bad
//     epoch (every comparison with NaN is false), as is +inf in mode min;
//   - better(a, best): rel-min a < best * (1 - threshold), abs-min a < best - threshold,
//     rel-max a > best * (threshold + 1), abs-max a > best + threshold (same operation order as torch,
//     so the comparisons round identically; note rel-min with a negative best accepts a slightly
//     larger value, as torch does);
//   - in cooldown the counter goes down by one and bad epochs are forgotten;
//   - more than `patience` bad epochs: new_lr = max(lr * factor, min_lr), applied only when
//     lr - new_lr > eps; then cooldown_counter = cooldown and num_bad_epochs = 0 (also when the
//     reduction was not applied).
// One learning rate (torch keeps one per parameter group; bertrain has a single group).
// to_json / from_json carry the options and the whole state, so a resumed run continues exactly.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace bertrain {

enum class PlateauMode { kMin, kMax };     // torch mode "min" / "max"
enum class ThresholdMode { kRel, kAbs };   // torch threshold_mode "rel" / "abs"

// torch's names and defaults. Validated by the ReduceLROnPlateau constructor.
struct PlateauOptions {
  PlateauMode mode = PlateauMode::kMin;
  double factor = 0.1;     // 0 <= factor < 1 (torch only rejects factor >= 1)
  int patience = 10;       // >= 0: bad epochs tolerated before a reduction
  double threshold = 1e-4; // >= 0, finite
  ThresholdMode threshold_mode = ThresholdMode::kRel;
  int cooldown = 0;        // >= 0: epochs after a reduction during which bad epochs are not counted
  double min_lr = 0.0;     // >= 0, finite
  double eps = 1e-8;       // >= 0, finite: smaller reductions are skipped
};

// "min"/"max" and "rel"/"abs", as torch spells them; parse_* throw Error on anything else.
std::string to_string(PlateauMode mode);
std::string to_string(ThresholdMode mode);
PlateauMode parse_plateau_mode(const std::string& text);
ThresholdMode parse_threshold_mode(const std::string& text);

class ReduceLROnPlateau {
 public:
  // initial_lr: the optimizer's learning rate before the first step (finite, > 0).
  explicit ReduceLROnPlateau(double initial_lr, const PlateauOptions& options = PlateauOptions());
  // Made-With-ML's call: mode "min", the given factor and patience, every other option torch's default.
  ReduceLROnPlateau(double initial_lr, double factor, int patience);

  // Records one epoch's metric (e.g. val_loss) and returns the learning rate for the next epoch.
  // Any double is accepted; NaN counts as a bad epoch, like torch.
  double step(double metric);

  double learning_rate() const { return lr_; }           // the current learning rate
  double best() const { return best_; }                  // +inf (min) / -inf (max) before any improvement
  int num_bad_epochs() const { return num_bad_epochs_; }
  int cooldown_counter() const { return cooldown_counter_; }
  bool in_cooldown() const { return cooldown_counter_ > 0; }
  int64_t last_epoch() const { return last_epoch_; }     // number of step() calls (torch's last_epoch)
  const PlateauOptions& options() const { return options_; }

  // torch's _is_better(a, best) for these options.
  bool is_better(double a, double best) const;

  // {"mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "min_lr", "eps",
  //  "lr", "best", "num_bad_epochs", "cooldown_counter", "last_epoch"}. Doubles are stored exactly
  // (nlohmann/json prints them round-trip); an infinite best is stored as the string "inf" / "-inf"
  // because JSON has no infinity.
  nlohmann::json to_json() const;
  // Rebuilds a scheduler from to_json()'s output (like torch's load_state_dict, which restores the
  // options too). Throws Error on a missing or ill-typed field or an invalid value.
  static ReduceLROnPlateau from_json(const nlohmann::json& json);

 private:
  PlateauOptions options_;
  double lr_;
  double best_;
  int num_bad_epochs_ = 0;
  int cooldown_counter_ = 0;
  int64_t last_epoch_ = 0;
};

}  // namespace bertrain

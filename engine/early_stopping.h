// Early stopping and the best-checkpoint choice of Hugging Face's Trainer, as one plain class the trainer
// feeds one validation metric per evaluation (--metric-for-best picks which).
//
// Two rules live here, as in transformers 5.23, where they belong to two different objects:
//   - the best metric (Trainer._determine_best_metric -> state.best_metric, what best/ is saved on):
//     starts at +inf (lower is better) / -inf (higher is better); a metric strictly better than it
//     replaces it, with no threshold. A tie is not better; NaN is never better (every comparison with
//     it is false), so the best is never NaN.
//   - the patience counter (EarlyStoppingCallback.check_metric_value): reset to 0 when the metric is
//     better than the best AND |metric - best| > threshold, else incremented; training stops when the
//     counter reaches patience. The first evaluation always resets it (the callback sees
//     state.best_metric None then), even when its metric is NaN.
// Order: Trainer runs the callback (on_evaluate) before _determine_best_metric, so the counter compares
// with the best as it was BEFORE this evaluation. So with a threshold, a small improvement moves the
// best yet counts as a bad evaluation, and the next evaluation is compared with that moved best.
// Once stopped, stopped() stays true (Trainer's control.should_training_stop is only reset by a new
// training); further updates still move the counter and the best, as the callback would.
// One difference: patience 0 here means "never stop" (early stopping off); transformers' patience 0
// stops after the first evaluation (counter >= 0).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace bertrain {

// Which validation metric picks best/ and drives early stopping: val_loss (lower is better), f1,
// accuracy (higher), TrainingArguments' default greater_is_better for each (a name ending in "loss" is
// lower-is-better).
struct BestMetric {
  std::string name;
  bool greater_is_better;
};

// "val_loss" | "f1" | "accuracy", or metrics.jsonl's "val_f1" | "val_accuracy" for the last two (the name is then
// "f1" / "accuracy"); throws Error naming --metric-for-best and the choices otherwise.
BestMetric parse_metric_for_best(const std::string& text);

class EarlyStopping {
 public:
  // patience >= 0 (0: never stops), threshold >= 0 and finite; else Error.
  EarlyStopping(int patience, double threshold, bool greater_is_better);

  // Records one evaluation's metric (any double: NaN and +-inf follow the comparisons above) and
  // returns true when training should stop now, i.e. stopped() after this evaluation.
  bool update(double metric);

  int bad_evaluations() const { return bad_evaluations_; }  // the callback's patience counter
  double best() const { return best_; }                     // +inf / -inf before anything was better
  bool stopped() const { return stopped_; }
  // The last update set a new best (Trainer's is_new_best_metric: the moment to save best/).
  bool improved() const { return improved_; }
  int64_t evaluations() const { return evaluations_; }      // number of update() calls
  int patience() const { return patience_; }
  double threshold() const { return threshold_; }
  bool greater_is_better() const { return greater_is_better_; }

  // For training checkpoints, so a resumed run stops where the uninterrupted one would:
  // {"patience", "threshold", "greater_is_better", "evaluations", "bad_evaluations", "best" (a number, or
  //  "inf" / "-inf"), "improved", "stopped"}.
  nlohmann::json to_json() const;
  // Throws Error on a missing or ill-typed field, an invalid option, or a state no sequence of updates
  // can reach (more bad evaluations than evaluations after the first, stopped with patience 0, ...).
  static EarlyStopping from_json(const nlohmann::json& json);

 private:
  bool is_better(double metric) const;

  int patience_;
  double threshold_;
  bool greater_is_better_;
  int64_t evaluations_ = 0;
  int bad_evaluations_ = 0;
  double best_;
  bool improved_ = false;
  bool stopped_ = false;
};

}  // namespace bertrain

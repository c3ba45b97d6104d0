// Early stopping as Hugging Face Trainer's EarlyStoppingCallback does it, on the metric that picks best/
// (--metric-for-best): an evaluation resets the patience counter when it is better than the best so far AND by more
// than the threshold, else counts one more; the run stops once the counter reaches the patience. The best it compares
// with is Trainer's state.best_metric: the best of the EARLIER evaluations (strictly better, no threshold), none
// before the first evaluation (which therefore always resets the counter).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace bertrain {

// Which validation metric picks best/ and drives early stopping.
struct BestMetric {
  std::string name;        // "val_loss" | "f1" (weighted) | "accuracy"
  bool greater_is_better;  // val_loss: lower is better
};
BestMetric parse_metric_for_best(const std::string& text);  // Error naming --metric-for-best otherwise

class EarlyStopping {
 public:
  // patience 0 never stops. Error on patience < 0 or a negative or non-finite threshold.
  EarlyStopping(int patience, double threshold, bool greater_is_better);

  // One evaluation's metric; true when training should stop now. NaN is never an improvement.
  bool update(double metric);

  int bad_evaluations() const { return counter_; }
  bool has_best() const { return has_best_; }
  double best() const { return best_; }
  bool stopped() const { return stopped_; }

  // {"patience", "threshold", "greater_is_better", "counter", "best" (null before any), "stopped"}.
  nlohmann::json to_json() const;
  static EarlyStopping from_json(const nlohmann::json& json);  // Error on missing or ill-typed fields

 private:
  bool better(double a, double b) const { return greater_ ? a > b : a < b; }

  int patience_;
  double threshold_;
  bool greater_;
  int counter_ = 0;
  bool has_best_ = false;
  double best_ = 0;
  bool stopped_ = false;
};

}  // namespace bertrain

// EarlyStopping: transformers' EarlyStoppingCallback and Trainer's best-metric rule (see the header).
#include "engine/early_stopping.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "engine/state_json.h"

namespace bertrain {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

BestMetric parse_metric_for_best(const std::string& text) {
  if (text == "val_loss") return {text, false};
  if (text == "f1" || text == "accuracy") return {text, true};
  // metrics.jsonl's names (and bertrain tune --metric's) name the same metrics.
  if (text == "val_f1" || text == "val_accuracy") return {text.substr(4), true};
  BERTRAIN_FAIL("--metric-for-best must be val_loss, f1 or accuracy (or val_f1, val_accuracy), got \"" << text << "\"");
}

EarlyStopping::EarlyStopping(int patience, double threshold, bool greater_is_better)
    : patience_(patience), threshold_(threshold), greater_is_better_(greater_is_better) {
  BERTRAIN_CHECK(patience >= 0, "early stopping: patience must be >= 0 (0: never stop), got " << patience);
  BERTRAIN_CHECK(std::isfinite(threshold) && threshold >= 0.0,
                 "early stopping: threshold must be finite and >= 0, got " << threshold);
  best_ = greater_is_better ? -kInf : kInf;  // Trainer's starting state.best_metric
}

bool EarlyStopping::is_better(double metric) const {
  // np.greater / np.less on doubles: false whenever NaN is involved.
  return greater_is_better_ ? metric > best_ : metric < best_;
}

bool EarlyStopping::update(double metric) {
  const bool better = is_better(metric);
  // The callback first, against the best before this evaluation.
  if (evaluations_ == 0 || (better && std::fabs(metric - best_) > threshold_)) {
    bad_evaluations_ = 0;
  } else {
    ++bad_evaluations_;
  }
  // Then Trainer._determine_best_metric.
  improved_ = better;
  if (better) best_ = metric;
  ++evaluations_;
  if (patience_ > 0 && bad_evaluations_ >= patience_) stopped_ = true;
  return stopped_;
}

nlohmann::json EarlyStopping::to_json() const {
  nlohmann::json j;
  j["patience"] = patience_;
  j["threshold"] = threshold_;
  j["greater_is_better"] = greater_is_better_;
  j["evaluations"] = evaluations_;
  j["bad_evaluations"] = bad_evaluations_;
  j["best"] = infinity_json(best_);
  j["improved"] = improved_;
  j["stopped"] = stopped_;
  return j;
}

EarlyStopping EarlyStopping::from_json(const nlohmann::json& json) {
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  const StateFields f(json, "early stopping state");
  EarlyStopping s(static_cast<int>(f.integer("patience", 0, kIntMax)), f.number("threshold"),
                  f.boolean("greater_is_better"));
  s.evaluations_ = f.integer("evaluations", 0, std::numeric_limits<int64_t>::max());
  // The first evaluation never counts as bad.
  const int64_t max_bad = std::min<int64_t>(kIntMax, std::max<int64_t>(0, s.evaluations_ - 1));
  s.bad_evaluations_ = static_cast<int>(f.integer("bad_evaluations", 0, max_bad));
  s.best_ = f.number_or_infinity("best");
  s.improved_ = f.boolean("improved");
  s.stopped_ = f.boolean("stopped");
  BERTRAIN_CHECK(s.evaluations_ > 0 || (!s.improved_ && s.best_ == (s.greater_is_better_ ? -kInf : kInf)),
                 "early stopping state: \"best\" and \"improved\" must be the starting ones when \"evaluations\" is 0");
  const bool counter_reached = s.patience_ > 0 && s.bad_evaluations_ >= s.patience_;
  BERTRAIN_CHECK(!counter_reached || s.stopped_, "early stopping state: \"bad_evaluations\" = "
                                                     << s.bad_evaluations_ << " reached \"patience\" = " << s.patience_
                                                     << " but \"stopped\" is false");
  BERTRAIN_CHECK(!s.stopped_ || (s.patience_ > 0 && s.evaluations_ > s.patience_),
                 "early stopping state: \"stopped\" is true, which needs more than \"patience\" = "
                     << s.patience_ << " evaluations (and patience > 0), got " << s.evaluations_);
  return s;
}

}  // namespace bertrain

#include "engine/early_stopping.h"

#include <cmath>

#include "core/error.h"

namespace bertrain {

BestMetric parse_metric_for_best(const std::string& text) {
  if (text == "val_loss") return BestMetric{text, false};
  if (text == "f1" || text == "accuracy") return BestMetric{text, true};
  BERTRAIN_FAIL("--metric-for-best must be val_loss, f1 or accuracy, got '" << text << "'");
}

EarlyStopping::EarlyStopping(int patience, double threshold, bool greater_is_better)
    : patience_(patience), threshold_(threshold), greater_(greater_is_better) {
  BERTRAIN_CHECK(patience >= 0, "--early-stopping-patience must be >= 0, got " << patience);
  BERTRAIN_CHECK(std::isfinite(threshold) && threshold >= 0,
                 "--early-stopping-threshold must be finite and >= 0, got " << threshold);
}

bool EarlyStopping::update(double metric) {
  // The callback's check, against the best of the earlier evaluations.
  if (!has_best_ || (better(metric, best_) && std::abs(metric - best_) > threshold_)) {
    counter_ = 0;
  } else {
    ++counter_;
  }
  // Then Trainer's own best (no threshold); a NaN never replaces a best.
  if (!std::isnan(metric) && (!has_best_ || better(metric, best_))) {
    best_ = metric;
    has_best_ = true;
  }
  stopped_ = patience_ > 0 && counter_ >= patience_;
  return stopped_;
}

nlohmann::json EarlyStopping::to_json() const {
  return nlohmann::json{{"patience", patience_},     {"threshold", threshold_},
                        {"greater_is_better", greater_}, {"counter", counter_},
                        {"best", has_best_ ? nlohmann::json(best_) : nlohmann::json(nullptr)},
                        {"stopped", stopped_}};
}

EarlyStopping EarlyStopping::from_json(const nlohmann::json& json) {
  try {
    EarlyStopping s(json.at("patience").get<int>(), json.at("threshold").get<double>(),
                    json.at("greater_is_better").get<bool>());
    s.counter_ = json.at("counter").get<int>();
    BERTRAIN_CHECK(s.counter_ >= 0, "counter " << s.counter_ << " is negative");
    const nlohmann::json& best = json.at("best");
    s.has_best_ = !best.is_null();
    if (s.has_best_) s.best_ = best.get<double>();
    s.stopped_ = json.at("stopped").get<bool>();
    return s;
  } catch (const nlohmann::json::exception& e) {
    BERTRAIN_FAIL("early stopping state: " << e.what());
  }
}

}  // namespace bertrain

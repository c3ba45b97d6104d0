// What one row's prediction is, shared by `bertrain predict` and `bertrain serve`: single-label, the arg-max
// ("other" below a threshold when one is given, Made-With-ML's serving rule); multi-label, every label with
// probability >= the threshold (0.5 by default). The answer is {"prediction", "probabilities"}, predict's shape.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "data/labels.h"
#include "engine/predictor.h"

namespace bertrain {

struct PredictionRule {
  bool multi_label = false;
  double threshold = -1;  // < 0: not given
  std::string other;      // single-label: the prediction when the top probability is below the threshold

  nlohmann::ordered_json predict(const float* row, const LabelSet& labels) const {
    nlohmann::ordered_json out;
    const int classes = labels.size();
    if (multi_label) {
      const double t = threshold >= 0 ? threshold : 0.5;
      nlohmann::json predicted = nlohmann::json::array();
      for (int c = 0; c < classes; ++c) {
        if (row[c] >= t) predicted.push_back(labels.name(c));
      }
      out["prediction"] = predicted;
    } else {
      const int top = top_class(row, classes);
      out["prediction"] = threshold >= 0 && row[top] < threshold ? other : labels.name(top);
    }
    nlohmann::ordered_json probabilities = nlohmann::ordered_json::object();
    for (int c = 0; c < classes; ++c) probabilities[labels.name(c)] = row[c];
    out["probabilities"] = probabilities;
    return out;
  }

  // A single-label rule with a threshold answers `other` below it: refused when that is not one of the model's
  // labels unless --other-label named it (Made-With-ML's default "other" is its dataset's label). An empty name is
  // refused always.
  void check_other_label(const LabelSet& labels, bool other_given) const {
    BERTRAIN_CHECK(!other.empty(), "--other-label is empty: name the prediction below --threshold");
    BERTRAIN_CHECK(multi_label || threshold < 0 || other_given || labels.find(other) >= 0,
                   "--threshold predicts the label '" << other << "' below it, but the model's labels are "
                       << nlohmann::json(labels.names()).dump() << ": name the prediction with --other-label NAME");
  }
};

}  // namespace bertrain

// Validation accuracy and F1 from the engine's logits, as scikit-learn computes them (see the header).
#include "engine/validation_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>

#include "core/error.h"
#include "core/utf8.h"
#include "engine/metrics.h"
#include "engine/predictor.h"

namespace bertrain {

namespace {

// evaluate's and predict's default --threshold: a label is predicted at probability >= 0.5.
constexpr float kLabelThreshold = 0.5f;

// Index of the largest of row[0, n), the first on ties.
int largest(const float* row, int n) { return static_cast<int>(std::max_element(row, row + n) - row); }

}  // namespace

ValidationCounts::ValidationCounts(int num_labels, bool multi_label)
    : num_labels_(num_labels), multi_label_(multi_label) {
  BERTRAIN_CHECK(num_labels >= 1, "validation metrics: num_labels must be >= 1, got " << num_labels);
  counts_.assign(3 * static_cast<std::size_t>(num_labels) + 2, 0.0);
}

void ValidationCounts::clear() { std::fill(counts_.begin(), counts_.end(), 0.0); }

void ValidationCounts::add(const float* logits, const float* targets, int rows) {
  BERTRAIN_CHECK(rows >= 0, "validation metrics: " << rows << " rows");
  const std::size_t c_count = static_cast<std::size_t>(num_labels_);
  double* label = counts_.data();  // label c: [3c] true positives, [3c + 1] true, [3c + 2] predicted
  double& counted = counts_[3 * c_count];
  double& exactly_right = counts_[3 * c_count + 1];
  for (int r = 0; r < rows; ++r) {
    const float* x = logits + static_cast<std::size_t>(r) * c_count;
    const float* y = targets + static_cast<std::size_t>(r) * c_count;
    bool right = true;
    if (multi_label_) {
      for (std::size_t c = 0; c < c_count; ++c) {
        const bool predicted = label_probability(x[c]) >= kLabelThreshold;
        const bool truth = y[c] > 0.5f;
        label[3 * c] += predicted && truth ? 1 : 0;
        label[3 * c + 1] += truth ? 1 : 0;
        label[3 * c + 2] += predicted ? 1 : 0;
        right = right && predicted == truth;
      }
    } else {
      const std::size_t predicted = static_cast<std::size_t>(largest(x, num_labels_));
      const std::size_t truth = static_cast<std::size_t>(largest(y, num_labels_));
      right = predicted == truth;
      label[3 * truth] += right ? 1 : 0;
      label[3 * truth + 1] += 1;
      label[3 * predicted + 2] += 1;
    }
    counted += 1;
    exactly_right += right ? 1 : 0;
  }
}

ValidationMetrics ValidationCounts::metrics() const {
  // Counts summed over ranks arrive as doubles: each must still be a count.
  const auto count = [&](std::size_t k, const char* what, int c) {
    const double v = counts_[k];
    BERTRAIN_CHECK(v >= 0 && v <= 9007199254740992.0 && std::floor(v) == v,
                   "validation metrics: " << what << (c >= 0 ? " of label " + std::to_string(c) : std::string())
                                          << " is " << v << ", not a count");
    return static_cast<long>(v);
  };
  const std::size_t c_count = static_cast<std::size_t>(num_labels_);
  const long rows = count(3 * c_count, "the number of rows", -1);
  const long right = count(3 * c_count + 1, "the number of rows predicted exactly", -1);
  BERTRAIN_CHECK(rows > 0, "validation metrics: no rows were counted (scikit-learn has no metrics for no samples)");
  BERTRAIN_CHECK(right <= rows, "validation metrics: " << right << " rows predicted exactly of " << rows);
  std::vector<long> tp, truth, predicted;
  long true_sum = 0, pred_sum = 0;
  for (std::size_t c = 0; c < c_count; ++c) {
    const int label = static_cast<int>(c);
    const long t = count(3 * c, "the true positives", label), n_true = count(3 * c + 1, "the true rows", label),
               n_pred = count(3 * c + 2, "the predicted rows", label);
    BERTRAIN_CHECK(t <= n_true && t <= n_pred, "validation metrics: label " << c << " has " << t
                                                   << " true positives, " << n_true << " true and " << n_pred
                                                   << " predicted rows");
    true_sum += n_true;
    pred_sum += n_pred;
    // labels=None: single-label targets average over unique_labels(y_true, y_pred), which leaves out a class no
    // row has or is predicted as; indicator (multi-label) targets over every column.
    if (!multi_label_ && n_true == 0 && n_pred == 0) continue;
    tp.push_back(t);
    truth.push_back(n_true);
    predicted.push_back(n_pred);
  }
  // One true and one predicted class a row.
  BERTRAIN_CHECK(multi_label_ || (true_sum == rows && pred_sum == rows),
                 "validation metrics: " << rows << " single-label rows with " << true_sum << " true and " << pred_sum
                                        << " predicted classes");
  const LabelAverages averages = label_averages(tp, truth, predicted);
  ValidationMetrics m;
  m.accuracy = static_cast<double>(right) / static_cast<double>(rows);
  m.f1_weighted = averages.weighted.f1;
  m.f1_micro = averages.micro.f1;
  m.f1_macro = averages.macro.f1;
  return m;
}

std::vector<std::pair<int, long>> ValidationCounts::labels_never_predicted_right() const {
  std::vector<std::pair<int, long>> never;
  for (int c = 0; c < num_labels_; ++c) {
    const std::size_t at = 3 * static_cast<std::size_t>(c);
    if (counts_[at + 1] > 0 && counts_[at] == 0) never.emplace_back(c, static_cast<long>(counts_[at + 1]));
  }
  return never;
}

std::string unlearned_labels_warning(const ValidationCounts& counts, const ValidationMetrics& metrics,
                                     const std::vector<std::string>& names, bool class_weights) {
  const std::vector<std::pair<int, long>> never = counts.labels_never_predicted_right();
  if (never.empty()) return "";
  constexpr std::size_t kNamed = 5;
  std::string labels;
  for (std::size_t i = 0; i < never.size() && i < kNamed; ++i) {
    labels += (i == 0 ? "'" : ", '") + escape_for_message(names.at(static_cast<std::size_t>(never[i].first))) + "' (" +
              std::to_string(never[i].second) + (never[i].second == 1 ? " row)" : " rows)");
  }
  if (never.size() > kNamed) labels += " and " + std::to_string(never.size() - kNamed) + " more";
  char f1[96];
  std::snprintf(f1, sizeof f1, "val_f1 %.4f weights labels by their rows; their mean, val_f1_macro, is %.4f",
                metrics.f1_weighted, metrics.f1_macro);
  return std::string("the best model predicts no validation row of ") + (never.size() == 1 ? "label " : "labels ") +
         labels + " right: F1 0 (" + f1 + ")" +
         (class_weights ? "" : "; --class-weights weighs the loss by how rare each label is");
}

}  // namespace bertrain

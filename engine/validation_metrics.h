// The validation metrics training reports each epoch beside val_loss: accuracy and the weighted, micro and macro
// F1, computed from the engine's logits of the validation batches exactly as scikit-learn's accuracy_score and
// f1_score(average=..., labels=None, zero_division="warn") compute them on the predictions bertrain evaluate
// would make (checked against tests/fixtures/validation_metrics.json, made by
// tests/reference/make_validation_metric_cases.py).
//
// Predictions from logits [rows, C] (row-major) and targets [rows, C] (the batcher's one-hot / multi-hot rows):
//   single-label: the predicted class is the largest logit (the first on ties; softmax keeps the order), the true
//     class the target's largest entry;
//   multi-label: a label is predicted when label_probability(logit) >= 0.5 (engine/predictor.h: evaluate and
//     predict's rule at their default --threshold; that is, a logit of at least about 0), true when its target
//     is > 0.5.
// The metrics (ValidationMetrics::metrics, via label_averages in engine/metrics.h):
//   accuracy: the share of rows whose prediction is exactly right (multi-label: subset accuracy, every label).
//   F1 weighted / micro / macro over sklearn's label set for labels=None: single-label, unique_labels(y_true,
//     y_pred), so a class neither true nor predicted in any row is left out (it would pull macro down as a
//     0); multi-label, every column, unused ones included (they count as 0 in macro). Single-label micro F1
//     equals accuracy.
//
// Everything follows from integer counts, so ranks can each count their share of the rows and sum: add() per
// batch, then (data parallel) allreduce-sum counts() over the ranks, then metrics() on any rank.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace bertrain {

struct ValidationMetrics {
  double accuracy = 0;
  double f1_weighted = 0;  // Made-With-ML's headline F1 (evaluate's "overall" for single-label)
  double f1_micro = 0;
  double f1_macro = 0;
};

class ValidationCounts {
 public:
  // Throws Error when num_labels < 1.
  ValidationCounts(int num_labels, bool multi_label);

  // Counts `rows` rows of logits and targets ([rows, num_labels] each, host, row-major); rows may be 0. Allocates
  // nothing.
  void add(const float* logits, const float* targets, int rows);
  // The counts, flat doubles (exact integers up to 2^53), to allreduce-sum in place over ranks:
  // [3·c, 3·c + 1, 3·c + 2] = label c's true positives, true rows and predicted rows; then the rows counted, and
  // the rows predicted exactly right. size() = 3·num_labels + 2.
  std::vector<double>& counts() { return counts_; }
  const std::vector<double>& counts() const { return counts_; }
  // Back to no rows, for the next evaluation.
  void clear();

  // The metrics of the rows counted (and summed). Throws Error when no rows were counted (scikit-learn refuses
  // empty input) or when the counts are not consistent non-negative integers.
  ValidationMetrics metrics() const;

  // The labels that have validation rows none of which was predicted as them (F1 0: the model has not learnt them),
  // with their rows, from the counts (after summing).
  std::vector<std::pair<int, long>> labels_never_predicted_right() const;

  int num_labels() const { return num_labels_; }
  bool multi_label() const { return multi_label_; }

 private:
  int num_labels_;
  bool multi_label_;
  std::vector<double> counts_;
};

// A warning for the labels `counts` found never predicted right ("" when there are none), naming them (`names`) and
// the macro F1 that shows them beside the row-weighted F1 the epoch lines print, and suggesting --class-weights
// unless `class_weights` is on already.
std::string unlearned_labels_warning(const ValidationCounts& counts, const ValidationMetrics& metrics,
                                     const std::vector<std::string>& names, bool class_weights);

}  // namespace bertrain

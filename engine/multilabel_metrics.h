// Multi-label classification metrics, computed exactly as scikit-learn's
// precision_recall_fscore_support(y_true, y_pred, average=..., labels=None, zero_division="warn") does on
// multilabel-indicator input (read from sklearn/metrics/_classification.py of scikit-learn 1.9.1, numpy
// 2.4.6; checked against tests/fixtures/multilabel_metrics.json, made by
// tests/reference/make_multilabel_metric_cases.py).
//
// y_true and y_pred are [num_samples x num_labels] row-major 0/1 indicator matrices: entry i·L + c says
// whether sample i has (is predicted to have) label c. labels=None means every column is a label, in
// column order, including labels that are never true and never predicted.
//
// Counts (integers, exact in double). Per label c, over samples: tp_c = #(true and predicted),
// true_c = #true (the support), pred_c = #predicted. Per sample i, over labels: tp_i, true_i, pred_i.
// From counts (tp, true, pred), the same double operations as sklearn:
//   precision = tp / pred, recall = tp / true, f1 = 2·tp / (1·true + pred)   [= 2tp / (2tp + fp + fn)]
// and any x/0 is 0.0 (zero_division="warn": sklearn warns and sets 0.0). F1 is computed from the counts,
// not from precision and recall, so its zero-division rule applies only when true + pred = 0 (tp = fp
// = fn = 0); when tp = 0 but true + pred > 0, F1 is 0/(true + pred) = 0 without a zero division.
//
// The averages (ClassMetrics::support = Σ_c true_c for all four, as classification_report prints it):
//   per_label (average=None): the formulas on (tp_c, true_c, pred_c); support = true_c. Bit-identical to
//     sklearn. A label never true and never predicted gets 0, 0, 0 (support 0); a label predicted but
//     never true gets precision 0 (tp = 0), recall 0 (0/0), F1 0.
//   micro: the formulas on (Σ_c tp_c, Σ_c true_c, Σ_c pred_c) (integer sums): bit-identical. All
//     predictions empty gives precision 0 (0/0); no true labels at all gives recall 0 (0/0).
//   macro: the unweighted mean over ALL num_labels labels of the per-label values (np.nanmean; with
//     "warn" there are no NaNs): labels with zero support and zero predictions count as 0 in the mean
//     (they pull macro down); nothing is dropped.
//   weighted: Σ_c value_c·true_c / Σ_c true_c (np.average with weights = true_c). When Σ_c true_c = 0
//     numpy raises ZeroDivisionError and sklearn's _nanaverage falls back to the unweighted mean, which is
//     0.0 here (with no true labels every per-label value is 0 under "warn").
//   samples: the unweighted mean over all num_samples samples of the per-sample values (the formulas on
//     (tp_i, true_i, pred_i), np.nanmean; no sample_weight). A sample with an empty true set has recall 0
//     (0/0); with an empty prediction, precision 0 (0/0); with both empty, precision = recall = F1 = 0
//     (F1's 0/0 also follows zero_division: 0.0 under "warn"; zero_division=1 would give 1 and count it
//     as a perfect sample, "warn" does not). Every sample counts in the mean, empty ones included.
//
// The sums of the means are numpy's pairwise summation (np.add.reduce on a contiguous float64 array:
// sequential below 8 values, 8 interleaved accumulators up to 128, halving above; pairwise_sum in metrics.h), so
// the averages come out bit-identical too with the numpy above; the tests still compare them with a
// 1e-12 relative tolerance, since numpy may change its summation order (per-label and micro values are
// compared exactly).
//
// A single label column is treated as multi-label data with one label (sklearn itself reads an
// [n x 1] indicator as a "binary" target and would report both classes 0 and 1, and refuses
// average="samples"; the fixture script derives the one-label reference values differently, see it).
//
// Arguments (BERTRAIN_CHECK, bertrain::Error): num_samples >= 1, num_labels >= 1, both matrices of size
// num_samples·num_labels, every entry 0 or 1.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/metrics.h"

namespace bertrain {

struct MultiLabelMetrics {
  ClassMetrics micro, macro, weighted, samples;  // average="micro" | "macro" | "weighted" | "samples"
  std::vector<ClassMetrics> per_label;           // average=None, element c is label c
};

MultiLabelMetrics multilabel_metrics(const std::vector<uint8_t>& y_true, const std::vector<uint8_t>& y_pred,
                                     int num_samples, int num_labels);

}  // namespace bertrain

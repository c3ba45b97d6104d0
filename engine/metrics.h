// Evaluation metrics of the Made-With-ML tag classifier, computed exactly as its evaluate() does with
// scikit-learn's precision_recall_fscore_support (zero_division left at "warn": an ill-defined 0/0
// precision, recall or F1 is 0.0), plus its two data slices.
//
// Classes are indices in [0, num_classes) (the label order of the model, class_to_index); y_true and
// y_pred are one class per sample, same length, non-empty. Per class c:
//   tp = #(true c and predicted c), true = #(true c) (the support), pred = #(predicted c),
//   precision = tp / pred, recall = tp / true, f1 = 2·tp / (true + pred)   (0 when the divisor is 0),
// the same double operations as sklearn, so per-class values are bit-identical to it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace bertrain {

struct ClassMetrics {
  double precision = 0.0;
  double recall = 0.0;
  double f1 = 0.0;
  long support = 0;  // per class: samples whose true class it is; averages: samples averaged over
};

// Precision, recall and F1 of one class from its counts (tp, true = support, pred), sklearn's operations in its
// order (counts are small integers, exact in double); any x/0 is 0.
ClassMetrics metrics_from_counts(long tp, long true_count, long pred_count);

// numpy's pairwise summation of n contiguous doubles, in its exact order (DOUBLE_pairwise_sum, what np.sum,
// np.mean and np.average use on a 1-D float64 array): sequential below 8 values, 8 interleaved accumulators up
// to 128, halving above. Means of per-label values summed this way come out as numpy's, bit for bit.
double pairwise_sum(const double* values, std::size_t n);

// The unweighted mean of the precisions, of the recalls and of the F1s in `values` (np.nanmean; with
// zero_division "warn" there are no NaNs): pairwise sum / count. support is 0. `values` must not be empty.
ClassMetrics mean_metrics(const std::vector<ClassMetrics>& values);

// scikit-learn's precision_recall_fscore_support(average=None | "micro" | "macro" | "weighted",
// zero_division="warn") over one set of labels, from each label's counts (element k of the three vectors is
// the k-th label of the set, as multilabel_confusion_matrix gives them):
//   per_label: metrics_from_counts of each label (support = its true count);
//   micro: metrics_from_counts of the summed counts;
//   macro: mean_metrics(per_label): every label of the set counts, a label with no true and no predicted
//     sample as 0 (which set that is, is the caller's: labels=None means unique_labels(y_true, y_pred) for
//     single-label targets but every column for multi-label ones);
//   weighted: Σ value·true / Σ true, both pairwise sums (np.average with weights = true counts); when no label
//     is ever true, np.average raises and sklearn's _nanaverage falls back to the plain mean: macro's values.
// support of the three averages = Σ true counts. Throws Error for an empty set or vectors of different sizes.
struct LabelAverages {
  ClassMetrics micro, macro, weighted;
  std::vector<ClassMetrics> per_label;
};
LabelAverages label_averages(const std::vector<long>& tp, const std::vector<long>& true_count,
                             const std::vector<long>& pred_count);

// Overall metrics: average="weighted". Each class's precision/recall/F1 is weighted by its support, over
// sklearn's label set (unique_labels(y_true, y_pred)), summed in numpy's pairwise order: bit for bit
// sklearn's. support = y_true.size() (Made-With-ML's num_samples).
ClassMetrics weighted_metrics(const std::vector<int>& y_true, const std::vector<int>& y_pred, int num_classes);

// Per-class metrics: average=None with labels = 0..num_classes-1; element c is class c. A class absent
// from both y_true and y_pred gets zeros (sklearn with labels=None would omit it, shifting Made-With-ML's
// per-class table; with every class present, as on the holdout set, the two agree).
std::vector<ClassMetrics> per_class_metrics(const std::vector<int>& y_true, const std::vector<int>& y_pred,
                                            int num_classes);

// The order in which Made-With-ML lists per-class metrics: class indices by F1, highest first, ties
// in class order (Python's sorted(..., reverse=True) is stable).
std::vector<int> classes_by_f1(const std::vector<ClassMetrics>& per_class);

// Slice metrics: average="micro" over the samples where mask is true. For single-label multiclass
// predictions, micro precision = recall = F1 = the accuracy on the slice. support = slice size.
// The mask must select at least one sample (Made-With-ML skips empty slices; so must the caller).
ClassMetrics micro_metrics(const std::vector<int>& y_true, const std::vector<int>& y_pred,
                           const std::vector<bool>& mask, int num_classes);

// Above this many classes evaluate's JSON has "confusion_matrix_omitted" (why) instead of the matrix, and report
// draws no heat map: 200 classes are 40,000 cells, 10,000 were 1.1 GB of JSON.
inline constexpr int kMaxConfusionClasses = 200;

// counts[t][p] = samples with true class t predicted as p (sklearn's confusion_matrix, labels 0..C-1).
std::vector<std::vector<long>> confusion_matrix(const std::vector<int>& y_true, const std::vector<int>& y_pred,
                                                int num_classes);

// Made-With-ML's slicing functions, on the raw (uncleaned) text = title + " " + description, UTF-8.
//
// nlp_llm: "natural-language-processing" in tag (a substring test) and any of "transformer", "llm",
// "bert" in text.lower(). ASCII lowercasing is exact here: the only non-ASCII characters whose Python
// lowercase contains ASCII are U+0130 (-> "i" U+0307) and U+212A Kelvin (-> "k"), and no term contains
// 'i' or 'k'; every other non-ASCII character stays non-ASCII, and UTF-8 bytes >= 0x80 never match an
// ASCII term byte, so a byte-wise search finds exactly Python's matches.
bool is_nlp_llm(const std::string& tag, const std::string& raw_text);

// short_text: len(text.split()) < 8.
bool is_short_text(const std::string& raw_text);

// len(text.split()) in Python: the number of maximal runs of non-whitespace characters, where
// whitespace is str.isspace(): U+0009-000D, U+001C-001F, U+0020, U+0085, U+00A0, U+1680, U+2000-200A,
// U+2028, U+2029, U+202F, U+205F, U+3000 (Python 3.11, Unicode 14; U+180E and U+200B are not spaces).
// Bytes that are not valid UTF-8 (Python would have refused to decode them) count as non-whitespace.
std::size_t count_words(const std::string& text);

}  // namespace bertrain

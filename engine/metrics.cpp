// Classification metrics as scikit-learn computes them, and Made-With-ML's slices (see the header).
#include "engine/metrics.h"

#include <algorithm>
#include <cstdint>
#include <numeric>

#include "core/error.h"
#include "data/hf_unicode.h"

namespace bertrain {

namespace {

void check_labels(const std::vector<int>& y_true, const std::vector<int>& y_pred, int num_classes) {
  BERTRAIN_CHECK(num_classes > 0, "metrics: num_classes must be > 0, got " << num_classes);
  BERTRAIN_CHECK(y_true.size() == y_pred.size(), "metrics: y_true has " << y_true.size() << " samples but y_pred has "
                                                                        << y_pred.size());
  BERTRAIN_CHECK(!y_true.empty(), "metrics: no samples");
  for (std::size_t i = 0; i < y_true.size(); ++i) {
    BERTRAIN_CHECK(y_true[i] >= 0 && y_true[i] < num_classes,
                   "metrics: y_true[" << i << "] = " << y_true[i] << " is not a class in [0, " << num_classes << ")");
    BERTRAIN_CHECK(y_pred[i] >= 0 && y_pred[i] < num_classes,
                   "metrics: y_pred[" << i << "] = " << y_pred[i] << " is not a class in [0, " << num_classes << ")");
  }
}

// sklearn's _prf_divide with zero_division="warn": 0/0 (any x/0) is 0.
double divide(double numerator, double denominator) { return denominator == 0.0 ? 0.0 : numerator / denominator; }

// Python str.isspace() for one code point (see count_words in the header).
bool is_python_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Each class's true positives and its row and column sums, without the matrix: C² cells for tens of thousands of
// classes would not fit in memory.
struct ClassCounts {
  std::vector<long> hits, true_count, pred_count;
};

ClassCounts count_classes(const std::vector<int>& y_true, const std::vector<int>& y_pred, int num_classes) {
  check_labels(y_true, y_pred, num_classes);
  ClassCounts n{std::vector<long>(num_classes, 0), std::vector<long>(num_classes, 0), std::vector<long>(num_classes, 0)};
  for (std::size_t i = 0; i < y_true.size(); ++i) {
    ++n.true_count[y_true[i]];
    ++n.pred_count[y_pred[i]];
    if (y_true[i] == y_pred[i]) ++n.hits[y_true[i]];
  }
  return n;
}

}  // namespace

// Counts are small integers, exact in double; the operations below are sklearn's, in its order.
ClassMetrics metrics_from_counts(long tp, long true_count, long pred_count) {
  ClassMetrics m;
  m.precision = divide(static_cast<double>(tp), static_cast<double>(pred_count));
  m.recall = divide(static_cast<double>(tp), static_cast<double>(true_count));
  // f = (1 + beta²)·tp / (beta²·true + pred) with beta = 1.
  m.f1 = divide(2.0 * static_cast<double>(tp), 1.0 * static_cast<double>(true_count) + static_cast<double>(pred_count));
  m.support = true_count;
  return m;
}

double pairwise_sum(const double* values, std::size_t n) {
  if (n < 8) {
    double res = 0.0;
    for (std::size_t i = 0; i < n; ++i) res += values[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int k = 0; k < 8; ++k) r[k] = values[k];
    std::size_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (int k = 0; k < 8; ++k) r[k] += values[i + k];
    }
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += values[i];
    return res;
  }
  std::size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(values, n2) + pairwise_sum(values + n2, n - n2);
}

ClassMetrics mean_metrics(const std::vector<ClassMetrics>& values) {
  BERTRAIN_CHECK(!values.empty(), "metrics: the mean of no values");
  // numpy sums each quantity as its own contiguous array.
  std::vector<double> precision, recall, f1;
  for (const ClassMetrics& m : values) {
    precision.push_back(m.precision);
    recall.push_back(m.recall);
    f1.push_back(m.f1);
  }
  const double n = static_cast<double>(values.size());
  ClassMetrics mean;
  mean.precision = pairwise_sum(precision.data(), precision.size()) / n;
  mean.recall = pairwise_sum(recall.data(), recall.size()) / n;
  mean.f1 = pairwise_sum(f1.data(), f1.size()) / n;
  return mean;
}

LabelAverages label_averages(const std::vector<long>& tp, const std::vector<long>& true_count,
                             const std::vector<long>& pred_count) {
  BERTRAIN_CHECK(!tp.empty(), "metrics: no labels to average over");
  BERTRAIN_CHECK(true_count.size() == tp.size() && pred_count.size() == tp.size(),
                 "metrics: counts of " << tp.size() << ", " << true_count.size() << " and " << pred_count.size()
                                       << " labels");
  const std::size_t l = tp.size();
  LabelAverages result;
  long tp_sum = 0, true_sum = 0, pred_sum = 0;
  for (std::size_t c = 0; c < l; ++c) {
    result.per_label.push_back(metrics_from_counts(tp[c], true_count[c], pred_count[c]));
    tp_sum += tp[c];
    true_sum += true_count[c];
    pred_sum += pred_count[c];
  }
  result.micro = metrics_from_counts(tp_sum, true_sum, pred_sum);
  result.macro = mean_metrics(result.per_label);
  if (true_sum == 0) {
    // np.average raises ZeroDivisionError; sklearn's _nanaverage falls back to the unweighted mean.
    result.weighted = result.macro;
  } else {
    // np.average: Σ value·weight / Σ weight, both pairwise sums (the weights are integers, exact).
    std::vector<double> weights(l), wp(l), wr(l), wf(l);
    for (std::size_t c = 0; c < l; ++c) {
      const ClassMetrics& m = result.per_label[c];
      weights[c] = static_cast<double>(true_count[c]);
      wp[c] = m.precision * weights[c];
      wr[c] = m.recall * weights[c];
      wf[c] = m.f1 * weights[c];
    }
    const double scale = pairwise_sum(weights.data(), l);
    result.weighted.precision = pairwise_sum(wp.data(), l) / scale;
    result.weighted.recall = pairwise_sum(wr.data(), l) / scale;
    result.weighted.f1 = pairwise_sum(wf.data(), l) / scale;
  }
  result.micro.support = result.macro.support = result.weighted.support = true_sum;
  return result;
}

std::vector<std::vector<long>> confusion_matrix(const std::vector<int>& y_true, const std::vector<int>& y_pred,
                                                int num_classes) {
  check_labels(y_true, y_pred, num_classes);
  std::vector<std::vector<long>> counts(num_classes, std::vector<long>(num_classes, 0));
  for (std::size_t i = 0; i < y_true.size(); ++i) counts[y_true[i]][y_pred[i]] += 1;
  return counts;
}

std::vector<ClassMetrics> per_class_metrics(const std::vector<int>& y_true, const std::vector<int>& y_pred,
                                            int num_classes) {
  const ClassCounts n = count_classes(y_true, y_pred, num_classes);
  std::vector<ClassMetrics> result(num_classes);
  for (int c = 0; c < num_classes; ++c) result[c] = metrics_from_counts(n.hits[c], n.true_count[c], n.pred_count[c]);
  return result;
}

ClassMetrics weighted_metrics(const std::vector<int>& y_true, const std::vector<int>& y_pred, int num_classes) {
  const ClassCounts n = count_classes(y_true, y_pred, num_classes);
  // sklearn's labels=None: the classes in y_true or y_pred, in order. A class in neither weighs 0 but would move the
  // others within numpy's pairwise sum, so it is left out as there; then np.average as label_averages computes it
  // (products stored, then summed pairwise: no fused multiply-add, bit for bit numpy's).
  std::vector<long> tp, trues, preds;
  for (int c = 0; c < num_classes; ++c) {
    if (n.true_count[c] == 0 && n.pred_count[c] == 0) continue;
    tp.push_back(n.hits[c]);
    trues.push_back(n.true_count[c]);
    preds.push_back(n.pred_count[c]);
  }
  ClassMetrics m = label_averages(tp, trues, preds).weighted;
  m.support = static_cast<long>(y_true.size());
  return m;
}

std::vector<int> classes_by_f1(const std::vector<ClassMetrics>& per_class) {
  std::vector<int> order(per_class.size());
  std::iota(order.begin(), order.end(), 0);
  // F1 is never NaN (0/0 is 0), so ">" is a strict weak order.
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return per_class[a].f1 > per_class[b].f1; });
  return order;
}

ClassMetrics micro_metrics(const std::vector<int>& y_true, const std::vector<int>& y_pred,
                           const std::vector<bool>& mask, int num_classes) {
  check_labels(y_true, y_pred, num_classes);
  BERTRAIN_CHECK(mask.size() == y_true.size(),
                 "metrics: the slice mask has " << mask.size() << " entries for " << y_true.size() << " samples");
  // Micro sums tp, pred and true over the labels present in the slice: Σ pred = Σ true = slice size.
  long n = 0;
  long tp = 0;
  for (std::size_t i = 0; i < mask.size(); ++i) {
    if (!mask[i]) continue;
    n += 1;
    tp += y_true[i] == y_pred[i] ? 1 : 0;
  }
  BERTRAIN_CHECK(n > 0, "metrics: the slice is empty (Made-With-ML reports no metrics for an empty slice)");
  ClassMetrics m = metrics_from_counts(tp, n, n);
  m.support = n;
  return m;
}

bool is_nlp_llm(const std::string& tag, const std::string& raw_text) {
  if (tag.find("natural-language-processing") == std::string::npos) return false;
  std::string lower = raw_text;
  for (char& ch : lower) {
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  }
  for (const char* term : {"transformer", "llm", "bert"}) {
    if (lower.find(term) != std::string::npos) return true;
  }
  return false;
}

std::size_t count_words(const std::string& text) {
  std::size_t words = 0;
  bool in_word = false;
  for (std::size_t i = 0; i < text.size();) {
    std::size_t length = 1;
    // An invalid sequence is one byte of U+FFFD, which is not a space (the readers refuse such text before).
    const uint32_t cp = static_cast<uint32_t>(hf::decode_utf8(text.data() + i, text.size() - i, &length));
    i += length;
    const bool space = is_python_space(cp);
    if (!space && !in_word) words += 1;
    in_word = !space;
  }
  return words;
}

bool is_short_text(const std::string& raw_text) { return count_words(raw_text) < 8; }

}  // namespace bertrain

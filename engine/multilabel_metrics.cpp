// Multi-label metrics as scikit-learn computes them (see the header for the rules).
#include "engine/multilabel_metrics.h"

#include <cstddef>

#include "core/error.h"

namespace bertrain {

namespace {

// numpy's pairwise summation of n contiguous doubles (DOUBLE_pairwise_sum, what np.sum / np.mean /
// np.average use on a 1-D float64 array), in its exact order.
double pairwise_sum(const double* a, std::size_t n) {
  if (n < 8) {
    double res = 0.0;
    for (std::size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int k = 0; k < 8; ++k) r[k] = a[k];
    std::size_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (int k = 0; k < 8; ++k) r[k] += a[i + k];
    }
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  std::size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

double pairwise_sum(const std::vector<double>& a) { return pairwise_sum(a.data(), a.size()); }

// np.nanmean without NaNs: pairwise sum / count.
ClassMetrics mean(const std::vector<double>& precision, const std::vector<double>& recall,
                  const std::vector<double>& f1) {
  const double n = static_cast<double>(precision.size());
  ClassMetrics m;
  m.precision = pairwise_sum(precision) / n;
  m.recall = pairwise_sum(recall) / n;
  m.f1 = pairwise_sum(f1) / n;
  return m;
}

void check_matrix(const std::vector<uint8_t>& y, const char* name, int num_samples, int num_labels) {
  const std::size_t want = static_cast<std::size_t>(num_samples) * static_cast<std::size_t>(num_labels);
  BERTRAIN_CHECK(y.size() == want, "multilabel_metrics: " << name << " has " << y.size() << " entries, expected "
                                                          << num_samples << " samples x " << num_labels
                                                          << " labels = " << want);
  const std::size_t l = static_cast<std::size_t>(num_labels);
  for (std::size_t k = 0; k < y.size(); ++k) {
    BERTRAIN_CHECK(y[k] <= 1, "multilabel_metrics: " << name << "[sample " << k / l << ", label " << k % l
                                                     << "] = " << static_cast<int>(y[k]) << " is not 0 or 1");
  }
}

}  // namespace

MultiLabelMetrics multilabel_metrics(const std::vector<uint8_t>& y_true, const std::vector<uint8_t>& y_pred,
                                     int num_samples, int num_labels) {
  BERTRAIN_CHECK(num_samples >= 1, "multilabel_metrics: num_samples must be >= 1, got " << num_samples);
  BERTRAIN_CHECK(num_labels >= 1, "multilabel_metrics: num_labels must be >= 1, got " << num_labels);
  check_matrix(y_true, "y_true", num_samples, num_labels);
  check_matrix(y_pred, "y_pred", num_samples, num_labels);

  const std::size_t n = static_cast<std::size_t>(num_samples);
  const std::size_t l = static_cast<std::size_t>(num_labels);
  std::vector<long> tp_label(l, 0), true_label(l, 0), pred_label(l, 0);
  std::vector<double> sample_p(n), sample_r(n), sample_f(n);
  for (std::size_t i = 0; i < n; ++i) {
    long tp = 0, t = 0, p = 0;
    for (std::size_t c = 0; c < l; ++c) {
      const long yt = y_true[i * l + c];
      const long yp = y_pred[i * l + c];
      tp += yt & yp;
      t += yt;
      p += yp;
      tp_label[c] += yt & yp;
      true_label[c] += yt;
      pred_label[c] += yp;
    }
    const ClassMetrics s = metrics_from_counts(tp, t, p);
    sample_p[i] = s.precision;
    sample_r[i] = s.recall;
    sample_f[i] = s.f1;
  }

  MultiLabelMetrics result;
  result.per_label.resize(l);
  std::vector<double> label_p(l), label_r(l), label_f(l);
  long tp_sum = 0, true_sum = 0, pred_sum = 0;
  for (std::size_t c = 0; c < l; ++c) {
    const ClassMetrics m = metrics_from_counts(tp_label[c], true_label[c], pred_label[c]);
    result.per_label[c] = m;
    label_p[c] = m.precision;
    label_r[c] = m.recall;
    label_f[c] = m.f1;
    tp_sum += tp_label[c];
    true_sum += true_label[c];
    pred_sum += pred_label[c];
  }

  result.micro = metrics_from_counts(tp_sum, true_sum, pred_sum);
  result.macro = mean(label_p, label_r, label_f);
  result.samples = mean(sample_p, sample_r, sample_f);

  if (true_sum == 0) {
    // np.average raises ZeroDivisionError; sklearn's _nanaverage falls back to the unweighted mean.
    result.weighted = result.macro;
  } else {
    // np.average: Σ value·weight / Σ weight, both pairwise sums (the weights are integers, exact).
    std::vector<double> weights(l), wp(l), wr(l), wf(l);
    for (std::size_t c = 0; c < l; ++c) {
      weights[c] = static_cast<double>(true_label[c]);
      wp[c] = label_p[c] * weights[c];
      wr[c] = label_r[c] * weights[c];
      wf[c] = label_f[c] * weights[c];
    }
    const double scale = pairwise_sum(weights);
    result.weighted.precision = pairwise_sum(wp) / scale;
    result.weighted.recall = pairwise_sum(wr) / scale;
    result.weighted.f1 = pairwise_sum(wf) / scale;
  }
  result.micro.support = result.macro.support = result.weighted.support = result.samples.support = true_sum;
  return result;
}

}  // namespace bertrain

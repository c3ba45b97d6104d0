// Multi-label metrics as scikit-learn computes them (see the header for the rules).
#include "engine/multilabel_metrics.h"

#include <cstddef>
#include <utility>

#include "core/error.h"

namespace bertrain {

namespace {

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
  std::vector<ClassMetrics> per_sample(n);
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
    per_sample[i] = metrics_from_counts(tp, t, p);
  }

  // labels=None on indicator input: every column is a label.
  LabelAverages averages = label_averages(tp_label, true_label, pred_label);
  MultiLabelMetrics result;
  result.micro = averages.micro;
  result.macro = averages.macro;
  result.weighted = averages.weighted;
  result.per_label = std::move(averages.per_label);
  result.samples = mean_metrics(per_sample);
  result.samples.support = result.micro.support;
  return result;
}

}  // namespace bertrain

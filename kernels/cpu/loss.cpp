#include "kernels/loss.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "core/error.h"

namespace bertrain {

template <typename T>
T bce_with_logits_cpu(T* dlogits, const T* logits, const T* targets, const T* class_weights, int batch, int classes) {
  const std::size_t n = static_cast<std::size_t>(batch) * classes;
  const T inv_n = T(1) / T(n);
  // Sequential sum: a handful of elements, and a fixed order keeps the loss reproducible.
  T total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const T x = logits[i], y = targets[i];
    const T w = class_weights != nullptr ? class_weights[i % classes] : T(1);
    total += w * (std::max(x, T(0)) - x * y + std::log1p(std::exp(-std::abs(x))));
    if (dlogits != nullptr) {
      const T sigmoid = T(1) / (T(1) + std::exp(-x));
      dlogits[i] = w * (sigmoid - y) * inv_n;
    }
  }
  return total * inv_n;
}

template <typename T>
T softmax_cross_entropy_cpu(T* dlogits, const T* logits, const T* targets, int batch, int classes) {
  const T inv_b = T(1) / T(batch);
  T total = 0;
  for (int b = 0; b < batch; ++b) {
    const T* x = logits + static_cast<std::size_t>(b) * classes;
    const T* y = targets + static_cast<std::size_t>(b) * classes;
    const T mx = *std::max_element(x, x + classes);
    T sum = 0;
    for (int c = 0; c < classes; ++c) sum += std::exp(x[c] - mx);
    const T log_sum = std::log(sum) + mx;
    T y_sum = 0;
    for (int c = 0; c < classes; ++c) {
      total -= y[c] * (x[c] - log_sum);
      y_sum += y[c];
    }
    if (dlogits != nullptr) {
      T* d = dlogits + static_cast<std::size_t>(b) * classes;
      // d/dx_c of -Σ y log softmax = softmax_c · Σ y - y_c (Σ y = 1 for one-hot targets).
      for (int c = 0; c < classes; ++c) d[c] = (std::exp(x[c] - log_sum) * y_sum - y[c]) * inv_b;
    }
  }
  return total * inv_b;
}

template <typename T>
void softmax_cpu(T* probs, const T* logits, int batch, int classes) {
  for (int b = 0; b < batch; ++b) {
    const T* x = logits + static_cast<std::size_t>(b) * classes;
    T* p = probs + static_cast<std::size_t>(b) * classes;
    const T mx = *std::max_element(x, x + classes);
    T sum = 0;
    for (int c = 0; c < classes; ++c) sum += (p[c] = std::exp(x[c] - mx));
    for (int c = 0; c < classes; ++c) p[c] /= sum;
  }
}

template <typename T>
T classification_loss_cpu(LossKind kind, T* dlogits, const T* logits, const T* targets, const T* class_weights,
                          int batch, int classes) {
  if (kind == LossKind::kBce) return bce_with_logits_cpu(dlogits, logits, targets, class_weights, batch, classes);
  BERTRAIN_CHECK(class_weights == nullptr, "class weights are supported with the BCE loss only");
  return softmax_cross_entropy_cpu(dlogits, logits, targets, batch, classes);
}

template float classification_loss_cpu<float>(LossKind, float*, const float*, const float*, const float*, int, int);
template double classification_loss_cpu<double>(LossKind, double*, const double*, const double*, const double*, int,
                                                 int);
template float bce_with_logits_cpu<float>(float*, const float*, const float*, const float*, int, int);
template double bce_with_logits_cpu<double>(double*, const double*, const double*, const double*, int, int);
template float softmax_cross_entropy_cpu<float>(float*, const float*, const float*, int, int);
template double softmax_cross_entropy_cpu<double>(double*, const double*, const double*, int, int);
template void softmax_cpu<float>(float*, const float*, int, int);
template void softmax_cpu<double>(double*, const double*, int, int);

}  // namespace bertrain

#include "kernels/layernorm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace bertrain {

namespace {
// Columns per task in the column-sum loop: one 64-byte cache line of floats.
constexpr int kColumnBlock = 16;

template <typename T>
T input_at(const T* x, const T* residual, std::size_t index) {
  return residual != nullptr ? x[index] + residual[index] : x[index];
}
}  // namespace

template <typename T>
void layernorm_forward_cpu(T* y, T* mean, T* rstd, const T* x, const T* residual, const T* gamma, const T* beta,
                           int rows, int cols, T eps) {
#pragma omp parallel for schedule(static) if (rows > 64)
  for (int r = 0; r < rows; ++r) {
    const std::size_t base = static_cast<std::size_t>(r) * cols;
    T sum = 0;
    for (int c = 0; c < cols; ++c) sum += input_at(x, residual, base + c);
    const T mu = sum / T(cols);
    T sq = 0;
    for (int c = 0; c < cols; ++c) {
      const T d = input_at(x, residual, base + c) - mu;
      sq += d * d;
    }
    const T inv = T(1) / std::sqrt(sq / T(cols) + eps);
    for (int c = 0; c < cols; ++c) {
      y[base + c] = (input_at(x, residual, base + c) - mu) * inv * gamma[c] + beta[c];
    }
    mean[r] = mu;
    rstd[r] = inv;
  }
}

template <typename T>
void layernorm_backward_cpu(T* dz, T* dgamma, T* dbeta, const T* dy, const T* x, const T* residual, const T* mean,
                            const T* rstd, const T* gamma, int rows, int cols) {
  // Parameter gradients first: dz may alias dy.
  const int blocks = (cols + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (rows * cols > 65536)
  for (int blk = 0; blk < blocks; ++blk) {
    const int c0 = blk * kColumnBlock, c1 = std::min(cols, c0 + kColumnBlock);
    T g[kColumnBlock] = {}, b[kColumnBlock] = {};
    for (int r = 0; r < rows; ++r) {
      const std::size_t base = static_cast<std::size_t>(r) * cols;
      for (int c = c0; c < c1; ++c) {
        const T xhat = (input_at(x, residual, base + c) - mean[r]) * rstd[r];
        g[c - c0] += dy[base + c] * xhat;
        b[c - c0] += dy[base + c];
      }
    }
    for (int c = c0; c < c1; ++c) {
      dgamma[c] = g[c - c0];
      dbeta[c] = b[c - c0];
    }
  }

#pragma omp parallel for schedule(static) if (rows > 64)
  for (int r = 0; r < rows; ++r) {
    const std::size_t base = static_cast<std::size_t>(r) * cols;
    T sum_dxhat = 0, sum_dxhat_xhat = 0;
    for (int c = 0; c < cols; ++c) {
      const T xhat = (input_at(x, residual, base + c) - mean[r]) * rstd[r];
      const T dxhat = dy[base + c] * gamma[c];
      sum_dxhat += dxhat;
      sum_dxhat_xhat += dxhat * xhat;
    }
    const T mean_dxhat = sum_dxhat / T(cols), mean_dxhat_xhat = sum_dxhat_xhat / T(cols);
    for (int c = 0; c < cols; ++c) {
      const T xhat = (input_at(x, residual, base + c) - mean[r]) * rstd[r];
      const T dxhat = dy[base + c] * gamma[c];
      dz[base + c] = rstd[r] * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
    }
  }
}

template void layernorm_forward_cpu<float>(float*, float*, float*, const float*, const float*, const float*,
                                           const float*, int, int, float);
template void layernorm_forward_cpu<double>(double*, double*, double*, const double*, const double*, const double*,
                                            const double*, int, int, double);
template void layernorm_backward_cpu<float>(float*, float*, float*, const float*, const float*, const float*,
                                            const float*, const float*, const float*, int, int);
template void layernorm_backward_cpu<double>(double*, double*, double*, const double*, const double*, const double*,
                                             const double*, const double*, const double*, int, int);

}  // namespace bertrain

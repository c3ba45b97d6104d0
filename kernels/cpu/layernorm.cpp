#include "kernels/layernorm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "kernels/dropout.h"

namespace bertrain {

namespace {
// Columns per task in the column-sum loop: one 64-byte cache line of floats.
constexpr int kColumnBlock = 16;
// The fused dropout + residual + LayerNorm: row sums in kSumLanes interleaved partial sums (one vector register of
// floats, so the loop vectorises without reassociation by the compiler); masks drawn kMaskSpan elements per
// dropout_span call (a multiple of its 64-element Philox batch, on the stack); column sums of the backward in
// chunks of kPartialRows rows.
constexpr int kSumLanes = 8;
constexpr int kMaskSpan = 256;
constexpr int kPartialRows = 16;

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

namespace {

// Σ_{c < n} f(c) in kSumLanes interleaved partial sums (term c goes to lane c % kSumLanes), added in lane order.
template <typename T, typename F>
T interleaved_sum(int n, F f) {
  T lane[kSumLanes] = {};
  int c = 0;
  for (; c + kSumLanes <= n; c += kSumLanes) {
    for (int k = 0; k < kSumLanes; ++k) lane[k] += f(c + k);
  }
  for (int k = 0; c + k < n; ++k) lane[k] += f(c + k);
  T total = 0;
  for (int k = 0; k < kSumLanes; ++k) total += lane[k];
  return total;
}

// The same for two sums at once: f(c, a, b) returns the terms of both through a and b.
template <typename T, typename F>
void interleaved_sums(int n, F f, T* sum_a, T* sum_b) {
  T lane_a[kSumLanes] = {}, lane_b[kSumLanes] = {};
  int c = 0;
  for (; c + kSumLanes <= n; c += kSumLanes) {
    for (int k = 0; k < kSumLanes; ++k) {
      T a, b;
      f(c + k, a, b);
      lane_a[k] += a;
      lane_b[k] += b;
    }
  }
  for (int k = 0; c + k < n; ++k) {
    T a, b;
    f(c + k, a, b);
    lane_a[k] += a;
    lane_b[k] += b;
  }
  T total_a = 0, total_b = 0;
  for (int k = 0; k < kSumLanes; ++k) {
    total_a += lane_a[k];
    total_b += lane_b[k];
  }
  *sum_a = total_a;
  *sum_b = total_b;
}

void check_fused_arguments(int rows, int cols, float p, const char* what) {
  BERTRAIN_CHECK(rows >= 0 && cols > 0, what << ": rows " << rows << ", cols " << cols);
  BERTRAIN_CHECK(p >= 0.0f && p <= 1.0f, what << ": dropout probability must be in [0, 1], got " << p);
}

// m[0, cols) (=) the row's mask as T values: 1 / (1 - p) where kept, 0 where dropped (dropout_span of ones: the
// same draws and the same scale as dropout_forward_cpu). 0 < p <= 1.
template <typename T>
void row_mask(T* m, int cols, uint64_t first, float p, const RandomKey& key) {
  if (p >= 1.0f) {  // nothing is kept (u >= 1 never holds); dropout_span wants p < 1
    std::fill(m, m + cols, T(0));
    return;
  }
  T ones[kMaskSpan];
  std::fill(ones, ones + kMaskSpan, T(1));
  for (int o = 0; o < cols; o += kMaskSpan) {
    dropout_span(m + o, ones, static_cast<std::size_t>(std::min(kMaskSpan, cols - o)), first + o, p, key);
  }
}

// The calling thread's buffer for the backward's chunk partials, grown when needed and reused (no allocation in a
// steady-state training step).
template <typename T>
T* column_partials(std::size_t n) {
  thread_local std::vector<T> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

// One row of the fused backward (kDrop: p > 0, m holds the row's mask in dx). pg, pb (+=) the row's dy · xhat and
// dy, column by column (the chunk's partial sums: never aliased). Three vectorisable passes over the row: the row
// sums, dz with the column sums (dz may overwrite dy: each element is read before it is written), then dx over the
// mask.
template <bool kDrop, typename T>
void fused_backward_row(T* dz, T* dx, T* __restrict pg, T* __restrict pb, const T* dy, const T* x,
                        const T* residual, T mu, T inv, const T* gamma, int cols, T scale) {
  const T* m = dx;
  auto z_at = [&](int c) {
    if constexpr (kDrop) {
      const T kept = x[c] * scale;  // loaded and scaled unconditionally, so the select vectorises
      return (m[c] != T(0) ? kept : T(0)) + residual[c];
    } else {
      return x[c] + residual[c];
    }
  };
  T sum_dxhat, sum_dxhat_xhat;
  interleaved_sums<T>(
      cols,
      [&](int c, T& a, T& b) {
        const T xhat = (z_at(c) - mu) * inv;
        const T dxhat = dy[c] * gamma[c];
        a = dxhat;
        b = dxhat * xhat;
      },
      &sum_dxhat, &sum_dxhat_xhat);
  const T mean_dxhat = sum_dxhat / T(cols), mean_dxhat_xhat = sum_dxhat_xhat / T(cols);
  for (int c = 0; c < cols; ++c) {
    const T xhat = (z_at(c) - mu) * inv;
    const T g = dy[c];  // read before dz[c] is written
    const T dxhat = g * gamma[c];
    pg[c] += g * xhat;
    pb[c] += g;
    dz[c] = inv * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
  }
  for (int c = 0; c < cols; ++c) {
    if constexpr (kDrop) {
      dx[c] = m[c] != T(0) ? dz[c] * scale : T(0);  // overwrites the mask element just read
    } else {
      dx[c] = dz[c];
    }
  }
}

}  // namespace

std::size_t dropout_residual_layout_cols(const DropoutLayout& layout, int rows, int cols, const char* what) {
  BERTRAIN_CHECK(layout.first_sample >= 0, what << ": dropout layout first_sample " << layout.first_sample);
  const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  const std::size_t layout_cols = layout.cols > 0 ? static_cast<std::size_t>(layout.cols) : n;
  BERTRAIN_CHECK(n % layout_cols == 0, what << ": " << n << " elements are not rows of " << layout_cols);
  BERTRAIN_CHECK(layout_cols % static_cast<std::size_t>(cols) == 0,
                 what << ": dropout layout rows of " << layout_cols << " elements split rows of " << cols);
  return layout_cols;
}

template <typename T>
void dropout_residual_layernorm_forward_cpu(T* y, T* mean, T* rstd, const T* x, const T* residual, const T* gamma,
                                            const T* beta, int rows, int cols, T eps, float p, const RandomKey& key,
                                            const DropoutLayout& layout) {
  const char* what = "dropout_residual_layernorm_forward_cpu";
  check_fused_arguments(rows, cols, p, what);
  BERTRAIN_CHECK(y != nullptr && mean != nullptr && rstd != nullptr && x != nullptr && residual != nullptr &&
                     gamma != nullptr && beta != nullptr,
                 what << ": null pointer");
  const std::size_t layout_cols = p > 0.0f ? dropout_residual_layout_cols(layout, rows, cols, what) : 0;
#pragma omp parallel for schedule(static) if (rows > 64)
  for (int r = 0; r < rows; ++r) {
    const std::size_t base = static_cast<std::size_t>(r) * cols;
    const T* xr = x + base;
    const T* rr = residual + base;
    T* z = y + base;  // z, then y: each chunk of x and residual is read before its z is stored
    if (p >= 1.0f) {
      for (int c = 0; c < cols; ++c) z[c] = T(0) + rr[c];
    } else if (p > 0.0f) {
      const uint64_t first = dropout_index(layout, layout_cols, base);
      T kept[kMaskSpan];
      for (int o = 0; o < cols; o += kMaskSpan) {
        const int n = std::min(kMaskSpan, cols - o);
        dropout_span(kept, xr + o, static_cast<std::size_t>(n), first + o, p, key);
        for (int e = 0; e < n; ++e) z[o + e] = kept[e] + rr[o + e];
      }
    } else {
      for (int c = 0; c < cols; ++c) z[c] = xr[c] + rr[c];
    }
    const T mu = interleaved_sum<T>(cols, [&](int c) { return z[c]; }) / T(cols);
    const T sq = interleaved_sum<T>(cols, [&](int c) {
      const T d = z[c] - mu;
      return d * d;
    });
    const T inv = T(1) / std::sqrt(sq / T(cols) + eps);
    for (int c = 0; c < cols; ++c) z[c] = (z[c] - mu) * inv * gamma[c] + beta[c];
    mean[r] = mu;
    rstd[r] = inv;
  }
}

template <typename T>
void dropout_residual_layernorm_backward_cpu(T* dz, T* dx, T* dgamma, T* dbeta, const T* dy, const T* x,
                                             const T* residual, const T* mean, const T* rstd, const T* gamma, int rows,
                                             int cols, float p, const RandomKey& key, const DropoutLayout& layout) {
  const char* what = "dropout_residual_layernorm_backward_cpu";
  check_fused_arguments(rows, cols, p, what);
  BERTRAIN_CHECK(dz != nullptr && dx != nullptr && dgamma != nullptr && dbeta != nullptr && dy != nullptr &&
                     x != nullptr && residual != nullptr && mean != nullptr && rstd != nullptr && gamma != nullptr,
                 what << ": null pointer");
  BERTRAIN_CHECK(static_cast<const void*>(dx) != static_cast<const void*>(dz) &&
                     static_cast<const void*>(dx) != static_cast<const void*>(dy) &&
                     static_cast<const void*>(dx) != static_cast<const void*>(x) &&
                     static_cast<const void*>(dx) != static_cast<const void*>(residual),
                 what << ": dx must not alias dz, dy, x or residual");
  const std::size_t layout_cols = p > 0.0f ? dropout_residual_layout_cols(layout, rows, cols, what) : 0;
  const T scale = T(1) / (T(1) - T(p));  // dropout_span's scale (inf for p == 1, never used: nothing is kept)
  const int chunks = (rows + kPartialRows - 1) / kPartialRows;
  const std::size_t width = static_cast<std::size_t>(cols);
  T* partial = column_partials<T>(2 * static_cast<std::size_t>(chunks) * width);  // [chunks][dgamma, dbeta][cols]

#pragma omp parallel for schedule(static) if (rows > 64)
  for (int k = 0; k < chunks; ++k) {
    T* pg = partial + 2 * static_cast<std::size_t>(k) * width;
    T* pb = pg + width;
    std::fill(pg, pg + 2 * width, T(0));
    const int r1 = std::min(rows, (k + 1) * kPartialRows);
    for (int r = k * kPartialRows; r < r1; ++r) {
      const std::size_t base = static_cast<std::size_t>(r) * width;
      if (p > 0.0f) {
        row_mask(dx + base, cols, dropout_index(layout, layout_cols, base), p, key);
        fused_backward_row<true>(dz + base, dx + base, pg, pb, dy + base, x + base, residual + base, mean[r], rstd[r],
                                 gamma, cols, scale);
      } else {
        fused_backward_row<false>(dz + base, dx + base, pg, pb, dy + base, x + base, residual + base, mean[r],
                                  rstd[r], gamma, cols, scale);
      }
    }
  }

  // Chunk partials in chunk order.
#pragma omp parallel for schedule(static) if (static_cast<std::size_t>(chunks) * width > 65536)
  for (int c = 0; c < cols; ++c) {
    T g = 0, b = 0;
    for (int k = 0; k < chunks; ++k) {
      g += partial[2 * static_cast<std::size_t>(k) * width + c];
      b += partial[(2 * static_cast<std::size_t>(k) + 1) * width + c];
    }
    dgamma[c] = g;
    dbeta[c] = b;
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

template void dropout_residual_layernorm_forward_cpu<float>(float*, float*, float*, const float*, const float*,
                                                            const float*, const float*, int, int, float, float,
                                                            const RandomKey&, const DropoutLayout&);
template void dropout_residual_layernorm_forward_cpu<double>(double*, double*, double*, const double*, const double*,
                                                             const double*, const double*, int, int, double, float,
                                                             const RandomKey&, const DropoutLayout&);
template void dropout_residual_layernorm_backward_cpu<float>(float*, float*, float*, float*, const float*,
                                                             const float*, const float*, const float*, const float*,
                                                             const float*, int, int, float, const RandomKey&,
                                                             const DropoutLayout&);
template void dropout_residual_layernorm_backward_cpu<double>(double*, double*, double*, double*, const double*,
                                                              const double*, const double*, const double*,
                                                              const double*, const double*, int, int, float,
                                                              const RandomKey&, const DropoutLayout&);

}  // namespace bertrain

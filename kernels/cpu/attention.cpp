#include "kernels/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "kernels/cpu/eigen_maps.h"

namespace bertrain {

std::size_t attention_scratch_elements(int seq, int threads) {
  return static_cast<std::size_t>(threads) * 2 * static_cast<std::size_t>(seq) * seq;
}

namespace {

// Dropout of one (b, h) block of S × S probabilities: row i draws the logical indices
// (((first_sample + b)·NH + h)·P + i)·P + [0, S) (kernels/attention.h).
template <typename T>
void block_dropout(T* out, const T* in, int b, int h, int heads, int seq, float p, const RandomKey& key,
                   const DropoutLayout& layout) {
  const uint64_t positions = static_cast<uint64_t>(std::max(layout.max_positions, seq));
  const uint64_t block = static_cast<uint64_t>(layout.first_sample + b) * heads + h;
  for (int i = 0; i < seq; ++i) {
    const std::size_t row = static_cast<std::size_t>(i) * seq;
    dropout_span(out + row, in + row, static_cast<std::size_t>(seq), (block * positions + i) * positions, p, key);
  }
}

std::size_t block_offset(int b, int h, int heads, int seq) {
  return (static_cast<std::size_t>(b) * heads + h) * static_cast<std::size_t>(seq) * seq;
}

}  // namespace

template <typename T>
void attention_forward_cpu(T* ctx, T* probs, const T* q, const T* k, const T* v, const int32_t* mask, int batch,
                           int seq, int heads, int head_dim, float dropout_p, const RandomKey& key, T* scratch,
                           const DropoutLayout& layout) {
  BERTRAIN_CHECK(dropout_p >= 0.0f && dropout_p < 1.0f, "attention dropout must be in [0, 1), got " << dropout_p);
  const int hidden = heads * head_dim;
  const T inv_sqrt_d = T(1) / std::sqrt(T(head_dim));
  const T masked = std::numeric_limits<T>::lowest();
  const std::size_t block = static_cast<std::size_t>(seq) * seq;
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < batch * heads; ++bh) {
    const int b = bh / heads, h = bh % heads;
    const std::size_t row0 = static_cast<std::size_t>(b) * seq * hidden + static_cast<std::size_t>(h) * head_dim;
    ConstStridedMap<T> qm(q + row0, seq, head_dim, Eigen::OuterStride<>(hidden));
    ConstStridedMap<T> km(k + row0, seq, head_dim, Eigen::OuterStride<>(hidden));
    ConstStridedMap<T> vm(v + row0, seq, head_dim, Eigen::OuterStride<>(hidden));
    const std::size_t offset = block_offset(b, h, heads, seq);
    MatrixMap<T> pm(probs + offset, seq, seq);
    // Hugging Face divides the scores by sqrt(HD) (not multiplies by the reciprocal); we do the same.
    pm.noalias() = qm * km.transpose();
    const int32_t* mrow = mask + static_cast<std::size_t>(b) * seq;
    for (int i = 0; i < seq; ++i) {
      T* row = probs + offset + static_cast<std::size_t>(i) * seq;
      T mx = masked;
      for (int j = 0; j < seq; ++j) {
        row[j] = row[j] * inv_sqrt_d;
        if (mrow[j] == 0) row[j] += masked;
        mx = std::max(mx, row[j]);
      }
      T sum = 0;
      for (int j = 0; j < seq; ++j) {
        row[j] = std::exp(row[j] - mx);
        sum += row[j];
      }
      const T inv = T(1) / sum;
      for (int j = 0; j < seq; ++j) row[j] *= inv;
    }
    StridedMap<T> cm(ctx + row0, seq, head_dim, Eigen::OuterStride<>(hidden));
    if (dropout_p > 0.0f) {
      T* dropped = scratch + static_cast<std::size_t>(omp_get_thread_num()) * 2 * block;
      block_dropout(dropped, probs + offset, b, h, heads, seq, dropout_p, key, layout);
      cm.noalias() = ConstMatrixMap<T>(dropped, seq, seq) * vm;
    } else {
      cm.noalias() = pm * vm;
    }
  }
}

template <typename T>
void attention_backward_cpu(T* dq, T* dk, T* dv, const T* dctx, const T* probs, const T* q, const T* k, const T* v,
                            int batch, int seq, int heads, int head_dim, float dropout_p, const RandomKey& key,
                            T* scratch, const DropoutLayout& layout) {
  const int hidden = heads * head_dim;
  const T inv_sqrt_d = T(1) / std::sqrt(T(head_dim));
  const std::size_t block = static_cast<std::size_t>(seq) * seq;
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < batch * heads; ++bh) {
    const int b = bh / heads, h = bh % heads;
    const std::size_t row0 = static_cast<std::size_t>(b) * seq * hidden + static_cast<std::size_t>(h) * head_dim;
    const Eigen::OuterStride<> stride(hidden);
    ConstStridedMap<T> qm(q + row0, seq, head_dim, stride);
    ConstStridedMap<T> km(k + row0, seq, head_dim, stride);
    ConstStridedMap<T> vm(v + row0, seq, head_dim, stride);
    ConstStridedMap<T> dcm(dctx + row0, seq, head_dim, stride);
    const std::size_t offset = block_offset(b, h, heads, seq);
    const T* p = probs + offset;
    T* dropped = scratch + static_cast<std::size_t>(omp_get_thread_num()) * 2 * block;
    T* dp = dropped + block;
    MatrixMap<T> dpm(dp, seq, seq);

    // dV = dropout(P)ᵀ · dctx
    const T* used = p;
    if (dropout_p > 0.0f) {
      block_dropout(dropped, p, b, h, heads, seq, dropout_p, key, layout);
      used = dropped;
    }
    StridedMap<T>(dv + row0, seq, head_dim, stride).noalias() = ConstMatrixMap<T>(used, seq, seq).transpose() * dcm;

    // dP = dropout'(dctx · Vᵀ)
    dpm.noalias() = dcm * vm.transpose();
    if (dropout_p > 0.0f) block_dropout(dp, dp, b, h, heads, seq, dropout_p, key, layout);

    // Softmax backward: dS_ij = P_ij (dP_ij - Σ_k dP_ik P_ik), then the 1/sqrt(HD) scale.
    for (int i = 0; i < seq; ++i) {
      const T* prow = p + static_cast<std::size_t>(i) * seq;
      T* drow = dp + static_cast<std::size_t>(i) * seq;
      T dot = 0;
      for (int j = 0; j < seq; ++j) dot += drow[j] * prow[j];
      for (int j = 0; j < seq; ++j) drow[j] = prow[j] * (drow[j] - dot) * inv_sqrt_d;
    }
    StridedMap<T>(dq + row0, seq, head_dim, stride).noalias() = dpm * km;
    StridedMap<T>(dk + row0, seq, head_dim, stride).noalias() = dpm.transpose() * qm;
  }
}

template void attention_forward_cpu<float>(float*, float*, const float*, const float*, const float*, const int32_t*,
                                           int, int, int, int, float, const RandomKey&, float*, const DropoutLayout&);
template void attention_forward_cpu<double>(double*, double*, const double*, const double*, const double*,
                                            const int32_t*, int, int, int, int, float, const RandomKey&, double*,
                                            const DropoutLayout&);
template void attention_backward_cpu<float>(float*, float*, float*, const float*, const float*, const float*,
                                            const float*, const float*, int, int, int, int, float, const RandomKey&,
                                            float*, const DropoutLayout&);
template void attention_backward_cpu<double>(double*, double*, double*, const double*, const double*, const double*,
                                             const double*, const double*, int, int, int, int, float,
                                             const RandomKey&, double*, const DropoutLayout&);

}  // namespace bertrain

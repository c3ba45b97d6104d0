#include "kernels/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "kernels/cpu/eigen_maps.h"
#include "kernels/packed.h"

namespace bertrain {

std::size_t attention_scratch_elements(int seq, int threads) {
  return static_cast<std::size_t>(threads) * 2 * static_cast<std::size_t>(seq) * seq;
}

std::size_t attention_probs_elements(const int32_t* cu_seqlens, int batch, int heads) {
  std::size_t squares = 0;
  for (int b = 0; b < batch; ++b) {
    const std::size_t length = static_cast<std::size_t>(cu_seqlens[b + 1] - cu_seqlens[b]);
    squares += length * length;
  }
  return squares * static_cast<std::size_t>(heads);
}

namespace {

// One (row, head) block of a packed batch: its L × L probabilities at `probs_offset`, its tokens from `first`.
struct Block {
  int b, h, first, length;
  std::size_t probs_offset;
};

Block block_of(const int32_t* cu_seqlens, int heads, int bh) {
  Block k;
  k.b = bh / heads;
  k.h = bh % heads;
  k.first = cu_seqlens[k.b];
  k.length = cu_seqlens[k.b + 1] - k.first;
  std::size_t squares = 0;  // Σ_{b' < b} L_b'², recomputed per task: O(B), cheap next to the block's products
  for (int r = 0; r < k.b; ++r) {
    const std::size_t length = static_cast<std::size_t>(cu_seqlens[r + 1] - cu_seqlens[r]);
    squares += length * length;
  }
  k.probs_offset = squares * heads + static_cast<std::size_t>(k.h) * k.length * k.length;
  return k;
}

// Dropout of one block of L × L probabilities: row i draws the logical indices
// (((first_sample + b)·NH + h)·P + i)·P + [0, L) (kernels/attention.h).
template <typename T>
void block_dropout(T* out, const T* in, const Block& blk, int heads, int positions, float p, const RandomKey& key,
                   const DropoutLayout& layout) {
  const uint64_t block = static_cast<uint64_t>(layout.first_sample + blk.b) * heads + blk.h;
  const uint64_t stride = static_cast<uint64_t>(positions);
  const int n = blk.length;
  for (int i = 0; i < n; ++i) {
    const std::size_t row = static_cast<std::size_t>(i) * n;
    dropout_span(out + row, in + row, static_cast<std::size_t>(n), (block * stride + i) * stride, p, key);
  }
}

// P of the dropout indices: max_positions, or the longest row when that is longer.
int dropout_positions(const DropoutLayout& layout, const int32_t* cu_seqlens, int batch) {
  return std::max(layout.max_positions, longest_row(cu_seqlens, batch));
}

void check_arguments(const char* what, const int32_t* cu_seqlens, int batch, int heads, int head_dim,
                     float dropout_p) {
  BERTRAIN_CHECK(batch > 0 && heads > 0 && head_dim > 0,
                 what << ": batch " << batch << ", heads " << heads << ", head_dim " << head_dim);
  BERTRAIN_CHECK(dropout_p >= 0.0f && dropout_p < 1.0f, what << ": attention dropout must be in [0, 1), got "
                                                             << dropout_p);
  check_row_offsets(cu_seqlens, batch, cu_seqlens[batch], std::numeric_limits<int>::max(), what);
}

}  // namespace

template <typename T>
void attention_forward_cpu(T* ctx, T* probs, const T* q, const T* k, const T* v, const int32_t* cu_seqlens, int batch,
                           int heads, int head_dim, float dropout_p, const RandomKey& key, T* scratch,
                           const DropoutLayout& layout) {
  check_arguments("attention_forward_cpu", cu_seqlens, batch, heads, head_dim, dropout_p);
  const int hidden = heads * head_dim;
  const T inv_sqrt_d = T(1) / std::sqrt(T(head_dim));
  const int positions = dropout_positions(layout, cu_seqlens, batch);
  const std::size_t longest = static_cast<std::size_t>(longest_row(cu_seqlens, batch));
#pragma omp parallel for schedule(dynamic)
  for (int bh = 0; bh < batch * heads; ++bh) {
    const Block blk = block_of(cu_seqlens, heads, bh);
    const int n = blk.length;
    const std::size_t row0 = static_cast<std::size_t>(blk.first) * hidden + static_cast<std::size_t>(blk.h) * head_dim;
    ConstStridedMap<T> qm(q + row0, n, head_dim, Eigen::OuterStride<>(hidden));
    ConstStridedMap<T> km(k + row0, n, head_dim, Eigen::OuterStride<>(hidden));
    ConstStridedMap<T> vm(v + row0, n, head_dim, Eigen::OuterStride<>(hidden));
    T* block_probs = probs + blk.probs_offset;
    MatrixMap<T> pm(block_probs, n, n);
    // Hugging Face divides the scores by sqrt(HD) (not multiplies by the reciprocal); we do the same.
    pm.noalias() = qm * km.transpose();
    for (int i = 0; i < n; ++i) {
      T* row = block_probs + static_cast<std::size_t>(i) * n;
      T mx = std::numeric_limits<T>::lowest();
      for (int j = 0; j < n; ++j) {
        row[j] = row[j] * inv_sqrt_d;
        mx = std::max(mx, row[j]);
      }
      T sum = 0;
      for (int j = 0; j < n; ++j) {
        row[j] = std::exp(row[j] - mx);
        sum += row[j];
      }
      const T inv = T(1) / sum;
      for (int j = 0; j < n; ++j) row[j] *= inv;
    }
    StridedMap<T> cm(ctx + row0, n, head_dim, Eigen::OuterStride<>(hidden));
    if (dropout_p > 0.0f) {
      T* dropped = scratch + static_cast<std::size_t>(omp_get_thread_num()) * 2 * longest * longest;
      block_dropout(dropped, block_probs, blk, heads, positions, dropout_p, key, layout);
      cm.noalias() = ConstMatrixMap<T>(dropped, n, n) * vm;
    } else {
      cm.noalias() = pm * vm;
    }
  }
}

template <typename T>
void attention_backward_cpu(T* dq, T* dk, T* dv, const T* dctx, const T* probs, const T* q, const T* k, const T* v,
                            const int32_t* cu_seqlens, int batch, int heads, int head_dim, float dropout_p,
                            const RandomKey& key, T* scratch, const DropoutLayout& layout) {
  check_arguments("attention_backward_cpu", cu_seqlens, batch, heads, head_dim, dropout_p);
  const int hidden = heads * head_dim;
  const T inv_sqrt_d = T(1) / std::sqrt(T(head_dim));
  const int positions = dropout_positions(layout, cu_seqlens, batch);
  const std::size_t longest = static_cast<std::size_t>(longest_row(cu_seqlens, batch));
#pragma omp parallel for schedule(dynamic)
  for (int bh = 0; bh < batch * heads; ++bh) {
    const Block blk = block_of(cu_seqlens, heads, bh);
    const int n = blk.length;
    const std::size_t row0 = static_cast<std::size_t>(blk.first) * hidden + static_cast<std::size_t>(blk.h) * head_dim;
    const Eigen::OuterStride<> stride(hidden);
    ConstStridedMap<T> qm(q + row0, n, head_dim, stride);
    ConstStridedMap<T> km(k + row0, n, head_dim, stride);
    ConstStridedMap<T> vm(v + row0, n, head_dim, stride);
    ConstStridedMap<T> dcm(dctx + row0, n, head_dim, stride);
    const T* p = probs + blk.probs_offset;
    T* dropped = scratch + static_cast<std::size_t>(omp_get_thread_num()) * 2 * longest * longest;
    T* dp = dropped + longest * longest;
    MatrixMap<T> dpm(dp, n, n);

    // dV = dropout(P)ᵀ · dctx
    const T* used = p;
    if (dropout_p > 0.0f) {
      block_dropout(dropped, p, blk, heads, positions, dropout_p, key, layout);
      used = dropped;
    }
    StridedMap<T>(dv + row0, n, head_dim, stride).noalias() = ConstMatrixMap<T>(used, n, n).transpose() * dcm;

    // dP = dropout'(dctx · Vᵀ)
    dpm.noalias() = dcm * vm.transpose();
    if (dropout_p > 0.0f) block_dropout(dp, dp, blk, heads, positions, dropout_p, key, layout);

    // Softmax backward: dS_ij = P_ij (dP_ij - Σ_k dP_ik P_ik), then the 1/sqrt(HD) scale.
    for (int i = 0; i < n; ++i) {
      const T* prow = p + static_cast<std::size_t>(i) * n;
      T* drow = dp + static_cast<std::size_t>(i) * n;
      T dot = 0;
      for (int j = 0; j < n; ++j) dot += drow[j] * prow[j];
      for (int j = 0; j < n; ++j) drow[j] = prow[j] * (drow[j] - dot) * inv_sqrt_d;
    }
    StridedMap<T>(dq + row0, n, head_dim, stride).noalias() = dpm * km;
    StridedMap<T>(dk + row0, n, head_dim, stride).noalias() = dpm.transpose() * qm;
  }
}

template void attention_forward_cpu<float>(float*, float*, const float*, const float*, const float*, const int32_t*,
                                           int, int, int, float, const RandomKey&, float*, const DropoutLayout&);
template void attention_forward_cpu<double>(double*, double*, const double*, const double*, const double*,
                                            const int32_t*, int, int, int, float, const RandomKey&, double*,
                                            const DropoutLayout&);
template void attention_backward_cpu<float>(float*, float*, float*, const float*, const float*, const float*,
                                            const float*, const float*, const int32_t*, int, int, int, float,
                                            const RandomKey&, float*, const DropoutLayout&);
template void attention_backward_cpu<double>(double*, double*, double*, const double*, const double*, const double*,
                                             const double*, const double*, const int32_t*, int, int, int, float,
                                             const RandomKey&, double*, const DropoutLayout&);

}  // namespace bertrain

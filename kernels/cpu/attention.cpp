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

namespace {

// One (row, head) block of a packed batch: its L tokens from `first`.
struct Block {
  int b, h, first, length;
};

Block block_of(const int32_t* cu_seqlens, int heads, int bh) {
  Block k;
  k.b = bh / heads;
  k.h = bh % heads;
  k.first = cu_seqlens[k.b];
  k.length = cu_seqlens[k.b + 1] - k.first;
  return k;
}

// The block's Q, K, V (and their gradients) inside qkv[T, 3H]: L × HD maps with row stride 3H.
template <typename Ptr>
Ptr block_column(Ptr qkv, const Block& blk, int hidden, int part, int head_dim) {
  return qkv + static_cast<std::size_t>(blk.first) * 3 * hidden + static_cast<std::size_t>(part) * hidden +
         static_cast<std::size_t>(blk.h) * head_dim;
}

// scores (=) Q Kᵀ / sqrt(HD) of one block, L × L row-major.
template <typename T>
void block_scores(T* scores, const T* qkv, const Block& blk, int hidden, int head_dim) {
  const Eigen::OuterStride<> stride(3 * hidden);
  const int n = blk.length;
  ConstStridedMap<T> qm(block_column(qkv, blk, hidden, 0, head_dim), n, head_dim, stride);
  ConstStridedMap<T> km(block_column(qkv, blk, hidden, 1, head_dim), n, head_dim, stride);
  MatrixMap<T> sm(scores, n, n);
  sm.noalias() = qm * km.transpose();
  sm *= T(1) / std::sqrt(T(head_dim));
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
void attention_forward_cpu(T* ctx, T* lse, const T* qkv, const int32_t* cu_seqlens, int batch, int heads,
                           int head_dim, float dropout_p, const RandomKey& key, T* scratch,
                           const DropoutLayout& layout) {
  check_arguments("attention_forward_cpu", cu_seqlens, batch, heads, head_dim, dropout_p);
  const int hidden = heads * head_dim;
  const std::size_t tokens = static_cast<std::size_t>(cu_seqlens[batch]);
  const int positions = dropout_positions(layout, cu_seqlens, batch);
  const std::size_t longest = static_cast<std::size_t>(longest_row(cu_seqlens, batch));
#pragma omp parallel for schedule(dynamic)
  for (int bh = 0; bh < batch * heads; ++bh) {
    const Block blk = block_of(cu_seqlens, heads, bh);
    const int n = blk.length;
    T* probs = scratch + static_cast<std::size_t>(omp_get_thread_num()) * 2 * longest * longest;
    block_scores(probs, qkv, blk, hidden, head_dim);
    T* block_lse = lse + static_cast<std::size_t>(blk.h) * tokens + blk.first;
    for (int i = 0; i < n; ++i) {
      T* row = probs + static_cast<std::size_t>(i) * n;
      T mx = std::numeric_limits<T>::lowest();
      for (int j = 0; j < n; ++j) mx = std::max(mx, row[j]);
      T sum = 0;
      for (int j = 0; j < n; ++j) {
        row[j] = std::exp(row[j] - mx);
        sum += row[j];
      }
      const T inv = T(1) / sum;
      for (int j = 0; j < n; ++j) row[j] *= inv;
      block_lse[i] = mx + std::log(sum);
    }
    if (dropout_p > 0.0f) block_dropout(probs, probs, blk, heads, positions, dropout_p, key, layout);
    const Eigen::OuterStride<> stride(3 * hidden);
    ConstStridedMap<T> vm(block_column(qkv, blk, hidden, 2, head_dim), n, head_dim, stride);
    StridedMap<T> cm(ctx + static_cast<std::size_t>(blk.first) * hidden + static_cast<std::size_t>(blk.h) * head_dim,
                     n, head_dim, Eigen::OuterStride<>(hidden));
    cm.noalias() = ConstMatrixMap<T>(probs, n, n) * vm;
  }
}

template <typename T>
void attention_backward_cpu(T* dqkv, const T* dctx, const T* ctx, const T* lse, const T* qkv,
                            const int32_t* cu_seqlens, int batch, int heads, int head_dim, float dropout_p,
                            const RandomKey& key, T* scratch, const DropoutLayout& layout) {
  check_arguments("attention_backward_cpu", cu_seqlens, batch, heads, head_dim, dropout_p);
  const int hidden = heads * head_dim;
  const T scale = T(1) / std::sqrt(T(head_dim));
  const std::size_t tokens = static_cast<std::size_t>(cu_seqlens[batch]);
  const int positions = dropout_positions(layout, cu_seqlens, batch);
  const std::size_t longest = static_cast<std::size_t>(longest_row(cu_seqlens, batch));
#pragma omp parallel for schedule(dynamic)
  for (int bh = 0; bh < batch * heads; ++bh) {
    const Block blk = block_of(cu_seqlens, heads, bh);
    const int n = blk.length;
    const Eigen::OuterStride<> stride(3 * hidden), ctx_stride(hidden);
    ConstStridedMap<T> qm(block_column(qkv, blk, hidden, 0, head_dim), n, head_dim, stride);
    ConstStridedMap<T> km(block_column(qkv, blk, hidden, 1, head_dim), n, head_dim, stride);
    ConstStridedMap<T> vm(block_column(qkv, blk, hidden, 2, head_dim), n, head_dim, stride);
    const std::size_t ctx0 = static_cast<std::size_t>(blk.first) * hidden + static_cast<std::size_t>(blk.h) * head_dim;
    ConstStridedMap<T> om(ctx + ctx0, n, head_dim, ctx_stride);
    ConstStridedMap<T> dom(dctx + ctx0, n, head_dim, ctx_stride);
    T* p = scratch + static_cast<std::size_t>(omp_get_thread_num()) * 2 * longest * longest;
    T* dp = p + longest * longest;
    MatrixMap<T> pm(p, n, n), dpm(dp, n, n);

    // The probabilities again, from the scores and the saved log-sum-exp.
    block_scores(p, qkv, blk, hidden, head_dim);
    const T* block_lse = lse + static_cast<std::size_t>(blk.h) * tokens + blk.first;
    for (int i = 0; i < n; ++i) {
      T* row = p + static_cast<std::size_t>(i) * n;
      for (int j = 0; j < n; ++j) row[j] = std::exp(row[j] - block_lse[i]);
    }
    // dV = dropout(P)ᵀ dctx (the dropped probabilities borrow dP's slot).
    const T* used = p;
    if (dropout_p > 0.0f) {
      block_dropout(dp, p, blk, heads, positions, dropout_p, key, layout);
      used = dp;
    }
    StridedMap<T>(block_column(dqkv, blk, hidden, 2, head_dim), n, head_dim, stride).noalias() =
        ConstMatrixMap<T>(used, n, n).transpose() * dom;
    // dP = dropout'(dctx Vᵀ); dS = P ∘ (dP − D) / sqrt(HD) with D_i = dctx_i · ctx_i.
    dpm.noalias() = dom * vm.transpose();
    if (dropout_p > 0.0f) block_dropout(dp, dp, blk, heads, positions, dropout_p, key, layout);
    for (int i = 0; i < n; ++i) {
      const T d = dom.row(i).dot(om.row(i));
      const T* prow = p + static_cast<std::size_t>(i) * n;
      T* drow = dp + static_cast<std::size_t>(i) * n;
      for (int j = 0; j < n; ++j) drow[j] = prow[j] * (drow[j] - d) * scale;
    }
    StridedMap<T>(block_column(dqkv, blk, hidden, 0, head_dim), n, head_dim, stride).noalias() = dpm * km;
    StridedMap<T>(block_column(dqkv, blk, hidden, 1, head_dim), n, head_dim, stride).noalias() = dpm.transpose() * qm;
  }
}

template void attention_forward_cpu<float>(float*, float*, const float*, const int32_t*, int, int, int, float,
                                           const RandomKey&, float*, const DropoutLayout&);
template void attention_forward_cpu<double>(double*, double*, const double*, const int32_t*, int, int, int, float,
                                            const RandomKey&, double*, const DropoutLayout&);
template void attention_backward_cpu<float>(float*, const float*, const float*, const float*, const float*,
                                            const int32_t*, int, int, int, float, const RandomKey&, float*,
                                            const DropoutLayout&);
template void attention_backward_cpu<double>(double*, const double*, const double*, const double*, const double*,
                                             const int32_t*, int, int, int, float, const RandomKey&, double*,
                                             const DropoutLayout&);

}  // namespace bertrain

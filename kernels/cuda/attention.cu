// Self-attention on the GPU (llm.c style): each row's tokens are gathered from the packed Q, K, V [T, H] into
// head-major [B, NH, S, HD] blocks padded with zeros to the longest row S, so that the score, context and gradient
// products are cuBLAS strided-batched GEMMs over the B·NH (row, head) blocks, with a softmax (+ dropout) kernel that
// ignores the keys beyond the row's length, and its backward, in between. The contexts and gradients of the real
// tokens are scattered back to [T, H]. A padded query row has zero dctx, so its dS row is zero and it adds nothing
// to dK or dV; padded keys have probability exactly 0, as the CPU's absent keys. Same probabilities and the same dropout
// masks (same Philox stream, same logical indices) as kernels/cpu/attention.cpp.
//
// Row-major to column-major (see kernels/cuda/linear.cu): a row-major [r, c] block read column-major is its
// c × r transpose, so each row-major product Z = X·Y is issued as Zᵀ = Yᵀ·Xᵀ. Per block bh, with qh, kh, vh,
// ctx_h row-major [S, HD] (lying as HD × S, ld HD) and the S × S matrices row-major (lying transposed, ld S):
//   scores = qh·khᵀ·α        scoresᵀ = kh·qhᵀ:       (T, N) m=S,  n=S, k=HD  A=kh (HD)      B=qh (HD)      C=scores (S)
//   ctx_h  = P_used·vh       ctx_hᵀ = vhᵀ·P_usedᵀ:   (N, N) m=HD, n=S, k=S   A=vh (HD)      B=P_used (S)   C=ctx_h (HD)
//   dvh    = P_usedᵀ·dctx_h  dvhᵀ = dctx_hᵀ·P_used:  (N, T) m=HD, n=S, k=S   A=dctx_h (HD)  B=P_used (S)   C=dvh (HD)
//   dP     = dctx_h·vhᵀ      dPᵀ = vh·dctx_hᵀ:       (T, N) m=S,  n=S, k=HD  A=vh (HD)      B=dctx_h (HD)  C=dP (S)
//   dqh    = dS·kh·α         dqhᵀ = khᵀ·dSᵀ:         (N, N) m=HD, n=S, k=S   A=kh (HD)      B=dS (S)       C=dqh (HD)
//   dkh    = dSᵀ·qh·α        dkhᵀ = qhᵀ·dS:          (N, T) m=HD, n=S, k=S   A=qh (HD)      B=dS (S)       C=dkh (HD)
// (leading dimensions in parentheses), α = 1/sqrt(HD). Strides: S·HD for the [S, HD] blocks, S·S for the
// S × S ones. The CPU scales the scores (and dS) before its products; α in the GEMM differs only in rounding.
//
// For T = bf16 every buffer (probs, qh, ..., the GEMM outputs) is bf16 with fp32 GEMM compute, except the scores:
// the softmax's input stays fp32 (softmax is on torch.autocast's fp32 list), so the scores GEMM writes fp32 into
// workspace regions [4] + [5] (2·B·NH·S·S bf16 elements are B·NH·S·S floats), the softmax reads them there and
// writes the bf16 probabilities, and the dropped probabilities are drawn in a second pass into region [4] once the
// scores are dead. The probabilities themselves stay bf16 (they feed the bf16 P·V GEMM, as under autocast). For
// T = float the scores are written into probs and the softmax runs in place with the dropout fused, as before.
// The softmax and its backward compute in float.
#include "kernels/attention.h"

#include <cublas_v2.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/common.cuh"

namespace bertrain {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxRowThreads = 256;
// Workspace regions start at multiples of this many elements (128 bytes for bf16), so cuBLAS sees aligned
// operands.
constexpr std::size_t kRegionAlign = 64;

std::size_t align_region(std::size_t n) { return (n + kRegionAlign - 1) / kRegionAlign * kRegionAlign; }

// The shapes of one call and where its scratch lies in the caller's T workspace. Six disjoint regions, laid
// out one after another:
//   [0] ctx_h (forward) / dctx_h (backward)  B·NH·S·HD = B·S·H
//   [1] dqh                                 B·S·H      (backward)
//   [2] dkh                                 B·S·H      (backward)
//   [3] dvh                                 B·S·H      (backward)
//   [4] dropped probabilities P_used        B·NH·S·S   (when dropout_p > 0)
//   [5] dP, then dS in place                B·NH·S·S   (backward)
//   [4] + [5] as one float array: the fp32 scores    B·NH·S·S floats (forward, T = bf16, before [4] is used)
struct AttentionShape {
  int batch, seq, heads, head_dim;
  std::size_t tokens_x_hidden;  // B·S·H = B·NH·S·HD
  std::size_t probs;            // B·NH·S·S
  AttentionShape(int b, int s, int nh, int hd)
      : batch(b),
        seq(s),
        heads(nh),
        head_dim(hd),
        tokens_x_hidden(static_cast<std::size_t>(b) * s * nh * hd),
        probs(static_cast<std::size_t>(b) * nh * s * s) {}
  std::size_t workspace_elements() const { return 4 * align_region(tokens_x_hidden) + 2 * align_region(probs); }
  template <typename T>
  T* region(T* workspace, int index) const {
    const std::size_t small = align_region(tokens_x_hidden), large = align_region(probs);
    const std::size_t offset = index < 4 ? index * small : 4 * small + (index - 4) * large;
    return workspace + offset;
  }
};

// Checks the arguments every call shares.
void check_shape(const char* what, int batch, int tokens, int seq, int heads, int head_dim, float dropout_p,
                 const DropoutLayout& layout) {
  BERTRAIN_CHECK(batch > 0 && seq > 0 && heads > 0 && head_dim > 0,
                 what << ": batch " << batch << ", seq " << seq << ", heads " << heads << ", head_dim " << head_dim);
  BERTRAIN_CHECK(tokens >= batch && static_cast<long long>(tokens) <= static_cast<long long>(batch) * seq,
                 what << ": " << tokens << " tokens in " << batch << " rows of at most " << seq);
  BERTRAIN_CHECK(static_cast<long long>(batch) * heads * seq <= 0x7fffffffLL,
                 what << ": B·NH·S = " << static_cast<long long>(batch) * heads * seq << " rows exceed the grid");
  BERTRAIN_CHECK(dropout_p >= 0.0f && dropout_p < 1.0f,
                 what << ": attention dropout must be in [0, 1), got " << dropout_p);
  BERTRAIN_CHECK(dropout_p == 0.0f || layout.first_sample >= 0,
                 what << ": dropout layout first_sample " << layout.first_sample);
}

// True when the byte ranges [a, a + a_elements) and [b, b + b_elements) of T share an element.
template <typename T>
bool overlap(const T* a, std::size_t a_elements, const T* b, std::size_t b_elements) {
  const auto a0 = reinterpret_cast<std::uintptr_t>(a), b0 = reinterpret_cast<std::uintptr_t>(b);
  return a0 < b0 + b_elements * sizeof(T) && b0 < a0 + a_elements * sizeof(T);
}

// C = alpha · op(A) · op(B) for each of `count` blocks (column-major, beta = 0), fp32 compute. C is T, or float
// (bf16 A and B with an fp32 C: a supported cublasGemmStridedBatchedEx combination).
template <typename T, typename C = T>
void batched_gemm(const GpuHandles& handles, cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k,
                  float alpha, const T* a, int lda, long long stride_a, const T* b, int ldb, long long stride_b, C* c,
                  int ldc, long long stride_c, int count) {
  constexpr cudaDataType_t type = cuda::CudaDataType<T>::value;
  const float beta = 0.0f;
  BERTRAIN_CUBLAS_CHECK(cublasGemmStridedBatchedEx(handles.blas, op_a, op_b, m, n, k, &alpha, a, type, lda, stride_a,
                                                   b, type, ldb, stride_b, &beta, c, cuda::CudaDataType<C>::value, ldc,
                                                   stride_c, count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// Dropout parameters as the kernels need them: element (b, h, i, j) of the B·NH·S·S probabilities has logical
// index (((first_sample + b)·NH + h)·P + i)·P + j with P = positions = max(max_positions, S).
struct DropoutParams {
  float p;
  float scale;  // 1 / (1 - p), computed in float as the CPU's dropout_span<float>
  RandomKey key;
  uint64_t first_sample;
  uint64_t positions;
};

DropoutParams dropout_params(float p, const RandomKey& key, const DropoutLayout& layout, int seq) {
  DropoutParams d;
  d.p = p;
  d.scale = 1.0f / (1.0f - p);
  d.key = key;
  d.first_sample = static_cast<uint64_t>(layout.first_sample);
  d.positions = static_cast<uint64_t>(std::max(layout.max_positions, seq));
  return d;
}

// Logical dropout index of the first element of row i of block (b, h).
__device__ __forceinline__ uint64_t dropout_row_index(const DropoutParams& d, uint64_t b, int heads, int h, int i) {
  return (((d.first_sample + b) * static_cast<uint64_t>(heads) + static_cast<uint64_t>(h)) * d.positions +
          static_cast<uint64_t>(i)) *
         d.positions;
}

// Inverted dropout of one value with the CPU's rule: kept when its uniform draw is >= p, then scaled.
__device__ __forceinline__ float dropout_value(const DropoutParams& d, uint64_t index, float x) {
  return philox_uniform(d.key, index) >= d.p ? x * d.scale : 0.0f;
}

// Threads of a one-block-per-row kernel: the row length rounded up to whole warps, at most kMaxRowThreads.
int row_threads(int seq) { return std::min(kMaxRowThreads, (seq + 31) / 32 * 32); }

// dst[b, h, s, :] (=) src[cu_seqlens[b] + s, h·HD : (h+1)·HD] for s < L_b, 0 for s in [L_b, S): the packed
// [T, H] tokens split into heads and padded. Grid-stride over the B·NH·S·HD destination elements.
template <typename T>
__global__ void attention_split_heads_kernel(T* dst, const T* src, const int32_t* cu_seqlens, int batch, int seq,
                                             int heads, int head_dim) {
  const std::size_t n = static_cast<std::size_t>(batch) * heads * seq * head_dim;
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t e = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    const std::size_t d = e % head_dim;
    const std::size_t s = (e / head_dim) % seq;
    const std::size_t h = (e / (static_cast<std::size_t>(head_dim) * seq)) % heads;
    const std::size_t b = e / (static_cast<std::size_t>(head_dim) * seq * heads);
    const std::size_t first = static_cast<std::size_t>(cu_seqlens[b]);
    if (first + s < static_cast<std::size_t>(cu_seqlens[b + 1])) {
      dst[e] = src[((first + s) * heads + h) * head_dim + d];
    } else {
      cuda::store(dst + e, 0.0f);
    }
  }
}

// dst[cu_seqlens[b] + s, h·HD : (h+1)·HD] (=) src[b, h, s, :] for s < L_b (the heads merged back into the packed
// [T, H]; padded positions are dropped). Grid-stride over the B·S·H padded positions, in destination order.
template <typename T>
__global__ void attention_merge_heads_kernel(T* dst, const T* src, const int32_t* cu_seqlens, int batch, int seq,
                                             int heads, int head_dim) {
  const std::size_t n = static_cast<std::size_t>(batch) * seq * heads * head_dim;
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t e = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    const std::size_t d = e % head_dim;
    const std::size_t h = (e / head_dim) % heads;
    const std::size_t s = (e / (static_cast<std::size_t>(head_dim) * heads)) % seq;
    const std::size_t b = e / (static_cast<std::size_t>(head_dim) * heads * seq);
    const std::size_t first = static_cast<std::size_t>(cu_seqlens[b]);
    if (first + s < static_cast<std::size_t>(cu_seqlens[b + 1])) {
      dst[((first + s) * heads + h) * head_dim + d] = src[((b * heads + h) * seq + s) * head_dim + d];
    }
  }
}

// Score j of a row whose sample has `length` tokens: keys beyond it get the lowest float added, so their
// probability is exactly 0 (the CPU has no such keys).
template <typename S>
__device__ __forceinline__ float masked_score(const S* row, int length, int j) {
  float s = cuda::load(row + j);
  if (j >= length) s += -FLT_MAX;
  return s;
}

// probs[B, NH, S, S] (=) softmax over each row of the scores[B, NH, S, S] over the row's real keys (the scaled scores, in S: float,
// or T when scores == probs: in place). When dropped is not null, dropped[B, NH, S, S] (=) dropout(probs) of the
// stored (rounded) probabilities. One block per row of S: blockIdx.x = (b·NH + h)·S + i.
template <typename T, typename S>
__global__ void attention_softmax_forward_kernel(T* probs, T* dropped, const S* scores, const int32_t* cu_seqlens,
                                                 int seq, int heads, DropoutParams dropout) {
  __shared__ float shared[32];
  const std::size_t row = blockIdx.x;
  const int i = static_cast<int>(row % seq);
  const std::size_t bh = row / seq;
  const int h = static_cast<int>(bh % heads);
  const std::size_t b = bh / heads;
  T* prow = probs + row * seq;
  const S* srow = scores + row * seq;
  const int length = cu_seqlens[b + 1] - cu_seqlens[b];

  float mx = -FLT_MAX;  // the CPU starts from the lowest float too
  for (int j = threadIdx.x; j < seq; j += blockDim.x) mx = fmaxf(mx, masked_score(srow, length, j));
  mx = cuda::block_max(mx, shared);
  float sum = 0.0f;
  for (int j = threadIdx.x; j < seq; j += blockDim.x) sum += expf(masked_score(srow, length, j) - mx);
  sum = cuda::block_sum(sum, shared);
  const float inv = 1.0f / sum;
  // In place (scores == probs), each thread rewrites only the elements it read above, and no thread reads them
  // afterwards.
  for (int j = threadIdx.x; j < seq; j += blockDim.x) {
    cuda::store(prow + j, expf(masked_score(srow, length, j) - mx) * inv);
  }
  if (dropped != nullptr) {
    T* drow = dropped + row * seq;
    const uint64_t first = dropout_row_index(dropout, b, heads, h, i);
    // Reads back what this thread stored above, so forward drops exactly the probabilities backward will
    // read from probs (for bf16: the rounded ones).
    for (int j = threadIdx.x; j < seq; j += blockDim.x) {
      cuda::store(drow + j, dropout_value(dropout, first + static_cast<uint64_t>(j), cuda::load(prow + j)));
    }
  }
}

// dropped[B, NH, S, S] (=) dropout(probs), the forward's mask regenerated. Grid-stride over B·NH·S·S.
template <typename T>
__global__ void attention_dropout_kernel(T* dropped, const T* probs, int batch, int seq, int heads,
                                         DropoutParams dropout) {
  const std::size_t n = static_cast<std::size_t>(batch) * heads * seq * seq;
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t e = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    const int j = static_cast<int>(e % seq);
    const std::size_t row = e / seq;
    const int i = static_cast<int>(row % seq);
    const std::size_t bh = row / seq;
    const int h = static_cast<int>(bh % heads);
    const std::size_t b = bh / heads;
    const uint64_t index = dropout_row_index(dropout, b, heads, h, i) + static_cast<uint64_t>(j);
    cuda::store(dropped + e, dropout_value(dropout, index, cuda::load(probs + e)));
  }
}

// Softmax backward, in place: on entry dp[B, NH, S, S] holds dP_used = dctx_h · vhᵀ (the gradient of the
// dropped probabilities); dP = dP_used through the forward's dropout mask (when dropout_p > 0), and
// dp (=) dS_ij = P_ij (dP_ij − Σ_k dP_ik P_ik) with P the saved probabilities before dropout. The 1/sqrt(HD)
// scale is left to the dQ/dK GEMMs. One block per row of S: blockIdx.x = (b·NH + h)·S + i.
template <typename T>
__global__ void attention_softmax_backward_kernel(T* dp, const T* probs, int seq, int heads, bool use_dropout,
                                                  DropoutParams dropout) {
  __shared__ float shared[32];
  const std::size_t row = blockIdx.x;
  const int i = static_cast<int>(row % seq);
  const std::size_t bh = row / seq;
  const int h = static_cast<int>(bh % heads);
  const std::size_t b = bh / heads;
  const T* prow = probs + row * seq;
  T* drow = dp + row * seq;
  const uint64_t first = use_dropout ? dropout_row_index(dropout, b, heads, h, i) : 0;
  // The masked gradient is recomputed in the second pass rather than stored, so bf16 rounds it only once.
  auto grad = [&](int j) {
    const float g = cuda::load(drow + j);
    return use_dropout ? dropout_value(dropout, first + static_cast<uint64_t>(j), g) : g;
  };
  float dot = 0.0f;
  for (int j = threadIdx.x; j < seq; j += blockDim.x) dot += grad(j) * cuda::load(prow + j);
  dot = cuda::block_sum(dot, shared);
  // Each thread rewrites only the elements it read above.
  for (int j = threadIdx.x; j < seq; j += blockDim.x) cuda::store(drow + j, cuda::load(prow + j) * (grad(j) - dot));
}

template <typename T>
void split_heads(const GpuHandles& handles, T* dst, const T* src, const int32_t* cu_seqlens,
                 const AttentionShape& shape) {
  attention_split_heads_kernel<T><<<cuda::elementwise_blocks(shape.tokens_x_hidden, kThreads), kThreads, 0,
                                    handles.stream>>>(dst, src, cu_seqlens, shape.batch, shape.seq, shape.heads,
                                                      shape.head_dim);
  BERTRAIN_CUDA_CHECK_LAUNCH("attention_split_heads_kernel");
}

template <typename T>
void merge_heads(const GpuHandles& handles, T* dst, const T* src, const int32_t* cu_seqlens,
                 const AttentionShape& shape) {
  attention_merge_heads_kernel<T><<<cuda::elementwise_blocks(shape.tokens_x_hidden, kThreads), kThreads, 0,
                                    handles.stream>>>(dst, src, cu_seqlens, shape.batch, shape.seq, shape.heads,
                                                      shape.head_dim);
  BERTRAIN_CUDA_CHECK_LAUNCH("attention_merge_heads_kernel");
}

}  // namespace

std::size_t attention_workspace_elements_cuda(int batch, int seq, int heads, int head_dim) {
  BERTRAIN_CHECK(batch > 0 && seq > 0 && heads > 0 && head_dim > 0,
                 "attention_workspace_elements_cuda: batch " << batch << ", seq " << seq << ", heads " << heads
                                                             << ", head_dim " << head_dim);
  return AttentionShape(batch, seq, heads, head_dim).workspace_elements();
}

template <typename T>
void attention_forward_cuda(const GpuHandles& handles, T* ctx, T* probs, T* qh, T* kh, T* vh, const T* q, const T* k,
                            const T* v, const int32_t* cu_seqlens, int batch, int tokens, int seq, int heads,
                            int head_dim, float dropout_p, const RandomKey& key, const DropoutLayout& layout,
                            T* workspace) {
  check_shape("attention_forward_cuda", batch, tokens, seq, heads, head_dim, dropout_p, layout);
  BERTRAIN_CHECK(ctx && probs && qh && kh && vh && q && k && v && cu_seqlens && workspace,
                 "attention_forward_cuda: null pointer argument");
  const AttentionShape shape(batch, seq, heads, head_dim);
  const std::size_t n = shape.tokens_x_hidden, np = shape.probs, nw = shape.workspace_elements();
  const std::size_t packed = static_cast<std::size_t>(tokens) * heads * head_dim;  // T·H
  // Outputs must not overlap each other, the inputs or the workspace (the kernels do not support aliasing).
  const T* outputs[] = {ctx, probs, qh, kh, vh, workspace};
  const std::size_t sizes[] = {packed, np, n, n, n, nw};
  const T* inputs[] = {q, k, v};
  for (int a = 0; a < 6; ++a) {
    for (int b = a + 1; b < 6; ++b) {
      BERTRAIN_CHECK(!overlap(outputs[a], sizes[a], outputs[b], sizes[b]),
                     "attention_forward_cuda: output/workspace buffers " << a << " and " << b << " overlap");
    }
    for (const T* in : inputs) {
      BERTRAIN_CHECK(!overlap(outputs[a], sizes[a], in, packed),
                     "attention_forward_cuda: output/workspace buffer " << a << " overlaps q, k or v");
    }
  }
  BERTRAIN_CHECK(handles.blas != nullptr, "attention_forward_cuda: no cuBLAS handle");
  T* ctx_h = shape.region(workspace, 0);
  T* dropped = dropout_p > 0.0f ? shape.region(workspace, 4) : nullptr;
  const int bh = batch * heads;
  const long long block_hd = static_cast<long long>(seq) * head_dim, block_ss = static_cast<long long>(seq) * seq;
  const float alpha = 1.0f / std::sqrt(static_cast<float>(head_dim));  // the CPU's T(1) / std::sqrt(T(HD))

  // qh, kh, vh [B, NH, S, HD] from q, k, v [T, H].
  split_heads(handles, qh, q, cu_seqlens, shape);
  split_heads(handles, kh, k, cu_seqlens, shape);
  split_heads(handles, vh, v, cu_seqlens, shape);
  const DropoutParams dropout = dropout_params(dropout_p, key, layout, seq);
  const unsigned rows = static_cast<unsigned>(np / seq);
  if constexpr (std::is_same_v<T, float>) {
    // scores[bh] (S × S) = qh[bh] · kh[bh]ᵀ · α, as scoresᵀ = kh · qhᵀ, into probs; softmax and dropout in place.
    batched_gemm<T>(handles, CUBLAS_OP_T, CUBLAS_OP_N, seq, seq, head_dim, alpha, kh, head_dim, block_hd, qh,
                    head_dim, block_hd, probs, seq, block_ss, bh);
    attention_softmax_forward_kernel<T, T>
        <<<rows, row_threads(seq), 0, handles.stream>>>(probs, dropped, probs, cu_seqlens, seq, heads, dropout);
    BERTRAIN_CUDA_CHECK_LAUNCH("attention_softmax_forward_kernel");
  } else {
    // The same scores in fp32 (regions [4] + [5] of the workspace), so that the softmax reads unrounded scores.
    static_assert(sizeof(T) * 2 >= sizeof(float), "regions [4] + [5] hold the float scores");
    float* scores = reinterpret_cast<float*>(shape.region(workspace, 4));
    batched_gemm<T, float>(handles, CUBLAS_OP_T, CUBLAS_OP_N, seq, seq, head_dim, alpha, kh, head_dim, block_hd, qh,
                           head_dim, block_hd, scores, seq, block_ss, bh);
    attention_softmax_forward_kernel<T, float>
        <<<rows, row_threads(seq), 0, handles.stream>>>(probs, nullptr, scores, cu_seqlens, seq, heads, dropout);
    BERTRAIN_CUDA_CHECK_LAUNCH("attention_softmax_forward_kernel");
    if (dropped != nullptr) {
      // Region [4] overlaps the scores, dead now (stream order); the backward's pass draws the same mask from the
      // same stored probabilities, so forward and backward drop the same values.
      attention_dropout_kernel<T><<<cuda::elementwise_blocks(np, kThreads), kThreads, 0, handles.stream>>>(
          dropped, probs, batch, seq, heads, dropout);
      BERTRAIN_CUDA_CHECK_LAUNCH("attention_dropout_kernel");
    }
  }
  // ctx_h[bh] (S × HD) = P_used[bh] · vh[bh], as ctx_hᵀ = vhᵀ · P_usedᵀ.
  const T* used = dropped != nullptr ? dropped : probs;
  batched_gemm<T>(handles, CUBLAS_OP_N, CUBLAS_OP_N, head_dim, seq, seq, 1.0f, vh, head_dim, block_hd, used, seq,
                  block_ss, ctx_h, head_dim, block_hd, bh);
  merge_heads(handles, ctx, ctx_h, cu_seqlens, shape);
}

template <typename T>
void attention_backward_cuda(const GpuHandles& handles, T* dq, T* dk, T* dv, const T* dctx, const T* probs,
                             const T* qh, const T* kh, const T* vh, const int32_t* cu_seqlens, int batch, int tokens,
                             int seq, int heads, int head_dim, float dropout_p, const RandomKey& key,
                             const DropoutLayout& layout, T* workspace) {
  check_shape("attention_backward_cuda", batch, tokens, seq, heads, head_dim, dropout_p, layout);
  BERTRAIN_CHECK(dq && dk && dv && dctx && probs && qh && kh && vh && cu_seqlens && workspace,
                 "attention_backward_cuda: null pointer argument");
  const AttentionShape shape(batch, seq, heads, head_dim);
  const std::size_t n = shape.tokens_x_hidden, np = shape.probs, nw = shape.workspace_elements();
  const std::size_t packed = static_cast<std::size_t>(tokens) * heads * head_dim;  // T·H
  const T* outputs[] = {dq, dk, dv, workspace};
  const std::size_t sizes[] = {packed, packed, packed, nw};
  const T* inputs[] = {dctx, probs, qh, kh, vh};
  const std::size_t input_sizes[] = {packed, np, n, n, n};
  for (int a = 0; a < 4; ++a) {
    for (int b = a + 1; b < 4; ++b) {
      BERTRAIN_CHECK(!overlap(outputs[a], sizes[a], outputs[b], sizes[b]),
                     "attention_backward_cuda: output/workspace buffers " << a << " and " << b << " overlap");
    }
    for (int b = 0; b < 5; ++b) {
      BERTRAIN_CHECK(!overlap(outputs[a], sizes[a], inputs[b], input_sizes[b]),
                     "attention_backward_cuda: output/workspace buffer " << a << " overlaps input " << b);
    }
  }
  BERTRAIN_CHECK(handles.blas != nullptr, "attention_backward_cuda: no cuBLAS handle");
  T* dctx_h = shape.region(workspace, 0);
  T* dqh = shape.region(workspace, 1);
  T* dkh = shape.region(workspace, 2);
  T* dvh = shape.region(workspace, 3);
  T* dropped = shape.region(workspace, 4);
  T* dp = shape.region(workspace, 5);
  const int bh = batch * heads;
  const long long block_hd = static_cast<long long>(seq) * head_dim, block_ss = static_cast<long long>(seq) * seq;
  const float alpha = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const DropoutParams dropout = dropout_params(dropout_p, key, layout, seq);
  const bool use_dropout = dropout_p > 0.0f;

  split_heads(handles, dctx_h, dctx, cu_seqlens, shape);
  const T* used = probs;
  if (use_dropout) {
    attention_dropout_kernel<T><<<cuda::elementwise_blocks(np, kThreads), kThreads, 0, handles.stream>>>(
        dropped, probs, batch, seq, heads, dropout);
    BERTRAIN_CUDA_CHECK_LAUNCH("attention_dropout_kernel");
    used = dropped;
  }
  // dvh[bh] (S × HD) = P_used[bh]ᵀ · dctx_h[bh], as dvhᵀ = dctx_hᵀ · P_used.
  batched_gemm<T>(handles, CUBLAS_OP_N, CUBLAS_OP_T, head_dim, seq, seq, 1.0f, dctx_h, head_dim, block_hd, used, seq,
                  block_ss, dvh, head_dim, block_hd, bh);
  // dP_used[bh] (S × S) = dctx_h[bh] · vh[bh]ᵀ, as dPᵀ = vh · dctx_hᵀ.
  batched_gemm<T>(handles, CUBLAS_OP_T, CUBLAS_OP_N, seq, seq, head_dim, 1.0f, vh, head_dim, block_hd, dctx_h, head_dim,
                  block_hd, dp, seq, block_ss, bh);
  attention_softmax_backward_kernel<T><<<static_cast<unsigned>(np / seq), row_threads(seq), 0, handles.stream>>>(
      dp, probs, seq, heads, use_dropout, dropout);
  BERTRAIN_CUDA_CHECK_LAUNCH("attention_softmax_backward_kernel");
  // dqh[bh] (S × HD) = dS[bh] · kh[bh] · α, as dqhᵀ = khᵀ · dSᵀ.
  batched_gemm<T>(handles, CUBLAS_OP_N, CUBLAS_OP_N, head_dim, seq, seq, alpha, kh, head_dim, block_hd, dp, seq,
                  block_ss, dqh, head_dim, block_hd, bh);
  // dkh[bh] (S × HD) = dS[bh]ᵀ · qh[bh] · α, as dkhᵀ = qhᵀ · dS.
  batched_gemm<T>(handles, CUBLAS_OP_N, CUBLAS_OP_T, head_dim, seq, seq, alpha, qh, head_dim, block_hd, dp, seq,
                  block_ss, dkh, head_dim, block_hd, bh);
  merge_heads(handles, dq, dqh, cu_seqlens, shape);
  merge_heads(handles, dk, dkh, cu_seqlens, shape);
  merge_heads(handles, dv, dvh, cu_seqlens, shape);
}

template void attention_forward_cuda<float>(const GpuHandles&, float*, float*, float*, float*, float*, const float*,
                                            const float*, const float*, const int32_t*, int, int, int, int, int, float,
                                            const RandomKey&, const DropoutLayout&, float*);
template void attention_forward_cuda<bf16>(const GpuHandles&, bf16*, bf16*, bf16*, bf16*, bf16*, const bf16*,
                                           const bf16*, const bf16*, const int32_t*, int, int, int, int, int, float,
                                           const RandomKey&, const DropoutLayout&, bf16*);
template void attention_backward_cuda<float>(const GpuHandles&, float*, float*, float*, const float*, const float*,
                                             const float*, const float*, const float*, const int32_t*, int, int, int,
                                             int, int, float, const RandomKey&, const DropoutLayout&, float*);
template void attention_backward_cuda<bf16>(const GpuHandles&, bf16*, bf16*, bf16*, const bf16*, const bf16*,
                                            const bf16*, const bf16*, const bf16*, const int32_t*, int, int, int, int,
                                            int, float, const RandomKey&, const DropoutLayout&, bf16*);

}  // namespace bertrain

// Scaled dot-product self-attention over packed rows (kernels/packed.h) with attention-probability dropout.
// Q, K, V and the context are [T, H] token-major (T = ΣL_b); head h owns columns [h·HD, (h+1)·HD). Row b attends
// over its own L_b tokens only: there is no mask and no padded score.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/philox.h"
#include "kernels/dropout.h"

#include "core/bf16.h"
#include "core/cuda/gpu_handles.h"

namespace bertrain {

// Elements of T scratch the CPU kernels need for `threads` threads when the longest row has `seq` tokens.
std::size_t attention_scratch_elements(int seq, int threads);
// Elements of the probabilities of a packed batch: NH · Σ_b L_b² (host cu_seqlens).
std::size_t attention_probs_elements(const int32_t* cu_seqlens, int batch, int heads);

// probs (=): for each row b and head h, the L_b × L_b block softmax(Q_bh K_bhᵀ / sqrt(HD)) before dropout, row-major
// at offset NH·Σ_{b' < b} L_b'² + h·L_b². ctx[T, H] (=): dropout(probs) V. Dropout logical index
// (kernels/dropout.h) of probability (i, j) of block (b, h): (((first_sample + b)·NH + h)·P + i)·P + j in the
// stream `key`, with first_sample and P = max_positions from `layout` (P below the longest row counts as the
// longest row) — the index the padded engine used, so masks do not depend on packing. One task per (row, head).
// cu_seqlens is host memory and must pass check_row_offsets.
template <typename T>
void attention_forward_cpu(T* ctx, T* probs, const T* q, const T* k, const T* v, const int32_t* cu_seqlens, int batch,
                           int heads, int head_dim, float dropout_p, const RandomKey& key, T* scratch,
                           const DropoutLayout& layout = DropoutLayout{});

// dq, dk, dv [T, H] (=) from dctx and the saved probs (the dropout mask is regenerated from `key`).
template <typename T>
void attention_backward_cpu(T* dq, T* dk, T* dv, const T* dctx, const T* probs, const T* q, const T* k, const T* v,
                            const int32_t* cu_seqlens, int batch, int heads, int head_dim, float dropout_p,
                            const RandomKey& key, T* scratch, const DropoutLayout& layout = DropoutLayout{});

// ---- CUDA (kernels/cuda/attention.cu): each row's tokens are gathered from the packed Q, K, V into head-major
// [B, NH, S, HD] blocks padded to the batch's longest row S (zeros beyond L_b), so that the score and context
// products are strided-batched GEMMs over B·NH; the softmax (+ dropout) is one block per row and ignores the keys
// beyond L_b, and the context is scattered back to the packed [T, H]. So the GEMMs still compute the padded
// S × S blocks (issue 14's fused kernel removes that); the results are the CPU's. Same dropout indices as the CPU.
// For T = bf16 the scores are computed into fp32 (workspace) and the softmax reads them unrounded (softmax is on
// torch.autocast's fp32 list); the probabilities are stored in bf16 (the P·V GEMM reads them in bf16, as under
// autocast), so probs is the CPU's fp32 softmax rounded once. cu_seqlens is a device pointer whose offsets passed
// check_row_offsets on the host; `tokens` is T and `seq` is S, the longest row.
// Elements of T scratch attention_forward/backward_cuda need.
std::size_t attention_workspace_elements_cuda(int batch, int seq, int heads, int head_dim);
// ctx[T, H] (=); probs[B, NH, S, S] (=, before dropout, kept for backward; entries of padded queries or keys are
// unspecified); qh, kh, vh [B, NH, S, HD] (=, kept for backward).
template <typename T>
void attention_forward_cuda(const GpuHandles& handles, T* ctx, T* probs, T* qh, T* kh, T* vh, const T* q, const T* k,
                            const T* v, const int32_t* cu_seqlens, int batch, int tokens, int seq, int heads,
                            int head_dim, float dropout_p, const RandomKey& key, const DropoutLayout& layout,
                            T* workspace);
// dq, dk, dv [T, H] (=) from dctx [T, H] and what forward kept.
template <typename T>
void attention_backward_cuda(const GpuHandles& handles, T* dq, T* dk, T* dv, const T* dctx, const T* probs,
                             const T* qh, const T* kh, const T* vh, const int32_t* cu_seqlens, int batch, int tokens,
                             int seq, int heads, int head_dim, float dropout_p, const RandomKey& key,
                             const DropoutLayout& layout, T* workspace);

}  // namespace bertrain

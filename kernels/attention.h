// Scaled dot-product self-attention over packed rows (kernels/packed.h) with attention-probability dropout.
// The context is [T, H] token-major (T = ΣL_b); head h owns columns [h·HD, (h+1)·HD). Row b attends over its
// own L_b tokens only: there is no mask and no padded score.
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

// Q, K and V come from one GEMM with N = 3H (the layer's query, key and value weights lie back to back in the
// parameter buffer, model/bert_params.h): qkv[T, 3H], token t's row being [q_t | k_t | v_t], so head h reads its
// query at columns h·HD, its key at H + h·HD and its value at 2H + h·HD. The kernels read them by strides (no
// split or merge copies) and write dqkv in the same layout, so that the QKV backward is again one GEMM.
//
// Flash-attention form: forward saves only the context and each query's log-sum-exp; backward recomputes the
// probabilities P_ij = exp(s_ij − lse_i) from Q, K and lse, with s = QKᵀ · (1 / sqrt(HD)) (the reciprocal is
// exact for HD = 64, a power of 4). Dropout logical index (kernels/dropout.h) of probability (i, j) of block (b, h):
// (((first_sample + b)·NH + h)·P + i)·P + j in the stream `key`, with first_sample and P = max_positions from
// `layout` (P below the longest row counts as the longest row): the index the padded engine used, so masks do
// not depend on packing. With D_i = Σ_d dctx_id·ctx_id (= Σ_j P_ij dP_ij under dropout too):
//   dV = dropout(P)ᵀ dctx, dP = dropout'(dctx Vᵀ), dS = P ∘ (dP − D) / sqrt(HD), dQ = dS K, dK = dSᵀ Q.

// ctx[T, H] (=) dropout(softmax(s)) V for each row b and head h over the row's L_b tokens; lse[NH, T] (=)
// log Σ_j exp(s_ij) of each query token (natural log; entry h·T + t). One task per (row, head); cu_seqlens is
// host memory and must pass check_row_offsets.
template <typename T>
void attention_forward_cpu(T* ctx, T* lse, const T* qkv, const int32_t* cu_seqlens, int batch, int heads,
                           int head_dim, float dropout_p, const RandomKey& key, T* scratch,
                           const DropoutLayout& layout = DropoutLayout{});

// dqkv[T, 3H] (=) from dctx[T, H] and what forward produced (ctx, lse) and read (qkv).
template <typename T>
void attention_backward_cpu(T* dqkv, const T* dctx, const T* ctx, const T* lse, const T* qkv,
                            const int32_t* cu_seqlens, int batch, int heads, int head_dim, float dropout_p,
                            const RandomKey& key, T* scratch, const DropoutLayout& layout = DropoutLayout{});

// ---- CUDA (kernels/cuda/attention.cu): fused kernels over the packed rows, never materialising a score or
// probability matrix in memory. Softmax statistics, lse and D are fp32 whatever T is; for T = bf16 the two
// products of each tile run on tensor cores (bf16 inputs, fp32 accumulation) and the probabilities are rounded to
// bf16 before the P·V product (as SDPA under autocast). Deterministic: each output element is written by one
// thread block, in a fixed order (no float atomics). cu_seqlens is a device pointer whose offsets passed
// check_row_offsets on the host; `tokens` is T and `longest` the longest row S (the host knows both).
// Floats of workspace attention_backward_cuda needs for batches of at most `tokens` tokens in rows of at most
// `longest`: D [NH, T], then, for the tensor-core kernels with dropout, the dropout mask of every (head, query) as
// ceil(longest / 32) 32-bit words (drawn once per backward instead of once in each of its two kernels).
std::size_t attention_workspace_floats_cuda(int tokens, int heads, int longest);
// 32-bit words of a dropout mask kept from a forward for its backward: ceil(longest / 32) per head and query.
std::size_t attention_dropout_mask_words_cuda(int tokens, int heads, int longest);
// ctx[T, H] (=), lse[NH, T] (=) as the CPU twin. One thread block per (query tile, head, row). With dropout and a
// `dropout_mask` of attention_dropout_mask_words_cuda(tokens, heads, longest) words, the tensor-core kernels also
// store the mask they draw there, for the backward to read instead of drawing it again (the general kernels
// leave it alone, and their backward draws its own; but where only a ctx not 4-byte aligned keeps the forward off
// the tensor-core kernels, the mask is drawn into the buffer by a kernel of its own, since the backward decides from
// its own pointers).
template <typename T>
void attention_forward_cuda(T* ctx, float* lse, const T* qkv, const int32_t* cu_seqlens, int batch, int tokens,
                            int longest, int heads, int head_dim, float dropout_p, const RandomKey& key,
                            const DropoutLayout& layout, CudaStream stream, uint32_t* dropout_mask = nullptr);
// dqkv[T, 3H] (=) as the CPU twin. D first, then dK and dV with one block per (key tile, head, row) walking the
// row's query tiles, then dQ with one block per (query tile, head, row) walking its key tiles: the probabilities are
// recomputed twice so that no block adds into another's output. The tensor-core kernels (bf16, head dim 64) read
// the dropout mask as bits: the forward's `dropout_mask` when given (the same buffer, key, layout and batch, and the
// same BERTRAIN_ATTENTION_MMA, so that both took the same kernels), else drawn once into the workspace for both.
// `workspace` holds attention_workspace_floats_cuda(tokens, heads, longest) floats.
template <typename T>
void attention_backward_cuda(T* dqkv, const T* dctx, const T* ctx, const float* lse, const T* qkv,
                             const int32_t* cu_seqlens, int batch, int tokens, int longest, int heads, int head_dim,
                             float dropout_p, const RandomKey& key, const DropoutLayout& layout, float* workspace,
                             CudaStream stream, const uint32_t* dropout_mask = nullptr);

}  // namespace bertrain

// Scaled dot-product self-attention with BERT's padding mask and attention-probability dropout.
// Q, K, V and the context are [B, S, H] token-major; head h owns columns [h·HD, (h+1)·HD).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/philox.h"
#include "kernels/dropout.h"

#include "core/bf16.h"
#include "core/cuda/gpu_handles.h"

namespace bertrain {

// Floats of scratch memory the attention kernels need for `threads` threads at sequence length `seq`.
std::size_t attention_scratch_elements(int seq, int threads);

// probs[B, NH, S, S] (=): softmax(Q Kᵀ / sqrt(HD) + m) before dropout, where m_j is 0 for keys with
// mask[b, j] = 1 and the lowest finite value (as Hugging Face) for padded keys. ctx[B, S, H] (=): dropout(probs) V.
// Dropout logical index (kernels/dropout.h): (((first_sample + b)·NH + h)·P + i)·P + j in the stream `key`,
// with first_sample and P = max_positions from `layout` (P below S counts as S). One task per (batch, head).
template <typename T>
void attention_forward_cpu(T* ctx, T* probs, const T* q, const T* k, const T* v, const int32_t* mask, int batch,
                           int seq, int heads, int head_dim, float dropout_p, const RandomKey& key, T* scratch,
                           const DropoutLayout& layout = DropoutLayout{});

// dq, dk, dv [B, S, H] (=) from dctx and the saved probs (the dropout mask is regenerated from `key`).
template <typename T>
void attention_backward_cpu(T* dq, T* dk, T* dv, const T* dctx, const T* probs, const T* q, const T* k, const T* v,
                            int batch, int seq, int heads, int head_dim, float dropout_p, const RandomKey& key,
                            T* scratch, const DropoutLayout& layout = DropoutLayout{});

// ---- CUDA (kernels/cuda/attention.cu): Q, K, V are permuted to head-major [B, NH, S, HD] so that the score and
// context products are strided-batched GEMMs over B·NH; masked softmax (+ dropout) is one block per row.
// Same probabilities, same dropout indices as the CPU. For T = bf16 the scores are computed into fp32 (workspace)
// and the softmax reads them unrounded (softmax is on torch.autocast's fp32 list); the probabilities are stored
// in bf16 (the P·V GEMM reads them in bf16, as under autocast), so probs is the CPU's fp32 softmax rounded once.
// Elements of T scratch attention_forward/backward_cuda need.
std::size_t attention_workspace_elements_cuda(int batch, int seq, int heads, int head_dim);
// ctx[B, S, H] (=); probs[B, NH, S, S] (=, before dropout, kept for backward); qh, kh, vh [B, NH, S, HD] (=,
// kept for backward).
template <typename T>
void attention_forward_cuda(const GpuHandles& handles, T* ctx, T* probs, T* qh, T* kh, T* vh, const T* q, const T* k,
                            const T* v, const int32_t* mask, int batch, int seq, int heads, int head_dim,
                            float dropout_p, const RandomKey& key, const DropoutLayout& layout, T* workspace);
// dq, dk, dv [B, S, H] (=) from dctx [B, S, H] and what forward kept.
template <typename T>
void attention_backward_cuda(const GpuHandles& handles, T* dq, T* dk, T* dv, const T* dctx, const T* probs,
                             const T* qh, const T* kh, const T* vh, int batch, int seq, int heads, int head_dim,
                             float dropout_p, const RandomKey& key, const DropoutLayout& layout, T* workspace);

}  // namespace bertrain

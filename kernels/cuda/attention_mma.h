// The tensor-core attention kernels (kernels/cuda/attention_mma.cu): bf16 at head dim 64, the head dim of every
// BERT the project trains (BERT-base and -large, SciBERT, DistilBERT, the small BERTs). attention_forward_cuda and
// attention_backward_cuda (kernels/cuda/attention.cu) run them where tensor_core_attention_applies, and their own
// general kernels everywhere else (fp32, other head dims).
#pragma once

#include <cstdint>

#include "core/bf16.h"
#include "core/cuda/gpu_handles.h"
#include "kernels/cuda/attention_common.cuh"

namespace bertrain {
namespace cuda_attention {

constexpr int kMmaHeadDim = 64;

// head_dim 64, 16-byte aligned rows (args.vec), compute capability 8.0 or newer with the shared memory the kernels
// need, and not turned off: BERTRAIN_ATTENTION_MMA=0 runs the general kernels instead (read at every call, so that
// one process can time or test both).
bool tensor_core_attention_applies(int head_dim, bool vec, const DeviceFacts& dev);

// The tensor-core kernels store their outputs two bf16 columns at a time (4-byte stores): they need ctx and dqkv
// 4-byte aligned, which attention_forward_cuda and attention_backward_cuda check beside tensor_core_attention_applies.
inline bool pair_stores_aligned(const bf16* out) { return reinterpret_cast<std::uintptr_t>(out) % 4 == 0; }

// With dropout: the mask as bits (NH·T·dropout_mask_words(longest) words, attention_backward_mma's layout) into
// `mask`, drawn by one kernel of its own.
void attention_dropout_mask_mma(uint32_t* mask, const AttentionArgs& args, int batch, int longest,
                                CudaStream stream);
// ctx[T, H] (=), lse[NH, T] (=): as attention_forward_cuda. With dropout and a non-null `mask` (NH·T·
// dropout_mask_words(longest) words), also stores the mask it draws, in attention_backward_mma's layout.
void attention_forward_mma(bf16* ctx, float* lse, uint32_t* mask, const bf16* qkv, const AttentionArgs& args,
                           int batch, int longest, const DeviceFacts& dev, CudaStream stream);
// dqkv[T, 3H] (=) from dctx, lse and dvec = D (attention_backward_cuda computes it first): as attention_backward_cuda.
// With dropout, both kernels read the mask as bits: `saved_mask`, the forward's, when not null; else it is first
// drawn into `mask` (NH·T·dropout_mask_words(longest) words of the caller's workspace).
void attention_backward_mma(bf16* dqkv, const bf16* dctx, const float* lse, const float* dvec,
                            const uint32_t* saved_mask, uint32_t* mask, const bf16* qkv, const AttentionArgs& args,
                            int batch, int longest, const DeviceFacts& dev, CudaStream stream);

}  // namespace cuda_attention
}  // namespace bertrain

// Packed (unpadded) batches (DESIGN.md): the T = ΣL_b tokens of B rows lie back to back, row b being tokens
// [cu_seqlens[b], cu_seqlens[b + 1]). These ops derive what token-wise kernels need from the row offsets (each
// token's dropout row; its position comes from embedding_positions, kernels/embedding.h) and move the [CLS] rows
// (each row's first token) in and out of the packed tokens. CPU twins first, then the CUDA launchers
// (kernels/cuda/packed.cu).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/bf16.h"
#include "core/cuda/gpu_handles.h"

namespace bertrain {

// Throws Error starting with `what` unless cu_seqlens (host memory, B + 1 entries) starts at 0, every row has
// 1..max_len tokens and cu_seqlens[B] == tokens.
void check_row_offsets(const int32_t* cu_seqlens, int batch, int tokens, int max_len, const char* what);
// The longest row, max_b L_b (0 for no rows). Host memory.
int longest_row(const int32_t* cu_seqlens, int batch);

// slots[T] (=) (first_sample + b) · max_positions + (t − cu_seqlens[b]) for every token t of row b: the token's
// dropout row (kernels/dropout.h), which is its index in the padded batch, so packed and padded batches draw the
// same masks.
void dropout_slots_cpu(int64_t* slots, const int32_t* cu_seqlens, int batch, int64_t first_sample, int max_positions);

// cls[B, H] (=) tokens[cu_seqlens[b], :], each row's first token.
template <typename T>
void gather_first_tokens_cpu(T* cls, const T* tokens, const int32_t* cu_seqlens, int batch, int hidden);
// dtokens[T, H] (=): dcls[b] in row cu_seqlens[b], zero elsewhere (T = cu_seqlens[B]).
template <typename T>
void scatter_first_tokens_cpu(T* dtokens, const T* dcls, const int32_t* cu_seqlens, int batch, int hidden);

// ---- CUDA. cu_seqlens, slots, tokens are device pointers; the offsets must have passed check_row_offsets on the
// host (a kernel cannot throw). One block per row for the slots; grid-stride element-wise for the rest.
void dropout_slots_cuda(int64_t* slots, const int32_t* cu_seqlens, int batch, int64_t first_sample, int max_positions,
                        CudaStream stream);
template <typename T>
void gather_first_tokens_cuda(T* cls, const T* tokens, const int32_t* cu_seqlens, int batch, int hidden,
                              CudaStream stream);
// `tokens` is T (the host knows it: the device's cu_seqlens[B] is not read back).
template <typename T>
void scatter_first_tokens_cuda(T* dtokens, const T* dcls, const int32_t* cu_seqlens, int batch, int tokens, int hidden,
                               CudaStream stream);

}  // namespace bertrain

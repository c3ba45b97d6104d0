// Inverted dropout with masks drawn from Philox (core/philox.h): an element whose logical index in the
// stream `key` is i is kept when its uniform draw u satisfies u >= p, and kept values are scaled by
// 1 / (1 - p). The mask is never stored: backward regenerates it from the same key.
//
// Logical indices make masks independent of padding, packing and data-parallel slicing: element (b, s, c) of
// a hidden-state tensor (token s of row b, feature c) has index ((first_sample + b) · max_positions + s) · C + c,
// where first_sample is the batch's first row within the global batch and max_positions a fixed bound on S. So a
// sample draws the same mask whether its batch is packed or padded, whatever its neighbours, on whichever rank.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/philox.h"

#include "core/bf16.h"
#include "core/cuda/gpu_handles.h"

namespace bertrain {

// How the n elements of a tensor of rows × `cols` map to logical indices (see above). Row r is logical row
// token_slots[r] when token_slots is given (packed tokens: slot (first_sample + b) · max_positions + s of token r,
// see dropout_slots_cpu in kernels/packed.h; a device pointer for the CUDA launchers), else first_sample + r
// (one row per sample, e.g. the pooled [B, H]). The default, {0, 1, 0, null}, is a flat tensor: element i has
// index i.
struct DropoutLayout {
  int64_t first_sample = 0;
  int max_positions = 1;                  // P, the bound on S (max_position_embeddings); attention indices use it
  int cols = 0;                           // elements per row; 0 means n (one flat row)
  const int64_t* token_slots = nullptr;   // [rows] logical row of each row, or null
};

// Logical stream index of flat element `i` of a tensor laid out as `layout` with `cols` columns. Host and
// device (CUDA kernels call it), so CPU and GPU draw from the same index.
BERTRAIN_HOST_DEVICE uint64_t dropout_index(const DropoutLayout& layout, std::size_t cols, std::size_t i) {
  const std::size_t row = i / cols, col = i % cols;
  const uint64_t logical_row = layout.token_slots != nullptr
                                   ? static_cast<uint64_t>(layout.token_slots[row])
                                   : static_cast<uint64_t>(layout.first_sample) + row;
  return logical_row * cols + col;
}

// out[0, n) = dropout(in[0, n)) for elements whose logical indices are first_index + [0, n): the masking
// loop every dropout site shares (one Philox call serves four consecutive indices). out may alias in;
// 0 < p < 1.
template <typename T>
void dropout_span(T* out, const T* in, std::size_t n, uint64_t first_index, float p, const RandomKey& key);

// y = dropout(x); y may alias x. p in [0, 1]; p == 0 copies.
template <typename T>
void dropout_forward_cpu(T* y, const T* x, std::size_t n, float p, const RandomKey& key,
                         const DropoutLayout& layout = DropoutLayout{});

// dx = dropout'(dy) with the mask of `key`; dx may alias dy.
template <typename T>
void dropout_backward_cpu(T* dx, const T* dy, std::size_t n, float p, const RandomKey& key,
                          const DropoutLayout& layout = DropoutLayout{});

// ---- CUDA (kernels/cuda/dropout.cu): the same masks as the CPU (same key, same logical indices).
// y = dropout(x), y may alias x; p in [0, 1].
template <typename T>
void dropout_forward_cuda(T* y, const T* x, std::size_t n, float p, const RandomKey& key, const DropoutLayout& layout,
                          CudaStream stream);
template <typename T>
void dropout_backward_cuda(T* dx, const T* dy, std::size_t n, float p, const RandomKey& key,
                           const DropoutLayout& layout, CudaStream stream);

// ---- CUDA, mixed precision: the residual stream and its gradient in float (as torch.autocast keeps them), the
// GEMM operands in T. The CPU twins are the float functions above with T outputs rounded once.
// y[n] (=) float dropout(x) (the embeddings' residual stream) and y_copy[n] (=) the same values rounded to T
// (the next GEMMs' input; may be null; for T = float it may be y itself: stored once). y may alias x. p in
// [0, 1]; p == 0 copies (and rounds into y_copy).
template <typename T>
void dropout_forward_cuda(float* y, T* y_copy, const float* x, std::size_t n, float p, const RandomKey& key,
                          const DropoutLayout& layout, CudaStream stream);
// dx[n] (=) dropout'(dy) rounded to bf16: the float residual-stream gradient masked into the bf16 input of the
// sublayer's backward GEMMs. Not a template: for T = float the all-float instantiation of the template above is
// this function, so generic code calls dropout_backward_cuda(T* dx, const float* dy, ...) for either T.
void dropout_backward_cuda(bf16* dx, const float* dy, std::size_t n, float p, const RandomKey& key,
                           const DropoutLayout& layout, CudaStream stream);

}  // namespace bertrain

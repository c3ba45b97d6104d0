// Inverted dropout with masks drawn from Philox (core/philox.h): an element whose logical index in the
// stream `key` is i is kept when its uniform draw u satisfies u >= p, and kept values are scaled by
// 1 / (1 - p). The mask is never stored: backward regenerates it from the same key.
//
// Logical indices make masks independent of padding and of data-parallel slicing: element (b, s, c) of a
// [B, S, C] tensor has index ((first_sample + b) · max_positions + s) · C + c, where first_sample is the
// batch's first row within the global batch and max_positions a fixed bound on S. So a sample draws the
// same mask whether it is padded to 40 or 64 tokens and whichever rank holds it.
#pragma once

#include <cstddef>

#include "core/philox.h"

#include "core/bf16.h"
#include "core/cuda/gpu_handles.h"

namespace bertrain {

// How the n elements of a tensor map to logical indices (see above). The default, {0, 1, 1, 0}, is a flat
// tensor: element i has index i.
struct DropoutLayout {
  int64_t first_sample = 0;
  int seq = 1;            // S: rows per sample in this tensor
  int max_positions = 1;  // the bound on S used for indexing (max_position_embeddings)
  int cols = 0;           // C: elements per row; 0 means n (one flat row)
};

// Logical stream index of flat element `i` of a tensor laid out as `layout` with `cols` columns. Host and
// device (CUDA kernels call it), so CPU and GPU draw from the same index.
BERTRAIN_HOST_DEVICE uint64_t dropout_index(const DropoutLayout& layout, std::size_t cols, std::size_t i) {
  const std::size_t row = i / cols, col = i % cols;
  const std::size_t sample = row / static_cast<std::size_t>(layout.seq), pos = row % static_cast<std::size_t>(layout.seq);
  return ((static_cast<uint64_t>(layout.first_sample) + sample) * static_cast<uint64_t>(layout.max_positions) + pos) *
             cols + col;
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

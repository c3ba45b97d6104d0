// Small whole-tensor ops of the training step: dtype casts, y += x and the gradient norm. CPU twins first, then the CUDA launchers (kernels/cuda/tensor_ops.cu).
#pragma once

#include <cstddef>

#include "core/bf16.h"
#include "core/cuda/gpu_handles.h"

namespace bertrain {

// y[i] (=) x[i] converted (float → bf16 rounds to nearest even).
void cast_cpu(bf16* y, const float* x, std::size_t n);
void cast_cpu(float* y, const bf16* x, std::size_t n);

// y[i] += x[i].
template <typename T>
void add_inplace_cpu(T* y, const T* x, std::size_t n);

// Σ x[i]² in double (the gradient norm is its square root).
double sum_of_squares_cpu(const float* x, std::size_t n);

// ---- CUDA. Element-wise ops are grid-stride, one thread per element.
void cast_cuda(bf16* y, const float* x, std::size_t n, CudaStream stream);
void cast_cuda(float* y, const bf16* x, std::size_t n, CudaStream stream);
template <typename T>
void add_inplace_cuda(T* y, const T* x, std::size_t n, CudaStream stream);
// out[0] (=) Σ x[i]² (float accumulation per block, blocks added in a fixed order through
// handles.workspace; deterministic).
void sum_of_squares_cuda(const GpuHandles& handles, float* out, const float* x, std::size_t n);

}  // namespace bertrain

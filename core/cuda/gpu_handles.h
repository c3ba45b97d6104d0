// What a CUDA launcher needs to know about where it runs, declared without CUDA headers (model/ and the
// kernel headers include this; only core/cuda, kernels/cuda and engine/cuda include the CUDA toolkit's headers).
#pragma once

#include <cstddef>

struct CUstream_st;   // cudaStream_t is CUstream_st*
struct cublasContext;  // cublasHandle_t is cublasContext*

namespace bertrain {

using CudaStream = CUstream_st*;
using CublasHandle = cublasContext*;

// The stream every launch of a step goes to, the cuBLAS handle bound to it, and a device workspace for
// deterministic two-pass reductions (column sums, LayerNorm parameter gradients): partial sums are
// written to the workspace and added in a fixed order instead of with float atomics.
struct GpuHandles {
  CudaStream stream = nullptr;
  CublasHandle blas = nullptr;
  float* workspace = nullptr;
  std::size_t workspace_elements = 0;
};

// Rows a column reduction splits its input into (the first pass writes kReductionChunks × cols partial
// sums per reduced quantity). Workspaces are sized from it: gpu_reduction_workspace_elements(cols) covers two
// quantities side by side (LayerNorm's dgamma and dbeta: 2 · kReductionChunks · cols) plus 1024 floats for
// whole-tensor reductions (sum_of_squares_cuda's per-block partials).
constexpr int kReductionChunks = 64;
inline std::size_t gpu_reduction_workspace_elements(int max_cols) {
  return 2 * static_cast<std::size_t>(kReductionChunks) * static_cast<std::size_t>(max_cols) + 1024;
}

}  // namespace bertrain

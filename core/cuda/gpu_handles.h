// What a CUDA launcher needs to know about where it runs, declared without CUDA headers (model/ and the
// kernel headers include this). The CUDA toolkit's headers are included only by core/cuda, kernels/cuda and
// engine/cuda, by the device communicators in dist/, by core/build_info.cpp (NCCL's version) and by the kernel
// profiler (tools/bench_kernels): tests/check_layers.sh keeps it so.
#pragma once

#include <cstddef>

struct CUstream_st;   // cudaStream_t is CUstream_st*
struct cublasContext;  // cublasHandle_t is cublasContext*

namespace bertrain {

using CudaStream = CUstream_st*;
using CublasHandle = cublasContext*;

// The stream every launch of a step goes to, the cuBLAS handle bound to it, a device workspace for
// deterministic two-pass reductions (column sums, LayerNorm parameter gradients: partial sums are written to
// the workspace and added in a fixed order instead of with float atomics), and the GEMM workspace that
// cuBLAS and cuBLASLt use on that stream (split-K partials, epilogue scratch), so that no GEMM allocates.
// The cuBLASLt calls of kernels/cuda/linear.cu use `blas` cast to cublasLtHandle_t (a cuBLAS handle is a
// valid cuBLASLt handle).
struct GpuHandles {
  CudaStream stream = nullptr;
  CublasHandle blas = nullptr;
  float* workspace = nullptr;
  std::size_t workspace_elements = 0;
  void* gemm_workspace = nullptr;
  std::size_t gemm_workspace_bytes = 0;
};

// The GEMM workspace a GpuContext allocates: the size NVIDIA's cuBLAS documentation (cublasSetWorkspace)
// recommends for Hopper, and more than enough for the 4 MiB it recommends for earlier architectures.
constexpr std::size_t kGemmWorkspaceBytes = std::size_t{32} << 20;

// Rows a column reduction splits its input into (the first pass writes kReductionChunks × cols partial
// sums per reduced quantity). Row kernels that also reduce over rows in the same pass (the fused dropout + residual
// + LayerNorm backward) run at most kRowPartialBlocks blocks, each writing one row of partial sums per quantity:
// enough blocks to fill a large GPU in one wave. Workspaces are sized from both: gpu_reduction_workspace_elements
// (cols) covers two quantities side by side (LayerNorm's dgamma and dbeta: 2 · max(kReductionChunks,
// kRowPartialBlocks) · cols) plus 1024 floats for whole-tensor reductions (sum_of_squares_cuda's per-block
// partials).
constexpr int kReductionChunks = 64;
constexpr int kRowPartialBlocks = 256;
inline std::size_t gpu_reduction_workspace_elements(int max_cols) {
  const std::size_t chunks = kRowPartialBlocks > kReductionChunks ? kRowPartialBlocks : kReductionChunks;
  return 2 * chunks * static_cast<std::size_t>(max_cols) + 1024;
}

}  // namespace bertrain

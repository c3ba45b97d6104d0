// CUDA twins of kernels/cpu/tensor_ops.cpp: dtype casts, y += x and the deterministic sum of squares behind
// the gradient norm.
#include "kernels/tensor_ops.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/cuda/common.cuh"

namespace bertrain {
namespace {

constexpr int kThreads = 256;
// sum_of_squares_cuda: at most this many blocks, whose partial sums fit the workspace's 1024 spare floats.
constexpr int kSquareBlocks = 256;

// y[i] (=) x[i] converted (to bf16: round to nearest even). Grid-stride, one thread per element.
template <typename Out, typename In>
__global__ void cast_forward_kernel(Out* y, const In* x, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    cuda::store(y + i, cuda::load(x + i));
  }
}

// y[i] (+=) x[i]. Grid-stride, one thread per element.
template <typename T>
__global__ void add_inplace_forward_kernel(T* y, const T* x, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    cuda::store(y + i, cuda::load(y + i) + cuda::load(x + i));
  }
}

// partial[blockIdx.x] (=) Σ x[i]² over the elements this block visits (grid-stride, float). Fixed grid of
// `gridDim.x` blocks of kThreads; block_sum adds in a fixed order.
__global__ void sum_of_squares_partial_kernel(float* partial, const float* x, std::size_t n) {
  __shared__ float shared[32];
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  float s = 0.0f;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    s += x[i] * x[i];
  }
  s = cuda::block_sum(s, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// out[0] (=) partial[0] + partial[1] + ... + partial[blocks - 1], in that order. One thread.
__global__ void sum_of_squares_finish_kernel(float* out, const float* partial, int blocks) {
  float s = 0.0f;
  for (int k = 0; k < blocks; ++k) s += partial[k];
  out[0] = s;
}

}  // namespace

void cast_cuda(bf16* y, const float* x, std::size_t n, CudaStream stream) {
  if (n == 0) return;
  BERTRAIN_CHECK(y != nullptr && x != nullptr, "cast_cuda: null pointer");
  cast_forward_kernel<bf16, float><<<cuda::elementwise_blocks(n, kThreads), kThreads, 0, stream>>>(y, x, n);
  BERTRAIN_CUDA_CHECK_LAUNCH("cast_forward_kernel<bf16, float>");
}

void cast_cuda(float* y, const bf16* x, std::size_t n, CudaStream stream) {
  if (n == 0) return;
  BERTRAIN_CHECK(y != nullptr && x != nullptr, "cast_cuda: null pointer");
  cast_forward_kernel<float, bf16><<<cuda::elementwise_blocks(n, kThreads), kThreads, 0, stream>>>(y, x, n);
  BERTRAIN_CUDA_CHECK_LAUNCH("cast_forward_kernel<float, bf16>");
}

template <typename T>
void add_inplace_cuda(T* y, const T* x, std::size_t n, CudaStream stream) {
  if (n == 0) return;
  BERTRAIN_CHECK(y != nullptr && x != nullptr, "add_inplace_cuda: null pointer");
  add_inplace_forward_kernel<T><<<cuda::elementwise_blocks(n, kThreads), kThreads, 0, stream>>>(y, x, n);
  BERTRAIN_CUDA_CHECK_LAUNCH("add_inplace_forward_kernel");
}

void sum_of_squares_cuda(const GpuHandles& handles, float* out, const float* x, std::size_t n) {
  BERTRAIN_CHECK(out != nullptr && (x != nullptr || n == 0), "sum_of_squares_cuda: null pointer");
  // The grid depends on n only, so the order of additions (and the result) is fixed for a given n.
  const int blocks = static_cast<int>(std::min<std::size_t>(kSquareBlocks, cuda::elementwise_blocks(n, kThreads)));
  BERTRAIN_CHECK(handles.workspace != nullptr && handles.workspace_elements >= static_cast<std::size_t>(blocks),
                 "sum_of_squares_cuda: reduction workspace of " << handles.workspace_elements << " floats, needs "
                                                                << blocks);
  sum_of_squares_partial_kernel<<<blocks, kThreads, 0, handles.stream>>>(handles.workspace, x, n);
  BERTRAIN_CUDA_CHECK_LAUNCH("sum_of_squares_partial_kernel");
  sum_of_squares_finish_kernel<<<1, 1, 0, handles.stream>>>(out, handles.workspace, blocks);
  BERTRAIN_CUDA_CHECK_LAUNCH("sum_of_squares_finish_kernel");
}

template void add_inplace_cuda<float>(float*, const float*, std::size_t, CudaStream);
template void add_inplace_cuda<bf16>(bf16*, const bf16*, std::size_t, CudaStream);

}  // namespace bertrain

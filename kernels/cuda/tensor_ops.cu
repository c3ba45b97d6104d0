// CUDA twins of kernels/cpu/tensor_ops.cpp: dtype casts, y += x and the deterministic sum of squares behind
// the gradient norm.
#include "kernels/tensor_ops.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/cuda/common.cuh"

namespace bertrain {
namespace {

constexpr int kThreads = 256;
// sum_of_squares_cuda: at most this many blocks, whose partial sums fit the workspace's 1024 spare floats, of
// kSquareThreads: 256 blocks of 256 threads (a quarter of an H100's resident threads) read at 20 % of its memory
// bandwidth, one float per load.
constexpr int kSquareBlocks = 256;
constexpr int kSquareThreads = 1024;

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

// partial[blockIdx.x] (=) Σ x[i]² over the elements this block visits (grid-stride, float): the first `packs`
// float4s (0 when x is not 16-byte aligned), then the remaining elements. Fixed grid of `gridDim.x` blocks of
// kSquareThreads; every thread adds in a fixed order and block_sum too, so the result is fixed for given n and x's
// alignment.
__global__ void sum_of_squares_partial_kernel(float* partial, const float* x, std::size_t n, std::size_t packs) {
  __shared__ float shared[32];
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  float s = 0.0f;
  for (std::size_t p = first; p < packs; p += stride) {
    float v[4];
    cuda::load_pack(x + 4 * p, v);
    s = fmaf(v[0], v[0], s);
    s = fmaf(v[1], v[1], s);
    s = fmaf(v[2], v[2], s);
    s = fmaf(v[3], v[3], s);
  }
  for (std::size_t i = 4 * packs + first; i < n; i += stride) s = fmaf(x[i], x[i], s);
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
  // The grid depends on n and x's alignment only, so the order of additions (and the result) is fixed for them.
  const std::size_t packs = cuda::aligned16(x) ? n / 4 : 0;
  const int blocks = static_cast<int>(
      std::min<std::size_t>(kSquareBlocks, cuda::elementwise_blocks(packs > 0 ? packs : n, kSquareThreads)));
  BERTRAIN_CHECK(handles.workspace != nullptr && handles.workspace_elements >= static_cast<std::size_t>(blocks),
                 "sum_of_squares_cuda: reduction workspace of " << handles.workspace_elements << " floats, needs "
                                                                << blocks);
  sum_of_squares_partial_kernel<<<blocks, kSquareThreads, 0, handles.stream>>>(handles.workspace, x, n, packs);
  BERTRAIN_CUDA_CHECK_LAUNCH("sum_of_squares_partial_kernel");
  sum_of_squares_finish_kernel<<<1, 1, 0, handles.stream>>>(out, handles.workspace, blocks);
  BERTRAIN_CUDA_CHECK_LAUNCH("sum_of_squares_finish_kernel");
}

template void add_inplace_cuda<float>(float*, const float*, std::size_t, CudaStream);
template void add_inplace_cuda<bf16>(bf16*, const bf16*, std::size_t, CudaStream);

}  // namespace bertrain

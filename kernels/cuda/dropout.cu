// CUDA inverted dropout drawing exactly the CPU's mask (kernels/cpu/dropout.cpp): element i of the tensor has
// logical index dropout_index(layout, cols, i) and is kept when the Philox draw of that index is >= p. The
// kept values are scaled by the same float 1 / (1 - p), so for T = float the output equals the CPU's bit for
// bit.
#include "kernels/dropout.h"

#include "core/error.h"
#include "kernels/cuda/common.cuh"

namespace bertrain {
namespace {

constexpr int kThreads = 256;

// out[i] (=) keep(i) ? in[i] · scale : 0 for i in [0, n). Grid-stride, one thread per element; each thread
// computes the Philox group of its own index (four neighbours recompute the same group: simple, and the
// generator is cheap next to the memory traffic). out may alias in.
template <typename T>
__global__ void dropout_forward_kernel(T* out, const T* in, std::size_t n, float p, float scale, RandomKey key,
                                       DropoutLayout layout, std::size_t cols) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint64_t index = dropout_index(layout, cols, i);
    const Philox4 bits = philox_group(key, index >> 2);
    const bool keep = uniform_from_bits(bits.v[index & 3]) >= p;
    cuda::store(out + i, keep ? cuda::load(in + i) * scale : 0.0f);
  }
}

// Shared by forward and backward (the gradient of inverted dropout is the same masked scaling), with the CPU's
// preconditions in the CPU's order.
template <typename T>
void apply_dropout_mask_cuda(T* out, const T* in, std::size_t n, float p, const RandomKey& key,
                             const DropoutLayout& layout, CudaStream stream) {
  BERTRAIN_CHECK(p >= 0.0f && p <= 1.0f, "dropout probability must be in [0, 1], got " << p);
  if (n == 0) return;
  BERTRAIN_CHECK(out != nullptr && in != nullptr, "dropout_cuda: null pointer");
  if (p == 0.0f) {
    if (out != in) BERTRAIN_CUDA_CHECK(cudaMemcpyAsync(out, in, n * sizeof(T), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  if (p == 1.0f) {
    // All-zero bits are +0 for float and bf16 alike.
    BERTRAIN_CUDA_CHECK(cudaMemsetAsync(out, 0, n * sizeof(T), stream));
    return;
  }
  BERTRAIN_CHECK(layout.seq >= 1 && layout.max_positions >= layout.seq && layout.first_sample >= 0,
                 "dropout layout: seq " << layout.seq << ", max_positions " << layout.max_positions
                                        << ", first_sample " << layout.first_sample);
  const std::size_t cols = layout.cols > 0 ? static_cast<std::size_t>(layout.cols) : n;
  BERTRAIN_CHECK(n % cols == 0, "dropout: " << n << " elements are not rows of " << cols);
  // The CPU's T(1) / (T(1) - T(p)) for T = float, computed once on the host in IEEE float.
  const float scale = 1.0f / (1.0f - p);
  dropout_forward_kernel<T>
      <<<cuda::elementwise_blocks(n, kThreads), kThreads, 0, stream>>>(out, in, n, p, scale, key, layout, cols);
  BERTRAIN_CUDA_CHECK_LAUNCH("dropout_forward_kernel");
}

}  // namespace

template <typename T>
void dropout_forward_cuda(T* y, const T* x, std::size_t n, float p, const RandomKey& key, const DropoutLayout& layout,
                          CudaStream stream) {
  apply_dropout_mask_cuda(y, x, n, p, key, layout, stream);
}

template <typename T>
void dropout_backward_cuda(T* dx, const T* dy, std::size_t n, float p, const RandomKey& key,
                           const DropoutLayout& layout, CudaStream stream) {
  apply_dropout_mask_cuda(dx, dy, n, p, key, layout, stream);
}

template void dropout_forward_cuda<float>(float*, const float*, std::size_t, float, const RandomKey&,
                                          const DropoutLayout&, CudaStream);
template void dropout_forward_cuda<bf16>(bf16*, const bf16*, std::size_t, float, const RandomKey&,
                                         const DropoutLayout&, CudaStream);
template void dropout_backward_cuda<float>(float*, const float*, std::size_t, float, const RandomKey&,
                                           const DropoutLayout&, CudaStream);
template void dropout_backward_cuda<bf16>(bf16*, const bf16*, std::size_t, float, const RandomKey&,
                                          const DropoutLayout&, CudaStream);

}  // namespace bertrain

// CUDA inverted dropout drawing exactly the CPU's mask (kernels/cpu/dropout.cpp): element i of the tensor has
// logical index dropout_index(layout, cols, i) and is kept when the Philox draw of that index is >= p. The
// kept values are scaled by the same float 1 / (1 - p), so for T = float the output equals the CPU's bit for
// bit.
#include "kernels/dropout.h"

#include <type_traits>

#include "core/error.h"
#include "kernels/cuda/common.cuh"

namespace bertrain {
namespace {

constexpr int kThreads = 256;

// out[i] (=) keep(i) ? in[i] · scale : 0 for i in [0, n), and copy[i] (=) the same value in copy's type when copy
// is not null. Grid-stride, one thread per element; each thread computes the Philox group of its own index (four
// neighbours recompute the same group: simple, and the generator is cheap next to the memory traffic). With
// p == 0 every element is kept with scale 1 and no draw is made (a copy or a cast). out and copy may alias in
// element for element (same type).
template <typename Out, typename Copy, typename In>
__global__ void dropout_forward_kernel(Out* out, Copy* copy, const In* in, std::size_t n, float p, float scale,
                                       RandomKey key, DropoutLayout layout, std::size_t cols) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    bool keep = true;
    if (p > 0.0f) {
      const uint64_t index = dropout_index(layout, cols, i);
      const Philox4 bits = philox_group(key, index >> 2);
      keep = uniform_from_bits(bits.v[index & 3]) >= p;
    }
    const float value = keep ? cuda::load(in + i) * scale : 0.0f;
    cuda::store(out + i, value);
    if (copy != nullptr) cuda::store(copy + i, value);  // rounded once, from the float value
  }
}

// The CPU's layout preconditions (checked only when there is a mask to draw, as on the CPU); returns the
// elements per row (the layout's cols).
std::size_t check_dropout_layout(std::size_t n, const DropoutLayout& layout) {
  BERTRAIN_CHECK(layout.first_sample >= 0, "dropout layout: first_sample " << layout.first_sample);
  const std::size_t cols = layout.cols > 0 ? static_cast<std::size_t>(layout.cols) : n;
  BERTRAIN_CHECK(n % cols == 0, "dropout: " << n << " elements are not rows of " << cols);
  return cols;
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
  const std::size_t cols = check_dropout_layout(n, layout);
  // The CPU's T(1) / (T(1) - T(p)) for T = float, computed once on the host in IEEE float.
  const float scale = 1.0f / (1.0f - p);
  dropout_forward_kernel<T, T, T><<<cuda::elementwise_blocks(n, kThreads), kThreads, 0, stream>>>(
      out, static_cast<T*>(nullptr), in, n, p, scale, key, layout, cols);
  BERTRAIN_CUDA_CHECK_LAUNCH("dropout_forward_kernel");
}

// The mixed-precision masking: out (=) dropout(in) in Out, copy (=) the same values in Copy (may be null).
// Unlike the all-T path, p == 0 still runs the kernel when there is a conversion to make.
template <typename Out, typename Copy, typename In>
void apply_mixed_dropout_mask_cuda(Out* out, Copy* copy, const In* in, std::size_t n, float p, const RandomKey& key,
                                   const DropoutLayout& layout, CudaStream stream) {
  BERTRAIN_CHECK(p >= 0.0f && p <= 1.0f, "dropout probability must be in [0, 1], got " << p);
  if (n == 0) return;
  BERTRAIN_CHECK(out != nullptr && in != nullptr, "dropout_cuda: null pointer");
  if (p == 0.0f && copy == nullptr && static_cast<const void*>(out) == static_cast<const void*>(in)) return;
  if (p == 1.0f) {
    // All-zero bits are +0 for float and bf16 alike.
    BERTRAIN_CUDA_CHECK(cudaMemsetAsync(out, 0, n * sizeof(Out), stream));
    if (copy != nullptr) BERTRAIN_CUDA_CHECK(cudaMemsetAsync(copy, 0, n * sizeof(Copy), stream));
    return;
  }
  const std::size_t cols = p > 0.0f ? check_dropout_layout(n, layout) : n;
  const float scale = 1.0f / (1.0f - p);  // 1 for p == 0: x · 1 is x exactly
  dropout_forward_kernel<Out, Copy, In><<<cuda::elementwise_blocks(n, kThreads), kThreads, 0, stream>>>(
      out, copy, in, n, p, scale, key, layout, cols);
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

template <typename T>
void dropout_forward_cuda(float* y, T* y_copy, const float* x, std::size_t n, float p, const RandomKey& key,
                          const DropoutLayout& layout, CudaStream stream) {
  // For T = float the stream is its own copy: one store. For bf16 the two must be distinct buffers.
  if (static_cast<const void*>(y_copy) == static_cast<const void*>(y)) {
    BERTRAIN_CHECK((std::is_same_v<T, float>), "dropout_forward_cuda: the bf16 copy is the float output");
    y_copy = nullptr;
  }
  apply_mixed_dropout_mask_cuda(y, y_copy, x, n, p, key, layout, stream);
}

void dropout_backward_cuda(bf16* dx, const float* dy, std::size_t n, float p, const RandomKey& key,
                           const DropoutLayout& layout, CudaStream stream) {
  apply_mixed_dropout_mask_cuda(dx, static_cast<bf16*>(nullptr), dy, n, p, key, layout, stream);
}

template void dropout_forward_cuda<float>(float*, float*, const float*, std::size_t, float, const RandomKey&,
                                          const DropoutLayout&, CudaStream);
template void dropout_forward_cuda<bf16>(float*, bf16*, const float*, std::size_t, float, const RandomKey&,
                                         const DropoutLayout&, CudaStream);
template void dropout_forward_cuda<float>(float*, const float*, std::size_t, float, const RandomKey&,
                                          const DropoutLayout&, CudaStream);
template void dropout_forward_cuda<bf16>(bf16*, const bf16*, std::size_t, float, const RandomKey&,
                                         const DropoutLayout&, CudaStream);
template void dropout_backward_cuda<float>(float*, const float*, std::size_t, float, const RandomKey&,
                                           const DropoutLayout&, CudaStream);
template void dropout_backward_cuda<bf16>(bf16*, const bf16*, std::size_t, float, const RandomKey&,
                                          const DropoutLayout&, CudaStream);

}  // namespace bertrain

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

// out[i] (=) keep(i) ? in[i] · scale : 0 for i in [0, n), and copy[i] (=) the same value in copy's type when copy
// is not null. Grid-stride, one thread per element; each thread computes the Philox group of its own index, so four
// neighbours draw the same group: the general path, for rows whose width is not a multiple of 4 or buffers not
// aligned for dropout_group_kernel. With p == 0 every element is kept with scale 1 and no draw is made (a copy or
// a cast). out and copy may alias in element for element (same type).
template <typename Out, typename Copy, typename In>
__global__ void dropout_element_kernel(Out* out, Copy* copy, const In* in, std::size_t n, float p, float scale,
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

// Four consecutive elements as one load or store (float4, or 8 bytes of bf16), in float; the pointer is aligned to
// four elements (quad_aligned). For float that is a 16-byte pack.
__device__ __forceinline__ void load_quad(const float* p, float (&v)[4]) { cuda::load_pack(p, v); }
__device__ __forceinline__ void load_quad(const bf16* p, float (&v)[4]) {
  const uint2 q = *reinterpret_cast<const uint2*>(p);  // the element at the lower address is the word's low half
  v[0] = __uint_as_float(q.x << 16);
  v[1] = __uint_as_float(q.x & 0xffff0000u);
  v[2] = __uint_as_float(q.y << 16);
  v[3] = __uint_as_float(q.y & 0xffff0000u);
}
__device__ __forceinline__ void store_quad(float* p, const float (&v)[4]) { cuda::store_pack(p, v); }
__device__ __forceinline__ void store_quad(bf16* p, const float (&v)[4]) {
  *reinterpret_cast<uint2*>(p) = make_uint2(cuda::pack_bf16x2(v[0], v[1]), cuda::pack_bf16x2(v[2], v[3]));
}

template <typename T>
bool quad_aligned(const T* p) {
  return reinterpret_cast<std::uintptr_t>(p) % (4 * sizeof(T)) == 0;
}

// The same result as dropout_element_kernel when every row's width is a multiple of 4: then elements 4g .. 4g + 3
// lie in one row and have the logical indices 4k .. 4k + 3 of one Philox group k, so one thread draws the group
// once for its four elements (the element kernel's threads draw it four times, and on an H100 those draws, not
// the memory traffic, set its time). Grid-stride over the n / 4 quads; out, copy and in quad-aligned.
template <typename Out, typename Copy, typename In>
__global__ void dropout_group_kernel(Out* out, Copy* copy, const In* in, std::size_t quads, float p, float scale,
                                     RandomKey key, DropoutLayout layout, std::size_t cols) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t q = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; q < quads; q += stride) {
    const std::size_t i = 4 * q;
    float v[4];
    load_quad(in + i, v);
    if (p > 0.0f) {
      const Philox4 bits = philox_group(key, dropout_index(layout, cols, i) >> 2);
#pragma unroll
      for (int k = 0; k < 4; ++k) v[k] = uniform_from_bits(bits.v[k]) >= p ? v[k] * scale : 0.0f;
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k) v[k] *= scale;
    }
    store_quad(out + i, v);
    if (copy != nullptr) store_quad(copy + i, v);
  }
}

// One masking pass over n elements in rows of `cols`: the group kernel where its conditions hold, else the
// element kernel. Both give the same bits.
template <typename Out, typename Copy, typename In>
void launch_dropout(Out* out, Copy* copy, const In* in, std::size_t n, float p, float scale, const RandomKey& key,
                    const DropoutLayout& layout, std::size_t cols, CudaStream stream) {
  if (cols % 4 == 0 && quad_aligned(out) && quad_aligned(in) && (copy == nullptr || quad_aligned(copy))) {
    const std::size_t quads = n / 4;  // n is whole rows of cols
    dropout_group_kernel<Out, Copy, In><<<cuda::elementwise_blocks(quads, kThreads), kThreads, 0, stream>>>(
        out, copy, in, quads, p, scale, key, layout, cols);
    BERTRAIN_CUDA_CHECK_LAUNCH("dropout_group_kernel");
    return;
  }
  dropout_element_kernel<Out, Copy, In><<<cuda::elementwise_blocks(n, kThreads), kThreads, 0, stream>>>(
      out, copy, in, n, p, scale, key, layout, cols);
  BERTRAIN_CUDA_CHECK_LAUNCH("dropout_element_kernel");
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
  launch_dropout(out, static_cast<T*>(nullptr), in, n, p, scale, key, layout, cols, stream);
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
  launch_dropout(out, copy, in, n, p, scale, key, layout, cols, stream);
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
  apply_mixed_dropout_mask_cuda(y, cuda::separate_copy(y, y_copy, "dropout_forward_cuda"), x, n, p, key, layout,
                                stream);
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

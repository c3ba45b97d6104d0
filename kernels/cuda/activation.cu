// CUDA activations: the CPU twin's formulas (kernels/cpu/activation.cpp) evaluated in float, one thread per
// element over a grid-stride loop. T is float or bf16 storage.
#include "kernels/activation.h"

#include "core/error.h"
#include "kernels/cuda/common.cuh"

namespace bertrain {
namespace {

constexpr int kThreads = 256;

// The CPU's Constants<float>: the same decimal literals rounded to float.
constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;
constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kCubic = 0.044715f;

__device__ __forceinline__ float activation_value(float x, Activation act) {
  switch (act) {
    case Activation::kGelu:
      return 0.5f * x * (1.0f + erff(x * kInvSqrt2));
    case Activation::kGeluTanh:
      return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kCubic * x * x * x)));
    case Activation::kRelu:
      return x > 0.0f ? x : 0.0f;
    case Activation::kTanh:
      return tanhf(x);
  }
  return x;
}

__device__ __forceinline__ float activation_derivative(float x, Activation act) {
  switch (act) {
    case Activation::kGelu:
      return 0.5f * (1.0f + erff(x * kInvSqrt2)) + x * kInvSqrt2Pi * expf(-0.5f * x * x);
    case Activation::kGeluTanh: {
      const float t = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
      return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    }
    case Activation::kRelu:
      return x > 0.0f ? 1.0f : 0.0f;
    case Activation::kTanh: {
      const float t = tanhf(x);
      return 1.0f - t * t;
    }
  }
  return 1.0f;
}

// y[i] (=) act(x[i]), i in [0, n). Grid-stride: the first `packs` 16-byte packs a pack per thread (0 when a pointer
// is not 16-byte aligned), then the rest an element per thread. y may alias x (each element is read before it is
// written, by the same thread).
template <typename T>
__global__ void activation_forward_kernel(T* y, const T* x, std::size_t n, std::size_t packs, Activation act) {
  constexpr int kPack = cuda::kPack<T>;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::size_t p = first; p < packs; p += stride) {
    float v[kPack];
    cuda::load_pack(x + p * kPack, v);
#pragma unroll
    for (int k = 0; k < kPack; ++k) v[k] = activation_value(v[k], act);
    cuda::store_pack(y + p * kPack, v);
  }
  for (std::size_t i = packs * kPack + first; i < n; i += stride) {
    cuda::store(y + i, activation_value(cuda::load(x + i), act));
  }
}

// dx[i] (=) dy[i] · act'(x[i]), in packs then elements as above; dx may alias dy.
template <typename T>
__global__ void activation_backward_kernel(T* dx, const T* dy, const T* x, std::size_t n, std::size_t packs,
                                           Activation act) {
  constexpr int kPack = cuda::kPack<T>;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::size_t p = first; p < packs; p += stride) {
    float g[kPack], v[kPack];
    cuda::load_pack(dy + p * kPack, g);
    cuda::load_pack(x + p * kPack, v);
#pragma unroll
    for (int k = 0; k < kPack; ++k) g[k] *= activation_derivative(v[k], act);
    cuda::store_pack(dx + p * kPack, g);
  }
  for (std::size_t i = packs * kPack + first; i < n; i += stride) {
    cuda::store(dx + i, cuda::load(dy + i) * activation_derivative(cuda::load(x + i), act));
  }
}

// x[rows, cols] (=) x + bias[col], then y (=) act(x) computed from the value just stored (for bf16 the rounded
// pre-activation, which is what backward will see). Grid-stride over rows·cols, one thread per element.
template <typename T>
__global__ void bias_activation_forward_kernel(T* y, T* x, const T* bias, std::size_t n, int cols, Activation act) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int col = static_cast<int>(i % static_cast<std::size_t>(cols));
    cuda::store(x + i, cuda::load(x + i) + cuda::load(bias + col));
    cuda::store(y + i, activation_value(cuda::load(x + i), act));
  }
}

void check_activation(Activation act) {
  BERTRAIN_CHECK(act == Activation::kGelu || act == Activation::kGeluTanh || act == Activation::kRelu ||
                     act == Activation::kTanh,
                 "unknown activation value " << static_cast<int>(act));
}

}  // namespace

template <typename T>
void activation_forward_cuda(T* y, const T* x, std::size_t n, Activation act, CudaStream stream) {
  check_activation(act);
  if (n == 0) return;  // as the CPU twin: nothing to do
  BERTRAIN_CHECK(y != nullptr && x != nullptr, "activation_forward_cuda: null pointer");
  // 16-byte accesses where the pointers allow: 2 bytes per bf16 load reached 47 % of an H100's bandwidth.
  const std::size_t packs = cuda::aligned16(y, x) ? n / cuda::kPack<T> : 0;
  activation_forward_kernel<T>
      <<<cuda::elementwise_blocks(packs > 0 ? packs : n, kThreads), kThreads, 0, stream>>>(y, x, n, packs, act);
  BERTRAIN_CUDA_CHECK_LAUNCH("activation_forward_kernel");
}

template <typename T>
void activation_backward_cuda(T* dx, const T* dy, const T* x, std::size_t n, Activation act, CudaStream stream) {
  check_activation(act);
  if (n == 0) return;
  BERTRAIN_CHECK(dx != nullptr && dy != nullptr && x != nullptr, "activation_backward_cuda: null pointer");
  const std::size_t packs = cuda::aligned16(dx, dy, x) ? n / cuda::kPack<T> : 0;
  activation_backward_kernel<T>
      <<<cuda::elementwise_blocks(packs > 0 ? packs : n, kThreads), kThreads, 0, stream>>>(dx, dy, x, n, packs, act);
  BERTRAIN_CUDA_CHECK_LAUNCH("activation_backward_kernel");
}

template <typename T>
void bias_activation_forward_cuda(T* y, T* x, const T* bias, int rows, int cols, Activation act, CudaStream stream) {
  check_activation(act);
  BERTRAIN_CHECK(rows > 0 && cols > 0, "bias_activation_forward_cuda: rows " << rows << ", cols " << cols);
  BERTRAIN_CHECK(y != nullptr && x != nullptr && bias != nullptr, "bias_activation_forward_cuda: null pointer");
  BERTRAIN_CHECK(y != x, "bias_activation_forward_cuda: y must not alias x (x keeps the pre-activation)");
  const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  bias_activation_forward_kernel<T>
      <<<cuda::elementwise_blocks(n, kThreads), kThreads, 0, stream>>>(y, x, bias, n, cols, act);
  BERTRAIN_CUDA_CHECK_LAUNCH("bias_activation_forward_kernel");
}

template void activation_forward_cuda<float>(float*, const float*, std::size_t, Activation, CudaStream);
template void activation_forward_cuda<bf16>(bf16*, const bf16*, std::size_t, Activation, CudaStream);
template void activation_backward_cuda<float>(float*, const float*, const float*, std::size_t, Activation,
                                              CudaStream);
template void activation_backward_cuda<bf16>(bf16*, const bf16*, const bf16*, std::size_t, Activation, CudaStream);
template void bias_activation_forward_cuda<float>(float*, float*, const float*, int, int, Activation, CudaStream);
template void bias_activation_forward_cuda<bf16>(bf16*, bf16*, const bf16*, int, int, Activation, CudaStream);

}  // namespace bertrain

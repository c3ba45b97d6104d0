// The activations and their derivatives on the device, as the CPU twin's formulas (kernels/cpu/activation.cpp)
// evaluated in float: shared by the activation kernels (kernels/cuda/activation.cu) and the fused activation
// backward with bias gradient (kernels/cuda/linear.cu).
#pragma once

#include "kernels/activation.h"

namespace bertrain {
namespace cuda {

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

}  // namespace cuda
}  // namespace bertrain

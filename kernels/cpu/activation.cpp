#include "kernels/activation.h"

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/error.h"

namespace bertrain {

Activation activation_from_name(const std::string& name) {
  // transformers' ACT2FN names for the same functions: gelu_python is the erf GELU written in Python; gelu_fast and
  // gelu_python_tanh are the tanh approximation (gelu_fast's 0.7978845608 is sqrt(2/pi) to 10 digits).
  if (name == "gelu" || name == "gelu_python") return Activation::kGelu;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_python_tanh" || name == "gelu_fast") {
    return Activation::kGeluTanh;
  }
  if (name == "relu") return Activation::kRelu;
  if (name == "tanh") return Activation::kTanh;
  BERTRAIN_FAIL("unknown activation '" << name << "' (expected " << kActivationNames << " or tanh)");
}

namespace {

template <typename T>
struct Constants {
  static constexpr T kInvSqrt2 = T(0.70710678118654752440);
  static constexpr T kInvSqrt2Pi = T(0.39894228040143267794);
  static constexpr T kSqrt2OverPi = T(0.79788456080286535588);
  static constexpr T kCubic = T(0.044715);
};

template <typename T>
T forward_one(T x, Activation act) {
  using C = Constants<T>;
  switch (act) {
    case Activation::kGelu:
      return T(0.5) * x * (T(1) + std::erf(x * C::kInvSqrt2));
    case Activation::kGeluTanh:
      return T(0.5) * x * (T(1) + std::tanh(C::kSqrt2OverPi * (x + C::kCubic * x * x * x)));
    case Activation::kRelu:
      return x > T(0) ? x : T(0);
    case Activation::kTanh:
      return std::tanh(x);
  }
  return x;
}

template <typename T>
T derivative_one(T x, Activation act) {
  using C = Constants<T>;
  switch (act) {
    case Activation::kGelu:
      return T(0.5) * (T(1) + std::erf(x * C::kInvSqrt2)) + x * C::kInvSqrt2Pi * std::exp(T(-0.5) * x * x);
    case Activation::kGeluTanh: {
      const T t = std::tanh(C::kSqrt2OverPi * (x + C::kCubic * x * x * x));
      return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * C::kSqrt2OverPi * (T(1) + T(3) * C::kCubic * x * x);
    }
    case Activation::kRelu:
      return x > T(0) ? T(1) : T(0);
    case Activation::kTanh: {
      const T t = std::tanh(x);
      return T(1) - t * t;
    }
  }
  return T(1);
}

// The GELUs in float through Eigen's vectorized erf, exp and tanh (rational approximations a few ulp from libm's,
// far inside every tolerance): libm's scalar erff was the CPU step's largest cost after the GEMMs. Chunks of
// kChunk elements, in parallel.
constexpr std::ptrdiff_t kChunk = 4096;
using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

bool vectorized(Activation act) { return act == Activation::kGelu || act == Activation::kGeluTanh; }

void gelu_forward_chunk(float* y, const float* x, std::ptrdiff_t n, Activation act) {
  using C = Constants<float>;
  const ConstArrayMap xa(x, n);
  if (act == Activation::kGelu) {
    ArrayMap(y, n) = 0.5f * xa * (1.0f + (xa * C::kInvSqrt2).erf());
  } else {
    ArrayMap(y, n) = 0.5f * xa * (1.0f + (C::kSqrt2OverPi * (xa + C::kCubic * xa * xa * xa)).tanh());
  }
}

void gelu_backward_chunk(float* dx, const float* dy, const float* x, std::ptrdiff_t n, Activation act) {
  using C = Constants<float>;
  const ConstArrayMap xa(x, n), dya(dy, n);
  if (act == Activation::kGelu) {
    ArrayMap(dx, n) =
        dya * (0.5f * (1.0f + (xa * C::kInvSqrt2).erf()) + xa * C::kInvSqrt2Pi * (-0.5f * xa * xa).exp());
  } else {
    // Fixed-capacity storage on the stack: the training step allocates nothing.
    const Eigen::Array<float, Eigen::Dynamic, 1, 0, kChunk, 1> t = (C::kSqrt2OverPi * (xa + C::kCubic * xa * xa * xa)).tanh();
    ArrayMap(dx, n) = dya * (0.5f * (1.0f + t) + 0.5f * xa * (1.0f - t * t) * C::kSqrt2OverPi *
                                                     (1.0f + 3.0f * C::kCubic * xa * xa));
  }
}

}  // namespace

template <typename T>
void activation_forward_cpu(T* y, const T* x, std::size_t n, Activation act) {
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(n);
  if constexpr (std::is_same_v<T, float>) {
    if (vectorized(act)) {
      const std::ptrdiff_t chunks = (count + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (count > 32768)
      for (std::ptrdiff_t c = 0; c < chunks; ++c) {
        gelu_forward_chunk(y + c * kChunk, x + c * kChunk, std::min(kChunk, count - c * kChunk), act);
      }
      return;
    }
  }
#pragma omp parallel for schedule(static) if (count > 32768)
  for (std::ptrdiff_t i = 0; i < count; ++i) y[i] = forward_one(x[i], act);
}

template <typename T>
void activation_backward_cpu(T* dx, const T* dy, const T* x, std::size_t n, Activation act) {
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(n);
  if constexpr (std::is_same_v<T, float>) {
    if (vectorized(act)) {
      const std::ptrdiff_t chunks = (count + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (count > 32768)
      for (std::ptrdiff_t c = 0; c < chunks; ++c) {
        gelu_backward_chunk(dx + c * kChunk, dy + c * kChunk, x + c * kChunk, std::min(kChunk, count - c * kChunk),
                            act);
      }
      return;
    }
  }
#pragma omp parallel for schedule(static) if (count > 32768)
  for (std::ptrdiff_t i = 0; i < count; ++i) dx[i] = dy[i] * derivative_one(x[i], act);
}

template void activation_forward_cpu<float>(float*, const float*, std::size_t, Activation);
template void activation_forward_cpu<double>(double*, const double*, std::size_t, Activation);
template void activation_backward_cpu<float>(float*, const float*, const float*, std::size_t, Activation);
template void activation_backward_cpu<double>(double*, const double*, const double*, std::size_t, Activation);

}  // namespace bertrain

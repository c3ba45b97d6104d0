#include "kernels/dropout.h"

#include <algorithm>

#include "engine/error.h"

namespace bertrain {

namespace {

// Shared by forward and backward: the gradient of inverted dropout is the same masked scaling.
template <typename T>
void apply_dropout_mask(T* out, const T* in, std::size_t n, float p, const RandomKey& key) {
  BERTRAIN_CHECK(p >= 0.0f && p <= 1.0f, "dropout probability must be in [0, 1], got " << p);
  if (p == 0.0f) {
    if (out != in) std::copy(in, in + n, out);
    return;
  }
  if (p == 1.0f) {
    std::fill(out, out + n, T(0));
    return;
  }
  const T scale = T(1) / (T(1) - T(p));
  const std::ptrdiff_t groups = static_cast<std::ptrdiff_t>((n + 3) / 4);
#pragma omp parallel for schedule(static) if (n > 65536)
  for (std::ptrdiff_t g = 0; g < groups; ++g) {
    const Philox4 bits = philox_group(key, static_cast<uint64_t>(g));
    const std::size_t first = static_cast<std::size_t>(g) * 4;
    const std::size_t last = std::min(first + 4, n);
    for (std::size_t i = first; i < last; ++i) {
      const bool keep = uniform_from_bits(bits.v[i - first]) >= p;
      out[i] = keep ? in[i] * scale : T(0);
    }
  }
}

}  // namespace

template <typename T>
void dropout_forward_cpu(T* y, const T* x, std::size_t n, float p, const RandomKey& key) {
  apply_dropout_mask(y, x, n, p, key);
}

template <typename T>
void dropout_backward_cpu(T* dx, const T* dy, std::size_t n, float p, const RandomKey& key) {
  apply_dropout_mask(dx, dy, n, p, key);
}

template void dropout_forward_cpu<float>(float*, const float*, std::size_t, float, const RandomKey&);
template void dropout_forward_cpu<double>(double*, const double*, std::size_t, float, const RandomKey&);
template void dropout_backward_cpu<float>(float*, const float*, std::size_t, float, const RandomKey&);
template void dropout_backward_cpu<double>(double*, const double*, std::size_t, float, const RandomKey&);

}  // namespace bertrain

#include "kernels/dropout.h"

#include <algorithm>

#include "core/error.h"

namespace bertrain {

template <typename T>
void dropout_span(T* out, const T* in, std::size_t n, uint64_t first_index, float p, const RandomKey& key) {
  const T scale = T(1) / (T(1) - T(p));
  uint64_t group = ~uint64_t(0);
  Philox4 bits{};
  for (std::size_t i = 0; i < n; ++i) {
    const uint64_t index = first_index + i;
    if ((index >> 2) != group) {
      group = index >> 2;
      bits = philox_group(key, group);
    }
    const bool keep = uniform_from_bits(bits.v[index & 3]) >= p;
    out[i] = keep ? in[i] * scale : T(0);
  }
}

namespace {

// Shared by forward and backward: the gradient of inverted dropout is the same masked scaling.
template <typename T>
void apply_dropout_mask(T* out, const T* in, std::size_t n, float p, const RandomKey& key,
                        const DropoutLayout& layout) {
  BERTRAIN_CHECK(p >= 0.0f && p <= 1.0f, "dropout probability must be in [0, 1], got " << p);
  if (p == 0.0f) {
    if (out != in) std::copy(in, in + n, out);
    return;
  }
  if (p == 1.0f) {
    std::fill(out, out + n, T(0));
    return;
  }
  BERTRAIN_CHECK(layout.seq >= 1 && layout.max_positions >= layout.seq && layout.first_sample >= 0,
                 "dropout layout: seq " << layout.seq << ", max_positions " << layout.max_positions
                                        << ", first_sample " << layout.first_sample);
  const std::size_t cols = layout.cols > 0 ? static_cast<std::size_t>(layout.cols) : std::max<std::size_t>(n, 1);
  BERTRAIN_CHECK(n % cols == 0, "dropout: " << n << " elements are not rows of " << cols);
  const std::ptrdiff_t rows = static_cast<std::ptrdiff_t>(n / cols);
  // One row at a time: logical indices are contiguous within a row.
#pragma omp parallel for schedule(static) if (n > 65536)
  for (std::ptrdiff_t r = 0; r < rows; ++r) {
    const std::size_t base = static_cast<std::size_t>(r) * cols;
    dropout_span(out + base, in + base, cols, dropout_index(layout, cols, base), p, key);
  }
}

}  // namespace

template <typename T>
void dropout_forward_cpu(T* y, const T* x, std::size_t n, float p, const RandomKey& key, const DropoutLayout& layout) {
  apply_dropout_mask(y, x, n, p, key, layout);
}

template <typename T>
void dropout_backward_cpu(T* dx, const T* dy, std::size_t n, float p, const RandomKey& key,
                          const DropoutLayout& layout) {
  apply_dropout_mask(dx, dy, n, p, key, layout);
}

template void dropout_span<float>(float*, const float*, std::size_t, uint64_t, float, const RandomKey&);
template void dropout_span<double>(double*, const double*, std::size_t, uint64_t, float, const RandomKey&);
template void dropout_forward_cpu<float>(float*, const float*, std::size_t, float, const RandomKey&,
                                         const DropoutLayout&);
template void dropout_forward_cpu<double>(double*, const double*, std::size_t, float, const RandomKey&,
                                          const DropoutLayout&);
template void dropout_backward_cpu<float>(float*, const float*, std::size_t, float, const RandomKey&,
                                          const DropoutLayout&);
template void dropout_backward_cpu<double>(double*, const double*, std::size_t, float, const RandomKey&,
                                           const DropoutLayout&);

}  // namespace bertrain

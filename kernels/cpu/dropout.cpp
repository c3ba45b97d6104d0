#include "kernels/dropout.h"

#include <algorithm>

#if defined(__AVX512F__)
// GCC 12's AVX-512 headers trip its own -Wuninitialized once inlined (as -Wmaybe-uninitialized, see CMakeLists.txt):
// the warnings point into the header, so the header is included with them off.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

#include "core/error.h"

namespace bertrain {

namespace {

// Groups of four elements drawn together in dropout_span's main loop: kLanes Philox counters side by side, one
// round at a time over all of them (core/philox.h's philox4x32_10, lane by lane).
constexpr int kLanes = 16;

#if defined(__AVX512F__)
// bits[4·g + w] (=) word w of philox_group(key, group + g) for g < count (≤ kLanes; all kLanes are computed here):
// the draws of elements 4·group + [0, 4·count) in element order. Each 32-bit word sits in a 64-bit lane, so one
// _mm512_mul_epu32 is Philox's 32 × 32 → 64-bit multiply of eight counters; two vectors of eight groups interleave.
void philox_lanes(uint32_t (&bits)[4 * kLanes], const RandomKey& key, uint64_t group, int /*count*/) {
  const __m512i mul0 = _mm512_set1_epi64(0xD2511F53u), mul1 = _mm512_set1_epi64(0xCD9E8D57u);
  const __m512i low32 = _mm512_set1_epi64(0xFFFFFFFFu);
  __m512i c0[2], c1[2], c2[2], c3[2];
  for (int v = 0; v < 2; ++v) {
    const __m512i counter = _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(group + 8 * v)),
                                             _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0));
    c0[v] = _mm512_and_si512(counter, low32);
    c1[v] = _mm512_srli_epi64(counter, 32);
    c2[v] = _mm512_set1_epi64(key.step);
    c3[v] = _mm512_set1_epi64(key.tensor);
  }
  uint32_t k0 = static_cast<uint32_t>(key.seed), k1 = static_cast<uint32_t>(key.seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const __m512i key0 = _mm512_set1_epi64(k0), key1 = _mm512_set1_epi64(k1);
    for (int v = 0; v < 2; ++v) {
      const __m512i p0 = _mm512_mul_epu32(c0[v], mul0), p1 = _mm512_mul_epu32(c2[v], mul1);
      const __m512i n0 = _mm512_xor_si512(_mm512_xor_si512(_mm512_srli_epi64(p1, 32), c1[v]), key0);
      const __m512i n2 = _mm512_xor_si512(_mm512_xor_si512(_mm512_srli_epi64(p0, 32), c3[v]), key1);
      c1[v] = _mm512_and_si512(p1, low32);
      c3[v] = _mm512_and_si512(p0, low32);
      c0[v] = n0;
      c2[v] = n2;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  alignas(64) uint64_t words[4][kLanes];
  for (int v = 0; v < 2; ++v) {
    _mm512_store_si512(words[0] + 8 * v, c0[v]);
    _mm512_store_si512(words[1] + 8 * v, c1[v]);
    _mm512_store_si512(words[2] + 8 * v, c2[v]);
    _mm512_store_si512(words[3] + 8 * v, c3[v]);
  }
  for (int g = 0; g < kLanes; ++g) {
    for (int w = 0; w < 4; ++w) bits[4 * g + w] = static_cast<uint32_t>(words[w][g]);
  }
}
#else
// The same without AVX-512: the generator one group at a time, only the `count` groups asked for.
void philox_lanes(uint32_t (&bits)[4 * kLanes], const RandomKey& key, uint64_t group, int count) {
  for (int g = 0; g < count; ++g) {
    const Philox4 r = philox_group(key, group + static_cast<uint64_t>(g));
    for (int w = 0; w < 4; ++w) bits[4 * g + w] = r.v[w];
  }
}
#endif

}  // namespace

template <typename T>
void dropout_span(T* out, const T* in, std::size_t n, uint64_t first_index, float p, const RandomKey& key) {
  const T scale = T(1) / (T(1) - T(p));
  // Whole groups of four from the one holding first_index, kLanes groups per Philox batch; a batch's draws cover
  // elements [4·group, 4·group + 4·kLanes), of which those in [first_index, first_index + n) are used.
  const uint64_t last = first_index + n;
  uint32_t bits[4 * kLanes];
  for (uint64_t group = first_index >> 2; 4 * group < last; group += kLanes) {
    const uint64_t begin = std::max(first_index, 4 * group), end = std::min(last, 4 * (group + kLanes));
    philox_lanes(bits, key, group, static_cast<int>((end - 4 * group + 3) / 4));
    const uint32_t* draws = bits + (begin - 4 * group);
    T* o = out + (begin - first_index);
    const T* x = in + (begin - first_index);
    const std::size_t count = static_cast<std::size_t>(end - begin);
    for (std::size_t e = 0; e < count; ++e) o[e] = uniform_from_bits(draws[e]) >= p ? x[e] * scale : T(0);
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
  BERTRAIN_CHECK(layout.first_sample >= 0, "dropout layout: first_sample " << layout.first_sample);
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

// Shared by the GPU suites: skip visibly without a device, move test data to and from the device, and
// build random inputs and ragged (packed) batches.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "core/bf16.h"
#include "core/build_info.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/device_buffer.h"
#include "core/cuda/gpu_context.h"
#include "tests/gpu_skip.h"

namespace bertrain::testing {

inline std::vector<float> random_floats(std::size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

inline std::vector<bf16> to_bf16(const std::vector<float>& x) {
  std::vector<bf16> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = float_to_bf16(x[i]);
  return y;
}

inline std::vector<float> to_float(const std::vector<bf16>& x) {
  std::vector<float> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = bf16_to_float(x[i]);
  return y;
}

// Values exactly representable in bf16, so the same inputs drive the fp32 CPU twin and a bf16 kernel.
inline std::vector<float> bf16_rounded(const std::vector<float>& x) { return to_float(to_bf16(x)); }

// Random inputs in [lo, hi), exactly representable in T (so the fp32 CPU twin sees the values a kernel reads).
template <typename T>
std::vector<float> make_input(std::size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> x = random_floats(n, seed, lo, hi);
  if constexpr (std::is_same_v<T, bf16>) x = bf16_rounded(x);
  return x;
}

// Host floats to a device buffer of T (rounded to bf16 for T = bf16), and back.
template <typename T>
DeviceBuffer<T> to_device(const std::vector<float>& x) {
  if constexpr (std::is_same_v<T, bf16>) {
    return DeviceBuffer<bf16>(to_bf16(x));
  } else {
    return DeviceBuffer<float>(x);
  }
}

template <typename T>
std::vector<float> to_host(const DeviceBuffer<T>& d) {
  if constexpr (std::is_same_v<T, bf16>) {
    return to_float(d.download());
  } else {
    return d.download();
  }
}

// Fills a device buffer with 0xff bytes (NaN in float and bf16), so that an output a kernel forgets to write
// cannot pass as zero or as a stale correct value.
template <typename T>
void poison(DeviceBuffer<T>& d) {
  if (d.size() > 0) BERTRAIN_CUDA_CHECK(cudaMemset(d.data(), 0xff, d.bytes()));
}

template <typename T>
bool bitwise_equal(const DeviceBuffer<T>& a, const DeviceBuffer<T>& b) {
  const std::vector<T> x = a.download(), y = b.download();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
}

// ---- Packed batches (DESIGN.md: T = ΣL_b tokens back to back, row offsets cu_seqlens [B + 1]) ---------------

// cu_seqlens [B + 1] of rows with these lengths.
inline std::vector<int32_t> row_offsets(const std::vector<int>& lengths) {
  std::vector<int32_t> cu(lengths.size() + 1, 0);
  for (std::size_t b = 0; b < lengths.size(); ++b) cu[b + 1] = cu[b] + lengths[b];
  return cu;
}

inline int total_tokens(const std::vector<int>& lengths) { return row_offsets(lengths).back(); }
inline int longest_of(const std::vector<int>& lengths) {
  return lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
}

// `rows` lengths in [1, longest] drawn from `seed`, with row 0 of length `longest` and (rows >= 2) row rows / 2 of
// length 1, so that both extremes are always present wherever they land in the padded GPU internals.
inline std::vector<int> mixed_lengths(int rows, int longest, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> length(1, longest);
  std::vector<int> lengths(static_cast<std::size_t>(rows));
  for (int& l : lengths) l = length(gen);
  lengths[0] = longest;
  if (rows >= 2) lengths[static_cast<std::size_t>(rows / 2)] = 1;
  return lengths;
}

// A named set of row lengths for the ragged cases every packed kernel is checked on.
struct RaggedRows {
  std::string name;
  std::vector<int> lengths;
};

// The ragged shapes of the brief with rows up to `longest` tokens: every row of length 1; mixed lengths from 1 to
// `longest` in a few rows (the longest not first, so row 0 is not the padded S); a single row; and 64 rows of mixed
// lengths (many blocks, many row offsets). first_sample is each test's own parameter.
inline std::vector<RaggedRows> ragged_row_sets(int longest, uint32_t seed) {
  std::vector<int> mixed = {std::max(1, longest / 3), longest, 1, std::max(1, longest / 7),
                            std::min(2, longest), std::max(1, longest - 1)};
  return {
      {"all length 1", std::vector<int>(5, 1)},
      {"mixed 1.." + std::to_string(longest), mixed},
      {"one row of " + std::to_string(longest), {longest}},
      {"64 mixed rows up to " + std::to_string(std::min(longest, 96)), mixed_lengths(64, std::min(longest, 96), seed)},
  };
}

inline std::string describe_lengths(const std::vector<int>& lengths) {
  std::string s = "B " + std::to_string(lengths.size()) + ", T " + std::to_string(total_tokens(lengths)) + ", S " +
                  std::to_string(longest_of(lengths)) + ", lengths";
  const std::size_t shown = std::min<std::size_t>(lengths.size(), 8);
  for (std::size_t b = 0; b < shown; ++b) s += " " + std::to_string(lengths[b]);
  if (shown < lengths.size()) s += " ...";
  return s;
}

}  // namespace bertrain::testing

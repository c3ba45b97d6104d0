// Shared by the GPU suites: skip visibly without a device, move test data to and from the device, and
// build random inputs.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/build_info.h"
#include "core/cuda/device_buffer.h"
#include "core/cuda/gpu_context.h"

namespace bertrain::testing {

// True when BERTRAIN_EXPECT_GPU=1: a GPU machine's run (./bertrain.sh gpu-check) must not pass with every
// GPU test skipped, e.g. because the driver is older than the toolkit.
inline bool gpu_expected() {
  const char* v = std::getenv("BERTRAIN_EXPECT_GPU");
  return v != nullptr && std::string(v) == "1";
}

// Skips the calling test with the reason when this process sees no CUDA device (the CI machine), or
// fails it under BERTRAIN_EXPECT_GPU=1.
#define BERTRAIN_REQUIRE_GPU()                                                                      \
  do {                                                                                              \
    std::string bertrain_gpu_why_;                                                                  \
    if (::bertrain::cuda_device_count(&bertrain_gpu_why_) == 0) {                                   \
      if (::bertrain::testing::gpu_expected()) {                                                    \
        FAIL() << "BERTRAIN_EXPECT_GPU=1 but no CUDA device (" << bertrain_gpu_why_ << ")";        \
      }                                                                                             \
      GTEST_SKIP() << "GPU test skipped: no CUDA device (" << bertrain_gpu_why_ << ")";            \
    }                                                                                               \
  } while (0)

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

}  // namespace bertrain::testing

// Skipping a GPU test visibly on a machine without a device, free of CUDA headers (the suites that run the
// bertrain binary on the GPU include it too).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/build_info.h"

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

}  // namespace bertrain::testing

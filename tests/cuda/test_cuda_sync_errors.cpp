// BERTRAIN_CUDA_SYNC=1's promise (core/cuda/cuda_check.h): a kernel that faults is named by the launch that
// started it, with the launcher's file, instead of surfacing at a later, unrelated call. A fault leaves the CUDA
// context unusable for the rest of the process, so this is a test program of its own with this one test, and it
// sets BERTRAIN_CUDA_SYNC itself, before the first checked call reads it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "core/cuda/device_buffer.h"
#include "core/cuda/gpu_context.h"
#include "core/error.h"
#include "kernels/dropout.h"
#include "tests/gpu_skip.h"

namespace bertrain {
namespace {

TEST(CudaSyncErrors, AFaultingKernelIsNamedAtItsLaunch) {
  BERTRAIN_REQUIRE_GPU();
  ASSERT_EQ(setenv("BERTRAIN_CUDA_SYNC", "1", 1), 0);
  ASSERT_TRUE(cuda_sync_debugging()) << "something read BERTRAIN_CUDA_SYNC before the test set it";

  GpuContext context(0, 0);
  const std::size_t n = 1024;
  DeviceBuffer<float> x(std::vector<float>(n, 1.0f));
  context.synchronize();
  // A device address nothing is mapped at, aligned so that the launch takes dropout_group_kernel: the kernel's
  // stores fault while it runs, after the launch itself succeeded.
  float* unmapped = reinterpret_cast<float*>(std::uintptr_t{0x1000});
  const RandomKey key{1, 2, 3};
  try {
    dropout_forward_cuda(unmapped, x.data(), n, 0.5f, key, DropoutLayout{0, 1, 64}, context.stream());
    FAIL() << "the faulting dropout kernel's launch returned without an error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("CUDA: dropout_group_kernel failed while running (BERTRAIN_CUDA_SYNC=1): "),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("kernels/cuda/dropout.cu:"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace bertrain

// Checked calls for the CUDA runtime and cuBLAS: a failure throws bertrain::Error naming the call, the
// library's message and file:line. Included by core/cuda, kernels/cuda and engine/cuda only (CUDA headers).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "core/error.h"

namespace bertrain {

const char* cublas_status_name(cublasStatus_t status);

// BERTRAIN_CUDA_SYNC=1 (read once): every checked kernel launch and cuBLAS call waits for the device and
// reports an error raised while it ran, naming it. Without it an asynchronous fault surfaces at some later,
// unrelated call. For debugging only: it serialises host and device.
bool cuda_sync_debugging();
// cudaDeviceSynchronize; throws Error "<what> failed while running ..." [file:line] on an error.
void cuda_debug_sync(const char* what, const char* file, int line);

}  // namespace bertrain

#define BERTRAIN_CUDA_CHECK(call)                                                                   \
  do {                                                                                              \
    const cudaError_t bertrain_cuda_status_ = (call);                                               \
    if (bertrain_cuda_status_ != cudaSuccess) {                                                     \
      BERTRAIN_FAIL("CUDA: " #call " failed: " << cudaGetErrorString(bertrain_cuda_status_));       \
    }                                                                                               \
  } while (0)

#define BERTRAIN_CUBLAS_CHECK(call)                                                                 \
  do {                                                                                              \
    const cublasStatus_t bertrain_cublas_status_ = (call);                                          \
    if (bertrain_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                         \
      BERTRAIN_FAIL("cuBLAS: " #call " failed: " << ::bertrain::cublas_status_name(bertrain_cublas_status_)); \
    }                                                                                               \
    if (::bertrain::cuda_sync_debugging()) ::bertrain::cuda_debug_sync("cuBLAS: " #call, __FILE__, __LINE__); \
  } while (0)

// After a <<<...>>> launch: reports bad launch configurations at the launcher that made them
// (cudaGetLastError does not synchronise), and under BERTRAIN_CUDA_SYNC=1 faults of the kernel itself.
#define BERTRAIN_CUDA_CHECK_LAUNCH(kernel_name)                                                     \
  do {                                                                                              \
    const cudaError_t bertrain_launch_status_ = cudaGetLastError();                                 \
    if (bertrain_launch_status_ != cudaSuccess) {                                                   \
      BERTRAIN_FAIL("CUDA: launching " << kernel_name << " failed: " << cudaGetErrorString(bertrain_launch_status_)); \
    }                                                                                               \
    if (::bertrain::cuda_sync_debugging()) ::bertrain::cuda_debug_sync(kernel_name, __FILE__, __LINE__); \
  } while (0)

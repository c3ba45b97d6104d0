#include "core/cuda/gpu_context.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string>

namespace bertrain {

const char* cublas_status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "unknown cuBLAS status";
  }
}

GpuContext::GpuContext(int device, std::size_t workspace_elements) : device_(device) {
  // A constructor that throws runs no destructor: release what was created so far before rethrowing.
  try {
    create(workspace_elements);
  } catch (...) {
    release();
    throw;
  }
}

void GpuContext::create(std::size_t workspace_elements) {
  int count = 0;
  BERTRAIN_CUDA_CHECK(cudaGetDeviceCount(&count));
  BERTRAIN_CHECK(device_ >= 0 && device_ < count, "CUDA device " << device_ << " does not exist (" << count
                                                                << " visible; check CUDA_VISIBLE_DEVICES)");
  BERTRAIN_CUDA_CHECK(cudaSetDevice(device_));
  cudaDeviceProp prop{};
  BERTRAIN_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  name_ = prop.name;
  BERTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&handles_.stream, cudaStreamNonBlocking));
  BERTRAIN_CUBLAS_CHECK(cublasCreate(&handles_.blas));
  BERTRAIN_CUBLAS_CHECK(cublasSetStream(handles_.blas, handles_.stream));
  // Full-precision fp32 products (no TF32), so that --precision fp32 reproduces the CPU engine. And split-K
  // partial sums reduced in fp32, never in a bf16 output (cuBLAS allows that by default). Note: even so, a
  // bf16 GEMM with beta = 1 rounds the product to bf16 before adding C on an H100 with cuBLAS 13.0
  // (2026-11-22; tests/cuda/test_cuda_gemm_attention.cpp bounds it), which is why the bf16 engine
  // accumulates residual gradients into fp32 outputs instead.
  BERTRAIN_CUBLAS_CHECK(cublasSetMathMode(
      handles_.blas,
      static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  workspace_ = DeviceBuffer<float>(workspace_elements);
  handles_.workspace = workspace_.data();
  handles_.workspace_elements = workspace_.size();
  // One GEMM workspace for the handle's cuBLAS calls and the cuBLASLt calls made with it: both run on
  // handles_.stream, so they never use it at the same time.
  gemm_workspace_ = DeviceBuffer<unsigned char>(kGemmWorkspaceBytes);
  handles_.gemm_workspace = gemm_workspace_.data();
  handles_.gemm_workspace_bytes = gemm_workspace_.bytes();
  BERTRAIN_CUBLAS_CHECK(cublasSetWorkspace(handles_.blas, handles_.gemm_workspace, handles_.gemm_workspace_bytes));
}

GpuContext::~GpuContext() { release(); }

void GpuContext::release() noexcept {
  workspace_ = DeviceBuffer<float>();
  if (handles_.blas != nullptr) cublasDestroy(handles_.blas);
  gemm_workspace_ = DeviceBuffer<unsigned char>();  // after the handle that points at it
  if (handles_.stream != nullptr) cudaStreamDestroy(handles_.stream);
  handles_ = GpuHandles{};
}
void GpuContext::synchronize() const { BERTRAIN_CUDA_CHECK(cudaStreamSynchronize(handles_.stream)); }

bool cuda_sync_debugging() {
  static const bool enabled = [] {
    const char* v = std::getenv("BERTRAIN_CUDA_SYNC");
    return v != nullptr && std::string(v) == "1";
  }();
  return enabled;
}

void cuda_debug_sync(const char* what, const char* file, int line) {
  const cudaError_t status = cudaDeviceSynchronize();
  if (status != cudaSuccess) {
    throw_error(file, line, std::string("CUDA: ") + what + " failed while running (BERTRAIN_CUDA_SYNC=1): " +
                                cudaGetErrorString(status));
  }
}

std::size_t gpu_memory_in_use_bytes() {
  std::size_t free_bytes = 0, total_bytes = 0;
  BERTRAIN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return total_bytes - free_bytes;
}

}  // namespace bertrain

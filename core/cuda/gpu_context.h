// The device context of one process: its CUDA device, the compute stream, the cuBLAS handle bound to that
// stream (fp32 GEMMs in full fp32: TF32 off, so --precision fp32 matches the CPU engine; also used as the
// cuBLASLt handle), the reduction workspace and the GEMM workspace (kGemmWorkspaceBytes) of
// core/cuda/gpu_handles.h.
#pragma once

#include <string>

#include "core/cuda/device_buffer.h"
#include "core/cuda/gpu_handles.h"

namespace bertrain {

class GpuContext {
 public:
  // Selects `device` (throws naming it when it does not exist) and creates the stream and handle.
  // workspace_elements: floats of reduction workspace (gpu_reduction_workspace_elements of the widest
  // matrix a column reduction will see).
  GpuContext(int device, std::size_t workspace_elements);
  ~GpuContext();
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  int device() const { return device_; }
  const GpuHandles& handles() const { return handles_; }
  CudaStream stream() const { return handles_.stream; }
  std::string device_name() const { return name_; }
  void synchronize() const;

 private:
  void create(std::size_t workspace_elements);
  void release() noexcept;

  int device_;
  std::string name_;
  GpuHandles handles_;
  DeviceBuffer<float> workspace_;
  DeviceBuffer<unsigned char> gemm_workspace_;
};

// Device memory in use now (total − free from cudaMemGetInfo): this process's allocations, cuBLAS's
// workspace and the CUDA context, plus other processes' on a shared device.
std::size_t gpu_memory_in_use_bytes();

}  // namespace bertrain

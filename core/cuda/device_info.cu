// CUDA runtime queries behind core/build_info.h (compiled only when BERTRAIN_CUDA is enabled).
#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "core/build_info.h"
#include "core/cuda/gpu_peaks.h"

namespace bertrain {

namespace {

// Why no device can be used, in the terms of the machine: the runtime reports a missing driver as "CUDA driver
// version is insufficient for CUDA runtime version", which sends a user on a laptop without a GPU looking for
// driver updates.
std::string no_device_reason(cudaError_t status) {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);  // 0 when no NVIDIA driver is installed
  cudaRuntimeGetVersion(&runtime);
  if (status == cudaErrorNoDevice || (status == cudaErrorInsufficientDriver && driver == 0)) {
    return "no NVIDIA driver or GPU found";
  }
  if (status == cudaErrorInsufficientDriver) {
    char text[160];
    std::snprintf(text, sizeof text, "the NVIDIA driver supports CUDA %d.%d, older than the CUDA %d.%d bertrain was "
                  "built with", driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
    return text;
  }
  return cudaGetErrorString(status);
}

}  // namespace

int cuda_device_count(std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    if (why != nullptr) *why = no_device_reason(status);
    cudaGetLastError();  // clear the sticky error so later queries start clean
    return 0;
  }
  if (count == 0 && why != nullptr) *why = "no NVIDIA GPU found (check CUDA_VISIBLE_DEVICES)";
  return count;
}

std::string cuda_device_summary() {
  std::string out;
  const int count = cuda_device_count();
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    char line[512];
    std::snprintf(line, sizeof line, "  %d: %s, %.1f GiB, compute capability %d.%d\n", i, prop.name,
                  static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0), prop.major, prop.minor);
    out += line;
  }
  return out;
}

std::string cuda_runtime_version() {
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  return std::to_string(runtime / 1000) + "." + std::to_string((runtime % 1000) / 10);
}

double gpu_peak_tflops(int device, bool bf16) {
  cudaDeviceProp prop{};
  DatasheetPeak peak;
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess || !datasheet_peak(prop.name, &peak)) return 0.0;
  return bf16 ? peak.bf16_tensor_tflops : peak.fp32_tflops;
}

}  // namespace bertrain

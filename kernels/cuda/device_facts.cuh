// Host side, shared by the kernels whose blocks use more than 48 KiB of dynamic shared memory (the attention
// kernels, the fused LayerNorm backward at BERT-large's width): the current device's compute capability and opt-in
// shared memory per block, queried once per device, and the opt-in itself. Included by kernels/cuda/ only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "core/cuda/cuda_check.h"

namespace bertrain {
namespace cuda {

constexpr std::size_t kStaticSmemLimit = 48 * 1024;  // above this a kernel must opt in to dynamic shared memory

struct DeviceFacts {
  int device = 0, major = 0, max_smem = 0;
};

inline DeviceFacts current_device_facts() {
  static std::mutex mutex;
  static std::map<int, DeviceFacts> known;
  int device = 0;
  BERTRAIN_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find(device);
  if (it == known.end()) {
    DeviceFacts f;
    f.device = device;
    BERTRAIN_CUDA_CHECK(cudaDeviceGetAttribute(&f.major, cudaDevAttrComputeCapabilityMajor, device));
    BERTRAIN_CUDA_CHECK(cudaDeviceGetAttribute(&f.max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    it = known.emplace(device, f).first;
  }
  return it->second;
}

// Above 48 KiB a kernel must opt in to its dynamic shared memory: once per (kernel, device), up to the device's limit
// (so any later launch of it fits). A host-side attribute, no synchronisation.
template <typename Kernel>
inline void allow_shared_memory(Kernel* kernel, std::size_t bytes, const DeviceFacts& dev) {
  if (bytes <= kStaticSmemLimit) return;
  static std::mutex mutex;
  static std::set<std::pair<const void*, int>> done;
  std::lock_guard<std::mutex> lock(mutex);
  const std::pair<const void*, int> id(reinterpret_cast<const void*>(kernel), dev.device);
  if (done.count(id) != 0) return;
  BERTRAIN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dev.max_smem));
  done.insert(id);
}

}  // namespace cuda
}  // namespace bertrain

// RAII owners of device and pinned host memory. Allocation happens when a trainer or test sets up, never
// inside a step.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "core/cuda/cuda_check.h"

namespace bertrain {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) : size_(n) {
    if (n > 0) BERTRAIN_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), n * sizeof(T)));
  }
  // Allocates and copies `host` (synchronously: set-up and tests only).
  // upload() and download() synchronise the whole device around the copy: cudaMemcpy runs on the legacy
  // default stream, which is not ordered with the non-blocking streams kernels run on, and a pageable
  // host-to-device cudaMemcpy may return before its DMA has finished.
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host.data(), host.size()); }
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    DeviceBuffer(std::move(other)).swap(*this);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);  // never throws
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }

  void upload(const T* host, std::size_t n) {
    BERTRAIN_CHECK(n <= size_, "upload of " << n << " elements into a device buffer of " << size_);
    if (n == 0) return;
    BERTRAIN_CUDA_CHECK(cudaDeviceSynchronize());
    BERTRAIN_CUDA_CHECK(cudaMemcpy(data_, host, n * sizeof(T), cudaMemcpyHostToDevice));
    BERTRAIN_CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::vector<T> download() const { return download(size_); }
  std::vector<T> download(std::size_t n) const {
    BERTRAIN_CHECK(n <= size_, "download of " << n << " elements from a device buffer of " << size_);
    std::vector<T> host(n);
    if (n == 0) return host;
    BERTRAIN_CUDA_CHECK(cudaDeviceSynchronize());
    BERTRAIN_CUDA_CHECK(cudaMemcpy(host.data(), data_, n * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  void swap(DeviceBuffer& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

// Page-locked host memory, so that cudaMemcpyAsync really is asynchronous.
template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t n) : size_(n) {
    if (n > 0) BERTRAIN_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&data_), n * sizeof(T)));
  }
  PinnedBuffer(PinnedBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
  }
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    return *this;
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() {
    if (data_ != nullptr) cudaFreeHost(data_);
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace bertrain

// MPI allreduce of GPU buffers through pinned host memory (GpuCollectives::kMpi): device to host, MPI_Allreduce
// over the host communicator, host to device. It needs neither NCCL nor a CUDA-aware MPI, and it lets several
// ranks share one GPU, which NCCL refuses. The price is speed: each call copies the slice out and back over
// PCIe, and the calling thread waits for the slice's gradients before it sums them, so the host enqueues the
// rest of the backward only after each bucket's sum and the GPU idles meanwhile (NCCL overlaps the sum with
// the backward instead).
#include "dist/device_communicator.h"

#include "core/build_config.h"
#include "core/error.h"

#if BERTRAIN_HAS_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda/cuda_check.h"
#include "core/cuda/device_buffer.h"
#include "dist/bf16_staging.h"
#endif

namespace bertrain {

#if BERTRAIN_HAS_CUDA

namespace {

class MpiStaged final : public DeviceCommunicator {
 public:
  MpiStaged(Communicator& host, std::size_t max_elements) : host_(host), staging_(max_elements) {}

  void allreduce_sum(float* data, std::size_t n, CudaStream stream) override {
    check_size(n);
    to_host(staging_.data(), data, n * sizeof(float), stream);
    host_.allreduce_sum(staging_.data(), n);
    to_device(data, staging_.data(), n * sizeof(float), stream);
  }

  void allreduce_sum(bf16* data, std::size_t n, CudaStream stream) override {
    check_size(n);
    unsigned char* bytes = reinterpret_cast<unsigned char*>(staging_.data());
    to_host(bytes + 2 * n, data, n * sizeof(bf16), stream);  // the upper half (dist/bf16_staging.h)
    host_.allreduce_sum(widen_bf16_upper_half(bytes, n), n);
    narrow_to_bf16_front(bytes, n);
    to_device(data, bytes, n * sizeof(bf16), stream);
  }

  // Every sum is finished on the calling thread before allreduce_sum returns: nothing is outstanding to fail
  // later. A rank that hangs blocks its peers inside MPI, as on the CPU engine; mpirun ends the job when one dies.
  void check(double) override {}

 private:
  void check_size(std::size_t n) const {
    BERTRAIN_CHECK(n <= staging_.size(), host_.where() << ": allreduce of " << n
                                                       << " elements through a staging buffer of " << staging_.size());
  }
  // The copy waits for the work enqueued on `stream` before it (the slice's gradients) and for the previous
  // call's copy back to the device, which read the same staging memory.
  static void to_host(void* host, const void* device, std::size_t bytes, cudaStream_t stream) {
    BERTRAIN_CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream));
    BERTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  // Enqueued only: the next call's to_host on the same stream waits for it before the staging memory is reused.
  static void to_device(void* device, const void* host, std::size_t bytes, cudaStream_t stream) {
    BERTRAIN_CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream));
  }

  Communicator& host_;
  PinnedBuffer<float> staging_;
};

}  // namespace

std::unique_ptr<DeviceCommunicator> make_mpi_staged_communicator(Communicator& host, std::size_t max_elements) {
  return std::make_unique<MpiStaged>(host, max_elements);
}

#else

std::unique_ptr<DeviceCommunicator> make_mpi_staged_communicator(Communicator& host, std::size_t) {
  BERTRAIN_FAIL(host.where() << ": GPU collectives need a build with CUDA");
}

#endif

}  // namespace bertrain

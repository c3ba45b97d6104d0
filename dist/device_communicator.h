// Collectives on GPU buffers between the ranks of a data-parallel job: NCCL (ring / tree allreduce), with
// the ncclUniqueId sent from rank 0 over the host communicator and one device per process. Failures of
// asynchronous collectives are found by polling, and a collective that does not finish within the timeout
// aborts the NCCL communicator, so a dead peer ends the job instead of hanging it.
#pragma once

#include <cstddef>
#include <memory>

#include "core/bf16.h"
#include "core/cuda/gpu_handles.h"
#include "dist/communicator.h"

namespace bertrain {

class DeviceCommunicator {
 public:
  virtual ~DeviceCommunicator() = default;
  // data[0, n) (device) = Σ over ranks, in place, enqueued on `stream`.
  virtual void allreduce_sum(float* data, std::size_t n, CudaStream stream) = 0;
  virtual void allreduce_sum(bf16* data, std::size_t n, CudaStream stream) = 0;
  // Throws Error (naming host and rank) when an earlier collective failed asynchronously, or when
  // `waited_s` seconds of waiting exceed the timeout (the NCCL communicator is aborted first).
  virtual void check(double waited_s) = 0;
};

// NCCL communicator over `host`'s ranks on `device` (already current). timeout_s > 0.
// Throws Error when this build has no NCCL.
std::unique_ptr<DeviceCommunicator> make_device_communicator(Communicator& host, int device, double timeout_s);

}  // namespace bertrain

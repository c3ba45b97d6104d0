// Collectives on GPU buffers between the ranks of a data-parallel job, by one of two transports:
// - NCCL (ring / tree allreduce, GPU memory to GPU memory), with the ncclUniqueId sent from rank 0 over the host
//   communicator and one device per process;
// - MPI through pinned host memory (dist/staged_communicator.cpp): for builds or clusters without NCCL, and for
//   several ranks on one GPU, which NCCL refuses ("Duplicate GPU detected").
//
// NCCL:
// A dead or hung peer must end the job, not hang it:
// - the NCCL communicator is non-blocking, so initialisation and the host side of every call are polled
//   with the timeout (--collective-timeout) and never block the calling thread inside NCCL;
// - a watchdog thread watches every enqueued collective (a CUDA event recorded after it) and, once one has
//   been outstanding longer than the timeout, aborts the communicator, so that the host thread, wherever it
//   is blocked (waiting for a step, inside a kernel launch or a copy queued behind the hung collective), gets
//   going again and meets the error; if it does not reach its error path within a few seconds, the watchdog
//   ends the job itself through the host communicator (MPI_Abort) with a one-line message;
// - on an error path the communicator is aborted, never destroyed (ncclCommDestroy may wait for the peers),
//   and without waiting for the abort to finish: the job ends through the host communicator either way.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/bf16.h"
#include "core/cuda/gpu_handles.h"
#include "dist/communicator.h"

namespace bertrain {

class DeviceCommunicator {
 public:
  virtual ~DeviceCommunicator() = default;
  // data[0, n) (device) = Σ over ranks, in place, enqueued on `stream`. All collectives of one communicator go
  // to the same stream (the watchdog relies on their completing in order). Throws Error (naming host and rank)
  // when the communicator failed or was aborted earlier.
  virtual void allreduce_sum(float* data, std::size_t n, CudaStream stream) = 0;
  virtual void allreduce_sum(bf16* data, std::size_t n, CudaStream stream) = 0;
  // Throws Error (naming host and rank) when an earlier collective failed asynchronously, when the watchdog
  // found one that did not finish within the timeout, or when `waited_s` seconds of waiting exceed the
  // timeout (the NCCL communicator is aborted first).
  virtual void check(double waited_s) = 0;
};

// Which transport sums GPU buffers across ranks (train --gpu-collectives).
enum class GpuCollectives {
  kAuto,  // NCCL when this build has it and every rank has a GPU of its own, else MPI
  kNccl,  // NCCL, GPU memory to GPU memory: one GPU per rank
  kMpi,   // MPI through pinned host memory: any number of ranks per GPU, no NCCL needed
};
// "auto" | "nccl" | "mpi"; throws Error naming --gpu-collectives for anything else.
GpuCollectives parse_gpu_collectives(const std::string& name);
const char* gpu_collectives_name(GpuCollectives kind);

// What `requested` means for this job: kNccl or kMpi, the same on every rank. A collective: every rank of
// `host` calls it, with the number of GPUs its process sees. kAuto is kNccl when the build has NCCL and on
// every host the ranks are no more than its GPUs (so each gets one of its own), else kMpi. kNccl is refused
// (Error, on every rank) when the build has no NCCL or when some host has more ranks than GPUs.
GpuCollectives agree_gpu_collectives(GpuCollectives requested, Communicator& host, int visible_devices);

// The communicator of `kind` (kNccl or kMpi, as agree_gpu_collectives returns) over `host`'s ranks on `device`
// (already current). `max_elements` bounds every allreduce's size (kMpi stages that many floats in pinned host
// memory, allocated here). timeout_s > 0 bounds NCCL's initialisation and every NCCL collective; kMpi's sums are
// `host`'s, bounded by the timeout `host` was made with (make_communicator). `host` must outlive
// the result: NCCL's watchdog ends the job through it, MPI's sums go through it. Throws Error when this build
// lacks the transport, or when NCCL's initialisation fails or times out.
std::unique_ptr<DeviceCommunicator> make_device_communicator(GpuCollectives kind, Communicator& host, int device,
                                                             double timeout_s, std::size_t max_elements);
std::unique_ptr<DeviceCommunicator> make_nccl_communicator(Communicator& host, int device, double timeout_s);
std::unique_ptr<DeviceCommunicator> make_mpi_staged_communicator(Communicator& host, std::size_t max_elements);

// The watchdog's book of enqueued collectives: a ring of slots, each holding the time a collective was
// enqueued; the caller keeps a completion marker per slot (a CUDA event). Free of CUDA so that it is tested on
// the CPU. One thread enqueues (reserve, then publish), one other thread watches (oldest_outstanding_s);
// a slot is reused only after the watcher has seen its collective finish, so the two never race on a slot.
class CollectiveWatch {
 public:
  static constexpr std::size_t kSlots = 256;
  static constexpr std::size_t kNoSlot = kSlots;

  // Enqueuing thread, after enqueuing a collective at time `now_s`: the slot whose marker to record now, then
  // publish(). kNoSlot when every slot still holds a collective the watcher has not seen finish (this one then
  // goes unwatched; the trainer keeps a few dozen in flight, far fewer than kSlots).
  std::size_t reserve(double now_s);
  // Enqueuing thread: the marker of the slot reserve() returned is recorded; the watcher may look at it.
  void publish();

  // Watching thread: walks the published collectives oldest first, asking done(slot) whether each has finished,
  // and returns how long (s) the oldest unfinished one has been outstanding at `now_s`, or 0 when all finished.
  // Collectives on one stream finish in order, so the walk stops at the first unfinished one.
  template <typename Done>
  double oldest_outstanding_s(double now_s, Done&& done) {
    const std::uint64_t published = published_.load(std::memory_order_acquire);
    std::uint64_t seen = finished_.load(std::memory_order_relaxed);
    double age = 0.0;
    for (; seen < published; ++seen) {
      const std::size_t slot = static_cast<std::size_t>(seen % kSlots);
      if (!done(slot)) {
        age = now_s - enqueued_s_[slot];
        break;
      }
    }
    finished_.store(seen, std::memory_order_release);
    return age;
  }

  // Watching thread: moves the enqueue time of every published collective it has not seen finish `seconds` later
  // (time this process did not run, OwnAbsence: not its peers' delay). The enqueuing thread writes only slots past
  // the published ones, so the two never touch one slot.
  void postpone(double seconds) {
    const std::uint64_t published = published_.load(std::memory_order_acquire);
    for (std::uint64_t k = finished_.load(std::memory_order_relaxed); k < published; ++k) {
      enqueued_s_[static_cast<std::size_t>(k % kSlots)] += seconds;
    }
  }

  // Collectives published so far, and those the watcher has seen finish.
  std::uint64_t published() const { return published_.load(std::memory_order_acquire); }
  std::uint64_t finished() const { return finished_.load(std::memory_order_acquire); }

 private:
  std::array<double, kSlots> enqueued_s_{};
  std::uint64_t reserved_ = 0;                // enqueuing thread only
  std::atomic<std::uint64_t> published_{0};  // written by the enqueuing thread
  std::atomic<std::uint64_t> finished_{0};   // written by the watching thread
};

}  // namespace bertrain

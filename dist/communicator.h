// Collective operations between the ranks of a data-parallel job. One process: every operation is the
// identity. MPI: CPU buffers through MPI_Allreduce / MPI_Bcast (NCCL for GPU buffers comes with the CUDA
// backend). All ranks must call the same collectives in the same order. With a collective timeout, an MPI call
// that waits longer than it (a peer rank stopped or hung) ends the job (dist/collective_deadline.h).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "dist/launcher.h"

namespace bertrain {

class Communicator {
 public:
  virtual ~Communicator() = default;

  int rank() const { return info_.rank; }
  int size() const { return info_.world_size; }
  const LaunchInfo& info() const { return info_; }
  // "host:rank" for messages.
  std::string where() const { return info_.host + " rank " + std::to_string(info_.rank); }

  // data[0, n) = Σ over ranks, in place.
  virtual void allreduce_sum(float* data, std::size_t n) = 0;
  virtual void allreduce_sum(double* data, std::size_t n) = 0;
  // data[0, n) = root's data[0, n).
  virtual void broadcast(float* data, std::size_t n, int root) = 0;
  // bytes[0, n) = root's (e.g. the NCCL unique id).
  virtual void broadcast_bytes(void* bytes, std::size_t n, int root) = 0;
  // Logical AND of `value` over ranks: lets every rank agree that all succeeded before going on.
  virtual bool all_true(bool value) = 0;
  // Ends every process of the job with `code` after printing `message` (MPI_Abort); never returns.
  [[noreturn]] virtual void abort(int code, const std::string& message) = 0;

 protected:
  explicit Communicator(LaunchInfo info) : info_(std::move(info)) {}
  LaunchInfo info_;
};

// The communicator for this process: MPI when launched with more than one rank (MPI_Init here),
// a single-process one otherwise. collective_timeout_s > 0: an MPI collective still waiting
// after that many seconds ends every process of the job with exit status 1 and a line naming this rank and the
// call (--collective-timeout); 0: MPI's calls wait as long as they must. Throws Error when a multi-rank launch
// meets a build without MPI.
std::unique_ptr<Communicator> make_communicator(const LaunchInfo& info, double collective_timeout_s = 0);

}  // namespace bertrain

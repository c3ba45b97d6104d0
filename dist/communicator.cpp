#include "dist/communicator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "core/build_config.h"
#include "core/error.h"
#include "dist/collective_deadline.h"

#if BERTRAIN_HAS_MPI
#include <mpi.h>
#endif

namespace bertrain {

namespace {

class SingleProcess final : public Communicator {
 public:
  explicit SingleProcess(LaunchInfo info) : Communicator(std::move(info)) {}
  void allreduce_sum(float*, std::size_t) override {}
  void allreduce_sum(double*, std::size_t) override {}
  void broadcast(float*, std::size_t, int) override {}
  void broadcast_bytes(void*, std::size_t, int) override {}
  bool all_true(bool value) override { return value; }
  [[noreturn]] void abort(int code, const std::string& message) override {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::exit(code);
  }
};

#if BERTRAIN_HAS_MPI

#define BERTRAIN_MPI_CHECK(call, who)                                                      \
  do {                                                                                     \
    const int mpi_status_ = (call);                                                        \
    if (mpi_status_ != MPI_SUCCESS) {                                                      \
      char mpi_text_[MPI_MAX_ERROR_STRING];                                                \
      int mpi_length_ = 0;                                                                 \
      MPI_Error_string(mpi_status_, mpi_text_, &mpi_length_);                             \
      BERTRAIN_FAIL(who << ": " #call " failed: " << std::string(mpi_text_, mpi_length_)); \
    }                                                                                      \
  } while (0)

// Buffers larger than INT_MAX elements go in chunks: MPI counts are int.
constexpr std::size_t kMaxChunk = std::size_t(1) << 30;

class Mpi final : public Communicator {
 public:
  Mpi(LaunchInfo info, double timeout_s) : Communicator(std::move(info)) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) BERTRAIN_MPI_CHECK(MPI_Init(nullptr, nullptr), where());
    int rank = 0, size = 1;
    BERTRAIN_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank), where());
    BERTRAIN_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size), where());
    // How the job was started, not a failure while working: running it again the same way cannot succeed (exit 2,
    // never retried). The usual case: a plain command in a batch script of a Slurm allocation of several tasks.
    if (rank != info_.rank || size != info_.world_size) {
      std::ostringstream message;
      message << where() << ": MPI reports rank " << rank << " of " << size << " but the environment says "
              << info_.rank << " of " << info_.world_size << " (" << info_.variables << "): start every rank with "
              << "srun or mpirun" << (info_.launcher == "slurm" ? " (srun --ntasks 1 for one process)" : "");
      throw InputError(message.str());
    }
    // Errors come back as codes (checked above) instead of MPI's default of aborting silently.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (timeout_s > 0) {
      deadline_ = std::make_unique<CollectiveDeadline>(timeout_s, [this, timeout_s](const std::string& what) {
        std::ostringstream message;
        message << "bertrain: error: " << where() << ": " << what << " did not finish within " << timeout_s
                << " s (a peer rank was stopped, hangs or is far behind; --collective-timeout sets the limit)";
        abort(1, message.str());
      });
    }
  }
  ~Mpi() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    // Not watched: Open MPI's finalize waits for every rank, and rank 0 may legitimately take long to get there
    // (writing results, copying best/ into MLflow) while the others wait; a job must not fail after its work.
    deadline_.reset();
    if (!finalized) MPI_Finalize();
  }

  void allreduce_sum(float* data, std::size_t n) override { reduce(data, n, MPI_FLOAT); }
  void allreduce_sum(double* data, std::size_t n) override { reduce(data, n, MPI_DOUBLE); }

  void broadcast(float* data, std::size_t n, int root) override {
    const CollectiveDeadline::Scope watched(deadline_.get(), "MPI_Bcast");
    for (std::size_t done = 0; done < n; done += kMaxChunk) {
      const int count = static_cast<int>(std::min(kMaxChunk, n - done));
      BERTRAIN_MPI_CHECK(MPI_Bcast(data + done, count, MPI_FLOAT, root, MPI_COMM_WORLD), where());
    }
  }
  void broadcast_bytes(void* bytes, std::size_t n, int root) override {
    BERTRAIN_CHECK(n <= kMaxChunk, "broadcast of " << n << " bytes");
    const CollectiveDeadline::Scope watched(deadline_.get(), "MPI_Bcast");
    BERTRAIN_MPI_CHECK(MPI_Bcast(bytes, static_cast<int>(n), MPI_BYTE, root, MPI_COMM_WORLD), where());
  }

  bool all_true(bool value) override {
    int local = value ? 1 : 0, global = 0;
    const CollectiveDeadline::Scope watched(deadline_.get(), "MPI_Allreduce");
    BERTRAIN_MPI_CHECK(MPI_Allreduce(&local, &global, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD), where());
    return global != 0;
  }

  [[noreturn]] void abort(int code, const std::string& message) override {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::exit(code);  // MPI_Abort does not return; this keeps the compiler and a broken MPI honest
  }

 private:
  template <typename T>
  void reduce(T* data, std::size_t n, MPI_Datatype type) {
    const CollectiveDeadline::Scope watched(deadline_.get(), "MPI_Allreduce");
    for (std::size_t done = 0; done < n; done += kMaxChunk) {
      const int count = static_cast<int>(std::min(kMaxChunk, n - done));
      BERTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data + done, count, type, MPI_SUM, MPI_COMM_WORLD), where());
    }
  }

  std::unique_ptr<CollectiveDeadline> deadline_;  // null: no timeout
};

#endif  // BERTRAIN_HAS_MPI

}  // namespace

std::unique_ptr<Communicator> make_communicator(const LaunchInfo& info, double collective_timeout_s) {
  if (info.world_size <= 1) return std::make_unique<SingleProcess>(info);
#if BERTRAIN_HAS_MPI
  return std::make_unique<Mpi>(info, collective_timeout_s);
#else
  // As the mismatch above: how it was started (or built), which running it again cannot change.
  throw InputError(info.host + " rank " + std::to_string(info.rank) + ": launched as one of " +
                   std::to_string(info.world_size) + " processes (" + info.variables + ") but this build has no MPI " +
                   "support (configure with BERTRAIN_MPI=ON; Debian: libopenmpi-dev)");
#endif
}

}  // namespace bertrain

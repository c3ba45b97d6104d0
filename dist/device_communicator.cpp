#include "dist/device_communicator.h"

#include "core/build_config.h"
#include "core/error.h"
#include "dist/collective_deadline.h"

#if BERTRAIN_HAS_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#endif

namespace bertrain {

std::size_t CollectiveWatch::reserve(double now_s) {
  if (reserved_ - finished_.load(std::memory_order_acquire) >= kSlots) return kNoSlot;
  const std::size_t slot = static_cast<std::size_t>(reserved_ % kSlots);
  enqueued_s_[slot] = now_s;
  return slot;
}

void CollectiveWatch::publish() { published_.store(++reserved_, std::memory_order_release); }

#if BERTRAIN_HAS_NCCL

namespace {

std::string seconds_text(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

// After aborting NCCL, the watchdog leaves the host thread this long to reach its own error path (which ends
// the job on the main thread, the one MPI was initialised on) before ending the job itself.
constexpr std::chrono::seconds kGrace{5};
// How long the watchdog tries to take the NCCL lock to abort; a host thread holding it longer is stuck inside
// an NCCL call, under which the communicator must not be freed.
constexpr std::chrono::seconds kLockWait{2};

// One CUDA event per CollectiveWatch slot, created on the current device.
class EventRing {
 public:
  EventRing() {
    for (cudaEvent_t& event : events_) {
      const cudaError_t status = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
      if (status != cudaSuccess) {
        release();
        BERTRAIN_FAIL("CUDA: cudaEventCreateWithFlags failed: " << cudaGetErrorString(status));
      }
    }
  }
  ~EventRing() { release(); }
  EventRing(const EventRing&) = delete;
  EventRing& operator=(const EventRing&) = delete;
  cudaEvent_t operator[](std::size_t slot) const { return events_[slot]; }

 private:
  void release() noexcept {
    for (cudaEvent_t& event : events_) {
      if (event != nullptr) cudaEventDestroy(event);
      event = nullptr;
    }
  }
  std::array<cudaEvent_t, CollectiveWatch::kSlots> events_{};
};

class Nccl final : public DeviceCommunicator {
 public:
  Nccl(Communicator& host, int device, double timeout_s)
      : host_(host), where_(host.where()), device_(device), timeout_s_(timeout_s) {
    BERTRAIN_CHECK(timeout_s > 0, "the collective timeout must be positive, got " << timeout_s);
    ncclUniqueId id{};
    if (host.rank() == 0) {
      const ncclResult_t status = ncclGetUniqueId(&id);
      BERTRAIN_CHECK(status == ncclSuccess, where_ << ": NCCL: ncclGetUniqueId failed: " << ncclGetErrorString(status));
    }
    host.broadcast_bytes(&id, sizeof id, 0);
    // Non-blocking: initialisation runs on NCCL's own thread and is polled here with the timeout, so a peer
    // that never joins ends the job instead of blocking ncclCommInitRank forever.
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    std::lock_guard<std::timed_mutex> lock(nccl_mutex_);
    const double start = steady_now_s();
    settle(ncclCommInitRankConfig(&comm_, host.size(), id, host.rank(), &config),
           "communicator initialisation (ncclCommInitRankConfig)", start);
    try {
      watchdog_ = std::thread([this, created_s = steady_now_s()] { watch(created_s); });
    } catch (...) {
      abort_locked();
      throw;
    }
  }

  ~Nccl() override {
    {
      std::lock_guard<std::mutex> state(state_mutex_);
      stop_ = true;
    }
    stop_cv_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
    std::lock_guard<std::timed_mutex> lock(nccl_mutex_);
    if (comm_ == nullptr) return;  // aborted already
    if (failed_.load() || std::uncaught_exceptions() > 0) {
      // An error path (this rank failed, maybe mid-step): the peers may be stuck in a collective this rank
      // will never join, and destroy/finalize would wait for them. The job is about to end through the host
      // communicator; abort, without waiting for it.
      abort_locked();
    } else {
      finalize_and_destroy();
    }
  }

  void allreduce_sum(float* data, std::size_t n, CudaStream stream) override {
    allreduce(data, n, ncclFloat32, stream);
  }
  void allreduce_sum(bf16* data, std::size_t n, CudaStream stream) override {
    allreduce(data, n, ncclBfloat16, stream);
  }

  void check(double waited_s) override {
    throw_if_failed();  // before locking: the watchdog may hold the lock while it aborts
    std::lock_guard<std::timed_mutex> lock(nccl_mutex_);
    throw_if_failed_locked();
    ncclResult_t async = ncclSuccess;
    const ncclResult_t status = ncclCommGetAsyncError(comm_, &async);
    if (status != ncclSuccess) async = status;
    if (async != ncclSuccess && async != ncclInProgress) {
      fail_locked(std::string("NCCL collective failed: ") + ncclGetErrorString(async));
    }
    if (waited_s > timeout_s_) {
      fail_locked("a GPU collective did not finish within " + seconds_text(timeout_s_) +
                  " s (a peer rank died or hangs; --collective-timeout sets the limit); NCCL aborted");
    }
  }

 private:
  void allreduce(void* data, std::size_t n, ncclDataType_t type, cudaStream_t stream) {
    throw_if_failed();
    std::lock_guard<std::timed_mutex> lock(nccl_mutex_);
    throw_if_failed_locked();
    const double start = steady_now_s();
    settle(ncclAllReduce(data, data, n, type, ncclSum, comm_, stream), "allreduce (ncclAllReduce)", start);
    // The watchdog's marker: an event after the collective on its stream (recording it does not wait).
    const std::size_t slot = watch_.reserve(start);
    if (slot == CollectiveWatch::kNoSlot) return;
    const cudaError_t status = cudaEventRecord(events_[slot], stream);
    BERTRAIN_CHECK(status == cudaSuccess, where_ << ": CUDA: cudaEventRecord failed: " << cudaGetErrorString(status));
    watch_.publish();
  }

  // A non-blocking communicator answers ncclInProgress while NCCL finishes a call's host work on its own
  // thread (initialisation, connecting to the peers on first use); no other NCCL call may come before it
  // is done. Polls until then: throws Error, NCCL aborted, when it failed or took longer than the timeout.
  // nccl_mutex_ held.
  void settle(ncclResult_t result, const char* what, double started_s) {
    while (result == ncclInProgress) {
      throw_if_failed();  // the watchdog gave up on an earlier collective: it aborts NCCL once this lock is free
      if (steady_now_s() - started_s > timeout_s_) {
        fail_locked(std::string("NCCL ") + what + " did not finish within " + seconds_text(timeout_s_) +
                    " s (a peer rank died or hangs; --collective-timeout sets the limit); NCCL aborted");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      const ncclResult_t status = ncclCommGetAsyncError(comm_, &result);
      if (status != ncclSuccess) result = status;
    }
    if (result != ncclSuccess) fail_locked(std::string("NCCL ") + what + " failed: " + ncclGetErrorString(result));
  }

  // Clean end: every rank finished the same collectives. Finalize flushes NCCL's outstanding work (polled,
  // bounded by the timeout like every other wait); destroy then only frees this rank's resources.
  // nccl_mutex_ held.
  void finalize_and_destroy() noexcept {
    const double start = steady_now_s();
    ncclResult_t result = ncclCommFinalize(comm_);
    while (result == ncclInProgress && steady_now_s() - start <= timeout_s_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (ncclCommGetAsyncError(comm_, &result) != ncclSuccess) result = ncclInternalError;
    }
    if (result == ncclSuccess) {
      ncclCommDestroy(comm_);
      comm_ = nullptr;
    } else {
      abort_locked();
    }
  }

  void throw_if_failed() const {
    if (failed_.load()) BERTRAIN_FAIL(where_ << ": " << failure());
  }
  // nccl_mutex_ held.
  void throw_if_failed_locked() const {
    throw_if_failed();
    BERTRAIN_CHECK(comm_ != nullptr, where_ << ": the NCCL communicator was aborted earlier");
  }
  // Remembers the first failure (the one worth reporting) and returns it.
  std::string record_failure(const std::string& message) {
    std::lock_guard<std::mutex> state(state_mutex_);
    if (!failed_.load()) {
      failure_ = message;
      failed_.store(true);
    }
    return failure_;
  }
  std::string failure() const {
    std::lock_guard<std::mutex> state(state_mutex_);
    return failure_;
  }
  // Error paths never wait for NCCL: the communicator goes to a detached thread that aborts it. Abort first
  // raises NCCL's abort flag, so its kernels quit at once and nothing queued behind them waits any longer; the
  // rest (freeing, joining NCCL's threads, waiting for its streams) may take long or, with some NCCL versions,
  // hang, and the job must end regardless: it ends through the host communicator, which takes that thread
  // down with the process. nccl_mutex_ held.
  void abort_locked() noexcept {
    if (comm_ == nullptr) return;
    const ncclComm_t doomed = comm_;
    comm_ = nullptr;
    const int device = device_;
    try {
      std::thread([doomed, device] {
        cudaSetDevice(device);
        ncclCommAbort(doomed);
      }).detach();
    } catch (...) {  // no thread to be had
      ncclCommAbort(doomed);
    }
  }
  // nccl_mutex_ held.
  [[noreturn]] void fail_locked(const std::string& message) {
    const std::string first = record_failure(message);
    abort_locked();
    BERTRAIN_FAIL(where_ << ": " << first);
  }

  // The watchdog thread. It needs no host synchronisation from the training step: the step only records an
  // event after each collective (allreduce), and this thread polls those events. The host thread may be blocked
  // anywhere when a collective hangs (a kernel launch or a copy behind it, not only wait()), so only another
  // thread can notice in time.
  void watch(double created_s) {
    cudaSetDevice(device_);  // the events belong to this device; a new thread starts on device 0
    const std::chrono::duration<double> period = watchdog_period(timeout_s_);
    OwnAbsence own_absence(period, created_s);
    std::unique_lock<std::mutex> state(state_mutex_);
    // Each look costs one cudaEventQuery per finished collective plus one for the oldest outstanding one.
    while (!stop_cv_.wait_for(state, period, [this] { return stop_; })) {
      state.unlock();
      if (const double absent_s = own_absence.at_look(steady_now_s()); absent_s > 0) watch_.postpone(absent_s);
      const std::string problem = inspect();
      if (!problem.empty()) {
        end_job(problem);
        return;
      }
      state.lock();
    }
  }

  // One look: a collective outstanding for longer than the timeout, or an asynchronous NCCL error (a peer
  // that exited, a network failure). Returns what is wrong, or "".
  std::string inspect() {
    if (failed_.load()) return {};  // the host thread found it first and is on its error path
    const double age = watch_.oldest_outstanding_s(steady_now_s(), [this](std::size_t slot) {
      // Any answer but "not ready" counts as finished: a CUDA error is the host thread's to report.
      return cudaEventQuery(events_[slot]) != cudaErrorNotReady;
    });
    if (age > timeout_s_) {
      return "NCCL allreduce did not finish within " + seconds_text(timeout_s_) +
             " s (a peer rank died or hangs; --collective-timeout sets the limit)";
    }
    // NCCL calls are not thread-safe: look only while the host thread is outside NCCL.
    std::unique_lock<std::timed_mutex> lock(nccl_mutex_, std::try_to_lock);
    if (!lock.owns_lock() || comm_ == nullptr) return {};
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress) {
      return std::string("NCCL collective failed: ") + ncclGetErrorString(async);
    }
    return {};
  }

  // Ends the job after `problem`: aborts NCCL so that the host thread gets going again and ends the job on
  // its usual error path (Error → MPI_Abort with one line naming host and rank); if it has not reached this
  // communicator's destructor within kGrace (stuck inside an NCCL call, so NCCL could not even be aborted, or
  // in a wait that aborting NCCL does not end), ends the job from here with the same line.
  void end_job(const std::string& problem) {
    const std::string first = record_failure(problem);
    if (nccl_mutex_.try_lock_for(kLockWait)) {
      abort_locked();
      nccl_mutex_.unlock();
    }
    std::unique_lock<std::mutex> state(state_mutex_);
    if (stop_cv_.wait_for(state, kGrace, [this] { return stop_; })) return;
    state.unlock();
    host_.abort(1, "bertrain: error: " + where_ + ": " + first);
  }

  Communicator& host_;
  const std::string where_;
  const int device_;
  const double timeout_s_;
  std::timed_mutex nccl_mutex_;      // held by whichever thread calls NCCL
  ncclComm_t comm_ = nullptr;        // guarded by nccl_mutex_; null once aborted
  std::atomic<bool> failed_{false};  // set once, with failure_
  mutable std::mutex state_mutex_;   // guards failure_ and stop_
  std::string failure_;
  bool stop_ = false;
  std::condition_variable stop_cv_;
  CollectiveWatch watch_;
  EventRing events_;
  std::thread watchdog_;  // last: started when everything it reads exists
};

}  // namespace

std::unique_ptr<DeviceCommunicator> make_nccl_communicator(Communicator& host, int device, double timeout_s) {
  return std::make_unique<Nccl>(host, device, timeout_s);
}

#else

std::unique_ptr<DeviceCommunicator> make_nccl_communicator(Communicator& host, int, double) {
  BERTRAIN_FAIL(host.where() << ": --gpu-collectives nccl: this build has no NCCL (install NCCL and configure with "
                                "-DBERTRAIN_NCCL=ON), or sum through host memory with --gpu-collectives mpi");
}

#endif

GpuCollectives parse_gpu_collectives(const std::string& name) {
  if (name == "auto") return GpuCollectives::kAuto;
  if (name == "nccl") return GpuCollectives::kNccl;
  if (name == "mpi") return GpuCollectives::kMpi;
  BERTRAIN_FAIL("--gpu-collectives must be auto, nccl or mpi, got '" << name << "'");
}

const char* gpu_collectives_name(GpuCollectives kind) {
  switch (kind) {
    case GpuCollectives::kAuto: return "auto";
    case GpuCollectives::kNccl: return "nccl";
    case GpuCollectives::kMpi: return "mpi";
  }
  return "?";
}

GpuCollectives agree_gpu_collectives(GpuCollectives requested, Communicator& host, int visible_devices) {
  // Every rank takes part in the vote, whatever it asked for, so that no rank waits in it alone.
  const bool gpu_each = host.all_true(host.info().local_size <= visible_devices);
  const bool nccl = BERTRAIN_HAS_NCCL != 0;
  if (requested == GpuCollectives::kNccl) {
    BERTRAIN_CHECK(nccl, host.where() << ": --gpu-collectives nccl: this build has no NCCL (configure with "
                                         "-DBERTRAIN_NCCL=ON), or use --gpu-collectives mpi");
    BERTRAIN_CHECK(gpu_each, host.where() << ": --gpu-collectives nccl needs a GPU per rank, and some host runs more "
                                             "ranks than it has GPUs (this one: "
                                          << host.info().local_size << " rank(s), " << visible_devices
                                          << " GPU(s)); use --gpu-collectives mpi (or auto) to share GPUs");
    return GpuCollectives::kNccl;
  }
  if (requested == GpuCollectives::kMpi) return GpuCollectives::kMpi;
  return nccl && gpu_each ? GpuCollectives::kNccl : GpuCollectives::kMpi;
}

std::unique_ptr<DeviceCommunicator> make_device_communicator(GpuCollectives kind, Communicator& host, int device,
                                                             double timeout_s, std::size_t max_elements) {
  BERTRAIN_CHECK(kind != GpuCollectives::kAuto, "make_device_communicator: agree_gpu_collectives decides auto first");
  if (kind == GpuCollectives::kNccl) return make_nccl_communicator(host, device, timeout_s);
  return make_mpi_staged_communicator(host, max_elements);
}

}  // namespace bertrain

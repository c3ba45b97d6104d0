// `bertrain bench allreduce`: bandwidth of the gradient allreduce across the ranks of an mpirun / srun
// job, as nccl-tests reports it: algbw = bytes / time, busbw = algbw · 2(n-1)/n (the traffic each link
// carries in a ring allreduce, comparable across rank counts). Every result is verified. --device cuda
// reduces GPU buffers through the device communicator data-parallel GPU training uses (--gpu-collectives:
// NCCL, one GPU per local rank, or MPI through pinned host memory).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "core/build_config.h"
#include "core/build_info.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "dist/device_communicator.h"
#if BERTRAIN_HAS_CUDA
#include "core/cuda/gpu_context.h"
#endif
#include "tools/args.h"
#include "tools/commands.h"

namespace bertrain {

namespace {

// One buffer to reduce: the host vector itself (MPI), or a device copy of it reduced with NCCL.
class AllreduceTarget {
 public:
  virtual ~AllreduceTarget() = default;
  // Reduces host[0, count) across ranks; the time measured covers only the collective.
  virtual double reduce(std::vector<float>& host, std::size_t count) = 0;
};

double seconds_of(const std::chrono::steady_clock::time_point& start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

class HostTarget final : public AllreduceTarget {
 public:
  explicit HostTarget(Communicator& comm) : comm_(comm) {}
  double reduce(std::vector<float>& host, std::size_t count) override {
    comm_.all_true(true);  // start together
    const auto start = std::chrono::steady_clock::now();
    comm_.allreduce_sum(host.data(), count);
    return seconds_of(start);
  }

 private:
  Communicator& comm_;
};

#if BERTRAIN_HAS_CUDA
class DeviceTarget final : public AllreduceTarget {
 public:
  DeviceTarget(Communicator& comm, GpuCollectives kind, std::size_t max_count, double timeout_s)
      : comm_(comm),
        context_(comm.info().local_rank % cuda_device_count(), 0),
        buffer_(max_count),
        device_comm_(make_device_communicator(kind, comm, context_.device(), timeout_s, max_count)) {}
  double reduce(std::vector<float>& host, std::size_t count) override {
    buffer_.upload(host.data(), count);
    comm_.all_true(true);
    const auto start = std::chrono::steady_clock::now();
    device_comm_->allreduce_sum(buffer_.data(), count, context_.stream());
    context_.synchronize();
    const double seconds = seconds_of(start);
    const std::vector<float> result = buffer_.download(count);
    std::copy(result.begin(), result.end(), host.begin());
    return seconds;
  }

 private:
  Communicator& comm_;
  GpuContext context_;
  DeviceBuffer<float> buffer_;
  std::unique_ptr<DeviceCommunicator> device_comm_;
};
#endif

}  // namespace

int run_bench_allreduce(const std::vector<std::string>& args) {
  ArgParser p("bench allreduce",
              "Times an in-place float32 sum-allreduce over all ranks for sizes doubling from --min-bytes to\n"
              "--max-bytes (default: BERT-base's gradient, 110 M parameters), verifies every result, and prints\n"
              "one line per size with algbw and busbw (GB/s) from rank 0. Run it under mpirun or srun.");
  p.option("min-bytes", "1024", "smallest message");
  p.option("max-bytes", "440000000", "largest message (BERT-base gradient: 110 M float32)");
  p.option("iters", "10", "timed repetitions per size (the median is reported)");
  p.option("warmup", "2", "untimed repetitions per size");
  p.option("device", "cpu", "cpu: MPI on host memory; cuda: GPU memory, summed as --gpu-collectives says").value_name("cpu|cuda");
  p.option("gpu-collectives", "auto", "with --device cuda: nccl (one GPU per local rank), mpi (through pinned host "
                                      "memory; ranks may share a GPU) or auto (as train)").value_name("auto|nccl|mpi");
  p.flag("json", "one JSON object per size instead of the table");
  if (!p.parse(args)) return 0;
  const double min_bytes = p.get_double("min-bytes"), max_bytes = p.get_double("max-bytes");
  const int iters = p.get_int("iters"), warmup = p.get_int("warmup");
  if (!(min_bytes >= 4 && max_bytes >= min_bytes) || iters < 1 || warmup < 0) {
    throw UsageError("bench allreduce: need 4 <= --min-bytes <= --max-bytes, --iters >= 1, --warmup >= 0");
  }
  const std::string device = p.get("device");
  if (device != "cpu" && device != "cuda") throw UsageError("bench allreduce: --device must be cpu or cuda");
  const GpuCollectives requested = input_step([&] { return parse_gpu_collectives(p.get("gpu-collectives")); });
  const std::unique_ptr<Communicator> comm = make_communicator(detect_launch());
  const int n = comm->size(), rank = comm->rank();
  const bool json = p.get_flag("json");
  const std::size_t max_count = static_cast<std::size_t>(max_bytes / 4);
  std::unique_ptr<AllreduceTarget> target;
  GpuCollectives kind = GpuCollectives::kAuto;
  if (device == "cpu") {
    target = std::make_unique<HostTarget>(*comm);
  } else {
#if BERTRAIN_HAS_CUDA
    std::string why;
    // As train --device cuda: what was asked for does not fit this machine, and no retry changes that (exit 2).
    if (cuda_device_count(&why) == 0) throw UsageError("bench allreduce --device cuda: " + why);
    kind = agree_gpu_collectives(requested, *comm, cuda_device_count());
    target = std::make_unique<DeviceTarget>(*comm, kind, max_count, 300.0);
#else
    throw UsageError("bench allreduce --device cuda: this build has no CUDA support");
#endif
  }
  if (rank == 0 && !json) {
    // One process has nothing to sum over: its numbers are a copy's, not a network's.
    if (n == 1) std::printf("bench allreduce: one process (no launcher): start it with mpirun -np N for a real one\n");
    std::printf("bench allreduce: %d rank(s), %s, float32 sum, in place; busbw = algbw * 2(n-1)/n\n", n,
                device == "cpu"                 ? "MPI, host memory"
                : kind == GpuCollectives::kNccl ? "NCCL, GPU memory"
                                                : "GPU memory, MPI through pinned host memory");
    std::printf("%14s %12s %12s %12s %8s\n", "bytes", "time_us", "algbw_GB/s", "busbw_GB/s", "check");
  }
  std::vector<float> buffer(max_count);
  std::vector<double> times;
  for (double bytes = min_bytes; bytes <= max_bytes * 1.0000001; bytes *= 2) {
    const std::size_t count = static_cast<std::size_t>(bytes / 4);
    times.clear();
    bool correct = true;
    for (int it = 0; it < warmup + iters; ++it) {
      // Small integers sum exactly in float32, so the check is exact: element i ends as Σ_r (r + 1 + i % 7).
      for (std::size_t i = 0; i < count; ++i) buffer[i] = static_cast<float>(rank + 1 + static_cast<int>(i % 7));
      const double seconds = target->reduce(buffer, count);
      if (it >= warmup) times.push_back(seconds);
      for (std::size_t i = 0; i < count; ++i) {
        const float expected = static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(i % 7));
        if (buffer[i] != expected) correct = false;
      }
    }
    correct = comm->all_true(correct);
    // The slowest rank's time decides: take the maximum median over ranks.
    std::sort(times.begin(), times.end());
    double median = times[times.size() / 2];
    std::vector<double> all(static_cast<std::size_t>(n), 0.0);
    all[static_cast<std::size_t>(rank)] = median;
    comm->allreduce_sum(all.data(), all.size());
    median = *std::max_element(all.begin(), all.end());
    const double real_bytes = static_cast<double>(count) * 4;
    const double algbw = real_bytes / median / 1e9, busbw = algbw * (n > 1 ? 2.0 * (n - 1) / n : 0.0);
    if (rank == 0) {
      if (json) {
        std::printf("{\"bench\": \"allreduce\", \"ranks\": %d, \"bytes\": %.0f, \"time_us\": %.2f, \"algbw_gbps\": %.4f, "
                    "\"busbw_gbps\": %.4f, \"correct\": %s}\n",
                    n, real_bytes, median * 1e6, algbw, busbw, correct ? "true" : "false");
      } else {
        std::printf("%14.0f %12.2f %12.4f %12.4f %8s\n", real_bytes, median * 1e6, algbw, busbw, correct ? "ok" : "WRONG");
      }
      std::fflush(stdout);
    }
    BERTRAIN_CHECK(correct, "bench allreduce: wrong sum at " << real_bytes << " bytes");
  }
  return 0;
}

}  // namespace bertrain

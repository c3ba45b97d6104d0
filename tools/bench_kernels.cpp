// `bertrain bench kernels`: the CUDA kernels of one BERT training step at BERT-base shapes (by default), each
// FIRST checked against its CPU twin (kernels/cpu) and only THEN timed — a kernel that disagrees with its twin
// is reported with its worst element and never timed (exit 1), as llm.c's dev/cuda benchmarks do. Timing:
// warm-up launches, then --repeat launches, each after an L2 flush and between two CUDA events; the median is
// reported with the throughput it implies (GB/s of the bytes the op must move, TFLOP/s for GEMMs and
// attention) and that throughput's share of the device's peak. Every byte and flop formula is stated next to
// its kernel below and in docs/PERFORMANCE.md ("Kernel profiling"), which also shows how to profile one kernel
// under Nsight Compute (--only).
//
// Compiled only when CUDA is enabled; without it tools/bench_step.cpp defines run_bench_kernels as a stub.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/build_info.h"
#include "engine/cpu_threads.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/gpu_context.h"
#include "engine/error.h"
#include "kernels/activation.h"
#include "kernels/adam.h"
#include "kernels/attention.h"
#include "kernels/bf16.h"
#include "kernels/dropout.h"
#include "kernels/embedding.h"
#include "kernels/layernorm.h"
#include "kernels/linear.h"
#include "kernels/loss.h"
#include "kernels/tensor_ops.h"
#include "model/bert_config.h"
#include "model/bert_params.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "engine/gpu_peaks.h"

namespace bertrain {

namespace {

// CPU work allowed for checking one kernel, in flops. The CPU twins of the big GEMMs and of attention at
// BERT-base size take tens of GFLOP, so those kernels run at full size on the GPU and only their first rows
// (sequences) are compared with the twin run on those rows; 4 GFLOP stays under ~2 s of Eigen on a few cores.
constexpr double kVerifyFlops = 4e9;
// cuBLAS workspace set once (as the trainer does), so that no GEMM allocates while it is timed.
constexpr std::size_t kCublasWorkspaceBytes = 32u << 20;
constexpr float kDropout = 0.1f;  // BERT's hidden and attention dropout
constexpr float kLayerNormEps = 1e-12f;

struct Shape {
  int batch = 256, seq = 128, hidden = 768, heads = 12, intermediate = 3072, vocab = 31090, classes = 4;
  int layers = 12;      // only sizes the flat parameter buffer (Adam, casts, sum of squares)
  int max_pos = 512;    // BERT's max_position_embeddings (raised to S when S is larger)
  int type_vocab = 2;
  int tokens() const { return batch * seq; }
  int head_dim() const { return hidden / heads; }
};

struct Options {
  Shape shape;
  bool bf16 = true;
  int warmup = 3, repeat = 20, device = 0;
  bool json = false;
  std::string only;
  double peak_tflops = 0, peak_gbps = 0;  // overrides; 0 = from the device
  uint64_t seed = 1;
};

std::size_t sz(long long v) { return static_cast<std::size_t>(v); }

// ---- Host data --------------------------------------------------------------------------------------------

uint64_t mix64(uint64_t x) {  // splitmix64's finaliser: a counter-based generator, so filling is parallel
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// n uniform floats in [lo, hi), a pure function of (stream, index).
std::vector<float> random_floats(std::size_t n, uint64_t stream, float lo, float hi) {
  std::vector<float> v(n);
  const long long count = static_cast<long long>(n);
  const uint64_t base = mix64(stream) * 0x2545F4914F6CDD1Dull;
#pragma omp parallel for schedule(static)
  for (long long i = 0; i < count; ++i) {
    const uint64_t bits = mix64(base + static_cast<uint64_t>(i));
    v[sz(i)] = lo + (hi - lo) * static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
  }
  return v;
}

float round_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }

// Rounds host values to what T holds, so the fp32 CPU twin sees exactly the device's inputs (or outputs).
template <typename T>
void make_representable(std::vector<float>& v) {
  if constexpr (std::is_same_v<T, bf16>) {
    const long long count = static_cast<long long>(v.size());
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < count; ++i) v[sz(i)] = round_bf16(v[sz(i)]);
  }
}

// A batch as the trainer sees one: sample b has a random length in [ceil(S/2), S], random ids there, id 0
// and mask 0 in the padding.
struct HostBatch {
  std::vector<int32_t> ids, mask;
};

HostBatch make_batch(const Shape& s, uint64_t seed) {
  HostBatch hb;
  hb.ids.assign(sz(s.tokens()), 0);
  hb.mask.assign(sz(s.tokens()), 0);
  const std::vector<float> u = random_floats(sz(s.tokens()) + sz(s.batch), seed ^ 0xba7c4ull, 0.0f, 1.0f);
  const int shortest = (s.seq + 1) / 2;
  for (int b = 0; b < s.batch; ++b) {
    const int length = std::min(s.seq, shortest + static_cast<int>(u[sz(s.tokens()) + sz(b)] * (s.seq - shortest + 1)));
    for (int t = 0; t < length; ++t) {
      const std::size_t i = sz(b) * sz(s.seq) + sz(t);
      hb.ids[i] = std::min(s.vocab - 1, static_cast<int>(u[i] * static_cast<float>(s.vocab)));
      hb.mask[i] = 1;
    }
  }
  return hb;
}

// ---- Verification -----------------------------------------------------------------------------------------

// |got - ref| <= atol + rtol·|ref| with atol = atol_of_max · max|ref|: scaled by the tensor's largest value, so
// one tolerance serves outputs of any magnitude. fp32: a few hundred ulps of room for another summation order
// (GEMMs over K = 3072, column sums over T = 32768 rows). bf16: every bf16 store rounds by up to 2^-9 relative
// and attention stores intermediates (scores, probabilities) in bf16 too, so 1e-2 — loose enough for rounding,
// far too tight for a wrong index, mask or formula (those err by the size of the values themselves). This is a
// gate against timing a wrong kernel; the tight per-kernel checks are the GoogleTest suites in tests/cuda.
struct Tolerance {
  double atol_of_max, rtol;
};
constexpr Tolerance kFp32Tolerance{1e-5, 1e-4};
constexpr Tolerance kBf16Tolerance{1e-2, 1e-2};
constexpr Tolerance kExact{0, 0};

class VerificationFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Checker {
 public:
  Checker(std::string kernel, std::string shape, Tolerance tolerance)
      : kernel_(std::move(kernel)), shape_(std::move(shape)), tolerance_(tolerance) {}

  void compare(const std::string& what, const std::vector<float>& got, const std::vector<float>& ref) {
    compare(what, got, ref, tolerance_);
  }
  // Compares the first ref.size() elements of `got`; throws VerificationFailure naming the worst element.
  void compare(const std::string& what, const std::vector<float>& got, const std::vector<float>& ref, Tolerance tol) {
    BERTRAIN_CHECK(got.size() >= ref.size(), "bench kernels: " << what << ": " << got.size()
                                                               << " device values for " << ref.size() << " references");
    double max_ref = 0;
    for (float r : ref) max_ref = std::max(max_ref, static_cast<double>(std::fabs(r)));
    const double atol = tol.atol_of_max * max_ref;
    double worst = -1;
    std::size_t worst_i = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      const double err = std::fabs(static_cast<double>(got[i]) - static_cast<double>(ref[i]));
      const double bound = atol + tol.rtol * std::fabs(static_cast<double>(ref[i]));
      // NaN anywhere (got or ref) counts as infinitely wrong.
      const double ratio = std::isnan(err) ? std::numeric_limits<double>::infinity()
                                           : (bound > 0 ? err / bound : (err == 0 ? 0.0 : std::numeric_limits<double>::infinity()));
      if (ratio > worst) {
        worst = ratio;
        worst_i = i;
      }
    }
    if (ref.empty()) return;
    worst_ratio_ = std::max(worst_ratio_, worst);
    if (!(worst <= 1.0)) {
      const double r = ref[worst_i], g = got[worst_i];
      std::ostringstream os;
      os.precision(9);
      os << kernel_ << " (" << shape_ << ") FAILED verification against its CPU twin: " << what << "[" << worst_i
         << "] = " << g << ", CPU " << r << ", |difference| " << std::fabs(g - r) << " > tolerance "
         << atol + tol.rtol * std::fabs(r) << " (" << tol.atol_of_max << " x max|ref| " << max_ref << " + "
         << tol.rtol << " x |ref|); " << ref.size() << " elements compared. Not timed.";
      throw VerificationFailure(os.str());
    }
  }

  std::string coverage = "full";  // what was compared: "full", or "rows 847/32768", ...
  double worst_ratio() const { return worst_ratio_; }

 private:
  std::string kernel_, shape_;
  Tolerance tolerance_;
  double worst_ratio_ = 0;
};

// How many of `total` rows the CPU twin can check within kVerifyFlops at `flops_per_row` each.
int rows_to_verify(int total, double flops_per_row) {
  const double rows = std::floor(kVerifyFlops / std::max(flops_per_row, 1.0));
  return static_cast<int>(std::clamp(rows, 1.0, static_cast<double>(total)));
}

std::string coverage(const char* what, int checked, int total) {
  return checked == total ? std::string("full") : std::string(what) + " " + std::to_string(checked) + "/" + std::to_string(total);
}

// ---- Device peaks -----------------------------------------------------------------------------------------

struct DevicePeaks {
  std::string name;
  int major = 0, minor = 0, sms = 0;
  std::size_t l2_bytes = 0;
  double gbps = 0, tflops = 0;  // 0: unknown ("n/a")
  std::string gbps_source, tflops_source, tflops_kind;
};

int device_attribute(cudaDeviceAttr attr, int device) {
  int value = 0;
  if (cudaDeviceGetAttribute(&value, attr, device) != cudaSuccess) {
    cudaGetLastError();  // an attribute this runtime lacks is "unknown", not an error
    return 0;
  }
  return value;
}

DevicePeaks query_peaks(int device, bool bf16_compute, double tflops_override, double gbps_override) {
  DevicePeaks p;
  cudaDeviceProp prop{};
  BERTRAIN_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  p.name = prop.name;
  p.major = prop.major;
  p.minor = prop.minor;
  p.sms = prop.multiProcessorCount;
  p.l2_bytes = static_cast<std::size_t>(std::max(prop.l2CacheSize, 0));
  // CUDA 13's cudaDeviceProp has no memoryClockRate / clockRate any more: ask the attributes.
  if (gbps_override > 0) {
    p.gbps = gbps_override;
    p.gbps_source = "--peak-gbps";
  } else {
    p.gbps = memory_bandwidth_gbps(device_attribute(cudaDevAttrMemoryClockRate, device),
                                   device_attribute(cudaDevAttrGlobalMemoryBusWidth, device));
    p.gbps_source = p.gbps > 0 ? "2 x memory clock x bus width" : "unknown";
  }
  p.tflops_kind = bf16_compute ? "bf16 tensor-core" : "fp32 (no TF32)";
  DatasheetPeak sheet;
  if (tflops_override > 0) {
    p.tflops = tflops_override;
    p.tflops_source = "--peak-tflops";
  } else if (datasheet_peak(p.name, &sheet)) {
    p.tflops = bf16_compute ? sheet.bf16_tensor_tflops : sheet.fp32_tflops;
    p.tflops_source = std::string("datasheet: ") + sheet.board;
  } else if (!bf16_compute) {
    p.tflops = fp32_tflops_from_clock(p.sms, p.major, p.minor, device_attribute(cudaDevAttrClockRate, device));
    p.tflops_source = p.tflops > 0 ? "SMs x FP32 lanes x 2 x clock" : "unknown (use --peak-tflops)";
  } else {
    p.tflops_source = "unknown device (use --peak-tflops)";
  }
  return p;
}

// ---- The runner: arena, timing, reporting -----------------------------------------------------------------

// What one line reports. bytes: what the op must read and write at least (formula at each kernel); flops:
// for GEMMs and attention (0 otherwise), whose %peak is then taken against the TFLOP/s peak.
struct Measure {
  std::string kernel, shape;
  double bytes = 0, flops = 0;
};

class CudaEvents {
 public:
  explicit CudaEvents(std::size_t n) : events_(n, nullptr) {
    for (cudaEvent_t& e : events_) BERTRAIN_CUDA_CHECK(cudaEventCreate(&e));
  }
  ~CudaEvents() {
    for (cudaEvent_t e : events_) {
      if (e != nullptr) cudaEventDestroy(e);
    }
  }
  CudaEvents(const CudaEvents&) = delete;
  CudaEvents& operator=(const CudaEvents&) = delete;
  cudaEvent_t operator[](std::size_t i) const { return events_[i]; }

 private:
  std::vector<cudaEvent_t> events_;
};

// Runs every benchmark twice: a sizing pass (take() only counts bytes; the benchmark returns before touching
// memory) and, after one arena of the largest size any benchmark needs has been allocated, the real pass. So all
// device memory is allocated up front, once, and nothing allocates while kernels are timed.
class Runner {
 public:
  Runner(const Options& options, const GpuContext& context, DevicePeaks peaks)
      : o_(options),
        context_(context),
        peaks_(std::move(peaks)),
        flush_(std::max<std::size_t>(2 * peaks_.l2_bytes, 1)),
        starts_(sz(options.repeat)),
        stops_(sz(options.repeat)) {}

  const Options& options() const { return o_; }
  cudaStream_t stream() const { return context_.stream(); }
  const GpuHandles& handles() const { return context_.handles(); }
  bool sizing() const { return sizing_; }
  bool any_selected() const { return any_selected_; }
  Tolerance tolerance() const { return o_.bf16 ? kBf16Tolerance : kFp32Tolerance; }

  // Starts the benchmark `kernel` (resetting the arena); false when --only excludes it.
  bool select(const std::string& kernel) {
    if (!o_.only.empty() && kernel.find(o_.only) == std::string::npos) return false;
    any_selected_ = true;
    offset_ = 0;
    return true;
  }

  // n elements of U from the arena, 256-byte aligned; nullptr in the sizing pass.
  template <typename U>
  U* take(std::size_t n) {
    offset_ = (offset_ + 255) / 256 * 256;
    const std::size_t begin = offset_;
    offset_ += std::max<std::size_t>(n, 1) * sizeof(U);
    if (sizing_) {
      needed_ = std::max(needed_, offset_);
      return nullptr;
    }
    BERTRAIN_CHECK(offset_ <= arena_.size(), "bench kernels: arena of " << arena_.size() << " bytes overrun (" << offset_
                                                                          << "): the sizing pass missed a buffer");
    return reinterpret_cast<U*>(arena_.data() + begin);
  }

  // Ends the sizing pass: one allocation for every benchmark's buffers.
  void allocate() {
    sizing_ = false;
    arena_ = DeviceBuffer<unsigned char>(needed_);
  }
  std::size_t arena_bytes() const { return needed_; }

  // Host random data representable in T; `stream` tells tensors apart.
  template <typename T>
  std::vector<float> random(std::size_t n, uint64_t stream, float lo = -1.0f, float hi = 1.0f) const {
    std::vector<float> v = random_floats(n, o_.seed * 0x10000ull + stream, lo, hi);
    make_representable<T>(v);
    return v;
  }

  // Copies on the benchmark stream and waits: the stream is non-blocking, so plain cudaMemcpy (legacy default
  // stream) would not be ordered with the kernels.
  template <typename U>
  void copy_in(U* device, const std::vector<U>& host) const {
    BERTRAIN_CUDA_CHECK(cudaMemcpyAsync(device, host.data(), host.size() * sizeof(U), cudaMemcpyHostToDevice, stream()));
    BERTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream()));
  }
  template <typename T>
  void upload(T* device, const std::vector<float>& host) const {
    if constexpr (std::is_same_v<T, float>) {
      copy_in(device, host);
    } else {
      std::vector<bf16> converted(host.size());
      const long long count = static_cast<long long>(host.size());
#pragma omp parallel for schedule(static)
      for (long long i = 0; i < count; ++i) converted[sz(i)] = float_to_bf16(host[sz(i)]);
      copy_in(device, converted);
    }
  }
  template <typename T>
  std::vector<float> download(const T* device, std::size_t n) const {
    std::vector<T> raw(n);
    BERTRAIN_CUDA_CHECK(cudaMemcpyAsync(raw.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost, stream()));
    BERTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream()));
    if constexpr (std::is_same_v<T, float>) {
      return raw;
    } else {
      std::vector<float> out(n);
      for (std::size_t i = 0; i < n; ++i) out[i] = bf16_to_float(raw[i]);
      return out;
    }
  }

  // Runs `launch` once, checks its results with `verify` (which throws VerificationFailure on a mismatch), then
  // times it and prints one line.
  void measure(const Measure& m, const std::function<void()>& launch, const std::function<void(Checker&)>& verify,
               Tolerance tolerance) {
    launch();
    BERTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream()));
    Checker checker(m.kernel, m.shape, tolerance);
    verify(checker);

    for (int i = 0; i < o_.warmup; ++i) launch();
    // All runs are queued before waiting: the flush before each run gives the host time to enqueue the next
    // launch, so host launch latency stays out of the events.
    for (int i = 0; i < o_.repeat; ++i) {
      BERTRAIN_CUDA_CHECK(cudaMemsetAsync(flush_.data(), i & 0xff, flush_.bytes(), stream()));
      BERTRAIN_CUDA_CHECK(cudaEventRecord(starts_[sz(i)], stream()));
      launch();
      BERTRAIN_CUDA_CHECK(cudaEventRecord(stops_[sz(i)], stream()));
    }
    BERTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream()));
    std::vector<double> us(sz(o_.repeat));
    for (int i = 0; i < o_.repeat; ++i) {
      float ms = 0;
      BERTRAIN_CUDA_CHECK(cudaEventElapsedTime(&ms, starts_[sz(i)], stops_[sz(i)]));
      us[sz(i)] = 1e3 * static_cast<double>(ms);
    }
    report(m, us, checker);
  }
  void measure(const Measure& m, const std::function<void()>& launch, const std::function<void(Checker&)>& verify) {
    measure(m, launch, verify, tolerance());
  }

  void print_header(std::size_t parameters) const {
    const Shape& s = o_.shape;
    if (o_.json) {
      nlohmann::json j;
      j["bench"] = "kernels";
      j["record"] = "device";
      j["device"] = peaks_.name;
      j["compute_capability"] = std::to_string(peaks_.major) + "." + std::to_string(peaks_.minor);
      j["sms"] = peaks_.sms;
      j["l2_bytes"] = peaks_.l2_bytes;
      j["peak_gbps"] = peaks_.gbps > 0 ? nlohmann::json(peaks_.gbps) : nlohmann::json(nullptr);
      j["peak_gbps_source"] = peaks_.gbps_source;
      j["peak_tflops"] = peaks_.tflops > 0 ? nlohmann::json(peaks_.tflops) : nlohmann::json(nullptr);
      j["peak_tflops_kind"] = peaks_.tflops_kind;
      j["peak_tflops_source"] = peaks_.tflops_source;
      j["precision"] = o_.bf16 ? "bf16" : "fp32";
      j["batch"] = s.batch;
      j["seq"] = s.seq;
      j["hidden"] = s.hidden;
      j["heads"] = s.heads;
      j["intermediate"] = s.intermediate;
      j["vocab"] = s.vocab;
      j["classes"] = s.classes;
      j["layers"] = s.layers;
      j["parameters"] = parameters;
      j["repeat"] = o_.repeat;
      j["warmup"] = o_.warmup;
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("bench kernels: %s (compute capability %d.%d, %d SMs, L2 %.1f MiB), precision %s\n",
                  peaks_.name.c_str(), peaks_.major, peaks_.minor, peaks_.sms,
                  static_cast<double>(peaks_.l2_bytes) / (1 << 20), o_.bf16 ? "bf16" : "fp32");
      std::printf("shapes: B=%d S=%d T=%d H=%d NH=%d HD=%d I=%d V=%d C=%d; %zu parameters (%d layers)\n", s.batch,
                  s.seq, s.tokens(), s.hidden, s.heads, s.head_dim(), s.intermediate, s.vocab, s.classes, parameters,
                  s.layers);
      std::printf("peaks: memory %s (%s); %s %s (%s)\n", number_or_na(peaks_.gbps, "GB/s").c_str(),
                  peaks_.gbps_source.c_str(), peaks_.tflops_kind.c_str(), number_or_na(peaks_.tflops, "TFLOP/s").c_str(),
                  peaks_.tflops_source.c_str());
      std::printf("timing: median of %d runs after %d warm-up runs; L2 flushed (%.0f MiB memset) before each run\n",
                  o_.repeat, o_.warmup, static_cast<double>(flush_.bytes()) / (1 << 20));
      std::printf("%%peak: TFLOP/s against the compute peak for GEMMs and attention, GB/s against the memory peak "
                  "for the rest\n\n");
      std::printf("%-26s %-34s %11s %9s %8s %6s  %s\n", "kernel", "shape", "median_us", "GB/s", "TFLOP/s", "%peak",
                  "verified");
    }
    std::fflush(stdout);
  }

 private:
  static std::string number_or_na(double v, const char* unit) {
    if (!(v > 0)) return "n/a";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f %s", v, unit);
    return buf;
  }

  void report(const Measure& m, std::vector<double> us, const Checker& checker) const {
    std::sort(us.begin(), us.end());
    const std::size_t n = us.size();
    const double median = n % 2 == 1 ? us[n / 2] : 0.5 * (us[n / 2 - 1] + us[n / 2]);
    const double seconds = median * 1e-6;
    const double gbps = m.bytes > 0 && seconds > 0 ? m.bytes / seconds / 1e9 : 0;
    const double tflops = m.flops > 0 && seconds > 0 ? m.flops / seconds / 1e12 : 0;
    const bool compute = m.flops > 0;
    const double peak = compute ? peaks_.tflops : peaks_.gbps;
    const double achieved = compute ? tflops : gbps;
    const double percent = peak > 0 && achieved > 0 ? 100.0 * achieved / peak : 0;
    if (o_.json) {
      nlohmann::json j;
      j["bench"] = "kernels";
      j["record"] = "kernel";
      j["kernel"] = m.kernel;
      j["shape"] = m.shape;
      j["precision"] = o_.bf16 ? "bf16" : "fp32";
      j["median_us"] = median;
      j["min_us"] = us.front();
      j["max_us"] = us.back();
      j["repeat"] = o_.repeat;
      j["bytes"] = m.bytes > 0 ? nlohmann::json(m.bytes) : nlohmann::json(nullptr);
      j["gbps"] = gbps > 0 ? nlohmann::json(gbps) : nlohmann::json(nullptr);
      j["flops"] = m.flops > 0 ? nlohmann::json(m.flops) : nlohmann::json(nullptr);
      j["tflops"] = tflops > 0 ? nlohmann::json(tflops) : nlohmann::json(nullptr);
      j["percent_of_peak"] = percent > 0 ? nlohmann::json(percent) : nlohmann::json(nullptr);
      j["peak_kind"] = compute ? "compute" : "memory";
      j["verified"] = checker.coverage;
      j["worst_error_over_tolerance"] = checker.worst_ratio();
      std::printf("%s\n", j.dump().c_str());
    } else {
      char gb[32] = "-", tf[32] = "-", pc[32] = "n/a";
      if (gbps > 0) std::snprintf(gb, sizeof gb, "%.1f", gbps);
      if (tflops > 0) std::snprintf(tf, sizeof tf, "%.2f", tflops);
      if (percent > 0) std::snprintf(pc, sizeof pc, "%.1f", percent);
      std::printf("%-26s %-34s %11.2f %9s %8s %6s  %s\n", m.kernel.c_str(), m.shape.c_str(), median, gb, tf, pc,
                  checker.coverage.c_str());
    }
    std::fflush(stdout);
  }

  const Options& o_;
  const GpuContext& context_;
  DevicePeaks peaks_;
  DeviceBuffer<unsigned char> flush_;
  CudaEvents starts_, stops_;
  DeviceBuffer<unsigned char> arena_;
  bool sizing_ = true, any_selected_ = false;
  std::size_t offset_ = 0, needed_ = 0;
};

// ---- Shape labels -----------------------------------------------------------------------------------------

std::string label(const char* format, long long a, long long b = 0, long long c = 0) {
  char buf[96];
  std::snprintf(buf, sizeof buf, format, a, b, c);
  return buf;
}

template <typename T>
constexpr double elem() {
  return static_cast<double>(sizeof(T));
}

DropoutLayout token_layout(const Shape& s) { return DropoutLayout{0, s.seq, s.max_pos, s.hidden}; }
DropoutLayout attention_layout(const Shape& s) { return DropoutLayout{0, s.seq, s.max_pos, 0}; }
RandomKey dropout_key(const Options& o, uint32_t tensor) { return RandomKey{o.seed, 1, tensor}; }

// ---- The benchmarks, in the order a training step runs them -----------------------------------------------
// Byte formulas use e = sizeof(T) (4 for fp32, 2 for bf16); statistics, parameter gradients, Adam state and
// targets are fp32 (4 bytes) whatever T is.

template <typename T>
void bench_embedding_forward(Runner& r) {
  const Shape& s = r.options().shape;
  if (!r.select("embedding_forward")) return;
  const std::size_t tokens = sz(s.tokens()), th = tokens * sz(s.hidden);
  int32_t* ids = r.take<int32_t>(tokens);
  T* word = r.take<T>(sz(s.vocab) * sz(s.hidden));
  T* pos = r.take<T>(sz(s.max_pos) * sz(s.hidden));
  T* type = r.take<T>(sz(s.type_vocab) * sz(s.hidden));
  T* out = r.take<T>(th);
  if (r.sizing()) return;
  const HostBatch hb = make_batch(s, r.options().seed);
  const std::vector<float> hword = r.random<T>(sz(s.vocab) * sz(s.hidden), 1), hpos = r.random<T>(sz(s.max_pos) * sz(s.hidden), 2),
                           htype = r.random<T>(sz(s.type_vocab) * sz(s.hidden), 3);
  r.copy_in(ids, hb.ids);
  r.upload(word, hword);
  r.upload(pos, hpos);
  r.upload(type, htype);
  // bytes = ids 4·T + word rows T·H·e (one gathered row per token) + position rows S·H·e + type row 0 H·e
  //       + out T·H·e (written).
  Measure m{"embedding_forward", label("T=%lld H=%lld", s.tokens(), s.hidden),
            4.0 * tokens + (2.0 * th + static_cast<double>(s.seq) * s.hidden + s.hidden) * elem<T>()};
  r.measure(m, [&] { embedding_forward_cuda<T>(out, ids, nullptr, word, pos, type, s.batch, s.seq, s.hidden, r.stream()); },
            [&](Checker& c) {
              std::vector<float> ref(th);
              embedding_forward_cpu<float>(ref.data(), hb.ids.data(), nullptr, hword.data(), hpos.data(), htype.data(),
                                           s.batch, s.seq, s.hidden, s.vocab, s.type_vocab);
              make_representable<T>(ref);
              c.compare("out", r.download(out, th), ref);
            });
}

template <typename T>
void bench_layernorm_forward(Runner& r) {
  const Shape& s = r.options().shape;
  if (!r.select("layernorm_forward")) return;
  const int rows = s.tokens(), cols = s.hidden;
  const std::size_t n = sz(rows) * sz(cols);
  T* x = r.take<T>(n);
  T* residual = r.take<T>(n);
  T* gamma = r.take<T>(sz(cols));
  T* beta = r.take<T>(sz(cols));
  T* y = r.take<T>(n);
  float* mean = r.take<float>(sz(rows));
  float* rstd = r.take<float>(sz(rows));
  if (r.sizing()) return;
  const std::vector<float> hx = r.random<T>(n, 10), hres = r.random<T>(n, 11), hg = r.random<T>(sz(cols), 12, 0.5f, 1.5f),
                           hb = r.random<T>(sz(cols), 13);
  r.upload(x, hx);
  r.upload(residual, hres);
  r.upload(gamma, hg);
  r.upload(beta, hb);
  // bytes = x, residual 2·T·H·e + gamma, beta 2·H·e (read) + y T·H·e + mean, rstd 2·4·T (written).
  Measure m{"layernorm_forward", label("T=%lld H=%lld, +residual", rows, cols),
            (3.0 * n + 2.0 * cols) * elem<T>() + 8.0 * rows};
  r.measure(m, [&] { layernorm_forward_cuda<T>(y, mean, rstd, x, residual, gamma, beta, rows, cols, kLayerNormEps, r.stream()); },
            [&](Checker& c) {
              std::vector<float> ry(n), rmean(sz(rows)), rrstd(sz(rows));
              layernorm_forward_cpu<float>(ry.data(), rmean.data(), rrstd.data(), hx.data(), hres.data(), hg.data(),
                                           hb.data(), rows, cols, kLayerNormEps);
              make_representable<T>(ry);
              c.compare("y", r.download(y, n), ry);
              c.compare("mean", r.download(mean, sz(rows)), rmean);
              c.compare("rstd", r.download(rstd, sz(rows)), rrstd);
            });
}

template <typename T>
void bench_dropout(Runner& r, bool forward) {
  const Shape& s = r.options().shape;
  const char* name = forward ? "dropout_forward" : "dropout_backward";
  if (!r.select(name)) return;
  const std::size_t n = sz(s.tokens()) * sz(s.hidden);
  T* x = r.take<T>(n);
  T* y = r.take<T>(n);
  if (r.sizing()) return;
  const std::vector<float> hx = r.random<T>(n, 20);
  r.upload(x, hx);
  const RandomKey key = dropout_key(r.options(), 20);
  const DropoutLayout layout = token_layout(s);
  // bytes = x T·H·e (read) + y T·H·e (written); the mask is regenerated, never stored.
  Measure m{name, label("T=%lld H=%lld, p=0.1", s.tokens(), s.hidden), 2.0 * n * elem<T>()};
  r.measure(m,
            [&] {
              if (forward) dropout_forward_cuda<T>(y, x, n, kDropout, key, layout, r.stream());
              else dropout_backward_cuda<T>(y, x, n, kDropout, key, layout, r.stream());
            },
            [&](Checker& c) {
              std::vector<float> ref(n);
              if (forward) dropout_forward_cpu<float>(ref.data(), hx.data(), n, kDropout, key, layout);
              else dropout_backward_cpu<float>(ref.data(), hx.data(), n, kDropout, key, layout);
              make_representable<T>(ref);
              c.compare("y", r.download(y, n), ref);
            });
}

struct LinearCase {
  int in, out;
  bool bias;
};

// The three GEMM shapes of a BERT layer: Q/K/V and attention output (H -> H, with bias), intermediate
// (H -> I, bias added by bias_activation_forward as in the model) and output (I -> H, with bias).
std::vector<LinearCase> linear_cases(const Shape& s) {
  return {{s.hidden, s.hidden, true}, {s.hidden, s.intermediate, false}, {s.intermediate, s.hidden, true}};
}

template <typename T>
void bench_linear_forward(Runner& r) {
  const Shape& s = r.options().shape;
  for (const LinearCase& lc : linear_cases(s)) {
    if (!r.select("linear_forward")) return;
    const int rows = s.tokens();
    const std::size_t nx = sz(rows) * sz(lc.in), nw = sz(lc.out) * sz(lc.in), ny = sz(rows) * sz(lc.out);
    T* x = r.take<T>(nx);
    T* w = r.take<T>(nw);
    T* b = r.take<T>(sz(lc.out));
    T* y = r.take<T>(ny);
    if (r.sizing()) continue;
    const std::vector<float> hx = r.random<T>(nx, 30), hw = r.random<T>(nw, 31), hb = r.random<T>(sz(lc.out), 32);
    r.upload(x, hx);
    r.upload(w, hw);
    r.upload(b, hb);
    T* bias = lc.bias ? b : nullptr;
    // flops = 2·T·in·out (bias ignored). bytes = x T·in·e + W out·in·e + b out·e (read) + y T·out·e (written).
    Measure m{"linear_forward", label(lc.bias ? "T=%lld: %lld -> %lld" : "T=%lld: %lld -> %lld, no bias", rows, lc.in, lc.out),
              (static_cast<double>(nx) + nw + (lc.bias ? lc.out : 0) + ny) * elem<T>(), 2.0 * rows * lc.in * lc.out};
    r.measure(m, [&] { linear_forward_cuda<T>(r.handles(), y, x, w, bias, rows, lc.in, lc.out); },
              [&](Checker& c) {
                const int checked = rows_to_verify(rows, 2.0 * lc.in * lc.out);
                std::vector<float> ref(sz(checked) * sz(lc.out));
                linear_forward_cpu<float>(ref.data(), hx.data(), hw.data(), lc.bias ? hb.data() : nullptr, checked,
                                          lc.in, lc.out);
                make_representable<T>(ref);
                c.compare("y", r.download(y, ref.size()), ref);
                c.coverage = coverage("rows", checked, rows);
              });
  }
}

template <typename T>
void bench_attention_forward(Runner& r) {
  const Shape& s = r.options().shape;
  if (!r.select("attention_forward")) return;
  const int B = s.batch, S = s.seq, NH = s.heads, HD = s.head_dim();
  const std::size_t n = sz(s.tokens()) * sz(s.hidden), np = sz(B) * sz(NH) * sz(S) * sz(S);
  T *q = r.take<T>(n), *k = r.take<T>(n), *v = r.take<T>(n);
  int32_t* mask = r.take<int32_t>(sz(s.tokens()));
  T *ctx = r.take<T>(n), *probs = r.take<T>(np), *qh = r.take<T>(n), *kh = r.take<T>(n), *vh = r.take<T>(n);
  T* workspace = r.take<T>(attention_workspace_elements_cuda(B, S, NH, HD));
  if (r.sizing()) return;
  const HostBatch hb = make_batch(s, r.options().seed);
  const std::vector<float> hq = r.random<T>(n, 40), hk = r.random<T>(n, 41), hv = r.random<T>(n, 42);
  r.upload(q, hq);
  r.upload(k, hk);
  r.upload(v, hv);
  r.copy_in(mask, hb.mask);
  const RandomKey key = dropout_key(r.options(), 40);
  const DropoutLayout layout = attention_layout(s);
  // flops = 4·B·NH·S²·HD (Q·Kᵀ and P·V). bytes = q, k, v 3·T·H·e + mask 4·B·S (read) + ctx, qh, kh, vh 4·T·H·e
  // + probs B·NH·S²·e (written); the head-major context and the dropped probabilities in the workspace are
  // traffic of this implementation, not of the op.
  Measure m{"attention_forward", label("B=%lld S=%lld NH=%lld, p=0.1", B, S, NH),
            (7.0 * n + static_cast<double>(np)) * elem<T>() + 4.0 * s.tokens(),
            4.0 * B * NH * static_cast<double>(S) * S * HD};
  r.measure(m,
            [&] {
              attention_forward_cuda<T>(r.handles(), ctx, probs, qh, kh, vh, q, k, v, mask, B, S, NH, HD, kDropout, key,
                                        layout, workspace);
            },
            [&](Checker& c) {
              const int checked = rows_to_verify(B, 4.0 * NH * static_cast<double>(S) * S * HD);
              const std::size_t nc = sz(checked) * sz(S) * sz(s.hidden), npc = sz(checked) * sz(NH) * sz(S) * sz(S);
              std::vector<float> rctx(nc), rprobs(npc), scratch(attention_scratch_elements(S, omp_get_max_threads()));
              attention_forward_cpu<float>(rctx.data(), rprobs.data(), hq.data(), hk.data(), hv.data(), hb.mask.data(),
                                           checked, S, NH, HD, kDropout, key, scratch.data(), layout);
              make_representable<T>(rctx);
              make_representable<T>(rprobs);
              c.compare("ctx", r.download(ctx, nc), rctx);
              c.compare("probs", r.download(probs, npc), rprobs);
              c.coverage = coverage("sequences", checked, B);
            });
}

template <typename T>
void bench_bias_activation_forward(Runner& r) {
  const Shape& s = r.options().shape;
  if (!r.select("bias_activation_forward")) return;
  const int rows = s.tokens(), cols = s.intermediate;
  const std::size_t n = sz(rows) * sz(cols);
  T* x = r.take<T>(n);
  T* bias = r.take<T>(sz(cols));
  T* y = r.take<T>(n);
  if (r.sizing()) return;
  const std::vector<float> hx = r.random<T>(n, 50, -3.0f, 3.0f), hb = r.random<T>(sz(cols), 51);
  r.upload(x, hx);
  r.upload(bias, hb);
  // bytes = x T·I·e + b I·e (read) + x (+= b, kept for backward) T·I·e + y T·I·e (written).
  Measure m{"bias_activation_forward", label("T=%lld I=%lld, gelu", rows, cols), (3.0 * n + cols) * elem<T>()};
  // x += b on every run: the values drift by one bias per run, which does not change the work.
  r.measure(m, [&] { bias_activation_forward_cuda<T>(y, x, bias, rows, cols, Activation::kGelu, r.stream()); },
            [&](Checker& c) {
              // The twin of x += b is linear's bias (a row-wise add); of y = gelu(x) activation_forward_cpu.
              std::vector<float> rx(n), ry(n);
              for (std::size_t i = 0; i < n; ++i) rx[i] = hx[i] + hb[i % sz(cols)];
              make_representable<T>(rx);
              activation_forward_cpu<float>(ry.data(), rx.data(), n, Activation::kGelu);
              make_representable<T>(ry);
              c.compare("x (pre-activation)", r.download(x, n), rx);
              c.compare("y", r.download(y, n), ry);
            });
}

template <typename T>
void bench_activation(Runner& r, bool forward) {
  const Shape& s = r.options().shape;
  const char* name = forward ? "activation_forward" : "activation_backward";
  if (!r.select(name)) return;
  const std::size_t n = sz(s.tokens()) * sz(s.intermediate);
  T* x = r.take<T>(n);
  T* dy = r.take<T>(n);
  T* out = r.take<T>(n);
  if (r.sizing()) return;
  const std::vector<float> hx = r.random<T>(n, 60, -3.0f, 3.0f), hdy = r.random<T>(n, 61);
  r.upload(x, hx);
  r.upload(dy, hdy);
  // bytes: forward x T·I·e (read) + y T·I·e (written); backward dy, x 2·T·I·e (read) + dx T·I·e (written).
  Measure m{name, label("n=T*I=%lld, gelu", static_cast<long long>(n)), (forward ? 2.0 : 3.0) * n * elem<T>()};
  r.measure(m,
            [&] {
              if (forward) activation_forward_cuda<T>(out, x, n, Activation::kGelu, r.stream());
              else activation_backward_cuda<T>(out, dy, x, n, Activation::kGelu, r.stream());
            },
            [&](Checker& c) {
              std::vector<float> ref(n);
              if (forward) activation_forward_cpu<float>(ref.data(), hx.data(), n, Activation::kGelu);
              else activation_backward_cpu<float>(ref.data(), hdy.data(), hx.data(), n, Activation::kGelu);
              make_representable<T>(ref);
              c.compare(forward ? "y" : "dx", r.download(out, n), ref);
            });
}

template <typename T>
void bench_loss(Runner& r) {
  const Shape& s = r.options().shape;
  if (!r.select("classification_loss")) return;
  const std::size_t n = sz(s.batch) * sz(s.classes);
  T* logits = r.take<T>(n);
  float* targets = r.take<float>(n);
  float* loss = r.take<float>(1);
  T* dlogits = r.take<T>(n);
  if (r.sizing()) return;
  const std::vector<float> hlogits = r.random<T>(n, 70, -3.0f, 3.0f), pick = r.random<float>(sz(s.batch), 71, 0.0f, 1.0f);
  std::vector<float> htargets(n, 0.0f);
  for (int b = 0; b < s.batch; ++b) htargets[sz(b) * sz(s.classes) + sz(std::min(s.classes - 1, static_cast<int>(pick[sz(b)] * s.classes)))] = 1.0f;
  r.upload(logits, hlogits);
  r.copy_in(targets, htargets);
  // bytes = logits B·C·e + targets 4·B·C (read) + dlogits B·C·e + loss 4 (written). One block: this line shows
  // launch latency more than bandwidth.
  Measure m{"classification_loss", label("B=%lld C=%lld, BCE", s.batch, s.classes), 2.0 * n * elem<T>() + 4.0 * n + 4.0};
  r.measure(m,
            [&] {
              classification_loss_cuda<T>(LossKind::kBce, loss, dlogits, logits, targets, nullptr, s.batch, s.classes,
                                          1.0f, r.stream());
            },
            [&](Checker& c) {
              std::vector<float> rd(n);
              const float rloss = classification_loss_cpu<float>(LossKind::kBce, rd.data(), hlogits.data(),
                                                                 htargets.data(), nullptr, s.batch, s.classes);
              make_representable<T>(rd);
              c.compare("loss", r.download(loss, 1), {rloss}, kFp32Tolerance);
              c.compare("dlogits", r.download(dlogits, n), rd);
            });
}

// Twin of a column sum: linear_backward_cpu's bias gradient db = Σ_rows dy (in a fixed row order), with a
// one-column x so that its dw costs nothing.
std::vector<float> column_sums_cpu(const std::vector<float>& x, int rows, int cols) {
  std::vector<float> ones_x(sz(rows), 1.0f), ones_w(sz(cols), 1.0f), dw(sz(cols)), db(sz(cols));
  linear_backward_cpu<float>(nullptr, dw.data(), db.data(), x.data(), ones_x.data(), ones_w.data(), rows, 1, cols, false);
  return db;
}

template <typename T>
void bench_linear_backward(Runner& r) {
  const Shape& s = r.options().shape;
  for (const LinearCase& lc : linear_cases(s)) {
    if (!r.select("linear_backward")) return;
    const int rows = s.tokens();
    const std::size_t nx = sz(rows) * sz(lc.in), nw = sz(lc.out) * sz(lc.in), ny = sz(rows) * sz(lc.out);
    T* dy = r.take<T>(ny);
    T* x = r.take<T>(nx);
    T* w = r.take<T>(nw);
    T* dx = r.take<T>(nx);
    float* dw = r.take<float>(nw);
    float* db = r.take<float>(sz(lc.out));
    if (r.sizing()) continue;
    const std::vector<float> hdy = r.random<T>(ny, 80), hx = r.random<T>(nx, 81), hw = r.random<T>(nw, 82);
    r.upload(dy, hdy);
    r.upload(x, hx);
    r.upload(w, hw);
    // flops = 4·T·in·out (dx = dy·W and dW = dyᵀ·x; db's T·out adds ignored). bytes = dy T·out·e, x T·in·e,
    // W out·in·e (read) + dx T·in·e + dW 4·out·in + db 4·out (written).
    Measure m{"linear_backward", label("T=%lld: %lld -> %lld", rows, lc.in, lc.out),
              (static_cast<double>(ny) + 2.0 * nx + nw) * elem<T>() + 4.0 * (static_cast<double>(nw) + lc.out),
              4.0 * rows * lc.in * lc.out};
    r.measure(m, [&] { linear_backward_cuda<T>(r.handles(), dx, dw, db, dy, x, w, rows, lc.in, lc.out, false); },
              [&](Checker& c) {
                // dx on the first rows (the twin also computes a dW of those rows, discarded).
                const int dx_rows = rows_to_verify(rows, 4.0 * lc.in * lc.out);
                std::vector<float> rdx(sz(dx_rows) * sz(lc.in)), scratch_dw(nw);
                linear_backward_cpu<float>(rdx.data(), scratch_dw.data(), nullptr, hdy.data(), hx.data(), hw.data(),
                                           dx_rows, lc.in, lc.out, false);
                make_representable<T>(rdx);
                c.compare("dx", r.download(dx, rdx.size()), rdx);
                // dW sums over all T rows: check its first output rows, i.e. the twin on dy's first columns.
                const int dw_rows = std::min(lc.out, rows_to_verify(lc.out, 2.0 * rows * lc.in));
                std::vector<float> dy_cols(sz(rows) * sz(dw_rows));
                for (int t = 0; t < rows; ++t) {
                  for (int j = 0; j < dw_rows; ++j) dy_cols[sz(t) * sz(dw_rows) + sz(j)] = hdy[sz(t) * sz(lc.out) + sz(j)];
                }
                std::vector<float> rdw(sz(dw_rows) * sz(lc.in));
                linear_backward_cpu<float>(nullptr, rdw.data(), nullptr, dy_cols.data(), hx.data(), hw.data(), rows,
                                           lc.in, dw_rows, false);
                c.compare("dW", r.download(dw, rdw.size()), rdw);
                // db in full (cheap).
                c.compare("db", r.download(db, sz(lc.out)), column_sums_cpu(hdy, rows, lc.out));
                c.coverage = dx_rows == rows && dw_rows == lc.out
                                 ? std::string("full")
                                 : coverage("dx rows", dx_rows, rows) + ", " + coverage("dW rows", dw_rows, lc.out) +
                                       ", db full";
              });
  }
}

template <typename T>
void bench_attention_backward(Runner& r) {
  const Shape& s = r.options().shape;
  if (!r.select("attention_backward")) return;
  const int B = s.batch, S = s.seq, NH = s.heads, HD = s.head_dim();
  const std::size_t n = sz(s.tokens()) * sz(s.hidden), np = sz(B) * sz(NH) * sz(S) * sz(S);
  T *q = r.take<T>(n), *k = r.take<T>(n), *v = r.take<T>(n);
  int32_t* mask = r.take<int32_t>(sz(s.tokens()));
  T *ctx = r.take<T>(n), *probs = r.take<T>(np), *qh = r.take<T>(n), *kh = r.take<T>(n), *vh = r.take<T>(n);
  T *dctx = r.take<T>(n), *dq = r.take<T>(n), *dk = r.take<T>(n), *dv = r.take<T>(n);
  T* workspace = r.take<T>(attention_workspace_elements_cuda(B, S, NH, HD));
  if (r.sizing()) return;
  const HostBatch hb = make_batch(s, r.options().seed);
  const std::vector<float> hq = r.random<T>(n, 90), hk = r.random<T>(n, 91), hv = r.random<T>(n, 92),
                           hdctx = r.random<T>(n, 93);
  r.upload(q, hq);
  r.upload(k, hk);
  r.upload(v, hv);
  r.upload(dctx, hdctx);
  r.copy_in(mask, hb.mask);
  const RandomKey key = dropout_key(r.options(), 90);
  const DropoutLayout layout = attention_layout(s);
  // What backward reads: the forward's probabilities and head-major Q, K, V.
  attention_forward_cuda<T>(r.handles(), ctx, probs, qh, kh, vh, q, k, v, mask, B, S, NH, HD, kDropout, key, layout,
                            workspace);
  // flops = 8·B·NH·S²·HD (dV = Pᵀ·dctx, dP = dctx·Vᵀ, dQ = dS·K, dK = dSᵀ·Q). bytes = dctx, qh, kh, vh 4·T·H·e
  // + probs B·NH·S²·e (read) + dq, dk, dv 3·T·H·e (written).
  Measure m{"attention_backward", label("B=%lld S=%lld NH=%lld, p=0.1", B, S, NH),
            (7.0 * n + static_cast<double>(np)) * elem<T>(), 8.0 * B * NH * static_cast<double>(S) * S * HD};
  r.measure(m,
            [&] {
              attention_backward_cuda<T>(r.handles(), dq, dk, dv, dctx, probs, qh, kh, vh, B, S, NH, HD, kDropout, key,
                                         layout, workspace);
            },
            [&](Checker& c) {
              // The twin gets the device's probabilities (bf16 ones in bf16 mode), so only backward is compared.
              const int checked = rows_to_verify(B, 8.0 * NH * static_cast<double>(S) * S * HD);
              const std::size_t nc = sz(checked) * sz(S) * sz(s.hidden), npc = sz(checked) * sz(NH) * sz(S) * sz(S);
              const std::vector<float> dprobs = r.download(probs, npc);
              std::vector<float> rdq(nc), rdk(nc), rdv(nc), scratch(attention_scratch_elements(S, omp_get_max_threads()));
              attention_backward_cpu<float>(rdq.data(), rdk.data(), rdv.data(), hdctx.data(), dprobs.data(), hq.data(),
                                            hk.data(), hv.data(), checked, S, NH, HD, kDropout, key, scratch.data(), layout);
              make_representable<T>(rdq);
              make_representable<T>(rdk);
              make_representable<T>(rdv);
              c.compare("dq", r.download(dq, nc), rdq);
              c.compare("dk", r.download(dk, nc), rdk);
              c.compare("dv", r.download(dv, nc), rdv);
              c.coverage = coverage("sequences", checked, B);
            });
}

template <typename T>
void bench_layernorm_backward(Runner& r) {
  const Shape& s = r.options().shape;
  if (!r.select("layernorm_backward")) return;
  const int rows = s.tokens(), cols = s.hidden;
  const std::size_t n = sz(rows) * sz(cols);
  T *dy = r.take<T>(n), *x = r.take<T>(n), *residual = r.take<T>(n), *gamma = r.take<T>(sz(cols)), *dz = r.take<T>(n);
  float *mean = r.take<float>(sz(rows)), *rstd = r.take<float>(sz(rows));
  float *dgamma = r.take<float>(sz(cols)), *dbeta = r.take<float>(sz(cols));
  if (r.sizing()) return;
  const std::vector<float> hdy = r.random<T>(n, 100), hx = r.random<T>(n, 101), hres = r.random<T>(n, 102),
                           hg = r.random<T>(sz(cols), 103, 0.5f, 1.5f), hbeta(sz(cols), 0.0f);
  // The saved statistics come from the CPU forward of the same x + residual.
  std::vector<float> hy(n), hmean(sz(rows)), hrstd(sz(rows));
  layernorm_forward_cpu<float>(hy.data(), hmean.data(), hrstd.data(), hx.data(), hres.data(), hg.data(), hbeta.data(),
                               rows, cols, kLayerNormEps);
  r.upload(dy, hdy);
  r.upload(x, hx);
  r.upload(residual, hres);
  r.upload(gamma, hg);
  r.copy_in(mean, hmean);
  r.copy_in(rstd, hrstd);
  // bytes = dy, x, residual 3·T·H·e + gamma H·e + mean, rstd 2·4·T (read) + dz T·H·e + dgamma, dbeta 2·4·H
  // (written).
  Measure m{"layernorm_backward", label("T=%lld H=%lld, +residual", rows, cols),
            (4.0 * n + cols) * elem<T>() + 8.0 * rows + 8.0 * cols};
  r.measure(m,
            [&] {
              layernorm_backward_cuda<T>(r.handles(), dz, dgamma, dbeta, dy, x, residual, mean, rstd, gamma, rows, cols);
            },
            [&](Checker& c) {
              std::vector<float> rdz(n), rdg(sz(cols)), rdb(sz(cols));
              layernorm_backward_cpu<float>(rdz.data(), rdg.data(), rdb.data(), hdy.data(), hx.data(), hres.data(),
                                            hmean.data(), hrstd.data(), hg.data(), rows, cols);
              make_representable<T>(rdz);
              c.compare("dz", r.download(dz, n), rdz);
              c.compare("dgamma", r.download(dgamma, sz(cols)), rdg);
              c.compare("dbeta", r.download(dbeta, sz(cols)), rdb);
            });
}

template <typename T>
void bench_column_sum(Runner& r) {
  const Shape& s = r.options().shape;
  for (int cols : {s.hidden, s.intermediate}) {
    if (!r.select("column_sum")) return;
    const int rows = s.tokens();
    const std::size_t n = sz(rows) * sz(cols);
    T* x = r.take<T>(n);
    float* out = r.take<float>(sz(cols));
    if (r.sizing()) continue;
    const std::vector<float> hx = r.random<T>(n, 110);
    r.upload(x, hx);
    // bytes = x rows·cols·e (read) + out 4·cols (written); the partial sums' round trip through the workspace
    // (64·cols floats) is implementation traffic.
    Measure m{"column_sum", label("%lld x %lld", rows, cols), static_cast<double>(n) * elem<T>() + 4.0 * cols};
    r.measure(m, [&] { column_sum_cuda<T>(r.handles(), out, x, rows, cols); },
              [&](Checker& c) { c.compare("out", r.download(out, sz(cols)), column_sums_cpu(hx, rows, cols)); });
  }
}

template <typename T>
void bench_add_inplace(Runner& r) {
  const Shape& s = r.options().shape;
  if (!r.select("add_inplace")) return;
  const std::size_t n = sz(s.tokens()) * sz(s.hidden);
  T *y = r.take<T>(n), *x = r.take<T>(n);
  if (r.sizing()) return;
  const std::vector<float> hy = r.random<T>(n, 120), hx = r.random<T>(n, 121);
  r.upload(y, hy);
  r.upload(x, hx);
  // bytes = y, x 2·n·e (read) + y n·e (written). y grows by x on every timed run; the work does not change.
  Measure m{"add_inplace", label("n=T*H=%lld", static_cast<long long>(n)), 3.0 * n * elem<T>()};
  r.measure(m, [&] { add_inplace_cuda<T>(y, x, n, r.stream()); },
            [&](Checker& c) {
              std::vector<float> ref = hy;
              add_inplace_cpu<float>(ref.data(), hx.data(), n);
              make_representable<T>(ref);
              c.compare("y", r.download(y, n), ref);
            });
}

template <typename T>
void bench_embedding_backward(Runner& r) {
  const Shape& s = r.options().shape;
  if (!r.select("embedding_backward")) return;
  const std::size_t tokens = sz(s.tokens()), th = tokens * sz(s.hidden);
  const std::size_t nword = sz(s.vocab) * sz(s.hidden), npos = sz(s.max_pos) * sz(s.hidden),
                    ntype = sz(s.type_vocab) * sz(s.hidden);
  const std::size_t scratch_bytes = embedding_backward_scratch_bytes(s.tokens());
  T* dout = r.take<T>(th);
  int32_t* ids = r.take<int32_t>(tokens);
  float *dword = r.take<float>(nword), *dpos = r.take<float>(npos), *dtype = r.take<float>(ntype);
  unsigned char* scratch = r.take<unsigned char>(scratch_bytes);
  if (r.sizing()) return;
  const HostBatch hb = make_batch(s, r.options().seed);
  const std::vector<float> hdout = r.random<T>(th, 130);
  r.upload(dout, hdout);
  r.copy_in(ids, hb.ids);
  // bytes = dout T·H·e + ids 4·T (read) + dword, dpos, dtype 4·(V + max_pos + type_vocab)·H (written: every row,
  // used or not). The id sort's traffic (CUB radix sort over T ids) is implementation traffic.
  Measure m{"embedding_backward", label("T=%lld H=%lld V=%lld", s.tokens(), s.hidden, s.vocab),
            static_cast<double>(th) * elem<T>() + 4.0 * tokens + 4.0 * (static_cast<double>(nword) + npos + ntype)};
  r.measure(m,
            [&] {
              embedding_backward_cuda<T>(dword, dpos, dtype, dout, ids, nullptr, s.batch, s.seq, s.hidden, s.vocab,
                                         s.max_pos, s.type_vocab, scratch, scratch_bytes, r.stream());
            },
            [&](Checker& c) {
              std::vector<float> rword(nword), rpos(npos), rtype(ntype);
              embedding_backward_cpu<float>(rword.data(), rpos.data(), rtype.data(), hdout.data(), hb.ids.data(), nullptr,
                                            s.batch, s.seq, s.hidden, s.vocab, s.max_pos, s.type_vocab);
              c.compare("dword", r.download(dword, nword), rword);
              c.compare("dpos", r.download(dpos, npos), rpos);
              c.compare("dtype", r.download(dtype, ntype), rtype);
            });
}

// Elements of the flat parameter buffer of a BERT classifier of these shapes (padding included, as the
// trainer allocates it): what Adam, the bf16 cast and the gradient norm run over.
std::size_t parameter_elements(const Shape& s) {
  BertConfig config;
  config.vocab_size = s.vocab;
  config.hidden_size = s.hidden;
  config.num_hidden_layers = s.layers;
  config.num_attention_heads = s.heads;
  config.intermediate_size = s.intermediate;
  config.max_position_embeddings = s.max_pos;
  config.type_vocab_size = s.type_vocab;
  return bert_classifier_layout(config, s.classes).total();
}

void bench_adam(Runner& r, bool bf16_copy) {
  const Shape& s = r.options().shape;
  if (!r.select("adam_update")) return;
  const std::size_t n = parameter_elements(s);
  float *param = r.take<float>(n), *m1 = r.take<float>(n), *m2 = r.take<float>(n), *grad = r.take<float>(n);
  bf16* copy = r.take<bf16>(n);
  if (r.sizing()) return;
  std::vector<float> hp = r.random<float>(n, 140, -0.1f, 0.1f), hm = r.random<float>(n, 141, -1e-3f, 1e-3f),
                     hv = r.random<float>(n, 142, 0.0f, 1e-5f), hg = r.random<float>(n, 143, -1e-2f, 1e-2f);
  r.copy_in(param, hp);
  r.copy_in(m1, hm);
  r.copy_in(m2, hv);
  r.copy_in(grad, hg);
  AdamHyper hyper;
  hyper.lr = 1e-4;
  const long step = 10;  // bias corrections away from 1
  bf16* param_copy = bf16_copy ? copy : nullptr;
  // bytes = param, m, v, grad 4·4·N (read) + param, m, v 3·4·N (written) + the bf16 compute copy 2·N (bf16 only).
  Measure m{"adam_update", label(bf16_copy ? "N=%lld, + bf16 copy" : "N=%lld", static_cast<long long>(n)),
            28.0 * n + (bf16_copy ? 2.0 * n : 0.0)};
  // Every timed run is another optimizer step on the same state; the work does not change.
  r.measure(m, [&] { adam_update_cuda(param, m1, m2, grad, param_copy, n, hyper, step, r.stream()); },
            [&](Checker& c) {
              adam_update_cpu<float>(hp.data(), hm.data(), hv.data(), hg.data(), n, hyper, step);
              c.compare("param", r.download(param, n), hp, kFp32Tolerance);
              c.compare("m", r.download(m1, n), hm, kFp32Tolerance);
              c.compare("v", r.download(m2, n), hv, kFp32Tolerance);
              if (param_copy != nullptr) {
                make_representable<bf16>(hp);
                c.compare("bf16 copy", r.download(copy, n), hp, kBf16Tolerance);
              }
            });
}

void bench_cast(Runner& r, bool to_bf16) {
  const Shape& s = r.options().shape;
  const char* name = to_bf16 ? "cast_fp32_to_bf16" : "cast_bf16_to_fp32";
  if (!r.select(name)) return;
  const std::size_t n = parameter_elements(s);
  float* f = r.take<float>(n);
  bf16* h = r.take<bf16>(n);
  if (r.sizing()) return;
  const std::vector<float> hf = r.random<float>(n, 150);
  if (to_bf16) r.copy_in(f, hf);
  else r.upload(h, hf);  // rounded to bf16 on the way
  // bytes = 4·N + 2·N (one read, one write).
  Measure m{name, label("N=%lld", static_cast<long long>(n)), 6.0 * n};
  r.measure(m,
            [&] {
              if (to_bf16) cast_cuda(h, f, n, r.stream());
              else cast_cuda(f, h, n, r.stream());
            },
            [&](Checker& c) {
              // Both directions are exact functions (round to nearest even; widening): compared bit-for-bit.
              if (to_bf16) {
                std::vector<bf16> rb(n);
                cast_cpu(rb.data(), hf.data(), n);
                std::vector<float> ref(n);
                for (std::size_t i = 0; i < n; ++i) ref[i] = bf16_to_float(rb[i]);
                c.compare("y", r.download(h, n), ref, kExact);
              } else {
                std::vector<bf16> hb(n);
                for (std::size_t i = 0; i < n; ++i) hb[i] = float_to_bf16(hf[i]);
                std::vector<float> ref(n);
                cast_cpu(ref.data(), hb.data(), n);
                c.compare("y", r.download(f, n), ref, kExact);
              }
            });
}

void bench_sum_of_squares(Runner& r) {
  const Shape& s = r.options().shape;
  if (!r.select("sum_of_squares")) return;
  const std::size_t n = parameter_elements(s);
  float* x = r.take<float>(n);
  float* out = r.take<float>(1);
  if (r.sizing()) return;
  const std::vector<float> hx = r.random<float>(n, 160);
  r.copy_in(x, hx);
  // bytes = x 4·N (read) + 4 (written).
  Measure m{"sum_of_squares", label("N=%lld", static_cast<long long>(n)), 4.0 * n + 4.0};
  r.measure(m, [&] { sum_of_squares_cuda(r.handles(), out, x, n); },
            [&](Checker& c) {
              const float ref = static_cast<float>(sum_of_squares_cpu(hx.data(), n));
              c.compare("sum", r.download(out, 1), {ref}, kFp32Tolerance);
            });
}

template <typename T>
std::vector<std::function<void(Runner&)>> all_benchmarks(bool bf16_mode) {
  return {
      bench_embedding_forward<T>,
      bench_layernorm_forward<T>,
      [](Runner& r) { bench_dropout<T>(r, true); },
      bench_linear_forward<T>,
      bench_attention_forward<T>,
      bench_bias_activation_forward<T>,
      [](Runner& r) { bench_activation<T>(r, true); },
      bench_loss<T>,
      [](Runner& r) { bench_dropout<T>(r, false); },
      bench_layernorm_backward<T>,
      bench_linear_backward<T>,
      [](Runner& r) { bench_activation<T>(r, false); },
      bench_attention_backward<T>,
      bench_column_sum<T>,
      bench_add_inplace<T>,
      bench_embedding_backward<T>,
      bench_sum_of_squares,
      [bf16_mode](Runner& r) { bench_adam(r, bf16_mode); },
      [](Runner& r) { bench_cast(r, true); },
      [](Runner& r) { bench_cast(r, false); },
  };
}

const char kKernelNames[] =
    "embedding_forward, layernorm_forward, dropout_forward, linear_forward, attention_forward, "
    "bias_activation_forward, activation_forward, classification_loss, dropout_backward, layernorm_backward, "
    "linear_backward, activation_backward, attention_backward, column_sum, add_inplace, embedding_backward, "
    "sum_of_squares, adam_update, cast_fp32_to_bf16, cast_bf16_to_fp32";

template <typename T>
int run_kernels(const Options& o) {
  const Shape& s = o.shape;
  GpuContext context(o.device, gpu_reduction_workspace_elements(std::max(s.hidden, s.intermediate)));
  DeviceBuffer<unsigned char> cublas_workspace(kCublasWorkspaceBytes);
  BERTRAIN_CUBLAS_CHECK(cublasSetWorkspace(context.handles().blas, cublas_workspace.data(), cublas_workspace.bytes()));
  Runner runner(o, context, query_peaks(o.device, std::is_same_v<T, bf16>, o.peak_tflops, o.peak_gbps));
  const auto benchmarks = all_benchmarks<T>(std::is_same_v<T, bf16>);
  for (const auto& bench : benchmarks) bench(runner);  // sizing pass
  if (!runner.any_selected()) {
    throw UsageError("bench kernels: --only '" + o.only + "' matches no kernel (kernels: " + kKernelNames + ")");
  }
  runner.allocate();
  runner.print_header(parameter_elements(s));
  for (const auto& bench : benchmarks) bench(runner);
  return 0;
}

}  // namespace

int run_bench_kernels(const std::vector<std::string>& args) {
  ArgParser p("bench kernels",
              "Checks every CUDA kernel of a training step against its CPU twin, then times it: median of --repeat\n"
              "runs, L2 flushed before each, with GB/s (or TFLOP/s for GEMMs and attention) and % of the device's\n"
              "peak. Defaults: BERT-base with SciBERT's vocabulary. Made-With-ML's titles + descriptions fit in\n"
              "about 64 tokens: --seq 64 measures the shapes that training runs. See docs/PERFORMANCE.md.");
  p.option("batch", "256", "batch size B");
  p.option("seq", "128", "sequence length S (Made-With-ML's data: about 64)");
  p.option("hidden", "768", "hidden size H");
  p.option("heads", "12", "attention heads NH (H must be a multiple)");
  p.option("intermediate", "3072", "feed-forward size I");
  p.option("vocab", "31090", "vocabulary size V (SciBERT's)");
  p.option("labels", "4", "classes C");
  p.option("layers", "12", "encoder layers (sizes the parameter buffer of Adam, casts, sum_of_squares)");
  p.option("precision", "bf16", "bf16 | fp32: the type of activations and weights (gradients, Adam: fp32)");
  p.option("repeat", "20", "timed runs per kernel (the median is reported)");
  p.option("warmup", "3", "untimed runs per kernel before timing");
  p.option("only", "", "only kernels whose name contains this text (e.g. layernorm; for Nsight Compute)");
  p.option("device", "0", "CUDA device index");
  p.option("peak-tflops", "0", "compute peak for %peak of GEMMs and attention (0: datasheet table, else n/a)");
  p.option("peak-gbps", "0", "memory bandwidth peak in GB/s (0: 2 x memory clock x bus width)");
  p.option("seed", "1", "seed of the random inputs and dropout masks");
  p.flag("json", "one JSON object per line (a device record, then one per kernel) instead of the table");
  if (!p.parse(args)) return 0;

  Options o;
  Shape& s = o.shape;
  s.batch = p.get_int("batch");
  s.seq = p.get_int("seq");
  s.hidden = p.get_int("hidden");
  s.heads = p.get_int("heads");
  s.intermediate = p.get_int("intermediate");
  s.vocab = p.get_int("vocab");
  s.classes = p.get_int("labels");
  s.layers = p.get_int("layers");
  s.max_pos = std::max(512, s.seq);
  const std::string precision = p.get("precision");
  if (precision != "bf16" && precision != "fp32") {
    throw UsageError("bench kernels: --precision must be bf16 or fp32, got '" + precision + "'");
  }
  o.bf16 = precision == "bf16";
  o.repeat = p.get_int("repeat");
  o.warmup = p.get_int("warmup");
  o.only = p.get("only");
  o.device = p.get_int("device");
  o.peak_tflops = p.get_double("peak-tflops");
  o.peak_gbps = p.get_double("peak-gbps");
  o.seed = static_cast<uint64_t>(p.get_int("seed"));
  o.json = p.get_flag("json");
  if (s.batch < 1 || s.seq < 1 || s.hidden < 1 || s.heads < 1 || s.intermediate < 1 || s.vocab < 1 ||
      s.classes < 1 || s.layers < 1) {
    throw UsageError("bench kernels: --batch, --seq, --hidden, --heads, --intermediate, --vocab, --labels and "
                     "--layers must be >= 1");
  }
  if (s.hidden % s.heads != 0) throw UsageError("bench kernels: --hidden must be a multiple of --heads");
  if (static_cast<long long>(s.batch) * s.seq > 0x7fffffffLL / std::max(s.hidden, s.intermediate)) {
    throw UsageError("bench kernels: B·S·max(H, I) must fit in 32 bits");
  }
  if (o.repeat < 1 || o.warmup < 0 || o.device < 0) {
    throw UsageError("bench kernels: --repeat must be >= 1, --warmup and --device >= 0");
  }

  std::string why;
  if (cuda_device_count(&why) == 0) {
    if (why.empty() || why == "no CUDA device") why = "none visible (check CUDA_VISIBLE_DEVICES and the driver)";
    std::fprintf(stderr, "bertrain: bench kernels: no CUDA device: %s\n", why.c_str());
    return 1;
  }
  configure_cpu_threads(0);  // the CPU twins check the results; pinned threads keep Eigen's GEMMs fast
  try {
    return o.bf16 ? run_kernels<bf16>(o) : run_kernels<float>(o);
  } catch (const VerificationFailure& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "bertrain: bench kernels: %s\n", e.what());
    return 1;
  }
}

}  // namespace bertrain

// The harness every `bertrain bench kernels` benchmark runs in: shapes and options, random host data, the check
// against the CPU twin (tolerances, the rows checked of large tensors), the device's peaks, and the Runner that
// owns the device arena, times a launch and prints its line.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/bf16.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/device_buffer.h"
#include "core/cuda/gpu_context.h"
#include "core/error.h"
#include "core/philox.h"
#include "kernels/dropout.h"

namespace bertrain::bench {

// CPU work allowed for checking one kernel, in flops. The CPU twins of the big GEMMs and of attention at
// BERT-base size take tens of GFLOP, so those kernels run at full size on the GPU and only their first and last
// rows (sequences) are compared with the twin run on those rows; 4 GFLOP stays under ~2 s of Eigen on a few cores.
constexpr double kVerifyFlops = 4e9;
constexpr float kDropout = 0.1f;  // BERT's hidden and attention dropout

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

inline std::size_t sz(long long v) { return static_cast<std::size_t>(v); }

// ---- Host data --------------------------------------------------------------------------------------------

// n uniform floats in [lo, hi), a pure function of (stream, index).
std::vector<float> random_floats(std::size_t n, uint64_t stream, float lo, float hi);

inline float round_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }

// Rounds host values to what T holds, so the fp32 CPU twin sees exactly the device's inputs (or outputs).
template <typename T>
void make_representable(std::vector<float>& v) {
  if constexpr (std::is_same_v<T, bf16>) {
    const long long count = static_cast<long long>(v.size());
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < count; ++i) v[sz(i)] = round_bf16(v[sz(i)]);
  }
}

// A packed batch (DESIGN.md) of B rows of S tokens each, so that T = B·S, the size every token-wise benchmark
// uses: random ids [T], row offsets cu_seqlens [B + 1] = 0, S, 2S, ..., and what the kernels derive from them
// (kernels/packed.h): each token's position [T] and dropout slot [T] (first_sample 0, P = max_pos).
struct HostBatch {
  std::vector<int32_t> ids, cu_seqlens, positions;
  std::vector<int64_t> slots;
};

HostBatch make_batch(const Shape& s, uint64_t seed);

// ---- Verification -----------------------------------------------------------------------------------------

// |got - ref| <= atol + rtol·|ref| with atol = atol_of_max · max|ref|: scaled by the tensor's largest value, so
// one tolerance serves outputs of any magnitude. fp32: a few hundred ulps of room for another summation order
// (GEMMs over K = 3072, column sums over T = 32768 rows). bf16: every bf16 store rounds by up to 2^-9 relative
// and attention rounds its probabilities and dS to bf16 before their products, so 1e-2 — loose enough for rounding,
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
    compare_at(what, 0, got, ref, tolerance_);
  }
  void compare(const std::string& what, const std::vector<float>& got, const std::vector<float>& ref, Tolerance tol) {
    compare_at(what, 0, got, ref, tol);
  }
  // Compares part of a tensor: got and ref hold `what` from its element `first` on, so a failure names the
  // element's index in the whole tensor.
  void compare_at(const std::string& what, std::size_t first, const std::vector<float>& got,
                  const std::vector<float>& ref) {
    compare_at(what, first, got, ref, tolerance_);
  }
  // Compares the first ref.size() elements of `got`; throws VerificationFailure naming the worst element.
  void compare_at(const std::string& what, std::size_t first, const std::vector<float>& got,
                  const std::vector<float>& ref, Tolerance tol);

  std::string coverage = "full";  // what was compared: "full", or "rows first 424 + last 423 / 32768", ...
  double worst_ratio() const { return worst_ratio_; }

 private:
  std::string kernel_, shape_;
  Tolerance tolerance_;
  double worst_ratio_ = 0;
};

// Rows [first, first + count) of a tensor.
struct RowSpan {
  int first = 0, count = 0;
};

// The rows of a tensor of `total` rows that the CPU twin checks: all of them, or its first and its last rows.
struct RowSample {
  int total = 0;
  std::vector<RowSpan> spans;  // {0, total}; or the head {0, h} and the tail {total - t, t}
  bool full() const { return spans.size() == 1 && spans.front().count == total; }
  // "full", or `what` and the rows checked, e.g. "rows first 424 + last 423 / 32768".
  std::string coverage(const char* what) const;
};

// The rows of `total` the CPU twin checks within kVerifyFlops at `flops_per_row` each: all of them when they
// fit, else the budget split half and half between the first rows and the last rows (at least one of each), so
// that a kernel that mishandles the end of a large tensor (its last tile, an offset past 2^31) is caught as
// surely as one that mishandles its start.
RowSample rows_to_verify(int total, double flops_per_row);

// ---- Device peaks -----------------------------------------------------------------------------------------

struct DevicePeaks {
  std::string name;
  int major = 0, minor = 0, sms = 0;
  std::size_t l2_bytes = 0;
  double gbps = 0, tflops = 0;  // 0: unknown ("n/a")
  std::string gbps_source, tflops_source, tflops_kind;
};

DevicePeaks query_peaks(int device, bool bf16_compute, double tflops_override, double gbps_override);

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
               Tolerance tolerance);
  void measure(const Measure& m, const std::function<void()>& launch, const std::function<void(Checker&)>& verify) {
    measure(m, launch, verify, tolerance());
  }

  void print_header(std::size_t parameters) const;

 private:
  void report(const Measure& m, std::vector<double> us, const Checker& checker) const;

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

std::string label(const char* format, long long a, long long b = 0, long long c = 0);

template <typename T>
constexpr double elem() {
  return static_cast<double>(sizeof(T));
}

// The hidden states' dropout layout over the token slots `slots` (HostBatch::slots on the host for the CPU twin,
// its device copy for the launchers).
inline DropoutLayout token_layout(const Shape& s, const int64_t* slots) {
  return DropoutLayout{0, s.max_pos, s.hidden, slots};
}
inline DropoutLayout attention_layout(const Shape& s) { return DropoutLayout{0, s.max_pos, 0, nullptr}; }
inline RandomKey dropout_key(const Options& o, uint32_t tensor) { return RandomKey{o.seed, 1, tensor}; }

}  // namespace bertrain::bench

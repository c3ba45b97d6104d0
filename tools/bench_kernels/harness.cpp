// The harness of `bertrain bench kernels` (harness.h): random host data, the check against the CPU twin, the
// device's peaks, and the Runner's timing loop and its table and JSON lines.
#include "tools/bench_kernels/harness.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "core/cuda/gpu_peaks.h"
#include "core/error.h"
#include "kernels/embedding.h"
#include "kernels/packed.h"

namespace bertrain::bench {

namespace {

uint64_t mix64(uint64_t x) {  // splitmix64's finaliser: a counter-based generator, so filling is parallel
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

int device_attribute(cudaDeviceAttr attr, int device) {
  int value = 0;
  if (cudaDeviceGetAttribute(&value, attr, device) != cudaSuccess) {
    cudaGetLastError();  // an attribute this runtime lacks is "unknown", not an error
    return 0;
  }
  return value;
}

std::string number_or_na(double v, const char* unit) {
  if (!(v > 0)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f %s", v, unit);
  return buf;
}

}  // namespace

// ---- Host data --------------------------------------------------------------------------------------------

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

HostBatch make_batch(const Shape& s, uint64_t seed) {
  HostBatch hb;
  const std::size_t tokens = sz(s.tokens());
  hb.ids.assign(tokens, 0);
  const std::vector<float> u = random_floats(tokens, seed ^ 0xba7c4ull, 0.0f, 1.0f);
  for (std::size_t i = 0; i < tokens; ++i) {
    hb.ids[i] = std::min(s.vocab - 1, static_cast<int>(u[i] * static_cast<float>(s.vocab)));
  }
  hb.cu_seqlens.resize(sz(s.batch) + 1);
  for (int b = 0; b <= s.batch; ++b) hb.cu_seqlens[sz(b)] = b * s.seq;
  hb.positions.resize(tokens);
  hb.slots.resize(tokens);
  embedding_positions_cpu(hb.positions.data(), hb.ids.data(), hb.cu_seqlens.data(), s.batch, -1);
  dropout_slots_cpu(hb.slots.data(), hb.cu_seqlens.data(), s.batch, 0, s.max_pos);
  return hb;
}

// ---- Verification -----------------------------------------------------------------------------------------

void Checker::compare_at(const std::string& what, std::size_t first, const std::vector<float>& got,
                         const std::vector<float>& ref, Tolerance tol) {
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
    os << kernel_ << " (" << shape_ << ") FAILED verification against its CPU twin: " << what << "["
       << first + worst_i << "] = " << g << ", CPU " << r << ", |difference| " << std::fabs(g - r) << " > tolerance "
       << atol + tol.rtol * std::fabs(r) << " (" << tol.atol_of_max << " x max|ref| " << max_ref << " + " << tol.rtol
       << " x |ref|); " << ref.size() << " elements compared";
    if (first > 0) os << " (from element " << first << " on)";
    os << ". Not timed.";
    throw VerificationFailure(os.str());
  }
}

std::string RowSample::coverage(const char* what) const {
  if (full()) return "full";
  std::string text = std::string(what) + " first " + std::to_string(spans.front().count);
  if (spans.size() > 1) text += " + last " + std::to_string(spans.back().count);
  return text + " / " + std::to_string(total);
}

RowSample rows_to_verify(int total, double flops_per_row) {
  const double budget = std::floor(kVerifyFlops / std::max(flops_per_row, 1.0));
  const int checked = static_cast<int>(std::clamp(budget, 2.0, static_cast<double>(std::max(total, 2))));
  RowSample sample;
  sample.total = total;
  if (checked >= total) {
    sample.spans = {RowSpan{0, total}};
  } else {
    const int head = (checked + 1) / 2, tail = checked / 2;
    sample.spans = {RowSpan{0, head}, RowSpan{total - tail, tail}};
  }
  return sample;
}

// ---- Device peaks -----------------------------------------------------------------------------------------

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

// ---- The runner: timing, reporting ------------------------------------------------------------------------

void Runner::measure(const Measure& m, const std::function<void()>& launch,
                     const std::function<void(Checker&)>& verify, Tolerance tolerance) {
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

void Runner::print_header(std::size_t parameters) const {
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

void Runner::report(const Measure& m, std::vector<double> us, const Checker& checker) const {
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

// ---- Shape labels -----------------------------------------------------------------------------------------

std::string label(const char* format, long long a, long long b, long long c) {
  char buf[96];
  std::snprintf(buf, sizeof buf, format, a, b, c);
  return buf;
}

}  // namespace bertrain::bench

// `bertrain bench kernels`: the CUDA kernels of one BERT training step at BERT-base shapes (by default), each
// FIRST checked against its CPU twin (kernels/cpu) and only THEN timed — a kernel that disagrees with its twin
// is reported with its worst element and never timed (exit 1), as llm.c's dev/cuda benchmarks do. Timing:
// warm-up launches, then --repeat launches, each after an L2 flush and between two CUDA events; the median is
// reported with the throughput it implies (GB/s of the bytes the op must move, TFLOP/s for GEMMs and
// attention) and that throughput's share of the device's peak. Every byte and flop formula is stated next to
// its benchmark in this folder (one file per kernel family, benchmarks.h) and in docs/PERFORMANCE.md ("Kernel
// profiling"), which also shows how to profile one kernel under Nsight Compute (--only).
//
// This file holds the benchmark list, in step order, and the command line; harness.h the checking and timing.
// Compiled only when CUDA is enabled; without it tools/bench_step.cpp defines run_bench_kernels as a stub.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/bf16.h"
#include "core/build_info.h"
#include "core/cpu_threads.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/device_buffer.h"
#include "core/cuda/gpu_context.h"
#include "core/cuda/gpu_handles.h"
#include "tools/args.h"
#include "tools/bench_kernels/benchmarks.h"
#include "tools/bench_kernels/harness.h"
#include "tools/commands.h"

namespace bertrain {
namespace bench {
namespace {

// ---- The benchmarks, in the order a training step runs them -----------------------------------------------

template <typename T>
std::vector<std::function<void(Runner&)>> all_benchmarks(bool bf16_mode) {
  return {
      bench_embedding_forward<T>,
      bench_layernorm_forward<T>,
      [](Runner& r) { bench_dropout<T>(r, true); },
      [](Runner& r) { bench_fused_layernorm_forward<T>(r, false); },
      [](Runner& r) { bench_fused_layernorm_forward<T>(r, true); },
      bench_linear_forward<T>,
      bench_linear_activation_forward<T>,
      bench_attention_forward<T>,
      bench_bias_activation_forward<T>,
      [](Runner& r) { bench_activation<T>(r, true); },
      bench_loss<T>,
      [](Runner& r) { bench_dropout<T>(r, false); },
      bench_layernorm_backward<T>,
      [](Runner& r) { bench_fused_layernorm_backward<T>(r, false); },
      [](Runner& r) { bench_fused_layernorm_backward<T>(r, true); },
      bench_linear_backward<T>,
      bench_linear_activation_backward_data<T>,
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
    "embedding_forward, layernorm_forward, dropout_forward, layernorm_dropout_forward, "
    "dropout_residual_layernorm_forward, linear_forward, "
    "linear_activation_forward, "
    "attention_forward, bias_activation_forward, activation_forward, classification_loss, dropout_backward, "
    "layernorm_backward, layernorm_dropout_backward, dropout_residual_layernorm_backward, linear_backward, "
    "linear_activation_backward_data, activation_backward, "
    "attention_backward, column_sum, add_inplace, embedding_backward, sum_of_squares, adam_update, "
    "cast_fp32_to_bf16, cast_bf16_to_fp32";

template <typename T>
int run_kernels(const Options& o) {
  const Shape& s = o.shape;
  GpuContext context(o.device, gpu_reduction_workspace_elements(std::max(s.hidden, s.intermediate)));
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
}  // namespace bench

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
  p.option("precision", "bf16", "bf16 | fp32: the type of activations and weights (gradients, Adam: fp32)").value_name("fp32|bf16");
  p.option("repeat", "20", "timed runs per kernel (the median is reported)");
  p.option("warmup", "3", "untimed runs per kernel before timing");
  p.option("only", "", "only kernels whose name contains this text (e.g. layernorm; for Nsight Compute)").value_name("NAMES");
  p.option("device", "0", "CUDA device index").value_name("N");
  p.option("peak-tflops", "0", "compute peak for %peak of GEMMs and attention (0: datasheet table, else n/a)").value_name("X");
  p.option("peak-gbps", "0", "memory bandwidth peak in GB/s (0: 2 x memory clock x bus width)").value_name("X");
  p.option("seed", "1", "seed of the random inputs and dropout masks");
  p.flag("json", "one JSON object per line (a device record, then one per kernel) instead of the table");
  if (!p.parse(args)) return 0;

  bench::Options o;
  bench::Shape& s = o.shape;
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
  o.seed = p.get_uint64("seed");
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
    return 2;  // as train --device cuda: what was asked for does not fit this machine, and no retry changes that
  }
  configure_cpu_threads(0);  // the CPU twins check the results; pinned threads keep Eigen's GEMMs fast
  try {
    return o.bf16 ? bench::run_kernels<bf16>(o) : bench::run_kernels<float>(o);
  } catch (const bench::VerificationFailure& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "bertrain: bench kernels: %s\n", e.what());
    return 1;
  }
}

}  // namespace bertrain

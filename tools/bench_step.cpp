// `bertrain bench step`: times whole training steps (forward, BCE loss, backward, Adam) of a randomly
// initialised BERT classifier on a fixed synthetic batch, on the CPU or a CUDA device (fp32 or bf16), and
// prints the loss of each step so that one can see it learn. Compare with tools/reference/bench_torch_step.py
// (same shapes, PyTorch on the CPU or the GPU with bf16 autocast).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "core/build_config.h"
#include "core/build_info.h"
#include "core/cpu_threads.h"
#include "core/error.h"
#include "core/philox.h"
#include "dist/communicator.h"
#include "engine/classifier_trainer.h"
#include "engine/training_backend.h"
#include "model/bert_params.h"
#include "model/model_dir.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace bertrain {

namespace {

int bench_step(const std::vector<std::string>& args) {
  ArgParser parser("bench step",
                   "Times training steps (forward + BCE loss + backward + Adam) of a random BERT classifier on\n"
                   "one fixed synthetic batch and prints the loss of every step. Defaults: BERT-mini on the\n"
                   "CPU; BERT-base on a GPU: --layers 12 --hidden 768 --heads 12 --intermediate 3072 --batch 256\n"
                   "--seq 128 --device cuda --precision bf16.");
  parser.option("layers", "4", "encoder layers");
  parser.option("hidden", "256", "hidden size H");
  parser.option("heads", "4", "attention heads");
  parser.option("intermediate", "1024", "feed-forward size I");
  parser.option("vocab", "31090", "vocabulary size V (SciBERT's)");
  parser.option("batch", "32", "batch size B");
  parser.option("seq", "64", "sequence length S (rows are padded to it; lengths vary from S/2 to S)");
  parser.option("labels", "4", "classes C");
  parser.option("dropout", "0.1", "hidden and attention dropout");
  parser.option("steps", "20", "timed steps");
  parser.option("warmup", "3", "untimed steps before timing");
  parser.option("threads", "0", "OpenMP threads (0: OpenMP's default)");
  parser.option("seed", "42", "seed of the weights, the batch and the dropout masks");
  parser.option("device", "cpu", "cpu | cuda | auto");
  parser.option("precision", "fp32", "fp32 | bf16 (CUDA)");
  parser.option("peak-tflops", "0", "device peak TFLOP/s for the utilisation column (0: from the GPU's name)");
  if (!parser.parse(args)) return 0;

  const int threads = parser.get_int("threads");
  if (threads < 0) throw UsageError("bench step: --threads must be >= 0");
  configure_cpu_threads(threads);
  BertConfig config;
  config.num_hidden_layers = parser.get_int("layers");
  config.hidden_size = parser.get_int("hidden");
  config.num_attention_heads = parser.get_int("heads");
  config.intermediate_size = parser.get_int("intermediate");
  config.vocab_size = parser.get_int("vocab");
  config.hidden_dropout_prob = config.attention_probs_dropout_prob = parser.get_double("dropout");
  const int batch = parser.get_int("batch"), seq = parser.get_int("seq"), labels = parser.get_int("labels");
  const int steps = parser.get_int("steps"), warmup = parser.get_int("warmup");
  const uint64_t seed = static_cast<uint64_t>(parser.get_int("seed"));
  if (batch < 1 || seq < 2 || labels < 1 || steps < 1 || warmup < 0) {
    throw UsageError("bench step: --batch, --labels and --steps must be >= 1, --seq >= 2, --warmup >= 0");
  }
  if (seq > config.max_position_embeddings) config.max_position_embeddings = seq;
  config.validate("bench step");

  // A fixed batch: [CLS]-like first token, random ids, right padding, one random label per row.
  std::vector<int32_t> ids(static_cast<std::size_t>(batch) * seq, 0), mask(ids.size(), 0);
  std::vector<float> targets(static_cast<std::size_t>(batch) * labels, 0.0f);
  const RandomKey key{seed, 0, 0xbe7c4u};
  for (int b = 0; b < batch; ++b) {
    const int length = seq / 2 + static_cast<int>(philox_uniform(key, 3 * b) * (seq - seq / 2 + 1));
    for (int s = 0; s < std::min(length, seq); ++s) {
      ids[b * seq + s] = 1 + static_cast<int32_t>(philox_uniform(key, 1000003ull * (b + 1) + s) * (config.vocab_size - 1));
      mask[b * seq + s] = 1;
    }
    targets[b * labels + static_cast<int>(philox_uniform(key, 3 * b + 1) * labels) % labels] = 1.0f;
  }
  const BertBatch bert_batch{ids.data(), mask.data(), batch, seq};

  const ParamLayout layout = bert_classifier_layout(config, labels);
  TrainerOptions options;
  options.adam.lr = 1e-4;
  options.seed = seed;
  const BackendChoice choice = choose_backend(parser.get("device"), parser.get("precision"), 0);
  const std::unique_ptr<Communicator> single = make_communicator(LaunchInfo{});
  const std::unique_ptr<TrainingBackend> engine = make_training_backend(
      choice, config, labels, batch, seq, random_bert_parameters(layout, config, seed), options, *single);
  std::printf("bench step: layers %d, hidden %d, heads %d, intermediate %d, vocab %d, batch %d, seq %d, "
              "%zu parameters; %s",
              config.num_hidden_layers, config.hidden_size, config.num_attention_heads, config.intermediate_size,
              config.vocab_size, batch, seq, layout.parameter_count(), engine->description().c_str());
  if (engine->device_memory_bytes() > 0) {
    std::printf(", %.2f GiB device memory", static_cast<double>(engine->device_memory_bytes()) / (1u << 30));
  }
  std::printf("\n");

  // Model FLOPs of one step (forward + backward = 3 × forward): the dense layers (2 FLOPs per weight and
  // token: Q, K, V, attention output 4H², feed-forward 2HI) and the two attention products (2·S·H per token
  // each), as in the MFU accounting of the PaLM paper. Padding tokens count: the engine computes them.
  const double tokens = static_cast<double>(batch) * seq, h = config.hidden_size, inter = config.intermediate_size;
  const double flops_per_step =
      3.0 * config.num_hidden_layers * (2.0 * tokens * (4.0 * h * h + 2.0 * h * inter) + 4.0 * tokens * seq * h);
  double peak_tflops = parser.get_double("peak-tflops");
  if (peak_tflops <= 0 && choice.cuda) peak_tflops = gpu_peak_tflops(choice.device, choice.bf16);

  std::vector<double> times;
  for (int i = 0; i < warmup + steps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    engine->train_step(bert_batch, targets.data(), 1.0, *single);
    const double loss = engine->take_loss();  // waits for the step: each step is timed whole
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (i >= warmup) times.push_back(ms);
    std::printf("step %3d  loss %.6f  %8.2f ms%s\n", i + 1, loss, ms, i < warmup ? "  (warm-up)" : "");
    std::fflush(stdout);
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  double mean = 0;
  for (double t : times) mean += t / times.size();
  const double tflops = flops_per_step / (median * 1e-3) / 1e12;
  std::printf("{\"bench\": \"step\", \"engine\": \"%s\", \"threads\": %d, \"batch\": %d, \"seq\": %d, "
              "\"median_ms\": %.3f, \"mean_ms\": %.3f, \"samples_per_s\": %.1f, \"model_tflops\": %.2f",
              engine->description().c_str(), omp_get_max_threads(), batch, seq, median, mean, batch * 1000.0 / median,
              tflops);
  if (peak_tflops > 0) std::printf(", \"mfu_percent\": %.1f", 100.0 * tflops / peak_tflops);
  std::printf("}\n");
  return 0;
}

}  // namespace

#if !BERTRAIN_HAS_CUDA
// `bench kernels` times CUDA kernels (tools/bench_kernels/, compiled only with CUDA).
int run_bench_kernels(const std::vector<std::string>&) {
  std::fprintf(stderr, "bertrain: bench kernels: this build has no CUDA support\n");
  return 1;
}
#endif

int run_bench(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fprintf(args.empty() ? stderr : stdout,
                 "usage: bertrain bench BENCHMARK [options]\n\n"
                 "  step        time training steps on the CPU or a GPU (see bench step --help)\n"
                 "  tokenize    time text cleaning and tokenization (see bench tokenize --help)\n"
                 "  allreduce   gradient allreduce bandwidth across ranks (see bench allreduce --help)\n"
                 "  kernels     check every CUDA kernel against its CPU twin, then time it (see bench kernels --help)\n");
    return args.empty() ? 2 : 0;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "step") return bench_step(rest);
  if (args[0] == "tokenize") return run_bench_tokenize(rest);
  if (args[0] == "allreduce") return run_bench_allreduce(rest);
  if (args[0] == "kernels") return run_bench_kernels(rest);
  throw UsageError("bench: unknown benchmark '" + args[0] + "' (available: step, tokenize, allreduce, kernels)");
}

}  // namespace bertrain

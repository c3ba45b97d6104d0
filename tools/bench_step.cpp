// `bertrain bench step`: times whole training steps (forward, BCE loss, backward, Adam) of a randomly
// initialised BERT classifier on the CPU or a CUDA device (fp32 or bf16), and prints the loss of each step so
// that one can see it learn. Batches are packed (the engine computes only real tokens): either one synthetic
// batch (lengths from S/2 to S, or all S with --full-rows), or batches whose row lengths are drawn from a tokenized dataset
// (--lengths-from), optionally extended to their longest row (--padded: the work a padded engine does).
// Compare with tests/reference/bench_torch_step.py (--lengths takes the file --lengths-out writes).
// --forward-only times evaluation steps instead (forward + loss; on a GPU a repeated shape replays as a CUDA graph).
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <string>
#include <cstdio>
#include <vector>

#include "core/build_config.h"
#include "core/atomic_file.h"
#include "core/build_info.h"
#include "core/cpu_threads.h"
#include "core/error.h"
#include "core/files.h"
#include "core/philox.h"
#include "data/dataset.h"
#include "data/split.h"
#include "data/tokenizer.h"
#include "data/tokenizer_loader.h"
#include "dist/communicator.h"
#include "engine/classifier_trainer.h"
#include "engine/training_backend.h"
#include "model/bert_params.h"
#include "model/model_dir.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace bertrain {

namespace {

// Row lengths of every step's batch (warm-up steps first).
using BatchLengths = std::vector<std::vector<int>>;

// `count` batches of `batch` rows whose lengths are the dataset's, in seeded shuffled epochs (as training with
// --shuffle draws them); with `padded` every row gets its batch's longest length.
BatchLengths lengths_from_dataset(const std::string& csv, const std::string& vocab, int max_length, int batch,
                                  int count, uint64_t seed, bool padded) {
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer_file(vocab);  // vocab.txt, or a tokenizer.json
  DatasetOptions options;
  options.max_length = max_length;
  const TextDataset data = load_text_dataset(csv, *tokenizer, nullptr, options);
  BERTRAIN_CHECK(!data.examples.empty(), csv << ": no rows to draw lengths from");
  const int n = static_cast<int>(data.examples.size());
  BatchLengths batches(static_cast<std::size_t>(count));
  std::vector<int> order;
  std::size_t next = 0;
  uint64_t epoch = 0;
  for (std::vector<int>& lengths : batches) {
    for (int r = 0; r < batch; ++r) {
      if (next == order.size()) {  // a new epoch, a new order
        order = seeded_permutation(n, seed + 0x9E3779B97F4A7C15ull * ++epoch);
        next = 0;
      }
      lengths.push_back(static_cast<int>(data.examples[static_cast<std::size_t>(order[next++])].ids.size()));
    }
    if (padded) std::fill(lengths.begin(), lengths.end(), *std::max_element(lengths.begin(), lengths.end()));
  }
  return batches;
}

// {"batches": [[L, ...], ...]}: what tests/reference/bench_torch_step.py --lengths reads.
void write_lengths(const std::string& path, const BatchLengths& batches) {
  std::string text = "{\"batches\": [";
  for (std::size_t i = 0; i < batches.size(); ++i) {
    text += i > 0 ? ",\n  [" : "\n  [";
    for (std::size_t j = 0; j < batches[i].size(); ++j) text += (j > 0 ? ", " : "") + std::to_string(batches[i][j]);
    text += "]";
  }
  text += "\n]}\n";
  write_file_atomically(path, text);
}

// One packed batch of the given lengths: a [CLS]-like first token and random ids, one random label per row.
struct SyntheticBatch {
  std::vector<int32_t> ids, cu_seqlens;
  std::vector<float> targets;
  BertBatch view() const { return packed_batch(ids.data(), cu_seqlens.data(), static_cast<int>(cu_seqlens.size()) - 1); }
};

SyntheticBatch synthetic_batch(const std::vector<int>& lengths, int vocab, int labels, const RandomKey& key,
                               uint64_t salt) {
  SyntheticBatch b;
  b.cu_seqlens.push_back(0);
  b.targets.assign(lengths.size() * static_cast<std::size_t>(labels), 0.0f);
  for (std::size_t r = 0; r < lengths.size(); ++r) {
    for (int s = 0; s < lengths[r]; ++s) {
      const uint64_t index = salt + 1000003ull * (r + 1) + static_cast<uint64_t>(s);
      b.ids.push_back(s == 0 ? 1 : 1 + static_cast<int32_t>(philox_uniform(key, index) * (vocab - 1)));
    }
    b.cu_seqlens.push_back(static_cast<int32_t>(b.ids.size()));
    const int label = static_cast<int>(philox_uniform(key, salt + 3 * r + 1) * labels) % labels;
    b.targets[r * static_cast<std::size_t>(labels) + static_cast<std::size_t>(label)] = 1.0f;
  }
  return b;
}

// Model FLOPs of one step (forward + backward = 3 × forward; forward only: 1 ×) on real tokens: the dense layers (2 FLOPs per weight
// and token: Q, K, V, attention output 4H², feed-forward 2HI) and the two attention products (2·L_b·H per token
// each), as in the MFU accounting of the PaLM paper.
double step_flops(const BertConfig& c, const std::vector<int>& lengths, bool forward_only) {
  double tokens = 0, squares = 0;
  for (int l : lengths) {
    tokens += l;
    squares += static_cast<double>(l) * l;
  }
  const double h = c.hidden_size, inter = c.intermediate_size;
  return (forward_only ? 1.0 : 3.0) * c.num_hidden_layers *
         (2.0 * tokens * (4.0 * h * h + 2.0 * h * inter) + 4.0 * squares * h);
}

int bench_step(const std::vector<std::string>& args) {
  ArgParser parser("bench step",
                   "Times training steps (forward + BCE loss + backward + Adam) of a random BERT classifier and\n"
                   "prints the loss of every step. Batches are packed: only real tokens are computed. Without\n"
                   "--lengths-from every step uses one synthetic batch whose lengths run from S/2 to S (all S with\n"
                   "--full-rows); with it, step i uses the i-th batch of row lengths drawn (seeded, shuffled epochs)\n"
                   "from the tokenized CSV, and --padded extends every row to its batch's longest (the padded\n"
                   "engine's work).\n"
                   "--forward-only times evaluation steps (forward + loss; CUDA graphs replay repeated shapes\n"
                   "unless --no-cuda-graphs).\n"
                   "The defaults are BERT-mini's, on the CPU. For BERT-base on a GPU give --layers 12 --hidden 768\n"
                   "--heads 12 --intermediate 3072 --batch 256 --seq 128 --device cuda --precision bf16.");
  parser.option("layers", "4", "encoder layers");
  parser.option("hidden", "256", "hidden size H");
  parser.option("heads", "4", "attention heads");
  parser.option("intermediate", "1024", "feed-forward size I");
  parser.option("vocab", "31090", "vocabulary size V (SciBERT's)");
  parser.option("batch", "32", "batch size B");
  parser.option("seq", "64", "longest row S of the synthetic batch (rows have S/2 to S tokens)");
  parser.flag("full-rows", "every row of the synthetic batch has S tokens (no padding anywhere to skip)");
  parser.option("lengths-from", "", "CSV (title, description) whose tokenized lengths the batches take").value_name("CSV");
  parser.option("vocab-file", "", "vocab.txt to tokenize --lengths-from with (required with it)").value_name("FILE");
  parser.option("max-length", "512", "with --lengths-from: rows are cut to this many tokens, as training does");
  parser.flag("padded", "with --lengths-from: every row as long as its batch's longest row");
  parser.option("lengths-out", "", "write the batches' row lengths as JSON (bench_torch_step.py --lengths)").value_name("FILE");
  parser.flag("forward-only", "time evaluation steps (forward + loss, no dropout, no update) instead of training");
  parser.flag("no-cuda-graphs", "CUDA: run evaluation steps eagerly (by default repeated shapes replay as graphs)");
  parser.flag("gradient-checkpointing", "recompute each layer's activations in backward (train's flag of that name)");
  parser.option("labels", "4", "classes C");
  parser.option("dropout", "0.1", "hidden and attention dropout").value_name("P");
  parser.option("steps", "20", "timed steps");
  parser.option("warmup", "3", "untimed steps before timing");
  parser.option("threads", "0", "OpenMP threads (0: OpenMP's default)");
  parser.option("seed", "42", "seed of the weights, the batches and the dropout masks");
  parser.option("device", "cpu", "auto: CUDA when a device is visible").value_name("auto|cpu|cuda");
  parser.option("precision", "fp32", "bf16: on CUDA only").value_name("fp32|bf16");
  parser.option("peak-tflops", "0", "device peak TFLOP/s for the utilisation column (0: from the GPU's name)").value_name("X");
  if (!parser.parse(args)) return 0;

  const int threads = parser.get_threads();
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
  const uint64_t seed = parser.get_uint64("seed");
  const std::string lengths_csv = parser.get("lengths-from");
  const bool padded = parser.get_flag("padded");
  if (batch < 1 || seq < 2 || labels < 1 || steps < 1 || warmup < 0) {
    throw UsageError("bench step: --batch, --labels and --steps must be >= 1, --seq >= 2, --warmup >= 0");
  }
  if (!(parser.get_double("peak-tflops") >= 0)) {
    throw UsageError("bench step: --peak-tflops must be >= 0 (0: from the GPU's name)");
  }
  // An output that cannot be written fails now, not after the benchmark ran.
  parser.refuse_empty("lengths-out", "give the JSON file to write, or leave the flag out");
  const std::string lengths_out = parser.get("lengths-out");
  if (!lengths_out.empty()) {
    input_step([&] {
      check_writable_file(lengths_out, "--lengths-out", {parser.get("lengths-from"), parser.get("vocab-file")});
    });
  }
  if (!lengths_csv.empty() && parser.get("vocab-file").empty()) {
    throw UsageError("bench step: --lengths-from needs --vocab-file (the vocab.txt to tokenize it with)");
  }
  if (lengths_csv.empty() && padded) throw UsageError("bench step: --padded needs --lengths-from");
  const bool full_rows = parser.get_flag("full-rows");
  if (full_rows && !lengths_csv.empty()) throw UsageError("bench step: --full-rows is for synthetic batches, not --lengths-from");

  // Every step's row lengths, then one packed batch per distinct step (the loop only reads them).
  for (const char* flag : {"max-length", "vocab-file"}) {
    if (lengths_csv.empty() && parser.given(flag)) {
      throw UsageError(std::string("bench step: --") + flag + " goes with --lengths-from");
    }
  }
  BatchLengths lengths;
  if (!lengths_csv.empty()) {
    const int max_length = parser.get_int("max-length");
    if (max_length < 2) throw UsageError("bench step: --max-length must be >= 2");
    lengths = input_step([&] {
      return lengths_from_dataset(lengths_csv, parser.get("vocab-file"), max_length, batch, warmup + steps, seed, padded);
    });
  } else {
    const RandomKey key{seed, 0, 0xbe7c4u};
    std::vector<int> rows;
    for (int b = 0; b < batch; ++b) {
      rows.push_back(full_rows ? seq : seq / 2 + static_cast<int>(philox_uniform(key, 3 * b) * (seq - seq / 2 + 1)));
    }
    lengths.assign(1, rows);
  }
  if (!parser.get("lengths-out").empty()) write_lengths(parser.get("lengths-out"), lengths);
  int longest = 1, most_tokens = 1;
  for (const std::vector<int>& rows : lengths) {
    longest = std::max(longest, *std::max_element(rows.begin(), rows.end()));
    most_tokens = std::max(most_tokens, std::accumulate(rows.begin(), rows.end(), 0));
  }
  if (longest > config.max_position_embeddings) config.max_position_embeddings = longest;
  input_step([&] { config.validate("bench step"); });
  std::vector<SyntheticBatch> batches;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    batches.push_back(synthetic_batch(lengths[i], config.vocab_size, labels, RandomKey{seed, 0, 0xbe7c4u},
                                      static_cast<uint64_t>(i) << 32));
  }

  const ParamLayout layout = bert_classifier_layout(config, labels);
  TrainerOptions options;
  options.adam.lr = 1e-4;
  options.seed = seed;
  options.cuda_graphs = !parser.get_flag("no-cuda-graphs");
  options.recompute_activations = parser.get_flag("gradient-checkpointing");
  const bool forward_only = parser.get_flag("forward-only");
  // As for train: a --device or --precision this machine cannot run is the flags' fault.
  const BackendChoice choice = input_step([&] { return choose_backend(parser.get("device"), parser.get("precision"), 0); });
  const std::unique_ptr<Communicator> single = make_communicator(LaunchInfo{});
  const std::unique_ptr<TrainingBackend> engine =
      make_training_backend(choice, config, labels, BatchLimits{batch, longest, most_tokens},
                            random_bert_parameters(layout, config, seed), options, *single);
  std::printf("bench step: layers %d, hidden %d, heads %d, intermediate %d, vocab %d, batch %d, longest row %d, "
              "%s, %zu parameters; %s",
              config.num_hidden_layers, config.hidden_size, config.num_attention_heads, config.intermediate_size,
              config.vocab_size, batch, longest,
              lengths_csv.empty() ? (full_rows ? "full rows" : "synthetic lengths")
                                  : (padded ? "dataset lengths, padded" : "dataset lengths"),
              layout.parameter_count(), engine->description().c_str());
  if (engine->device_memory_bytes() > 0) {
    std::printf(", %.2f GiB device memory", static_cast<double>(engine->device_memory_bytes()) / (1u << 30));
  }
  std::printf("\n");
  double peak_tflops = parser.get_double("peak-tflops");
  if (peak_tflops <= 0 && choice.cuda) peak_tflops = gpu_peak_tflops(choice.device, choice.bf16);

  // On a GPU train_step only enqueues the step; how long that takes on the host (enqueue_ms) beside the whole step
  // says whether the host's launches, not the GPU, bound it (then they take nearly the whole step).
  const bool enqueue_timed = choice.cuda && !forward_only;
  const auto since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  };
  std::vector<double> times, enqueue_times;
  double timed_flops = 0, timed_tokens = 0, timed_rows = 0;
  for (int i = 0; i < warmup + steps; ++i) {
    const SyntheticBatch& b = batches[static_cast<std::size_t>(i) % batches.size()];
    const auto start = std::chrono::steady_clock::now();
    double loss, enqueue_ms = 0;
    if (forward_only) {
      loss = engine->evaluate(b.view(), b.targets.data());  // returns the loss: waits for the step
    } else {
      engine->train_step(b.view(), b.targets.data(), 1.0, *single);
      enqueue_ms = since(start);
      loss = engine->take_loss();  // waits for the step: each step is timed whole
    }
    const double ms = since(start);
    if (i >= warmup) {
      times.push_back(ms);
      enqueue_times.push_back(enqueue_ms);
      timed_flops += step_flops(config, lengths[static_cast<std::size_t>(i) % lengths.size()], forward_only);
      timed_tokens += static_cast<double>(b.ids.size());
      timed_rows += static_cast<double>(b.cu_seqlens.size() - 1);
    }
    std::printf("step %3d  loss %.6f  %8.2f ms  %6zu tokens", i + 1, loss, ms, b.ids.size());
    if (enqueue_timed) std::printf("  (enqueued in %.2f ms)", enqueue_ms);
    std::printf("%s\n", i < warmup ? "  (warm-up)" : "");
    std::fflush(stdout);
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  const double total_ms = std::accumulate(times.begin(), times.end(), 0.0);
  const double mean = total_ms / times.size();
  const double tflops = timed_flops / (total_ms * 1e-3) / 1e12;
  std::printf("{\"bench\": \"step\", \"engine\": \"%s\", \"threads\": %d, \"batch\": %d, \"longest\": %d, "
              "\"lengths\": \"%s\", \"median_ms\": %.3f, \"mean_ms\": %.3f, \"samples_per_s\": %.1f, "
              "\"tokens_per_s\": %.0f, \"model_tflops\": %.2f, \"step\": \"%s\"",
              engine->description().c_str(), omp_get_max_threads(), batch, longest,
              lengths_csv.empty() ? (full_rows ? "full" : "synthetic") : (padded ? "dataset-padded" : "dataset"), median,
              mean, timed_rows * 1000.0 / total_ms, timed_tokens * 1000.0 / total_ms, tflops,
              forward_only ? (choice.cuda && options.cuda_graphs ? "forward, cuda graphs" : "forward") : "train");
  if (peak_tflops > 0) std::printf(", \"mfu_percent\": %.1f", 100.0 * tflops / peak_tflops);
  if (enqueue_timed) {
    std::sort(enqueue_times.begin(), enqueue_times.end());
    std::printf(", \"enqueue_median_ms\": %.3f", enqueue_times[enqueue_times.size() / 2]);
  }
  // The process's peak resident memory (the CPU engine's activations live there; the device's are above).
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) == 0) {
    std::printf(", \"peak_rss_gib\": %.3f", static_cast<double>(usage.ru_maxrss) * 1024.0 / (1u << 30));
  }
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

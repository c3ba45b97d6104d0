#include "engine/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <sstream>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>

#include "core/atomic_file.h"
#include "core/count_text.h"
#include "core/cpu_threads.h"
#include "core/error.h"
#include "core/files.h"
#include "core/progress.h"
#include "data/batcher.h"
#include "data/dataset.h"
#include "data/label_checks.h"
#include "data/labels.h"
#include "data/split.h"
#include "data/tokenizer.h"
#include "dist/communicator.h"
#include "engine/batch_view.h"
#include "engine/checkpoint.h"
#include "engine/classifier_trainer.h"
#include "engine/lr_scheduler.h"
#include "engine/mlflow_model.h"
#include "engine/predictor.h"
#include "engine/stop_signals.h"
#include "engine/training_backend.h"
#include "model/model_dir.h"

namespace bertrain {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void validate(const TrainArgs& a) {
  BERTRAIN_CHECK(!a.model_dir.empty(), "--model is required");
  BERTRAIN_CHECK(!a.train_data.empty(), "--train-data is required");
  BERTRAIN_CHECK(!a.out_dir.empty(), "--out is required");
  BERTRAIN_CHECK(a.epochs >= 1, "--epochs must be at least 1, got " << a.epochs);
  BERTRAIN_CHECK(a.batch_size >= 1, "--batch-size must be at least 1, got " << a.batch_size);
  BERTRAIN_CHECK(a.lr > 0 && std::isfinite(a.lr), "--lr must be positive, got " << a.lr);
  BERTRAIN_CHECK(a.dropout >= 0 && a.dropout < 1, "--dropout must be in [0, 1), got " << a.dropout);
  BERTRAIN_CHECK(a.lr_factor > 0 && a.lr_factor < 1, "--lr-factor must be in (0, 1), got " << a.lr_factor);
  BERTRAIN_CHECK(a.lr_patience >= 0, "--lr-patience must be >= 0, got " << a.lr_patience);
  BERTRAIN_CHECK(a.adam_beta1 >= 0 && a.adam_beta1 < 1, "--adam-beta1 must be in [0, 1), got " << a.adam_beta1);
  BERTRAIN_CHECK(a.adam_beta2 >= 0 && a.adam_beta2 < 1, "--adam-beta2 must be in [0, 1), got " << a.adam_beta2);
  BERTRAIN_CHECK(a.adam_eps > 0, "--adam-eps must be positive, got " << a.adam_eps);
  BERTRAIN_CHECK(a.weight_decay >= 0, "--weight-decay must be >= 0, got " << a.weight_decay);
  BERTRAIN_CHECK(a.num_samples >= 0, "--num-samples must be >= 0, got " << a.num_samples);
  if (a.val_data.empty()) {
    BERTRAIN_CHECK(a.val_fraction > 0 && a.val_fraction < 1, "--val-fraction must be in (0, 1), got " << a.val_fraction);
  }
  BERTRAIN_CHECK(a.collective_timeout_s > 0, "--collective-timeout must be positive, got " << a.collective_timeout_s);
  BERTRAIN_CHECK(a.log_steps >= 0, "--log-steps must be >= 0, got " << a.log_steps);
  BERTRAIN_CHECK(a.log_steps == 0 || !a.mlflow_dir.empty(), "--log-steps logs to MLflow: give --mlflow-dir too");
  BERTRAIN_CHECK(a.save_steps >= 0, "--save-steps must be >= 0, got " << a.save_steps);
  BERTRAIN_CHECK(a.keep >= 0, "--keep must be >= 0, got " << a.keep);
  BERTRAIN_CHECK(a.keep == 0 || a.save_steps > 0, "--keep " << a.keep << " keeps step checkpoints: give --save-steps too");
  BERTRAIN_CHECK(a.data.max_length >= 0, "--max-length must be >= 0 (0: the model's), got " << a.data.max_length);
  BERTRAIN_CHECK(a.grad_reduce == "fp32" || a.grad_reduce == "bf16",
                 "--grad-reduce must be fp32 or bf16, got '" << a.grad_reduce << "'");
}

json args_json(const TrainArgs& a) {
  return json{{"model", a.model_dir},          {"train_data", a.train_data},   {"val_data", a.val_data},
              {"val_fraction", a.val_fraction}, {"out", a.out_dir},             {"epochs", a.epochs},
              {"batch_size", a.batch_size},     {"lr", a.lr},                   {"dropout", a.dropout},
              {"lr_factor", a.lr_factor},       {"lr_patience", a.lr_patience}, {"adam_beta1", a.adam_beta1},
              {"adam_beta2", a.adam_beta2},     {"adam_eps", a.adam_eps},       {"weight_decay", a.weight_decay},
              {"class_weights", a.class_weights}, {"num_samples", a.num_samples}, {"seed", a.seed},
              {"split_seed", a.split_seed},     {"shuffle", a.shuffle},         {"clean", a.clean},
              {"device", a.device},             {"precision", a.precision},     {"grad_reduce", a.grad_reduce},
              {"collective_timeout_s", a.collective_timeout_s},
              {"format", a.data.format},        {"text_columns", a.data.text_columns},
              {"label_column", a.data.label_column}, {"multi_label", a.data.multi_label},
              {"label_separator", a.data.label_separator}, {"skip_bad_rows", a.data.skip_bad_rows},
              {"max_length", a.data.max_length}, {"head_init", head_init_name(a.head_init)},
              {"save_steps", a.save_steps},     {"keep", a.keep},               {"log_steps", a.log_steps}};
}

// The examples of `rows` of `data`, labelled by `labels` (a label outside them is an Error naming the file).
std::vector<Example> labelled_examples(const TextDataset& data, const std::vector<int>& rows, const LabelSet& labels) {
  std::vector<Example> out;
  out.reserve(rows.size());
  for (int r : rows) {
    Example e = data.examples[static_cast<std::size_t>(r)];
    e.labels = labels.require_all(data.tags[static_cast<std::size_t>(r)], data.source);
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<int> all_rows(std::size_t n) {
  std::vector<int> rows(n);
  for (std::size_t i = 0; i < n; ++i) rows[i] = static_cast<int>(i);
  return rows;
}

// The per-epoch metrics an MLflow run gets (--mlflow-dir), as metrics.jsonl has them.
constexpr const char* kMlflowMetrics[] = {"train_loss", "val_loss", "lr", "samples_per_s", "elapsed_s"};

// Running mean of batch losses, as the original reports its epoch losses.
struct RunningMean {
  double mean = 0;
  int count = 0;
  void add(double x) { mean += (x - mean) / ++count; }
  // JSON keeps a double's 17 significant digits, so a mid-epoch checkpoint restores the mean bit for bit.
  json to_json() const { return json{{"mean", mean}, {"count", count}}; }
  static RunningMean from_json(const json& j) { return RunningMean{j.at("mean").get<double>(), j.at("count").get<int>()}; }
};

void write_run_files(const std::string& out, const json& history, const json* results) {
  std::string lines;
  for (const json& m : history) lines += m.dump() + "\n";
  write_file_atomically(out + "/metrics.jsonl", lines);
  if (results != nullptr) write_json_file(out + "/results.json", *results);
}

// ---- The parts of a run, in the order run_training calls them ---------------------------------------

// Where a run reads and writes: RUN_DIR/last and best, and the model directory it starts from.
struct RunDirs {
  std::string last, best;
  std::string source;  // last/ when resuming, else --model (a RUN_DIR given as --model: its best/)
  std::string vocab;   // copied into every checkpoint
  std::vector<std::string> to_clear;  // --overwrite: the earlier run's files, removed once the inputs are checked
  bool finished = false;              // --resume of a run that already trained its --epochs (results.json written)
};

// What a run writes into RUN_DIR; a fresh run refuses a RUN_DIR that holds any of them (unless --overwrite).
constexpr const char* kRunFiles[] = {"last", "best", "checkpoints", "metrics.jsonl", "results.json", "evaluation.json",
                                     "report.html"};

// Repairs an interrupted checkpoint swap (rank 0), then checks that --resume finds a run to continue, or
// that a fresh run does not overwrite one.
RunDirs prepare_run_dir(const TrainArgs& args, Communicator& comm) {
  RunDirs dirs{args.out_dir + "/last", args.out_dir + "/best", "", "", {}, false};
  BERTRAIN_CHECK(!(args.resume && args.overwrite), "--resume continues the run in --out and --overwrite replaces it: "
                                                   "give one of them");
  BERTRAIN_CHECK(!path_exists(args.out_dir) || directory_exists(args.out_dir),
                 "--out " << args.out_dir << " is a file, not a run directory");
  if (comm.rank() == 0) {
    recover_directory(dirs.last);
    recover_directory(dirs.best);
  }
  // Every rank reads RUN_DIR below: wait until rank 0 has repaired it.
  comm.all_true(true);
  if (args.resume) {
    BERTRAIN_CHECK(file_exists(dirs.last + "/trainer_state.json"),
                   "--resume: " << dirs.last << "/trainer_state.json not found (no run to continue in " << args.out_dir
                                << ")");
    // results.json is written last: with it, the run trained all its epochs. Asked for no more, there is nothing to
    // do, and saying so with exit status 0 makes a requeued or retried job step idempotent.
    if (file_exists(args.out_dir + "/results.json")) {
      const json state = read_json_file(dirs.last + "/trainer_state.json");
      dirs.finished = !state.contains("steps_in_epoch") && state.value("epochs_done", 0) >= args.epochs;
    }
  } else {
    std::vector<std::string> present;
    for (const char* name : kRunFiles) {
      if (path_exists(args.out_dir + "/" + name)) present.push_back(name);
    }
    if (!present.empty() && !args.overwrite) {
      std::string names;
      for (const std::string& name : present) names += (names.empty() ? "" : ", ") + name;
      BERTRAIN_FAIL(args.out_dir << " already holds a run (" << names << "); pass --resume to continue it, --overwrite "
                                 << "to replace it, or choose another --out");
    }
    for (const std::string& name : present) dirs.to_clear.push_back(args.out_dir + "/" + name);
  }
  dirs.source = args.resume ? dirs.last : resolve_model_dir(args.model_dir);
  dirs.vocab = dirs.source + "/vocab.txt";
  return dirs;
}

// The labelled training and validation rows.
struct TrainingData {
  LabelSet labels;
  std::vector<Example> train, val;
  DatasetOptions options;     // as the files were read (max_length resolved)
  std::size_t truncated = 0;  // rows cut to max_length tokens
  std::size_t skipped = 0;    // bad rows skipped (--skip-bad-rows)
  std::vector<std::string> skip_reasons;
  std::vector<std::string> warnings;  // about the labels (data/label_checks.h), printed by rank 0
};

// Training rows and validation rows: with --multi-label a seeded random split (label sets do not stratify), else
// Made-With-ML's stratified split by label.
Split split_rows(const TrainArgs& args, const TextDataset& file, const std::vector<int>& rows, const LabelSet& labels) {
  if (args.data.multi_label) {
    const int n = static_cast<int>(rows.size());
    const int n_val = static_cast<int>(std::ceil(args.val_fraction * n));
    std::vector<int> order = seeded_permutation(n, args.split_seed);
    Split split;
    split.val.assign(order.begin(), order.begin() + n_val);
    split.train.assign(order.begin() + n_val, order.end());
    std::sort(split.val.begin(), split.val.end());
    std::sort(split.train.begin(), split.train.end());
    return split;
  }
  std::vector<int> row_labels;
  for (int r : rows) row_labels.push_back(labels.require(file.tags[static_cast<std::size_t>(r)].at(0), file.source));
  return stratified_split(row_labels, args.val_fraction, args.split_seed);
}

// Reads --train-data (and --val-data, else a split of it), tokenized as the model in `source_dir` expects.
// Labels: the sorted labels of the training rows, or the resumed model's.
TrainingData load_training_data(const TrainArgs& args, const BertConfig& source_config, const BertTokenizer& tokenizer) {
  DatasetOptions data_options = args.data;
  data_options.clean = args.clean;
  data_options.read_labels = true;
  if (data_options.max_length == 0) data_options.max_length = source_config.max_position_embeddings;
  BERTRAIN_CHECK(data_options.max_length <= source_config.max_position_embeddings,
                 "--max-length " << data_options.max_length << " is more than the model's max_position_embeddings "
                                 << source_config.max_position_embeddings);
  const TextDataset train_file = load_text_dataset(args.train_data, tokenizer, nullptr, data_options);
  std::vector<int> rows = all_rows(train_file.examples.size());
  if (args.num_samples > 0) rows = sample_rows(static_cast<int>(rows.size()), args.num_samples, args.split_seed);

  std::vector<std::string> tags;
  for (int r : rows) {
    for (const std::string& tag : train_file.tags[static_cast<std::size_t>(r)]) tags.push_back(tag);
  }
  TrainingData data{args.resume ? LabelSet(source_config.labels) : LabelSet::from_tags(tags), {}, {}, data_options,
                    0, 0, {}, {}};
  BERTRAIN_CHECK(data.labels.size() >= (args.data.multi_label ? 1 : 2),
                 args.train_data << ": training needs at least " << (args.data.multi_label ? "one label" : "two distinct labels")
                                 << ", found " << data.labels.size());
  data.truncated = train_file.truncated;
  data.skipped = train_file.skipped;
  data.skip_reasons = train_file.skip_reasons;
  if (!args.val_data.empty()) {
    const TextDataset val_file = load_text_dataset(args.val_data, tokenizer, nullptr, data_options);
    data.truncated += val_file.truncated;
    data.skipped += val_file.skipped;
    data.skip_reasons.insert(data.skip_reasons.end(), val_file.skip_reasons.begin(), val_file.skip_reasons.end());
    data.train = labelled_examples(train_file, rows, data.labels);
    data.val = labelled_examples(val_file, all_rows(val_file.examples.size()), data.labels);
  } else {
    const Split split = split_rows(args, train_file, rows, data.labels);
    std::vector<int> train_rows, val_rows;
    for (int i : split.train) train_rows.push_back(rows[static_cast<std::size_t>(i)]);
    for (int i : split.val) val_rows.push_back(rows[static_cast<std::size_t>(i)]);
    data.train = labelled_examples(train_file, train_rows, data.labels);
    data.val = labelled_examples(train_file, val_rows, data.labels);
  }
  const std::vector<int> val_counts = count_label_rows(data.val, data.labels.size());
  data.warnings =
      label_count_warnings(data.labels.names(), count_label_rows(data.train, data.labels.size()), val_counts);
  if (args.data.multi_label && !args.data.label_separator_given) {
    for (std::string& w : label_separator_warnings(data.labels.names(), args.data.label_separator)) {
      data.warnings.push_back(std::move(w));
    }
  }
  const bool one_row_each =
      data.train.empty() && std::all_of(val_counts.begin(), val_counts.end(), [](int n) { return n == 1; });
  BERTRAIN_CHECK(!data.train.empty() && !data.val.empty(),
                 "need at least one training and one validation row, got "
                     << data.train.size() << " and " << data.val.size()
                     << (one_row_each ? " (each of the " + std::to_string(data.labels.size()) +
                                            " labels has a single row, which the split holds out for validation; is "
                                            "--label-column '" + args.data.label_column + "' the label?)"
                                      : ""));
  return data;
}

void print_warnings(const TrainingData& data) {
  for (const std::string& warning : data.warnings) std::fprintf(stderr, "bertrain: warning: %s\n", warning.c_str());
  std::fflush(stderr);
}

// Adam, class weights and the multi-GPU settings from the command line.
TrainerOptions trainer_options(const TrainArgs& args, const TrainingData& data) {
  TrainerOptions options;
  options.adam.lr = args.lr;
  options.adam.beta1 = args.adam_beta1;
  options.adam.beta2 = args.adam_beta2;
  options.adam.eps = args.adam_eps;
  options.adam.weight_decay = args.weight_decay;
  options.seed = args.seed;
  if (args.class_weights) {
    std::vector<int> counts(static_cast<std::size_t>(data.labels.size()), 0);
    for (const Example& e : data.train) {
      for (int label : e.labels) ++counts[static_cast<std::size_t>(label)];
    }
    for (int c : counts) options.class_weights.push_back(c > 0 ? 1.0f / static_cast<float>(c) : 0.0f);
  }
  options.collective_timeout_s = args.collective_timeout_s;
  options.reduce_bf16 = args.grad_reduce == "bf16";
  return options;
}

// What the epoch loop carries from epoch to epoch, and what a checkpoint saves of it.
struct RunState {
  int first_epoch = 0, best_epoch = -1;
  // A mid-epoch checkpoint: the batches of first_epoch already taken, their running loss and training seconds.
  int first_step = 0;
  RunningMean first_loss;
  double first_seconds = 0;
  double best_val_loss = std::numeric_limits<double>::infinity();
  double elapsed_before = 0;  // seconds spent by the runs this one resumes
  json history = json::array();
  ReduceLROnPlateau scheduler;
  std::string mlflow_run_id;  // the MLflow run this training logs to (--mlflow-dir), continued on --resume
};

// A fresh run's state, or the one saved in last/trainer_state.json (and the optimizer moments into `engine`).
RunState initial_state(const TrainArgs& args, const RunDirs& dirs, TrainingBackend& engine) {
  RunState run{0, -1, 0, {}, 0, std::numeric_limits<double>::infinity(), 0, json::array(),
               ReduceLROnPlateau(args.lr, args.lr_factor, args.lr_patience), ""};
  if (!args.resume) return run;
  const json state = read_json_file(dirs.last + "/trainer_state.json");
  try {
    run.first_epoch = state.at("epochs_done").get<int>();
    run.best_epoch = state.at("best_epoch").get<int>();
    // null: no epoch has ended yet (a step checkpoint of the first epoch; JSON has no infinity).
    const json& best = state.at("best_val_loss");
    run.best_val_loss = best.is_null() ? std::numeric_limits<double>::infinity() : best.get<double>();
    run.history = state.at("history");
    run.elapsed_before = state.at("elapsed_s").get<double>();
    run.scheduler = ReduceLROnPlateau::from_json(state.at("scheduler"));
    run.mlflow_run_id = state.value("mlflow_run_id", "");
    if (state.contains("steps_in_epoch")) {  // a step checkpoint
      run.first_step = state.at("steps_in_epoch").get<int>();
      run.first_loss = RunningMean::from_json(state.at("running_loss"));
      run.first_seconds = state.at("epoch_train_seconds").get<double>();
    }
    BERTRAIN_CHECK(state.at("seed").get<uint64_t>() == args.seed,
                   "--resume: the run used --seed " << state.at("seed") << ", got " << args.seed);
  } catch (const json::exception& e) {
    BERTRAIN_FAIL(dirs.last << "/trainer_state.json: " << e.what());
  }
  engine.load_optimizer(dirs.last + "/optimizer.safetensors");
  engine.set_learning_rate(run.scheduler.learning_rate());
  // (A run that trained all its epochs without writing results.json was stopped between its last checkpoint and its
  // run files: resuming writes them, from the checkpoint's history. One with results.json never gets here.)
  return run;
}

void print_start(const TrainArgs& args, const TrainingData& data, const LoadedModel& model,
                 const TrainingBackend& engine, const Communicator& comm) {
  if (data.skipped > 0) {
    std::printf("note: skipped %s (--skip-bad-rows); the first:\n", count_of(data.skipped, "bad row").c_str());
    for (const std::string& why : data.skip_reasons) std::printf("  %s\n", why.c_str());
  }
  if (data.truncated > 0) {
    std::printf("note: %s longer than %d tokens %s truncated\n", count_of(data.truncated, "row").c_str(),
                data.options.max_length, data.truncated == 1 ? "was" : "were");
  }
  std::printf("training %s on %s, validating on %zu; %d labels%s; %zu parameters; batch %d, %s\n",
              args.model_dir.c_str(), count_of(data.train.size(), "row").c_str(), data.val.size(), data.labels.size(),
              args.data.multi_label ? " (multi-label)" : "", model.layout.parameter_count(), args.batch_size,
              count_of(args.epochs, "epoch").c_str());
  std::printf("engine: %s%s", engine.description().c_str(), comm.size() > 1 ? " (rank 0)" : "");
  if (engine.device_memory_bytes() > 0) {
    std::printf("; %.2f GiB of device memory for parameters, gradients, optimizer state and activations",
                static_cast<double>(engine.device_memory_bytes()) / (1u << 30));
  }
  std::printf("\n");
  std::fflush(stdout);
}

// One pass over this rank's slices of the training batches from batch `first_step` on (a resumed step
// checkpoint; `loss_mean` holds the earlier batches' losses); returns the running mean of the (rank-summed) batch
// losses. A GPU engine runs a step behind the host: step i's loss is taken after step i + 1 is enqueued, so the
// next batch is prepared while the device computes. Every --save-steps optimizer steps (but on the epoch's last
// batch, which the epoch's checkpoint covers) the pending loss is taken and save_step(batches done, losses so
// far) is called on every rank.
struct EpochResult {
  double train_loss = 0;  // running mean of the batch losses
  bool stop = false;      // a stop signal reached some rank (StopSignals): every rank agrees on it
  bool finished = true;   // false: stopped inside the epoch, after save_step
};

EpochResult train_epoch(const TrainArgs& args, int epoch, int first_step, RunningMean loss_mean,
                        const Batcher& batcher, TrainingBackend& engine, Communicator& comm, Progress& progress,
                        Batch& batch, const std::function<void(int, const RunningMean&)>& save_step,
                        const std::function<void(long, double)>& log_step) {
  const auto epoch_start = Clock::now();
  const int steps = batcher.batches_per_epoch();
  EpochResult result;
  auto record_loss = [&](int step_index) {
    // The stop flag rides on the loss's allreduce: a signal that reached one rank stops all of them at the
    // same step, without another collective.
    double sums[2] = {engine.take_loss(), StopSignals::received() != 0 ? 1.0 : 0.0};
    comm.allreduce_sum(sums, 2);
    const double loss = sums[0];
    result.stop |= sums[1] > 0;
    // Every rank sees the same summed loss and gradient, so every rank stops here together. The step's
    // update is already applied, so nothing more is saved: last/ keeps the last checkpoint.
    const double grad_norm = engine.last_gradient_norm();
    BERTRAIN_CHECK(std::isfinite(loss) && std::isfinite(grad_norm),
                   "epoch " << epoch + 1 << ", step " << step_index + 1 << " of " << steps << ": the training loss is "
                            << loss << " and the gradient norm " << grad_norm
                            << "; training stopped (last/ holds the last checkpoint; try a lower --lr, or --precision "
                               "fp32)");
    loss_mean.add(loss);
    const double seconds = seconds_since(epoch_start);
    const double rate = (step_index + 1 - first_step) * static_cast<double>(args.batch_size) / seconds;
    const double eta = seconds / (step_index + 1) * ((args.epochs - epoch) * steps - (step_index + 1));
    progress.update(epoch + 1, args.epochs, step_index + 1, steps, loss, rate, eta);
    // The global step counts batches from the start of training, the same after any resume.
    const long global_step = static_cast<long>(epoch) * steps + step_index + 1;
    if (args.log_steps > 0 && global_step % args.log_steps == 0) log_step(global_step, loss);
  };
  int pending = -1;  // the step whose loss is not taken yet
  for (int i = first_step; i < steps; ++i) {
    batcher.batch(epoch, i, &batch);
    engine.train_step(bert_batch_view(batch), batch.targets.data(), batch.loss_scale, comm);
    if (pending >= 0) record_loss(pending);
    pending = i;
    const bool save_due = args.save_steps > 0 && engine.optimizer_steps() % args.save_steps == 0;
    if ((save_due || result.stop) && i + 1 < steps) {
      record_loss(pending);
      pending = -1;
      save_step(i + 1, loss_mean);
      if (result.stop) {
        result.train_loss = loss_mean.mean;
        result.finished = false;
        return result;
      }
    }
  }
  if (pending >= 0) record_loss(pending);
  result.train_loss = loss_mean.mean;
  return result;
}

// The mean validation loss over the validation batches (dropout off), summed over ranks.
double validation_loss(int epoch, const Batcher& batcher, TrainingBackend& engine, Communicator& comm, Batch& batch) {
  RunningMean loss_mean;
  for (int i = 0; i < batcher.batches_per_epoch(); ++i) {
    batcher.batch(epoch, i, &batch);
    double loss = engine.evaluate(bert_batch_view(batch), batch.targets.data()) * batch.loss_scale;
    comm.allreduce_sum(&loss, 1);
    loss_mean.add(loss);
  }
  return loss_mean.mean;
}

// Replaces last/ (and, with --keep, writes checkpoints/step-<S>/) with the current weights, optimizer and
// trainer `state`, each directory swapped in atomically; older step checkpoints beyond --keep are removed.
void write_checkpoint(const TrainArgs& args, const RunDirs& dirs, const LoadedModel& model, TrainingBackend& engine,
                      const std::vector<float>& weights, const json& state, bool step_checkpoint) {
  auto write = [&](const std::string& dir) {
    save_model_dir(dir, model.config, model.layout, weights.data(), dirs.vocab);
    engine.save_optimizer(dir + "/optimizer.safetensors");
    write_json_file(dir + "/trainer_state.json", state);
  };
  replace_directory_atomically(dirs.last, write);
  if (!step_checkpoint || args.keep == 0) return;
  const std::string folder = args.out_dir + "/checkpoints";
  make_directories(folder);
  replace_directory_atomically(folder + "/step-" + std::to_string(engine.optimizer_steps()), write);
  std::vector<std::pair<long, std::string>> kept;  // (step, path), for the newest --keep
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    const std::size_t tmp = name.find(".tmp-");
    if (name.rfind("step-", 0) == 0 && tmp != std::string::npos) {
      recover_directory(folder + "/" + name.substr(0, tmp));  // removes it when its writer was killed
      continue;
    }
    if (name.rfind("step-", 0) != 0 || name.find_first_not_of("0123456789", 5) != std::string::npos) continue;
    kept.emplace_back(std::stol(name.substr(5)), entry.path().string());
  }
  std::sort(kept.begin(), kept.end());
  for (std::size_t i = 0; i + static_cast<std::size_t>(args.keep) < kept.size(); ++i) remove_tree(kept[i].second);
}

// The trainer state every checkpoint holds; mid-epoch ones add where in the epoch they are.
json trainer_state(const TrainArgs& args, const RunState& run, const TrainingBackend& engine, int epochs_done,
                   double elapsed, const json& params) {
  return json{{"epochs_done", epochs_done},          {"best_epoch", run.best_epoch},
              {"best_val_loss", run.best_val_loss},    {"history", run.history},
              {"elapsed_s", elapsed},                  {"seed", args.seed},
              {"scheduler", run.scheduler.to_json()},  {"optimizer_steps", engine.optimizer_steps()},
              {"params", params},                      {"mlflow_run_id", run.mlflow_run_id}};
}

// best/: the model directory of the best epoch so far, swapped in atomically.
void save_best(const RunDirs& dirs, const LoadedModel& model, const std::vector<float>& weights) {
  replace_directory_atomically(dirs.best, [&](const std::string& dir) {
    save_model_dir(dir, model.config, model.layout, weights.data(), dirs.vocab);
  });
}

// Rank 0, after each epoch: last/ (model, optimizer, trainer state), best/ when the epoch improved, then
// metrics.jsonl; each directory swapped in atomically.
void save_epoch(const TrainArgs& args, const RunDirs& dirs, const LoadedModel& model, TrainingBackend& engine,
                const RunState& run, int epoch, bool improved, double elapsed, const json& params) {
  const std::vector<float>& weights = engine.parameters();
  // last/ first: until it exists a killed first epoch leaves no run files, so the restart is a fresh run and not
  // refused as a RUN_DIR holding one; a kill between last/ and best/ is repaired when the run resumes.
  write_checkpoint(args, dirs, model, engine, weights, trainer_state(args, run, engine, epoch + 1, elapsed, params),
                   false);
  if (improved) save_best(dirs, model, weights);
  write_run_files(args.out_dir, run.history, nullptr);
}

// Rank 0, every --save-steps optimizer steps inside an epoch: last/ (and checkpoints/step-<S>) as of `steps_done`
// batches of `epoch`, with those batches' running loss and training seconds, so that --resume continues at the
// next batch and ends where the uninterrupted run does, bit for bit.
void save_step(const TrainArgs& args, const RunDirs& dirs, const LoadedModel& model, TrainingBackend& engine,
               const RunState& run, int epoch, int steps_done, const RunningMean& loss, double epoch_seconds,
               double elapsed, const json& params) {
  json state = trainer_state(args, run, engine, epoch, elapsed, params);
  state["steps_in_epoch"] = steps_done;
  state["running_loss"] = loss.to_json();
  state["epoch_train_seconds"] = epoch_seconds;
  write_checkpoint(args, dirs, model, engine, engine.parameters(), state, true);
}

// What a run stopped by a signal says: where its checkpoint is and how to go on.
std::string stop_message(const TrainArgs& args, const std::string& where, const TrainingBackend& engine) {
  const int sig = StopSignals::received();
  const char* name = sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : sig == SIGUSR1 ? "SIGUSR1" : "a signal";
  std::ostringstream os;
  os << "stopped by " << (sig != 0 ? name : "a signal to another rank") << " " << where << " of " << args.epochs
     << ", after optimizer step " << engine.optimizer_steps() << "; checkpoint in " << args.out_dir
     << "/last; continue with the same command and --resume";
  return os.str();
}

// Test hook: BERTRAIN_TEST_CRASH_AFTER_STEP=S ends the process abruptly (std::_Exit(137), as a kill -9 would
// show) right after the checkpoint of optimizer step S is written, so tests can resume from a mid-epoch
// checkpoint of a run that really stopped there.
long test_crash_step() {
  const char* v = std::getenv("BERTRAIN_TEST_CRASH_AFTER_STEP");
  return v != nullptr && *v != '\0' ? std::atol(v) : -1;
}

// --resume of a run that already trained its epochs: nothing to do; results.json as it is.
TrainingOutcome finished_run(const TrainArgs& args, bool verbose) {
  TrainingOutcome outcome{input_step([&] { return read_json_file(args.out_dir + "/results.json"); }), true};
  if (verbose) {
    const json& r = outcome.results;
    const int epochs = static_cast<int>(r.value("metrics", json::array()).size());
    std::printf("%s already finished %s; nothing to do (best/: epoch %d, val_loss %.5f; raise --epochs to train "
                "more)\n",
                args.out_dir.c_str(), count_of(epochs, "epoch").c_str(), r.value("best_epoch", -1) + 1,
                r.value("best_val_loss", std::nan("")));
    std::fflush(stdout);
  }
  return outcome;
}

}  // namespace

TrainingOutcome run_training(const TrainArgs& args, Communicator& comm) {
  input_step([&] { validate(args); });
  // From here on SIGTERM, SIGINT and SIGUSR1 stop the run at its next step with a checkpoint (one that arrives
  // while the data and model load is acted on after the first step).
  const StopSignals stop_signals;
  const bool leader = comm.rank() == 0;  // prints and writes RUN_DIR
  const bool verbose = leader && !args.quiet;
  const auto start = Clock::now();
  configure_cpu_threads(args.threads, comm.info().local_rank);
  const RunDirs dirs = input_step([&] { return prepare_run_dir(args, comm); });
  if (dirs.finished) return finished_run(args, verbose);

  // Data and model: what fails here is the user's input (exit status 2, never retried).
  const BertConfig source_config = input_step([&] { return BertConfig::load(dirs.source + "/config.json"); });
  const BertTokenizer tokenizer = input_step([&] { return load_model_tokenizer(dirs.source); });
  const TrainingData data = input_step([&] { return load_training_data(args, source_config, tokenizer); });
  if (leader) print_warnings(data);  // with --quiet too: it silences progress, not problems
  LoadedModel model =
      input_step([&] { return load_model_dir(dirs.source, data.labels.names(), args.seed, args.head_init); });
  model.config.classifier_dropout = args.dropout;
  model.config.problem_type = args.data.multi_label ? "multi_label_classification" : "single_label_classification";
  // evaluate and predict must read and prepare text as training did.
  model.config.extra[kCleanTextKey] = args.clean;
  model.config.extra[kDataKey] = json{{"text_columns", data.options.text_columns},
                                      {"label_column", data.options.label_column},
                                      {"label_separator", data.options.label_separator},
                                      {"max_length", data.options.max_length}};
  // Every rank starts from rank 0's parameters (they agree already when loaded from the same files; the
  // broadcast makes that a guarantee rather than an assumption about shared filesystems).
  comm.broadcast(model.params.data(), model.params.size(), 0);

  BatcherOptions train_batching;
  train_batching.batch_size = args.batch_size;
  train_batching.shuffle = args.shuffle;
  train_batching.seed = args.seed;
  train_batching.classes = data.labels.size();
  train_batching.rank = comm.rank();
  train_batching.world_size = comm.size();
  BatcherOptions val_batching = train_batching;
  val_batching.shuffle = false;
  const Batcher train_batcher(&data.train, train_batching), val_batcher(&data.val, val_batching);

  // Engine: its activations are sized by the most tokens of this rank's slices, not by rows × longest row.
  // --device cuda without a device, or bf16 on the CPU, is a flag that does not fit this machine (an input
  // error); what fails while the engine is built (device memory) is not.
  const BackendChoice choice =
      input_step([&] { return choose_backend(args.device, args.precision, comm.info().local_rank); });
  const std::unique_ptr<TrainingBackend> engine =
      make_training_backend(choice, model.config, data.labels.size(), batch_limits({&train_batcher, &val_batcher}),
                            model.params, trainer_options(args, data), comm);
  RunState run = input_step([&] { return initial_state(args, dirs, *engine); });
  if (verbose && args.resume) {
    if (run.first_epoch < args.epochs) {
      std::printf("resuming from epoch %d, step %ld (%s)\n", run.first_epoch + 1,
                  static_cast<long>(engine->optimizer_steps()), dirs.last.c_str());
    } else {  // stopped after its last checkpoint, before results.json
      std::printf("resuming after the last epoch, step %ld (%s): writing the run files\n",
                  static_cast<long>(engine->optimizer_steps()), dirs.last.c_str());
    }
  }

  json params = args_json(args);
  params["world_size"] = comm.size();
  params["engine"] = engine->description();
  params["device_memory_bytes"] = engine->device_memory_bytes();
  if (verbose) print_start(args, data, model, *engine, comm);
  if (leader) {
    // --overwrite: the earlier run goes only now, once the new run's inputs have been read and checked.
    for (const std::string& path : dirs.to_clear) remove_tree(path);
    make_directories(args.out_dir);
    // best/ is written after last/ (save_epoch): a run stopped between the two has last/ of an epoch that improved
    // and best/ of an older one, or none. That epoch's weights are last/'s; write them into best/ again.
    if (run.first_step == 0 && run.best_epoch >= 0 && run.best_epoch == run.first_epoch - 1) {
      save_best(dirs, model, engine->parameters());
    }
  }
  // MLflow (rank 0): a new run, or the resumed training's own, RUNNING until the end.
  std::unique_ptr<MlflowRun> mlflow;
  if (leader && !args.mlflow_dir.empty()) {
    const std::string name = args.run_name.empty() ? folder_name(args.out_dir) : args.run_name;
    mlflow = std::make_unique<MlflowRun>(args.mlflow_dir, args.experiment, name, run.mlflow_run_id);
    run.mlflow_run_id = mlflow->run_id();
    mlflow->log_params(params);
    for (const char* key : kMlflowMetrics) {
      std::vector<std::pair<long, double>> values;
      for (const json& m : run.history) values.emplace_back(m.at("epoch").get<long>(), m.at(key).get<double>());
      mlflow->reset_metric(key, values);  // a resumed run: as its checkpoint's history says
    }
    // Per-step losses up to the checkpoint's step stay; any logged after it (before a kill) are redone.
    mlflow->truncate_metric("step_train_loss", static_cast<long>(run.first_epoch) * train_batcher.batches_per_epoch() +
                                                   run.first_step);
    if (verbose) std::printf("mlflow: run %s in %s/%s\n", mlflow->run_id().c_str(), args.mlflow_dir.c_str(),
                             mlflow->experiment_id().c_str());
  }

  // Epochs.
  try {
  Progress progress(verbose);
  Batch batch;
  const long crash_step = test_crash_step();
  for (int epoch = run.first_epoch; epoch < args.epochs; ++epoch) {
    const auto epoch_start = Clock::now();
    const bool resumed_epoch = epoch == run.first_epoch && run.first_step > 0;
    const double seconds_before = resumed_epoch ? run.first_seconds : 0.0;
    auto on_step_checkpoint = [&](int steps_done, const RunningMean& loss) {
      if (!leader) return;
      save_step(args, dirs, model, *engine, run, epoch, steps_done, loss, seconds_before + seconds_since(epoch_start),
                run.elapsed_before + seconds_since(start), params);
      if (engine->optimizer_steps() == crash_step) std::_Exit(137);
    };
    const EpochResult trained =
        train_epoch(args, epoch, resumed_epoch ? run.first_step : 0, resumed_epoch ? run.first_loss : RunningMean{},
                    train_batcher, *engine, comm, progress, batch, on_step_checkpoint, [&](long step, double loss) {
                      if (mlflow) mlflow->log_metric("step_train_loss", loss, step);
                    });
    if (!trained.finished) {
      progress.clear();
      throw TrainingStopped(stop_message(args, "in epoch " + std::to_string(epoch + 1), *engine));
    }
    const double train_loss = trained.train_loss;
    const double train_seconds = seconds_before + seconds_since(epoch_start);
    const double val_loss = validation_loss(epoch, val_batcher, *engine, comm, batch);
    const double lr = run.scheduler.step(val_loss);
    engine->set_learning_rate(lr);
    const bool improved = val_loss < run.best_val_loss;
    if (improved) {
      run.best_val_loss = val_loss;
      run.best_epoch = epoch;
    }
    const double elapsed = run.elapsed_before + seconds_since(start);
    // As the original reports it: epochs from 0, lr after the scheduler has seen this epoch's val_loss.
    run.history.push_back(json{{"epoch", epoch},
                               {"lr", lr},
                               {"train_loss", train_loss},
                               {"val_loss", val_loss},
                               {"samples_per_s", data.train.size() / train_seconds},
                               {"elapsed_s", elapsed}});
    if (leader) save_epoch(args, dirs, model, *engine, run, epoch, improved, elapsed, params);
    progress.clear();
    if (verbose) {
      std::printf("epoch %d/%d  train_loss %.5f  val_loss %.5f  lr %.3g  %.1f samples/s  %s%s\n", epoch + 1,
                  args.epochs, train_loss, val_loss, lr, data.train.size() / train_seconds,
                  format_duration(elapsed).c_str(), improved ? "  (best)" : "");
      std::fflush(stdout);
    }
    if (mlflow) {
      for (const char* key : kMlflowMetrics) {
        mlflow->log_metric(key, run.history.back().at(key).get<double>(), epoch);
      }
    }
    // A signal during the epoch's last batch: its checkpoint is the epoch's own.
    if (trained.stop && epoch + 1 < args.epochs) {
      throw TrainingStopped(stop_message(args, "at the end of epoch " + std::to_string(epoch + 1), *engine));
    }
  }

  } catch (const TrainingStopped&) {
    if (mlflow) mlflow->set_status(MlflowStatus::kKilled);
    throw;
  } catch (...) {
    if (mlflow) mlflow->set_status(MlflowStatus::kFailed);
    throw;
  }

  // End of run: results.json.
  json results{{"params", params},
               {"num_train", data.train.size()},
               {"num_val", data.val.size()},
               {"problem_type", model.config.problem_type},
               {"skipped_rows", data.skipped},
               {"truncated_rows", data.truncated},
               {"max_length", data.options.max_length},
               {"head_init", model.classifier_loaded ? "loaded" : head_init_name(args.head_init)},
               {"labels", data.labels.names()},
               {"metrics", run.history},
               {"best_epoch", run.best_epoch},
               {"best_val_loss", run.best_val_loss},
               {"time_total_s", run.elapsed_before + seconds_since(start)}};
  // `bertrain launch` tells each attempt the restarts before it.
  if (const char* restarts = std::getenv("BERTRAIN_RESTARTS"); restarts != nullptr && *restarts != '\0') {
    const json parsed = json::parse(restarts, nullptr, /*allow_exceptions=*/false);
    results["restarts"] = parsed.is_discarded() ? json(restarts) : parsed;
  }
  if (leader) write_run_files(args.out_dir, run.history, &results);
  if (mlflow) {
    if (directory_exists(dirs.best)) log_mlflow_model(*mlflow, dirs.best);  // the MLflow Model artifacts/model
    mlflow->log_artifact(args.out_dir + "/results.json", "results.json");
    mlflow->set_status(MlflowStatus::kFinished);
  }
  return TrainingOutcome{results, false};
}

}  // namespace bertrain

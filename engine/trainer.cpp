#include "engine/trainer.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <array>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>

#include "core/build_info.h"
#include "core/count_text.h"
#include "core/cpu_threads.h"
#include "core/error.h"
#include "core/file_hash.h"
#include "core/files.h"
#include "core/host_memory.h"
#include "core/progress.h"
#include "data/batcher.h"
#include "data/tokenizer.h"
#include "data/tokenizer_loader.h"
#include "dist/communicator.h"
#include "engine/batch_view.h"
#include "engine/classifier_trainer.h"
#include "engine/early_stopping.h"
#include "engine/lr_schedule.h"
#include "engine/lr_scheduler.h"
#include "engine/memory_fit.h"
#include "engine/mlflow_model.h"
#include "engine/mlflow_run.h"
#include "engine/mlflow_store.h"
#include "engine/predictor.h"
#include "engine/rank_agreement.h"
#include "engine/resume_check.h"
#include "engine/run_dir.h"
#include "engine/stop_signals.h"
#include "engine/training_backend.h"
#include "engine/training_data.h"
#include "engine/validation_metrics.h"
#include "model/model_dir.h"

namespace bertrain {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

constexpr double kInf = std::numeric_limits<double>::infinity();

// The per-evaluation metrics an MLflow run gets (--mlflow-dir), as metrics.jsonl has them (runs written before the
// validation metrics existed lack the val_accuracy / val_f1* keys).
constexpr const char* kMlflowMetrics[] = {"train_loss",   "val_loss", "val_accuracy",  "val_f1",    "val_f1_micro",
                                          "val_f1_macro", "lr",       "samples_per_s", "elapsed_s", "grad_norm"};

// JSON has no infinity: an unset best is null.
json finite_or_null(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }
double from_finite_or_null(const json& j, double fallback) { return j.is_null() ? fallback : j.get<double>(); }

// Running mean of step losses, as the original reports its epoch losses.
struct RunningMean {
  double mean = 0;
  int count = 0;
  void add(double x) { mean += (x - mean) / ++count; }
  // JSON keeps a double's 17 significant digits, so a mid-epoch checkpoint restores the mean bit for bit.
  json to_json() const { return json{{"mean", mean}, {"count", count}}; }
  static RunningMean from_json(const json& j) { return RunningMean{j.at("mean").get<double>(), j.at("count").get<int>()}; }
};

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
  options.max_grad_norm = args.max_grad_norm;
  options.recompute_activations = args.gradient_checkpointing;
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
  options.gpu_collectives = parse_gpu_collectives(args.gpu_collectives);
  options.accumulation = args.grad_accum_steps;
  return options;
}

// How long the run trains and when it validates, from the flags and the data.
struct TrainingPlan {
  int steps_per_epoch = 0;  // optimizer steps (step batches of batch_size · grad_accum_steps rows)
  long total_steps = 0;     // --max-steps, else epochs · steps_per_epoch
  int epochs = 0;           // the epochs those steps touch (the last may end early with --max-steps)
  LrSchedulerKind schedule = LrSchedulerKind::kPlateau;
  long warmup_steps = 0;
  BestMetric best;          // --metric-for-best

  TrainingPlan(const TrainArgs& args, const Batcher& train_batcher)
      : steps_per_epoch(train_batcher.batches_per_epoch()),
        total_steps(args.max_steps > 0 ? args.max_steps : static_cast<long>(args.epochs) * steps_per_epoch),
        epochs(static_cast<int>((total_steps + steps_per_epoch - 1) / steps_per_epoch)),
        schedule(parse_lr_scheduler(args.lr_scheduler)),
        warmup_steps(warmup_steps_for(args.warmup_steps, args.warmup_ratio, total_steps)),
        best(parse_metric_for_best(args.metric_for_best)) {}

  bool step_wise() const { return schedule != LrSchedulerKind::kPlateau; }
  // The optimizer steps epoch `epoch` (0-based) trains: all of them, but for --max-steps's last epoch.
  int steps_in_epoch(int epoch) const {
    return static_cast<int>(std::min<long>(steps_per_epoch, total_steps - static_cast<long>(epoch) * steps_per_epoch));
  }
  // The learning rate of optimizer update `step` (0-based) under a step-wise schedule.
  double learning_rate(double base, long step) const {
    return base * lr_multiplier(schedule, step, warmup_steps, total_steps);
  }
  // Validation after optimizer step `step` (0-based): every --eval-steps steps, else at each epoch's end; and after
  // the last step.
  bool evaluation_due(const TrainArgs& args, long step) const {
    if (step + 1 == total_steps) return true;
    if (args.eval_steps > 0) return (step + 1) % args.eval_steps == 0;
    return (step + 1) % steps_per_epoch == 0;
  }
  // Metrics and MLflow steps: the epoch (0-based, as the original) when validating per epoch, else the optimizer step.
  long log_step(const TrainArgs& args, const json& record) const {
    return args.eval_steps > 0 ? record.at("step").get<long>() : record.at("epoch").get<long>();
  }
};

// What the loop carries from evaluation to evaluation, and what a checkpoint saves of it.
struct RunState {
  long first_step = 0;           // optimizer steps already taken (a resumed run starts there)
  RunningMean period_loss;       // the step losses since the last evaluation
  RunningMean period_grad_norm;  // and the gradient norms of their updates (before --max-grad-norm clips them)
  double period_seconds = 0;     // and their training seconds
  long period_rows = 0;          // and rows
  int best_epoch = -1;
  long best_step = -1;
  double best_metric = kInf;     // --metric-for-best of best/ (±inf before any evaluation)
  double best_val_loss = kInf;   // val_loss of best/
  double elapsed_before = 0;     // seconds spent by the runs this one resumes
  json history = json::array();
  ReduceLROnPlateau scheduler;
  EarlyStopping early_stopping;
  json stopped_early;            // null, or {"epoch", "step", "reason"} once early stopping ended the run
  json resumes = json::array();  // per --resume: the resumable settings it changed
  std::string mlflow_run_id;     // the MLflow run this training logs to (--mlflow-dir), continued on --resume
  RunningMean log_window;        // the step losses since the last --log-steps metric (Trainer logs their mean)
};

RunState fresh_state(const TrainArgs& args, const TrainingPlan& plan) {
  RunState run{0, {}, {}, 0, 0, -1, -1, plan.best.greater_is_better ? -kInf : kInf, kInf, 0, json::array(),
               ReduceLROnPlateau(args.lr, args.lr_factor, args.lr_patience),
               EarlyStopping(args.early_stopping_patience, args.early_stopping_threshold, plan.best.greater_is_better),
               nullptr, json::array(), "", {}};
  return run;
}

// --resume: refuses a command whose training settings differ from the checkpoint's (engine/resume_check.h), and a
// step-wise schedule whose length changed (its learning rates depend on the total steps).
void check_resume(const TrainArgs& args, const RunDirs& dirs, const json& state, const json& params,
                  const TrainingPlan& plan, json* resumes) {
  const json recorded = state.value("params", json::object());
  std::vector<std::string> differences = resume_differences(recorded, params, train_args_json(TrainArgs{}));
  const long planned = state.value("total_steps", plan.total_steps);
  if (plan.step_wise() && planned != plan.total_steps) {
    differences.push_back("--epochs / --max-steps: the " + args.lr_scheduler + " schedule was planned over " +
                          std::to_string(planned) + " steps, now " + std::to_string(plan.total_steps));
  }
  if (!differences.empty()) {
    std::string text;
    for (const std::string& d : differences) text += (text.empty() ? "" : "; ") + d;
    // A step-wise schedule fixes the run's length: there --epochs and --max-steps may not change either.
    const std::string may_change = plan.step_wise() ? "save, keep, log steps, threads, device and MLflow settings "
                                                      "may change; the " + args.lr_scheduler +
                                                          " schedule fixes epochs and max-steps"
                                                    : "epochs, max-steps, save, keep, log steps, threads, device and "
                                                      "MLflow settings may change";
    BERTRAIN_FAIL("--resume: the command differs from the checkpoint in " << dirs.last << ": " << text
                                                                         << ". Resume with the run's settings (only "
                                                                         << may_change << "), or start a new run");
  }
  const json changes = resumable_changes(recorded, params);
  *resumes = state.value("resumes", json::array());
  resumes->push_back(json{{"at_step", state.value("optimizer_steps", 0L)}, {"changed", changes}});
}

// The step an evaluation record of metrics.jsonl was made after; records written before they carried it were each
// an epoch's end.
long evaluation_step(const json& record, const TrainingPlan& plan) {
  return record.value("step", (record.at("epoch").get<long>() + 1) * plan.steps_per_epoch);
}

// --resume: the tokenizer files in `last` are those the checkpoint was written with (`recorded`), by fingerprint.
void check_tokenizer_files(const json& recorded, const json& now, const std::string& last) {
  for (const auto& [name, fingerprint] : recorded.items()) {
    BERTRAIN_CHECK(now.contains(name), last << "/" << name << " is missing: the checkpoint was written with it");
    BERTRAIN_CHECK(now.at(name) == fingerprint, last << "/" << name << " is not the file the checkpoint was written "
                                                        "with (its content differs): the checkpoint is damaged");
  }
}

// The run `state` (last/trainer_state.json) saved, and the optimizer moments into `engine`.
RunState resumed_state(const TrainArgs& args, const RunDirs& dirs, const json& state, const TrainingPlan& plan,
                       TrainingBackend& engine, json resumes) {
  RunState run = fresh_state(args, plan);
  run.resumes = std::move(resumes);
  try {
    const int epochs_done = state.at("epochs_done").get<int>();
    const int steps_in_epoch = state.value("steps_in_epoch", 0);
    run.first_step = static_cast<long>(epochs_done) * plan.steps_per_epoch + steps_in_epoch;
    run.best_epoch = state.at("best_epoch").get<int>();
    // Checkpoints written before best_step existed evaluated at epoch ends only.
    run.best_step = state.value("best_step", run.best_epoch >= 0 ? (run.best_epoch + 1L) * plan.steps_per_epoch : -1L);
    run.best_val_loss = from_finite_or_null(state.at("best_val_loss"), kInf);
    run.best_metric = from_finite_or_null(state.value("best_metric", state.at("best_val_loss")), run.best_metric);
    run.history = state.at("history");
    run.elapsed_before = state.at("elapsed_s").get<double>();
    run.scheduler = ReduceLROnPlateau::from_json(state.at("scheduler"));
    if (state.contains("early_stopping")) run.early_stopping = EarlyStopping::from_json(state.at("early_stopping"));
    run.stopped_early = state.value("stopped_early", json());
    run.mlflow_run_id = state.value("mlflow_run_id", "");
    if (state.contains("log_window_loss")) run.log_window = RunningMean::from_json(state.at("log_window_loss"));
    if (state.contains("running_loss")) {  // a checkpoint between evaluations
      run.period_loss = RunningMean::from_json(state.at("running_loss"));
      // Checkpoints written before the gradient norm was recorded: the mean of the period's remaining steps.
      if (state.contains("running_grad_norm")) run.period_grad_norm = RunningMean::from_json(state.at("running_grad_norm"));
      run.period_seconds = state.at("epoch_train_seconds").get<double>();
      run.period_rows = state.value("period_rows", 0L);
    }
  } catch (const json::exception& e) {
    BERTRAIN_FAIL(dirs.last << "/trainer_state.json: " << e.what());
  }
  engine.load_optimizer(dirs.last + "/" + kOptimizerFile);
  // The two files of one checkpoint agree on where it is; a state that does not would skip or repeat steps.
  BERTRAIN_CHECK(engine.optimizer_steps() == run.first_step &&
                     state.value("optimizer_steps", run.first_step) == run.first_step,
                 dirs.last << "/trainer_state.json: epochs_done and steps_in_epoch place the checkpoint after step "
                           << run.first_step << ", but " << kOptimizerFile << " holds "
                           << engine.optimizer_steps() << " optimizer steps and optimizer_steps says "
                           << state.value("optimizer_steps", -1L) << ": the checkpoint is damaged");
  // A step-wise schedule sets the rate before every step (TrainingLoop::train).
  engine.set_learning_rate(run.scheduler.learning_rate());
  // (A run that trained all its steps without writing results.json was stopped between its last checkpoint and its
  // run files: resuming writes them, from the checkpoint's history.)
  return run;
}

// `host_bytes`: what the CPU engine allocated (cpu_training_memory), 0 for a GPU engine, which says its own.
void print_start(const TrainArgs& args, const TrainingPlan& plan, const TrainingData& data, const LoadedModel& model,
                 const TrainingBackend& engine, const Communicator& comm, std::size_t host_bytes) {
  std::fputs(reading_notes("note", data.skipped, data.skip_reasons, data.truncated, data.options.max_length).c_str(),
             stdout);
  const std::string batch = args.grad_accum_steps > 1 ? std::to_string(args.batch_size) + " x " +
                                                            std::to_string(args.grad_accum_steps) + " accumulated"
                                                      : std::to_string(args.batch_size);
  const std::string length = args.max_steps > 0 ? count_of(plan.total_steps, "step") + " (--max-steps)"
                                                : count_of(plan.epochs, "epoch") + " (" + count_of(plan.total_steps, "step") + ")";
  std::printf("training %s on %s, validating on %zu; %d labels%s; %zu parameters; batch %s, %s, lr schedule %s\n",
              args.model_dir.c_str(), count_of(data.train.size(), "row").c_str(), data.val.size(), data.labels.size(),
              args.data.multi_label ? " (multi-label)" : "", model.layout.parameter_count(), batch.c_str(),
              length.c_str(), args.lr_scheduler.c_str());
  std::printf("engine: %s%s", engine.description().c_str(), comm.size() > 1 ? " (rank 0)" : "");
  if (engine.device_memory_bytes() > 0) {
    std::printf("; %.2f GiB of device memory for parameters, gradients, optimizer state and activations",
                static_cast<double>(engine.device_memory_bytes()) / (1u << 30));
  } else if (host_bytes > 0) {
    std::printf("; %s of memory for parameters, gradients, optimizer state and activations",
                memory_text(host_bytes).c_str());
  }
  std::printf("\n");
  std::fflush(stdout);
}

// What the engine will hold, checked against what there is before it allocates (engine/memory_fit.h): host memory
// for every process of the job on this host, device memory for the local ranks sharing this rank's GPU. Every rank
// reads what there is before any allocates (the allreduce after: the arenas are zeroed when allocated, so a rank
// that read after a sibling allocated would count that sibling twice). Returns the bytes the CPU engine holds, for
// its start line (0 on a GPU, whose engine says its own).
std::size_t check_training_memory(const BackendChoice& choice, const BertConfig& config, int labels,
                                  const BatchLimits& limits, const TrainerOptions& options, Communicator& comm) {
  const LaunchInfo& launch = comm.info();
  std::size_t host_bytes = 0;
  if (choice.cuda) {
    const MemoryNeed need =
        cuda_training_memory(choice.device, choice.bf16, config, labels, limits, options, comm.size());
    const int devices = cuda_device_count();
    int sharing = 0;  // local ranks whose device this is (choose_backend: local rank mod device count)
    for (int r = 0; r < launch.local_size; ++r) sharing += devices > 0 && r % devices == choice.device ? 1 : 0;
    std::size_t free = 0, total = 0;
    cuda_memory_info(choice.device, &free, &total);
    check_device_memory(need, limits, std::max(sharing, 1), free, total, "cuda:" + std::to_string(choice.device),
                        "train");
  } else {
    const MemoryNeed need = cpu_training_memory(config, labels, limits, options);
    host_bytes = need.total();
    if (const std::optional<HostMemory> memory = host_memory()) {
      const std::string warning = check_host_memory(need, limits, launch.local_size, *memory, "train");
      if (launch.local_rank == 0 && !warning.empty()) {  // once per host: each host has its own memory
        std::fprintf(stderr, "bertrain: warning: %s\n", warning.c_str());
      }
    }
  }
  if (comm.size() > 1) {
    double read = 1;
    comm.allreduce_sum(&read, 1);
  }
  return host_bytes;
}

// Test hook: BERTRAIN_TEST_CRASH_AFTER_STEP=S ends the process abruptly (std::_Exit(137), as a kill -9 would
// show) right after the checkpoint of optimizer step S is written, so tests can resume from a mid-epoch
// checkpoint of a run that really stopped there.
long test_crash_step() {
  const char* v = std::getenv("BERTRAIN_TEST_CRASH_AFTER_STEP");
  return v != nullptr && *v != '\0' ? std::atol(v) : -1;
}

// The validation loss (mean over the validation batches of their rank-summed mean losses, as the original) and the
// metrics of every validation row, counts summed over ranks.
struct Validation {
  double loss = 0;
  ValidationMetrics metrics;
};

// The optimizer steps from run.first_step to plan.total_steps (or an early stop): micro-batches, losses, the
// learning rate, evaluations, checkpoints. Every rank runs it; only the leader writes and prints.
class TrainingLoop {
 public:
  struct Parts {
    const TrainArgs& args;
    const TrainingPlan& plan;
    const RunDirs& dirs;
    const LoadedModel& model;
    const TrainingData& data;
    const Batcher& train_batcher;
    const Batcher& val_batcher;
    TrainingBackend& engine;
    Communicator& comm;
    MlflowRun* mlflow;  // null without --mlflow-dir or on ranks > 0
    const json& params;
    const json& tokenizer_files;  // the model's tokenizer files' fingerprints, recorded in every checkpoint
    Clock::time_point start;
    DirectoryLock* run_dir_lock;  // rank 0's lock on RUN_DIR (null on the other ranks)
  };

  TrainingLoop(const Parts& parts, RunState& run)
      : p_(parts),
        run_(run),
        leader_(parts.comm.rank() == 0),
        verbose_(leader_ && !parts.args.quiet),
        progress_(verbose_, parts.args.progress_interval_s),
        counts_(parts.data.labels.size(), parts.args.data.multi_label),
        logits_(static_cast<std::size_t>(parts.val_batcher.max_rows()) * parts.data.labels.size()),
        crash_step_(test_crash_step()) {}

  void run() {
    loop_start_ = Clock::now();
    period_start_ = loop_start_;
    bool checkpointed = false;  // the step before this one was written for its evaluation or checkpoint
    for (long step = run_.first_step; step < p_.plan.total_steps; ++step) {
      // One process stops before it starts another step. The stop flag travels with a step's loss, which a GPU
      // engine's loop takes one step late (train), so a signal that came during an evaluation (as bertrain tune's
      // ASHA sends it, right after metrics.jsonl) would otherwise cost two more steps. Ranks of a job agree on
      // stopping through that loss's allreduce, so they keep stopping where it is taken.
      if (p_.comm.size() == 1 && step > run_.first_step && StopSignals::received() != 0) {
        drain();
        if (!checkpointed) checkpoint(step - 1, /*step_checkpoint=*/false, /*evaluated=*/false);
        progress_.clear();
        throw TrainingStopped(stop_message(step - 1));
      }
      train(step);
      const bool evaluation = p_.plan.evaluation_due(p_.args, step);
      const bool save = p_.args.save_steps > 0 && (step + 1) % p_.args.save_steps == 0;
      if (evaluation || save || stop_) drain();
      if (evaluation) {
        evaluate(step, save);
      } else if (save || stop_) {
        checkpoint(step, save, /*evaluated=*/false);
      }
      checkpointed = evaluation || save || stop_;
      if (!run_.stopped_early.is_null()) break;
      if (stop_ && step + 1 < p_.plan.total_steps) {
        progress_.clear();
        throw TrainingStopped(stop_message(step));
      }
    }
    drain();
    // With --quiet too: a model that never gets a label right is a problem, not progress. (Not known for a best
    // evaluation made before a --resume.)
    if (leader_ && !best_unlearned_.empty()) {
      progress_.clear();
      std::fflush(stdout);
      std::fprintf(stderr, "bertrain: warning: %s\n", best_unlearned_.c_str());
      std::fflush(stderr);
    }
  }

 private:
  struct Pending {
    long step;
    bool last;  // the step's last micro-batch
    long rows;  // the step batch's rows (global)
  };

  // Enqueues optimizer step `step` as its micro-batches; takes the losses of all but the newest micro-batch on a
  // GPU, so the host prepares the next batch while it computes, and every loss at once on the CPU.
  void train(long step) {
    const int epoch = static_cast<int>(step / p_.plan.steps_per_epoch);
    const int index = static_cast<int>(step % p_.plan.steps_per_epoch);
    if (p_.plan.step_wise()) p_.engine.set_learning_rate(p_.plan.learning_rate(p_.args.lr, step));
    const int micros = p_.train_batcher.micro_batches(index);
    for (int m = 0; m < micros; ++m) {
      p_.train_batcher.batch(epoch, index, &batch_, m);
      p_.engine.train_step(bert_batch_view(batch_), batch_.targets.data(), batch_.loss_scale, p_.comm,
                           MicroStep{m == 0, m + 1 == micros});
      push({step, m + 1 == micros, batch_.global_batch});
      while (pending_count_ > static_cast<std::size_t>(p_.engine.losses_left_pending())) take();
    }
  }

  void push(const Pending& entry) {
    pending_[(pending_first_ + pending_count_) % pending_.size()] = entry;
    ++pending_count_;
  }
  void drain() {
    while (pending_count_ > 0) take();
  }
  // The oldest micro-batch's loss; a step's last one completes the step: its loss summed over ranks (with the stop
  // flag, so a signal that reached one rank stops all of them at the same step, without another collective).
  void take() {
    const Pending entry = pending_[pending_first_];
    pending_first_ = (pending_first_ + 1) % pending_.size();
    --pending_count_;
    step_loss_ += p_.engine.take_loss();
    if (!entry.last) return;
    double sums[2] = {step_loss_, StopSignals::received() != 0 ? 1.0 : 0.0};
    step_loss_ = 0;
    p_.comm.allreduce_sum(sums, 2);
    const double loss = sums[0];
    stop_ |= sums[1] > 0;
    const int epoch = static_cast<int>(entry.step / p_.plan.steps_per_epoch);
    const int index = static_cast<int>(entry.step % p_.plan.steps_per_epoch);
    // Every rank sees the same summed loss and gradient, so every rank stops here together. The step's update is
    // already applied, so nothing more is saved: last/ keeps the last checkpoint.
    const double grad_norm = p_.engine.last_gradient_norm();
    if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
      throw DivergedError(diverged("epoch " + std::to_string(epoch + 1) + ", step " + std::to_string(index + 1) +
                                   " of " + std::to_string(p_.plan.steps_per_epoch) + ": the training loss is " +
                                   value_text(loss) + " and the gradient norm " + value_text(grad_norm)));
    }
    run_.period_loss.add(loss);
    run_.period_grad_norm.add(grad_norm);
    run_.period_rows += entry.rows;
    rows_trained_ += entry.rows;
    const double seconds = seconds_since(loop_start_);
    const long done = entry.step + 1 - run_.first_step;
    const double eta = seconds / static_cast<double>(done) * static_cast<double>(p_.plan.total_steps - entry.step - 1);
    progress_.update(epoch + 1, p_.plan.epochs, index + 1, p_.plan.steps_in_epoch(epoch), loss,
                     static_cast<double>(rows_trained_) / seconds, eta);
    if (p_.args.log_steps > 0) run_.log_window.add(loss);
    if (p_.mlflow != nullptr && p_.args.log_steps > 0 && (entry.step + 1) % p_.args.log_steps == 0) {
      // As Trainer's logging_steps: the mean loss of the steps since the last line, the last step's gradient norm.
      p_.mlflow->log_metric("step_train_loss", run_.log_window.mean, entry.step + 1);
      p_.mlflow->log_metric("step_grad_norm", grad_norm, entry.step + 1);
      run_.log_window = RunningMean{};
    }
  }

  Validation validate(int epoch) {
    Validation v;
    RunningMean loss_mean;
    counts_.clear();
    // Validation batches are as large as the training's step batches, evaluated as its micro-batches: val_loss, a
    // mean of batch means, is then the one the same run without accumulation reports.
    for (int i = 0; i < p_.val_batcher.batches_per_epoch(); ++i) {
      double loss = 0;
      for (int m = 0; m < p_.val_batcher.micro_batches(i); ++m) {
        p_.val_batcher.batch(epoch, i, &batch_, m);
        loss += p_.engine.evaluate(bert_batch_view(batch_), batch_.targets.data(), logits_.data()) * batch_.loss_scale;
        counts_.add(logits_.data(), batch_.targets.data(), batch_.batch);
      }
      p_.comm.allreduce_sum(&loss, 1);
      loss_mean.add(loss);
    }
    p_.comm.allreduce_sum(counts_.counts().data(), counts_.counts().size());
    v.loss = loss_mean.mean;
    v.metrics = counts_.metrics();
    return v;
  }

  double metric_value(const Validation& v) const {
    const std::string& name = p_.plan.best.name;
    if (name == "f1") return v.metrics.f1_weighted;
    if (name == "accuracy") return v.metrics.accuracy;
    return v.loss;
  }
  // The error of a training that diverged (`what` happened): it stops, and says what it leaves (a checkpoint is never
  // written with weights that are not finite, nor after an evaluation whose loss is not) and what to change. Resumed,
  // the run would diverge again, and --resume refuses changed settings: the advice is a new run. A trial of `tune`
  // (which sets BERTRAIN_TUNE_TRIAL) has its --out and --overwrite chosen by tune: the settings are its study's.
  std::string diverged(const std::string& what) const {
    const bool checkpoint = file_exists(p_.dirs.last + "/trainer_state.json");
    const bool tune_trial = std::getenv("BERTRAIN_TUNE_TRIAL") != nullptr;
    return what + "; training stopped (" +
           (checkpoint ? "last/ holds the last checkpoint" : "no checkpoint was written") + "; try a lower --lr" +
           (p_.args.weight_decay > 0 ? " or --weight-decay" : "") +
           (p_.args.precision == "bf16" ? ", or --precision fp32" : "") +
           (tune_trial ? " in a new study: its --space or TRAIN FLAGS)"
                       : " in a new run: another --out, or --overwrite)");
  }
  // "nan", "inf", "-inf" or the number (a stream writes -nan for some NaNs).
  static std::string value_text(double x) {
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    std::ostringstream os;
    os << x;
    return os.str();
  }

  bool better(double value, double best) const {
    return p_.plan.best.greater_is_better ? value > best : value < best;  // NaN is never better
  }

  // Validation after optimizer step `step`: the plateau schedule, best/, early stopping, metrics.jsonl, the
  // checkpoint, MLflow and the log line.
  void evaluate(long step, bool save) {
    const int epoch = static_cast<int>(step / p_.plan.steps_per_epoch);
    const double train_seconds = run_.period_seconds + seconds_since(period_start_);
    const Validation v = validate(epoch);
    // The last update can make the weights (or what they compute) overflow without a training loss to see it: the
    // validation does. Every rank has the same sums, so every rank stops here.
    if (!std::isfinite(v.loss)) {
      throw DivergedError(diverged("after optimizer step " + std::to_string(step + 1) + " the validation loss is " +
                                   value_text(v.loss)));
    }
    // The rate the next step uses: the plateau schedule sees this evaluation's val_loss (Made-With-ML's), a
    // step-wise one is a function of the step.
    double lr;
    if (p_.plan.step_wise()) {
      lr = p_.plan.learning_rate(p_.args.lr, step + 1);
    } else {
      lr = run_.scheduler.step(v.loss);
      p_.engine.set_learning_rate(lr);
    }
    const double metric = metric_value(v);
    const bool improved = better(metric, run_.best_metric);
    if (improved) {
      run_.best_metric = metric;
      run_.best_val_loss = v.loss;
      run_.best_epoch = epoch;
      run_.best_step = step + 1;
      best_unlearned_ = unlearned_labels_warning(counts_, v.metrics, p_.data.labels.names(), p_.args.class_weights);
    }
    // Patience that runs out at the last evaluation cuts nothing short: not an early stop (a --resume with more
    // epochs then trains on, as after any finished run).
    const bool stop_early = run_.early_stopping.update(metric) && step + 1 < p_.plan.total_steps;
    const double elapsed = run_.elapsed_before + seconds_since(p_.start);
    // As the original reports it: epochs from 0, lr after the scheduler has seen this evaluation.
    run_.history.push_back(json{{"epoch", epoch},
                                {"step", step + 1},
                                {"lr", lr},
                                {"train_loss", run_.period_loss.mean},
                                {"val_loss", v.loss},
                                {"val_accuracy", v.metrics.accuracy},
                                {"val_f1", v.metrics.f1_weighted},
                                {"val_f1_micro", v.metrics.f1_micro},
                                {"val_f1_macro", v.metrics.f1_macro},
                                {"samples_per_s", static_cast<double>(run_.period_rows) / train_seconds},
                                {"elapsed_s", elapsed},
                                {"grad_norm", run_.period_grad_norm.mean}});
    if (stop_early) {
      std::ostringstream why;
      why << p_.plan.best.name << " did not improve"
          << (p_.args.early_stopping_threshold > 0 ? " by more than " + std::to_string(p_.args.early_stopping_threshold)
                                                   : std::string())
          << " for " << count_of(p_.args.early_stopping_patience, "evaluation") << " (--early-stopping-patience); best "
          << metric_text(run_.best_metric) << " at epoch " << run_.best_epoch + 1 << ", step " << run_.best_step;
      run_.stopped_early = json{{"epoch", epoch}, {"step", step + 1}, {"reason", why.str()}};
    }
    run_.period_loss = RunningMean{};
    run_.period_grad_norm = RunningMean{};
    run_.period_seconds = 0;
    run_.period_rows = 0;
    checkpoint(step, save, /*evaluated=*/true, improved);
    progress_.clear();
    if (verbose_) print_evaluation(step, v, lr, improved);
    if (p_.mlflow != nullptr) {
      const json& record = run_.history.back();
      for (const char* key : kMlflowMetrics) p_.mlflow->log_metric(key, record.at(key).get<double>(), p_.plan.log_step(p_.args, record));
    }
    if (verbose_ && stop_early) {
      std::printf("stopping early: %s\n", run_.stopped_early.at("reason").get<std::string>().c_str());
      std::fflush(stdout);
    }
    period_start_ = Clock::now();
  }

  std::string metric_text(double value) const {
    char text[64];
    std::snprintf(text, sizeof(text), "%s %.5f", p_.plan.best.name.c_str(), value);
    return text;
  }

  void print_evaluation(long step, const Validation& v, double lr, bool improved) const {
    const int epoch = static_cast<int>(step / p_.plan.steps_per_epoch);
    const json& m = run_.history.back();
    std::string where = "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(p_.plan.epochs);
    if (p_.args.eval_steps > 0 || p_.args.max_steps > 0) {
      where = "step " + std::to_string(step + 1) + "/" + std::to_string(p_.plan.total_steps) + " (" + where + ")";
    }
    std::printf("%s  train_loss %.5f  val_loss %.5f  val_f1 %.4f  val_accuracy %.4f  lr %.3g  %.1f samples/s  %s%s\n",
                where.c_str(), m.at("train_loss").get<double>(), v.loss, v.metrics.f1_weighted, v.metrics.accuracy, lr,
                m.at("samples_per_s").get<double>(), format_duration(m.at("elapsed_s").get<double>()).c_str(),
                improved ? "  (best)" : "");
    std::fflush(stdout);
  }

  // The trainer state a checkpoint after optimizer step `step` holds: where the run is, what it has seen, and
  // between evaluations the running loss of the steps since the last one.
  json trainer_state(long step, bool evaluated) const {
    const int epoch = static_cast<int>(step / p_.plan.steps_per_epoch);
    const int index = static_cast<int>(step % p_.plan.steps_per_epoch);
    const bool epoch_end = index + 1 == p_.plan.steps_per_epoch;
    json state{{"epochs_done", epoch_end ? epoch + 1 : epoch},
               {"best_epoch", run_.best_epoch},
               {"best_step", run_.best_step},
               {"best_metric", finite_or_null(run_.best_metric)},
               {"best_val_loss", finite_or_null(run_.best_val_loss)},
               {"history", run_.history},
               {"elapsed_s", run_.elapsed_before + seconds_since(p_.start)},
               {"seed", p_.args.seed},
               {"scheduler", run_.scheduler.to_json()},
               {"early_stopping", run_.early_stopping.to_json()},
               {"stopped_early", run_.stopped_early},
               {"optimizer_steps", p_.engine.optimizer_steps()},
               {"total_steps", p_.plan.total_steps},
               {"training_done", step + 1 == p_.plan.total_steps || !run_.stopped_early.is_null()},
               {"resumes", run_.resumes},
               {"params", p_.params},
               {"mlflow_run_id", run_.mlflow_run_id},
               {"tokenizer_files", p_.tokenizer_files},
               {"cwd", working_directory_}};  // where the params' relative paths start
    if (!epoch_end) state["steps_in_epoch"] = index + 1;
    // Where the run logs, which params leave out (a resumed run may log elsewhere): `train --resume --out RUN_DIR`
    // alone gives it back (tools/recorded_train_flags.h).
    if (!p_.args.mlflow_dir.empty()) {
      state["mlflow_store"] = json{{"mlflow_dir", p_.args.mlflow_dir}, {"experiment", p_.args.experiment},
                                   {"run_name", p_.args.run_name}};
    }
    if (run_.log_window.count > 0) state["log_window_loss"] = run_.log_window.to_json();
    if (!evaluated) {
      state["running_loss"] = run_.period_loss.to_json();
      state["running_grad_norm"] = run_.period_grad_norm.to_json();
      state["epoch_train_seconds"] = run_.period_seconds + seconds_since(period_start_);
      state["period_rows"] = run_.period_rows;
    }
    return state;
  }

  // Rank 0: last/ (and with --keep checkpoints/step-<S>) after optimizer step `step`, then best/ when this
  // evaluation improved, then metrics.jsonl. last/ first: until it exists a killed first evaluation leaves no run
  // files, so the restart is a fresh run and not refused as a RUN_DIR holding one; a kill between last/ and best/
  // is repaired when the run resumes.
  void checkpoint(long step, bool step_checkpoint, bool evaluated, bool improved = false) {
    if (!leader_) return;
    const std::vector<float>& weights = p_.engine.parameters();
    // A step's update may have made weights overflow that its loss, computed before it, could not show (the next
    // step's would): they are never written. (The leader's error ends every rank, as any of its errors does.)
    if (!std::all_of(weights.begin(), weights.end(), [](float w) { return std::isfinite(w); })) {
      throw DivergedError(diverged("after optimizer step " + std::to_string(step + 1) + " the weights are not finite"));
    }
    p_.run_dir_lock->check_held();
    write_checkpoint(p_.args, p_.dirs, p_.model, p_.engine, weights, trainer_state(step, evaluated), step_checkpoint);
    if (improved) save_best(p_.dirs, p_.model, weights, /*in_last=*/true);
    if (evaluated) write_run_files(p_.args.out_dir, run_.history, nullptr);
    if (p_.engine.optimizer_steps() == crash_step_) std::_Exit(137);
  }

  // What a run stopped by a signal says: where its checkpoint is and how to go on.
  std::string stop_message(long step) const {
    const int sig = StopSignals::received();
    const int epoch = static_cast<int>(step / p_.plan.steps_per_epoch);
    const bool epoch_end = (step + 1) % p_.plan.steps_per_epoch == 0;
    std::ostringstream os;
    os << "stopped by " << (sig != 0 ? signal_name(sig) : "a signal to another rank")
       << (sig == SIGPIPE ? " (what read its output went away)" : "") << " "
       << (epoch_end ? "at the end of epoch " : "in epoch ") << epoch + 1 << " of " << p_.plan.epochs
       << ", after optimizer step " << p_.engine.optimizer_steps() << "; checkpoint in " << p_.args.out_dir
       << "/last; continue with the same command and --resume, or with bertrain train --resume --out "
       << p_.args.out_dir << " (the run's settings are read from its checkpoint)"
       << (p_.comm.size() > 1 ? " under the same launcher" : "");
    return os.str();
  }

  Parts p_;
  RunState& run_;
  const bool leader_, verbose_;
  Progress progress_;
  Batch batch_;
  ValidationCounts counts_;
  std::string best_unlearned_;  // unlearned_labels_warning of the best evaluation this process made
  const std::string working_directory_ = working_directory();
  std::vector<float> logits_;  // [rows of a validation batch, C]
  std::array<Pending, 3> pending_{};  // micro-batches enqueued whose losses are not taken yet (at most 2)
  std::size_t pending_first_ = 0, pending_count_ = 0;
  double step_loss_ = 0;  // this rank's losses of the current step's micro-batches taken so far
  bool stop_ = false;     // a stop signal reached some rank (StopSignals): every rank agrees on it
  long rows_trained_ = 0;
  Clock::time_point loop_start_, period_start_;
  const long crash_step_;
};

// Ends `run` (when there is one) with `status` as an error or a stop leaves the training; a store that cannot take
// it (the full disk that may have caused the error) must not replace the error on its way out.
void end_mlflow_run_quietly(MlflowRun* run, MlflowStatus status) {
  if (run == nullptr) return;
  try {
    run->set_status(status);
  } catch (const std::exception&) {
    // The run stays RUNNING (or gets its meta.yaml back, ~MlflowRun), as after a kill.
  }
}

// The end of a training in its MLflow run: the best model as the MLflow Model artifacts/model, results.json, FINISHED.
void log_training_end(MlflowRun& run, const TrainArgs& args, const RunDirs& dirs) {
  if (directory_exists(dirs.best)) log_mlflow_model(run, dirs.best);
  run.log_artifact(args.out_dir + "/results.json", "results.json");
  run.set_status(MlflowStatus::kFinished);
}

// A training that finished where its MLflow run did not (the store full or unwritable at the run's end, after
// results.json was written: exit 1, which `launch` answers with --resume): the run's end is logged now as the end of
// training logs it (the model, results.json, FINISHED). Nothing when MLflow is off, or the run is FINISHED or gone.
void finish_open_mlflow_run(const TrainArgs& args, const RunDirs& dirs, bool verbose) {
  const std::string state_file = dirs.last + "/trainer_state.json";
  if (args.mlflow_dir.empty() || !file_exists(state_file)) return;
  const json state = read_json_file(state_file);
  const json run_id = state.value("mlflow_run_id", json());
  if (!run_id.is_string() || run_id.get<std::string>().empty()) return;
  MlflowRunInfo info;
  try {
    info = find_mlflow_run(args.mlflow_dir, run_id.get<std::string>(), args.experiment);
  } catch (const Error&) {
    return;  // deleted, or in another store: not this command's to bring back
  }
  if (info.status == static_cast<int>(MlflowStatus::kFinished)) return;
  MlflowRun mlflow(args.mlflow_dir, args.experiment, info.run_name, info.run_id);
  log_training_end(mlflow, args, dirs);
  if (verbose) {
    std::printf("mlflow: run %s was %s; its end is logged now (FINISHED)\n", info.run_id.c_str(),
                mlflow_status_name(info.status).c_str());
  }
}

// --resume of a run that already finished: nothing to do but an MLflow end it missed; results.json as it is. Says
// how far it trained, as it was asked to (epochs, or steps under --max-steps), and how to train more where that is
// possible.
TrainingOutcome finished_run(const TrainArgs& args, const RunDirs& dirs, bool leader, bool verbose) {
  TrainingOutcome outcome{input_step([&] { return read_json_file(args.out_dir + "/results.json"); }), true};
  if (leader) finish_open_mlflow_run(args, dirs, verbose);
  if (verbose) {
    const json& r = outcome.results;
    const json metrics = r.value("metrics", json::array());
    const json params = r.value("params", json::object());
    const bool by_steps = params.value("max_steps", 0L) > 0;
    const int epochs = metrics.empty() ? 0 : metrics.back().value("epoch", 0) + 1;
    const bool early = r.value("stopped_early", json()).is_object();
    std::string hint;
    if (!early) {
      hint = !file_exists(dirs.last + "/" + kOptimizerFile)
                 ? "; " + dirs.last + " holds no optimizer state (--save-optimizer " +
                       params.value("save_optimizer", std::string("never")) +
                       "), so it cannot be resumed: train more in a new run with --model " + dirs.last
             : by_steps ? "; raise --max-steps to train more"
                        : "; raise --epochs to train more";
    }
    std::string best = "epoch " + std::to_string(r.value("best_epoch", -1) + 1);
    if (by_steps || params.value("eval_steps", 0L) > 0) best += ", step " + std::to_string(r.value("best_step", -1L));
    std::printf("%s already finished %s%s; nothing to do (best/: %s, val_loss %.5f%s)\n", args.out_dir.c_str(),
                (by_steps ? count_of(r.value("optimizer_steps", 0L), "step") + " (--max-steps)" : count_of(epochs, "epoch"))
                    .c_str(),
                early ? " (stopped early)" : "", best.c_str(),
                r.contains("best_val_loss") && r["best_val_loss"].is_number() ? r["best_val_loss"].get<double>() : std::nan(""),
                hint.c_str());
    std::fflush(stdout);
  }
  return outcome;
}

// train reads its data files twice (to load them, and for the fingerprints --resume compares): a pipe or FIFO, which
// can be read once (and whose open waits for a writer, beyond a stop signal's reach), is refused.
void require_regular_data_files(const TrainArgs& args) {
  const std::pair<const char*, const std::string*> files[] = {{"--train-data", &args.train_data},
                                                               {"--val-data", &args.val_data}};
  for (const auto& [flag, path] : files) {
    struct stat st;
    BERTRAIN_CHECK(path->empty() || ::stat(path->c_str(), &st) != 0 || !S_ISFIFO(st.st_mode),
                   flag << " " << *path << " is a pipe or FIFO: train reads its data twice (to load it, and for the "
                        << "fingerprint --resume compares), so write it to a file first");
  }
}

// What a run learns from, read from `source` (--model, or last/ on --resume): the data tokenized as the model's
// tokenizer does, and the model with a head for the data's labels.
struct TrainingInputs {
  TrainingData data;
  LoadedModel model;
};

TrainingInputs load_training_inputs(const TrainArgs& args, const std::string& source) {
  const BertConfig config = BertConfig::load(source + "/config.json");
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(source);
  check_tokenizer_fits(*tokenizer, config, source);
  TrainingData data = load_training_data(args, config, *tokenizer);
  LoadedModel model = load_model_dir(source, data.labels.names(), args.seed, args.head_init);
  return {std::move(data), std::move(model)};
}

}  // namespace

void check_training_inputs(const TrainArgs& args) {
  validate_train_args(args);
  require_regular_data_files(args);
  load_training_inputs(args, resolve_model_dir(args.model_dir));
}

TrainingOutcome run_training(const TrainArgs& args, Communicator& comm) {
  input_step([&] {
    validate_train_args(args);
    require_regular_data_files(args);
  });
  // From here on SIGTERM, SIGINT, SIGUSR1, SIGHUP and SIGPIPE (its output closed) stop the run at its next step with
  // a checkpoint (one that arrives while the data and model load is acted on after the first step).
  const StopSignals stop_signals(StopSignals::ClosedOutput::kStops);
  const bool leader = comm.rank() == 0;  // prints and writes RUN_DIR
  const bool verbose = leader && !args.quiet;
  const auto start = Clock::now();
  configure_cpu_threads(args.threads, comm.info().local_rank, comm.info().local_size);
  // Rank 0 writes RUN_DIR, and no other process may meanwhile: it locks RUN_DIR before reading it, so a second train
  // (or --resume, or --overwrite) into it fails before it reads or touches a file.
  std::optional<DirectoryLock> run_dir_lock;
  const RunDirs dirs = input_step([&] { return prepare_run_dir(args, comm, &run_dir_lock); });
  // What a rank found in RUN_DIR decides what it loads (a checkpoint or --model) and whether it trains at all: the
  // ranks agree on it first, so that ranks which found different runs (RUN_DIR not shared, --resume on one rank)
  // stop with one error line, not a rank returning while the others wait in a collective, or mismatched loads.
  input_step([&] {
    json found{{"the run directory's state", dirs.finished ? "finished" : args.resume ? "resumed" : "new"}};
    if (args.resume) found["the checkpoint in last/"] = file_fingerprint(dirs.last + "/trainer_state.json");
    require_ranks_agree(comm, found);
  });
  if (dirs.finished) return finished_run(args, dirs, leader, verbose);

  // Data and model: what fails here is the user's input (exit status 2, never retried).
  TrainingInputs inputs = input_step([&] { return load_training_inputs(args, dirs.source); });
  const TrainingData& data = inputs.data;
  LoadedModel& model = inputs.model;
  model.config.classifier_dropout = args.dropout;
  model.config.problem_type = args.data.multi_label ? "multi_label_classification" : "single_label_classification";
  // evaluate and predict must read and prepare text as training did.
  model.config.extra[kCleanTextKey] = args.clean;
  model.config.extra[kDataKey] = json{{"text_columns", data.options.text_columns},
                                      {"label_column", data.options.label_column},
                                      {"label_separator", data.options.label_separator},
                                      {"max_length", data.options.max_length}};
  // What this run trains with, data contents included: recorded, and compared by --resume.
  json params = train_args_json(args);
  params["world_size"] = comm.size();  // before check_resume: a resume at another world size records the change
  params["train_data_hash"] = input_step([&] { return file_fingerprint(args.train_data); });
  if (!args.val_data.empty()) params["val_data_hash"] = input_step([&] { return file_fingerprint(args.val_data); });
  const json tokenizer_files = input_step([&] { return tokenizer_fingerprints(dirs.source); });
  // Every rank trains the same thing, checked before the first collective whose sizes depend on it: the data files
  // by content (their paths may differ), the model by its parameter count, labels and tokenizer files. --threads may
  // differ (nodes of different sizes), as it may on resume.
  input_step([&] {
    json settings = params;
    for (const char* key : {"model", "train_data", "val_data", "threads"}) settings.erase(key);
    // RUN_DIR as a place, not as spelt: `run` on one rank and /shared/run on another are one folder.
    std::error_code error;
    std::filesystem::path out = std::filesystem::weakly_canonical(std::filesystem::absolute(args.out_dir), error);
    if (!out.has_filename()) out = out.parent_path();  // "run/": a trailing separator is the same folder
    if (!error) settings["out"] = out.string();
    settings["the model's parameter count"] = model.params.size();
    settings["the labels"] = data.labels.names();
    settings["the model's tokenizer files"] = tokenizer_files;
    require_ranks_agree(comm, settings);
  });
  // Every rank starts from rank 0's parameters (they agree already when loaded from the same files; the
  // broadcast makes that a guarantee rather than an assumption about shared filesystems).
  comm.broadcast(model.params.data(), model.params.size(), 0);

  BatcherOptions train_batching;
  train_batching.batch_size = args.batch_size;
  train_batching.accumulation = args.grad_accum_steps;
  train_batching.shuffle = args.shuffle;
  train_batching.seed = args.seed;
  train_batching.classes = data.labels.size();
  train_batching.rank = comm.rank();
  train_batching.world_size = comm.size();
  BatcherOptions val_batching = train_batching;
  val_batching.shuffle = false;
  const Batcher train_batcher(&data.train, train_batching), val_batcher(&data.val, val_batching);
  const TrainingPlan plan(args, train_batcher);

  json resumes = json::array();
  const json saved = args.resume ? input_step([&] { return read_trainer_state(dirs.last); }) : json();
  if (args.resume) input_step([&] { check_resume(args, dirs, saved, params, plan, &resumes); });
  if (args.resume && saved.contains("tokenizer_files")) {
    input_step([&] { check_tokenizer_files(saved.at("tokenizer_files"), tokenizer_files, dirs.last); });
  }
  // After the resume checks: a --resume with other data is one error line, not the other data's warnings first.
  if (leader) print_warnings(data);  // with --quiet too: it silences progress, not problems

  // Engine: its activations are sized by the most tokens of this rank's slices, not by rows × longest row.
  // --device cuda without a device, or bf16 on the CPU, is a flag that does not fit this machine (an input
  // error); what fails while the engine is built (device memory) is not.
  const BackendChoice choice =
      input_step([&] { return choose_backend(args.device, args.precision, comm.info().local_rank); });
  const BatchLimits limits = batch_limits({&train_batcher, &val_batcher});
  const TrainerOptions options = trainer_options(args, data);
  const std::size_t host_bytes = check_training_memory(choice, model.config, data.labels.size(), limits, options, comm);
  const std::unique_ptr<TrainingBackend> engine =
      make_training_backend(choice, model.config, data.labels.size(), limits, model.params, options, comm);
  RunState run = args.resume ? input_step([&] { return resumed_state(args, dirs, saved, plan, *engine, resumes); })
                             : fresh_state(args, plan);

  params["engine"] = engine->description();
  params["device_memory_bytes"] = engine->device_memory_bytes();
  if (verbose) print_start(args, plan, data, model, *engine, comm, host_bytes);
  // After the run's header, which says what trains; this line says where it goes on from.
  if (verbose && args.resume) {
    if (run.first_step < plan.total_steps) {
      std::printf("resuming from epoch %d, step %ld (%s)\n", static_cast<int>(run.first_step / plan.steps_per_epoch) + 1,
                  static_cast<long>(engine->optimizer_steps()), dirs.last.c_str());
    } else {  // stopped after its last checkpoint, before results.json
      std::printf("resuming after the last step, %ld (%s): writing the run files\n",
                  static_cast<long>(engine->optimizer_steps()), dirs.last.c_str());
    }
  }
  if (leader) {
    // --overwrite: the earlier run goes only now, once the new run's inputs have been read and checked.
    for (const std::string& path : dirs.to_clear) remove_tree(path);
    // best/ is written after last/: a run stopped between the two has last/ of an evaluation that improved and
    // best/ of an older one, or none. When last/ is that evaluation's checkpoint (no steps since it) and the best,
    // its weights are best/'s; write them into best/ again.
    if (args.resume && run.period_loss.count == 0 && !run.history.empty() &&
        evaluation_step(run.history.back(), plan) == run.best_step) {
      save_best(dirs, model, engine->parameters(), /*in_last=*/true);
    }
  }
  // MLflow (rank 0): a new run, or the resumed training's own, RUNNING until the end.
  std::unique_ptr<MlflowRun> mlflow;
  if (leader && !args.mlflow_dir.empty()) {
    const std::string name = args.run_name.empty() ? folder_name(args.out_dir) : args.run_name;
    // A run to continue that is missing, damaged or deleted is the input's fault (exit 2, not retried by launch).
    if (!run.mlflow_run_id.empty()) {
      input_step([&] { continued_run_experiment(args.mlflow_dir, args.experiment, run.mlflow_run_id); });
    }
    mlflow = std::make_unique<MlflowRun>(args.mlflow_dir, args.experiment, name, run.mlflow_run_id);
    if (run.mlflow_run_id.empty() && !args.mlflow_parent_run.empty()) {
      mlflow->set_tag("mlflow.parentRunId", args.mlflow_parent_run);  // a child run, as MLflow's nested runs are
    }
    run.mlflow_run_id = mlflow->run_id();
    mlflow->log_params(params);
    for (const char* key : kMlflowMetrics) {
      std::vector<std::pair<long, double>> values;
      for (const json& m : run.history) {
        if (m.contains(key)) values.emplace_back(plan.log_step(args, m), m.at(key).get<double>());
      }
      mlflow->reset_metric(key, values);  // a resumed run: as its checkpoint's history says
    }
    // Per-step losses and norms up to the checkpoint's step stay; any logged after it (before a kill) are redone.
    for (const char* key : {"step_train_loss", "step_grad_norm"}) mlflow->truncate_metric(key, run.first_step);
    if (verbose) std::printf("mlflow: run %s in %s/%s\n", mlflow->run_id().c_str(), args.mlflow_dir.c_str(),
                             mlflow->experiment_id().c_str());
  }

  try {
    TrainingLoop({args, plan, dirs, model, data, train_batcher, val_batcher, *engine, comm, mlflow.get(), params,
                  tokenizer_files, start, leader ? &*run_dir_lock : nullptr},
                 run)
        .run();
  } catch (const TrainingStopped&) {
    end_mlflow_run_quietly(mlflow.get(), MlflowStatus::kKilled);
    throw;
  } catch (...) {
    end_mlflow_run_quietly(mlflow.get(), MlflowStatus::kFailed);
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
               {"steps_per_epoch", plan.steps_per_epoch},
               {"total_steps", plan.total_steps},
               {"optimizer_steps", engine->optimizer_steps()},
               {"metrics", run.history},
               {"best_epoch", run.best_epoch},
               {"best_step", run.best_step},
               {"best_val_loss", finite_or_null(run.best_val_loss)},
               {"best_metric", json{{"name", plan.best.name}, {"value", finite_or_null(run.best_metric)}}},
               {"stopped_early", run.stopped_early},
               {"resumes", run.resumes},
               {"time_total_s", run.elapsed_before + seconds_since(start)}};
  // `bertrain launch` tells each attempt the restarts before it.
  if (const char* restarts = std::getenv("BERTRAIN_RESTARTS"); restarts != nullptr && *restarts != '\0') {
    const json parsed = json::parse(restarts, nullptr, /*allow_exceptions=*/false);
    results["restarts"] = parsed.is_discarded() ? json(restarts) : parsed;
  }
  if (leader) {
    run_dir_lock->check_held();
    write_run_files(args.out_dir, run.history, &results);
  }
  if (mlflow) log_training_end(*mlflow, args, dirs);
  if (leader && parse_optimizer_saving(args.save_optimizer) == OptimizerSaving::kDuring) {
    drop_optimizer_state(args.out_dir);
  }
  if (verbose) {
    std::printf("disk: %s\n", disk_use_summary(args.out_dir).c_str());
    std::fflush(stdout);
  }
  return TrainingOutcome{results, false};
}

}  // namespace bertrain

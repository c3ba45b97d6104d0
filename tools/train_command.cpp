// `bertrain train`: fine-tunes a BERT checkpoint on a tagged CSV (engine/trainer.h does the work).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include <memory>
#include <string>
#include <thread>

#include "core/error.h"
#include "dist/communicator.h"
#include "engine/early_stopping.h"
#include "engine/mlflow_store.h"
#include "engine/stop_signals.h"
#include "engine/trainer.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/data_flags.h"
#include "tools/recorded_train_flags.h"

namespace bertrain {

ArgParser train_arg_parser() {
  ArgParser p("train",
              "Fine-tunes a Hugging Face BERT-family model directory (model_type bert, roberta, xlm-roberta,\n"
              "camembert, data2vec-text, distilbert or electra) for text classification on a CSV, TSV or JSON Lines\n"
              "file (Made-With-ML's title, description and tag columns by default; --text-columns, --label-column,\n"
              "--multi-label for others), keeps the epoch with the lowest val_loss (RUN_DIR/best) and the latest\n"
              "(RUN_DIR/last, resumable), and writes RUN_DIR/metrics.jsonl and RUN_DIR/results.json.");
  p.usage("bertrain train --model DIR --train-data FILE --out DIR [options] (or, to continue a run with the settings "
          "its checkpoint recorded: bertrain train --resume --out DIR [options])");
  p.option("model", "", "Hugging Face model directory: config.json, model.safetensors (or pytorch_model.bin), "
                        "tokenizer.json (or vocab.txt, vocab.json + merges.txt, or sentencepiece.bpe.model)", true)
      .value_name("DIR");
  p.option("train-data", "", "training dataset file (CSV, TSV or JSON Lines)", true).value_name("FILE");
  p.option("val-data", "", "validation dataset file; without it a split of --train-data is used").value_name("FILE");
  p.option("val-fraction", "0.2",
           "held out for validation when no --val-data: this fraction of each label (rounded up), or of all rows "
           "with --multi-label").value_name("FRACTION");
  add_data_flags(p, true);
  p.flag("multi-label", "each row has a set of labels (a JSON array, or --label-separator in a text field): "
                        "one sigmoid per label");
  p.option("out", "", "the run directory (RUN_DIR below)", true).value_name("DIR");
  p.option("epochs", "10", "epochs");
  p.option("max-steps", "0", "train this many optimizer steps, overriding --epochs (0: --epochs decides)");
  p.option("batch-size", "256", "global batch size (per micro-batch with --grad-accum-steps)");
  p.option("grad-accum-steps", "1", "sum the gradients of K batches of --batch-size before each optimizer step: the "
                                    "step of a batch of batch-size x K rows, in the memory of one of batch-size")
      .value_name("K");
  p.option("lr", "1e-4", "Adam learning rate (the peak, with a step-wise --lr-scheduler)").value_name("RATE");
  p.option("lr-scheduler", "plateau",
           "plateau: ReduceLROnPlateau on val_loss after each evaluation (Made-With-ML's); linear, cosine, constant: "
           "Hugging Face Trainer's schedules, per optimizer step, with --warmup-steps / --warmup-ratio")
      .value_name("plateau|linear|cosine|constant");
  p.option("warmup-steps", "0", "step-wise schedules: raise the rate linearly from 0 over the first N steps");
  p.option("warmup-ratio", "0", "step-wise schedules: warm up over this fraction of the training steps (rounded up)")
      .value_name("FRACTION");
  p.option("dropout", "0.5", "dropout before the classifier (BERT's own dropouts come from config.json)").value_name("P");
  p.option("lr-factor", "0.8", "ReduceLROnPlateau factor (--lr-scheduler plateau only)").value_name("FACTOR");
  p.option("lr-patience", "3", "ReduceLROnPlateau patience (evaluations; --lr-scheduler plateau only)");
  p.option("eval-steps", "0", "validate every N optimizer steps (and after the last) instead of at each epoch's end");
  p.option("metric-for-best", "val_loss",
           "the validation metric that picks RUN_DIR/best and drives early stopping: val_loss (lower is better), f1 "
           "(weighted) or accuracy (higher is better; val_f1 and val_accuracy, metrics.jsonl's names, too)")
      .value_name("val_loss|f1|accuracy");
  p.option("early-stopping-patience", "0",
           "stop when --metric-for-best has not improved for N evaluations in a row (0: never; Trainer's "
           "EarlyStoppingCallback)");
  p.option("early-stopping-threshold", "0", "an improvement must exceed this to count for early stopping").value_name("X");
  p.option("adam-beta1", "0.9", "Adam beta1");
  p.option("adam-beta2", "0.999", "Adam beta2");
  p.option("adam-eps", "1e-8", "Adam epsilon");
  p.option("weight-decay", "0", "decoupled weight decay (AdamW) when > 0, as Trainer: not of biases and LayerNorm "
                                 "weights")
      .value_name("X");
  p.option("max-grad-norm", "0", "clip the gradient to this global L2 norm before each update, as Trainer's "
                                 "max_grad_norm (which clips at 1.0 unless told); 0: no clipping, as Made-With-ML")
      .value_name("X");
  p.flag("gradient-checkpointing", "keep only each layer's input for the backward and recompute the layer's "
                                   "activations there (Trainer's gradient_checkpointing): 3-5x less activation "
                                   "memory for one more forward pass; the same numbers bit for bit");
  p.flag("class-weights", "weight the BCE loss of each tag by 1 / its training rows");
  p.option("num-samples", "0", "use only N rows of --train-data (seeded shuffle), 0: all");
  p.option("seed", "42", "seed of the classifier initialisation, dropout and shuffling");
  p.option("split-seed", "1234", "seed of the train/validation split and of --num-samples");
  p.flag("shuffle", "reshuffle training batches every epoch (the original uses one fixed order)");
  p.flag("no-clean", "tokenize the raw text instead of Made-With-ML's cleaned text");
  p.option("head-init", "torch",
           "a new classifier head: torch is nn.Linear's uniform ±1/sqrt(hidden), as Made-With-ML; hf is "
           "Hugging Face's normal with std initializer_range, bias 0").value_name("torch|hf");
  p.option("device", "auto", "auto: CUDA when a device is visible; rank r uses GPU r mod count").value_name("auto|cpu|cuda");
  p.option("precision", "fp32", "bf16 (CUDA only): bf16 weights and activations, fp32 master weights").value_name("fp32|bf16");
  p.option("collective-timeout", "300", "how long a rank may wait in a collective (a gradient sum, NCCL or MPI) before the job is aborted").value_name("SECONDS");
  p.option("grad-reduce", "fp32", "precision of the gradients in the multi-GPU allreduce").value_name("fp32|bf16");
  p.option("gpu-collectives", "auto",
           "how GPU ranks sum gradients: nccl (GPU to GPU, one GPU per rank), mpi (through host memory: no NCCL "
           "needed, ranks may share a GPU, slower), auto (nccl when built with it and every rank has a GPU of its "
           "own, else mpi)").value_name("auto|nccl|mpi");
  p.option("save-steps", "0", "also write the resumable checkpoint RUN_DIR/last every N optimizer steps (0: at "
                                "the end of each epoch only)");
  p.option("keep", "0", "with --save-steps: keep the newest N step checkpoints as RUN_DIR/checkpoints/step-<S>");
  p.option("save-total-limit", "0", "keep the newest N step checkpoints (Trainer's save_total_limit; the same as --keep "
                                    "N; 0: --keep decides). RUN_DIR/last, the newest resumable checkpoint, is one of "
                                    "them when the last checkpoint was a step's, else one more (an epoch's end)");
  p.option("save-optimizer", "always",
           "the Adam moments (twice the model's size) in checkpoints: always (kept when the run finishes, so --resume "
           "with more --epochs continues exactly), during (dropped when the run finishes: a stopped run still resumes "
           "exactly), never (smallest; a stopped run cannot be resumed)")
      .value_name("always|during|never");
  p.option("mlflow-dir", "", "also log the run (params, metrics per epoch, best/ as the MLflow Model artifact model/, "
                            "results.json) to this MLflow file store: a folder or a file: URI (file:///abs/path, "
                            "file:rel/path; bertrain writes file stores only); default: MLFLOW_TRACKING_URI when set, "
                            "'' for none").value_name("DIR");
  p.option("experiment", "bertrain", "MLflow experiment name (with --mlflow-dir)").value_name("NAME");
  p.option("run-name", "", "MLflow run name (with --mlflow-dir; default: RUN_DIR's folder name)").value_name("NAME");
  p.option("mlflow-parent-run", "", "with --mlflow-dir: tag a new run as a child of this MLflow run "
                                    "(mlflow.parentRunId; bertrain tune does, for its study's run)").value_name("RUN_ID");
  p.option("log-steps", "0", "with --mlflow-dir: also log step_train_loss, the mean loss of the last N optimizer steps, "
                             "every N steps, as Trainer's logging_steps (0: per epoch only)");
  p.flag("resume", "continue the run in --out from RUN_DIR/last (an epoch's end or a step checkpoint); a run that "
                   "already trained its --epochs exits 0 at once");
  p.flag("overwrite", "train into an --out that holds an earlier run, removing its files (last/, best/, checkpoints/, "
                      "metrics.jsonl, results.json, evaluation.json, report.html) once the inputs are checked");
  p.option("threads", "0", "CPU threads (0: all cores, or OMP_NUM_THREADS)");
  p.flag("quiet", "no progress or epoch lines");
  p.option("progress-interval", "30", "where stderr is not a terminal (a log file, a batch job, a pipe): a progress "
                                      "line (epoch, step, loss, samples/s, the run's ETA) on stderr at most every "
                                      "this many seconds (0: none); on a terminal a status line updates in place")
      .value_name("SECONDS");
  p.epilog(kExitStatusHelp);
  return p;
}

TrainArgs train_args_of(const ArgParser& p) {
  TrainArgs a;
  a.model_dir = p.get("model");
  a.train_data = p.get("train-data");
  a.val_data = p.get("val-data");
  // An unset variable in --val-data "$VAL" would otherwise train on a split without a word.
  if (p.given("val-data") && a.val_data.empty()) {
    throw UsageError("train: --val-data is empty: name the validation file, or leave the flag out to hold out "
                     "--val-fraction of --train-data");
  }
  if (p.given("val-data") && p.given("val-fraction")) {
    throw UsageError("train: --val-fraction holds out part of --train-data when there is no --val-data: give one of "
                     "them");
  }
  a.val_fraction = p.get_double("val-fraction");
  a.out_dir = p.get("out");
  a.epochs = p.get_int("epochs");
  a.batch_size = p.get_int("batch-size");
  a.grad_accum_steps = p.get_int("grad-accum-steps");
  a.max_steps = p.get_int("max-steps");
  a.lr = p.get_double("lr");
  a.lr_scheduler = p.get("lr-scheduler");
  a.warmup_steps = p.get_int("warmup-steps");
  a.warmup_ratio = p.get_double("warmup-ratio");
  a.eval_steps = p.get_int("eval-steps");
  // One spelling per metric in the run's files, so that --resume compares like with like.
  a.metric_for_best = input_step([&] { return parse_metric_for_best(p.get("metric-for-best")).name; });
  a.early_stopping_patience = p.get_int("early-stopping-patience");
  a.early_stopping_threshold = p.get_double("early-stopping-threshold");
  a.dropout = p.get_double("dropout");
  a.lr_factor = p.get_double("lr-factor");
  a.lr_patience = p.get_int("lr-patience");
  // They would be ignored, as Trainer ignores them: a run that silently does not do what its command line says.
  const bool step_wise = a.lr_scheduler == "linear" || a.lr_scheduler == "cosine" || a.lr_scheduler == "constant";
  for (const char* flag : {"lr-factor", "lr-patience"}) {
    if (step_wise && p.given(flag)) {
      throw UsageError(std::string("train: --") + flag + " is ReduceLROnPlateau's (--lr-scheduler plateau); " +
                       "--lr-scheduler " + a.lr_scheduler + " sets the rate at every optimizer step without it");
    }
  }
  a.adam_beta1 = p.get_double("adam-beta1");
  a.adam_beta2 = p.get_double("adam-beta2");
  a.adam_eps = p.get_double("adam-eps");
  a.weight_decay = p.get_double("weight-decay");
  a.max_grad_norm = p.get_double("max-grad-norm");
  a.gradient_checkpointing = p.get_flag("gradient-checkpointing");
  a.class_weights = p.get_flag("class-weights");
  a.num_samples = p.get_int("num-samples");
  a.seed = p.get_uint64("seed");
  a.split_seed = p.get_uint64("split-seed");
  a.shuffle = p.get_flag("shuffle");
  a.clean = !p.get_flag("no-clean");
  apply_data_flags(p, &a.data);
  a.data.max_length = p.get_int("max-length");
  a.data.multi_label = p.get_flag("multi-label");
  a.head_init = input_step([&] { return parse_head_init(p.get("head-init")); });
  a.device = p.get("device");
  a.precision = p.get("precision");
  a.collective_timeout_s = p.get_double("collective-timeout");
  a.grad_reduce = p.get("grad-reduce");
  a.gpu_collectives = p.get("gpu-collectives");
  a.save_steps = p.get_int("save-steps");
  a.keep = p.get_int("keep");
  a.save_total_limit = p.get_int("save-total-limit");
  if (p.given("save-total-limit")) {
    if (p.given("keep")) throw UsageError("train: --save-total-limit and --keep both bound the step checkpoints: give one");
    if (a.save_total_limit < 1) throw UsageError("train: --save-total-limit must be at least 1");
    a.keep = a.save_total_limit;
  }
  a.save_optimizer = p.get("save-optimizer");
  a.mlflow_dir = input_step([&] { return mlflow_store(p.given("mlflow-dir"), p.get("mlflow-dir")).dir; });
  a.experiment = p.get("experiment");
  a.run_name = p.get("run-name");
  a.mlflow_parent_run = p.get("mlflow-parent-run");
  a.log_steps = p.get_int("log-steps");
  a.resume = p.get_flag("resume");
  a.overwrite = p.get_flag("overwrite");
  a.threads = p.get_threads();
  a.quiet = p.get_flag("quiet");
  a.progress_interval_s = p.get_double("progress-interval");
  // Flags that only mean something beside another: alone they would be ignored without a word.
  if (a.mlflow_dir.empty()) {
    for (const char* name : {"experiment", "run-name"}) {
      if (p.given(name)) {
        throw UsageError(std::string("train: --") + name + " names the MLflow run: give --mlflow-dir too (or set "
                         "MLFLOW_TRACKING_URI)");
      }
    }
  }
  if (p.given("label-separator") && !a.data.multi_label) {
    throw UsageError("train: --label-separator splits a label field into several labels: give --multi-label too "
                     "(without it the whole field is one label)");
  }
  input_step([&] { validate_train_args(a); });
  return a;
}

namespace {

// A mistake in the command line or in input every rank reads (the data, the model, RUN_DIR) fails on every rank of a
// job alike, and so does a SharedError (a diverging loss, summed over ranks: exit 3). The ranks but 0 wait before
// they report one, so that rank 0 says it once and ends the job; they speak only where it did not (their own node's
// files or disk). Not for other errors: those each rank reports at once.
void let_rank_zero_speak_first(int rank) {
  if (rank != 0) std::this_thread::sleep_for(std::chrono::seconds(3));
}

// `train --resume --out RUN_DIR` alone: the command line with the settings the run's checkpoint recorded, said once.
std::vector<std::string> with_recorded_settings(const std::vector<std::string>& args, const ArgParser& train,
                                                const LaunchInfo& launch) {
  const auto asks = [&](const char* flag) { return std::find(args.begin(), args.end(), flag) != args.end(); };
  if (!resumes_from_checkpoint_alone(args) || asks("--help") || asks("-h")) return args;
  const std::vector<std::string> recorded = input_step([&] { return recorded_train_flags(args, train); });
  if (launch.rank == 0 && !asks("--quiet")) {
    std::string line;
    for (const std::string& word : recorded) {  // as a shell reads it back: single-quoted where it must be
      const bool plain = !word.empty() && word.find_first_of(" \t\n'\"$\\*?|;&<>()`#~!{}[]") == std::string::npos;
      std::string quoted = "'";
      for (const char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
      line += " " + (plain ? word : quoted + "'");
    }
    std::printf("resuming with the settings of its checkpoint:%s\n", line.empty() ? " the defaults" : line.c_str());
    std::fflush(stdout);
  }
  std::vector<std::string> all = recorded;  // first: a flag given without its value does not take a recorded word
  all.insert(all.end(), args.begin(), args.end());
  return all;
}

}  // namespace

int run_train(const std::vector<std::string>& given) {
  const LaunchInfo launch = detect_launch();
  ArgParser p = train_arg_parser();
  TrainArgs a;
  try {
    const std::vector<std::string> args = with_recorded_settings(given, p, launch);
    if (!p.parse(args)) return 0;
    a = train_args_of(p);
  } catch (const std::exception&) {
    let_rank_zero_speak_first(launch.rank);
    throw;
  }

  const std::unique_ptr<Communicator> comm = make_communicator(launch, a.collective_timeout_s);
  TrainingOutcome outcome;
  try {
    outcome = run_training(a, *comm);
  } catch (const TrainingStopped& stopped) {
    // Every rank stops here after rank 0 wrote the checkpoint: a clean exit that asks to be resumed.
    if (comm->rank() == 0) std::fprintf(stderr, "bertrain: %s\n", stopped.what());
    return kExitCheckpointed;
  } catch (const std::exception& e) {
    if (comm->size() == 1) throw;
    // The other ranks may be waiting in a collective: end the whole job, naming who failed.
    // Errors from dist/ already start with "<host> rank <r>": name the rank once.
    const std::string what = e.what(), who = comm->where();
    const bool input = dynamic_cast<const InputError*>(&e) != nullptr;
    if (input || dynamic_cast<const SharedError*>(&e) != nullptr) let_rank_zero_speak_first(comm->rank());
    const int code = input ? 2 : dynamic_cast<const DivergedError*>(&e) != nullptr ? kExitDiverged : 1;
    comm->abort(code, "bertrain: error: " + (what.rfind(who, 0) == 0 ? what : who + ": " + what));
  }
  if (!a.quiet && comm->rank() == 0 && !outcome.already_finished) {
    const nlohmann::json& results = outcome.results;
    const nlohmann::json& best = results.at("best_metric");
    const std::string metric = best.at("name").get<std::string>();
    std::printf("best: epoch %d of %d (step %ld), val_loss %.5f", results.at("best_epoch").get<int>() + 1,
                results.at("metrics").back().at("epoch").get<int>() + 1, results.at("best_step").get<long>(),
                results.at("best_val_loss").is_number() ? results.at("best_val_loss").get<double>() : std::nan(""));
    if (metric != "val_loss" && best.at("value").is_number()) {
      std::printf(", %s %.5f", metric.c_str(), best.at("value").get<double>());
    }
    std::printf("; model in %s/best, results in %s/results.json\n", a.out_dir.c_str(), a.out_dir.c_str());
  }
  return 0;
}

}  // namespace bertrain

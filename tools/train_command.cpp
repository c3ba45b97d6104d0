// `bertrain train`: fine-tunes a BERT checkpoint on a tagged CSV (engine/trainer.h does the work).
#include <cstdio>

#include <memory>
#include <string>

#include "core/error.h"
#include "dist/communicator.h"
#include "engine/mlflow_store.h"
#include "engine/stop_signals.h"
#include "engine/trainer.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/data_flags.h"

namespace bertrain {

int run_train(const std::vector<std::string>& args) {
  ArgParser p("train",
              "Fine-tunes a Hugging Face BERT model directory for text classification on a CSV, TSV or JSON Lines\n"
              "file (Made-With-ML's title, description and tag columns by default; --text-columns, --label-column,\n"
              "--multi-label for others), keeps the epoch with the lowest val_loss (RUN_DIR/best) and the latest\n"
              "(RUN_DIR/last, resumable), and writes RUN_DIR/metrics.jsonl and RUN_DIR/results.json.");
  p.option("model", "", "Hugging Face BERT directory: config.json, model.safetensors, vocab.txt", true).value_name("DIR");
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
  p.option("batch-size", "256", "global batch size");
  p.option("lr", "1e-4", "Adam learning rate").value_name("RATE");
  p.option("dropout", "0.5", "dropout before the classifier (BERT's own dropouts come from config.json)").value_name("P");
  p.option("lr-factor", "0.8", "ReduceLROnPlateau factor").value_name("FACTOR");
  p.option("lr-patience", "3", "ReduceLROnPlateau patience (epochs)");
  p.option("adam-beta1", "0.9", "Adam beta1");
  p.option("adam-beta2", "0.999", "Adam beta2");
  p.option("adam-eps", "1e-8", "Adam epsilon");
  p.option("weight-decay", "0", "decoupled weight decay (AdamW) when > 0").value_name("X");
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
  p.option("collective-timeout", "300", "how long a multi-GPU collective may take before the job is aborted").value_name("SECONDS");
  p.option("grad-reduce", "fp32", "precision of the gradients in the multi-GPU allreduce").value_name("fp32|bf16");
  p.option("save-steps", "0", "also write the resumable checkpoint RUN_DIR/last every N optimizer steps (0: at "
                                "the end of each epoch only)");
  p.option("keep", "0", "with --save-steps: keep the newest N step checkpoints as RUN_DIR/checkpoints/step-<S>");
  p.option("mlflow-dir", "", "also log the run (params, metrics per epoch, best/ as the MLflow Model artifact model/, "
                            "results.json) to this MLflow file store: a folder or a file: URI (file:///abs/path, "
                            "file:rel/path; bertrain writes file stores only); default: MLFLOW_TRACKING_URI when set, "
                            "'' for none").value_name("DIR");
  p.option("experiment", "bertrain", "MLflow experiment name (with --mlflow-dir)").value_name("NAME");
  p.option("run-name", "", "MLflow run name (with --mlflow-dir; default: RUN_DIR's folder name)").value_name("NAME");
  p.option("log-steps", "0", "with --mlflow-dir: also log step_train_loss every N batches (0: per epoch only)");
  p.flag("resume", "continue the run in --out from RUN_DIR/last (an epoch's end or a step checkpoint); a run that "
                   "already trained its --epochs exits 0 at once");
  p.flag("overwrite", "train into an --out that holds an earlier run, removing its files (last/, best/, checkpoints/, "
                      "metrics.jsonl, results.json, evaluation.json, report.html) once the inputs are checked");
  p.option("threads", "0", "CPU threads (0: all cores, or OMP_NUM_THREADS)");
  p.flag("quiet", "no progress or epoch lines");
  p.epilog(kExitStatusHelp);
  if (!p.parse(args)) return 0;

  TrainArgs a;
  a.model_dir = p.get("model");
  a.train_data = p.get("train-data");
  a.val_data = p.get("val-data");
  a.val_fraction = p.get_double("val-fraction");
  a.out_dir = p.get("out");
  a.epochs = p.get_int("epochs");
  a.batch_size = p.get_int("batch-size");
  a.lr = p.get_double("lr");
  a.dropout = p.get_double("dropout");
  a.lr_factor = p.get_double("lr-factor");
  a.lr_patience = p.get_int("lr-patience");
  a.adam_beta1 = p.get_double("adam-beta1");
  a.adam_beta2 = p.get_double("adam-beta2");
  a.adam_eps = p.get_double("adam-eps");
  a.weight_decay = p.get_double("weight-decay");
  a.class_weights = p.get_flag("class-weights");
  a.num_samples = p.get_int("num-samples");
  a.seed = static_cast<uint64_t>(p.get_int("seed"));
  a.split_seed = static_cast<uint64_t>(p.get_int("split-seed"));
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
  a.save_steps = p.get_int("save-steps");
  a.keep = p.get_int("keep");
  a.mlflow_dir = input_step([&] { return mlflow_store(p.given("mlflow-dir"), p.get("mlflow-dir")).dir; });
  a.experiment = p.get("experiment");
  a.run_name = p.get("run-name");
  a.log_steps = p.get_int("log-steps");
  a.resume = p.get_flag("resume");
  a.overwrite = p.get_flag("overwrite");
  a.threads = p.get_int("threads");
  a.quiet = p.get_flag("quiet");
  if (a.threads < 0) throw UsageError("train: --threads must be >= 0");

  const std::unique_ptr<Communicator> comm = make_communicator(detect_launch());
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
    const int code = dynamic_cast<const InputError*>(&e) != nullptr ? 2 : 1;
    comm->abort(code, "bertrain: error: " + (what.rfind(who, 0) == 0 ? what : who + ": " + what));
  }
  if (!a.quiet && comm->rank() == 0 && !outcome.already_finished) {
    const nlohmann::json& results = outcome.results;
    std::printf("best: epoch %d of %d, val_loss %.5f; model in %s/best, results in %s/results.json\n",
                results.at("best_epoch").get<int>() + 1, static_cast<int>(results.at("metrics").size()),
                results.at("best_val_loss").get<double>(), a.out_dir.c_str(), a.out_dir.c_str());
  }
  return 0;
}

}  // namespace bertrain

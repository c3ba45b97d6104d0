// `bertrain evaluate`: a trained model on a labelled dataset. Single-label: Made-With-ML's evaluation
// (weighted overall metrics, per-class metrics sorted by F1, the nlp_llm and short_text slices, a confusion
// matrix). Multi-label: micro / macro / weighted / samples averages and per-label metrics, as scikit-learn's
// classification_report computes them, with a label predicted when its probability reaches --threshold.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/count_text.h"
#include "core/file_hash.h"
#include "core/files.h"
#include "engine/mlflow_run.h"
#include "engine/predictor.h"
#include "engine/run_dir.h"
#include "engine/training_data.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/data_flags.h"
#include "tools/evaluation.h"
#include "tools/model_source.h"

namespace bertrain {

namespace {

using ordered_json = nlohmann::ordered_json;

// The MLflow run evaluate logs into, found before anything is evaluated: --run-id's own, else with a store the
// run that trained --model RUN_DIR (RUN_DIR/last/trainer_state.json's mlflow_run_id). With --mlflow-dir given, a
// model that is not such a run is an error (logging was asked for); with only MLFLOW_TRACKING_URI it is evaluated
// without logging, as a model from elsewhere must be evaluable wherever the variable is set.
std::optional<MlflowRunInfo> run_to_log(const ArgParser& p, const ModelSource& source) {
  if (source.run || source.store.dir.empty()) return source.run;
  const bool asked = source.store.origin == "--mlflow-dir";
  const std::string state_path = p.get("model") + "/last/trainer_state.json";
  if (!file_exists(state_path)) {
    BERTRAIN_CHECK(!asked, "--mlflow-dir needs --model RUN_DIR of a training run (or --run-id); " << state_path
                                                                                                  << " not found");
    return std::nullopt;
  }
  const std::string run_id = read_json_file(state_path).value("mlflow_run_id", "");
  if (run_id.empty()) {
    BERTRAIN_CHECK(!asked, state_path << ": the run was trained without --mlflow-dir");
    return std::nullopt;
  }
  return find_mlflow_run(source.store.dir, run_id, p.get("experiment"));
}

// The JSON as evaluation.json and the overall metrics as eval_<average>_<metric> (single-label: eval_<metric>,
// weighted), in that run; its status stays what it was. The artifact first: a store that refuses a file does so
// before any metric is logged.
void log_to_mlflow(const MlflowRunInfo& info, const ordered_json& out, const std::string& text) {
  MlflowRun run(info);
  run.write_artifact("evaluation.json", text);
  const ordered_json& overall = out["overall"];
  for (const char* metric : {"precision", "recall", "f1"}) {
    if (overall.contains(metric)) {
      run.log_metric(std::string("eval_") + metric, overall[metric].get<double>(), 0);
    } else {
      for (const auto& [average, values] : overall.items()) {
        run.log_metric("eval_" + average + "_" + metric, values[metric].get<double>(), 0);
      }
    }
  }
}

// evaluate --validation: what the run in `run_dir` validated on, from its checkpoint's recorded settings: its
// --val-data, else its --train-data (unchanged since: checked by content) and how it was split.
struct HeldOut {
  std::string path;
  bool split = false;       // the held-out part of `path`, as `settings` split it
  TrainArgs settings;       // num_samples, split_seed, val_fraction, multi_label; format and skip_bad_rows as read
  long validation_rows = -1;  // results.json's num_val, when the run finished
};

// `relocated`: --data, the file where the run's recorded one has moved (the same content), or "".
HeldOut held_out_rows_of(const std::string& run_dir, const std::string& relocated) {
  const std::string last = checkpoint_folder(run_dir);
  if (!file_exists(last + "/trainer_state.json")) {
    const std::string parent = std::filesystem::path(run_dir).lexically_normal().parent_path().string();
    BERTRAIN_CHECK(parent.empty() || !file_exists(parent + "/last/trainer_state.json"),
                   "--validation needs --model RUN_DIR of a training run: " << run_dir << " is a model of the run "
                                                                            << parent << ": give that");
    BERTRAIN_FAIL("--validation needs --model RUN_DIR of a training run: " << run_dir
                                                                           << "/last/trainer_state.json not found");
  }
  const nlohmann::json state = read_trainer_state(last);
  const nlohmann::json params = state.value("params", nlohmann::json::object());
  HeldOut h;
  try {
    h.settings.val_fraction = params.value("val_fraction", h.settings.val_fraction);
    h.settings.split_seed = params.value("split_seed", h.settings.split_seed);
    h.settings.num_samples = params.value("num_samples", h.settings.num_samples);
    h.settings.data.multi_label = params.value("multi_label", false);
    h.settings.data.skip_bad_rows = params.value("skip_bad_rows", false);
    h.settings.data.format = params.value("format", std::string("auto"));
    const std::string val_data = params.value("val_data", std::string());
    h.split = val_data.empty();
    const std::string recorded = recorded_path(state, h.split ? params.at("train_data").get<std::string>() : val_data);
    h.path = relocated.empty() ? recorded : relocated;
    const std::string fingerprint = params.value(h.split ? "train_data_hash" : "val_data_hash", std::string());
    const std::string flag = h.split ? "--train-data" : "--val-data";
    BERTRAIN_CHECK(!relocated.empty() || path_exists(h.path),
                   run_dir << " trained with " << flag << " " << h.path << ", which is not there: give the file "
                           << "where it is now with --data");
    BERTRAIN_CHECK(fingerprint.empty() || file_fingerprint(h.path) == fingerprint,
                   h.path << " is not the file " << run_dir << " trained with as " << flag << " (its content differs): "
                          << "the rows it validated on cannot be found in it");
  } catch (const nlohmann::json::exception& e) {
    throw Error(last + "/trainer_state.json: its recorded settings cannot be read: " + e.what());
  }
  if (file_exists(run_dir + "/results.json")) {
    h.validation_rows = read_json_file(run_dir + "/results.json").value("num_val", -1L);
  }
  return h;
}

// The rows of `file` (the run's --train-data, read as its training read it, without labels: the rows --num-samples
// left out may have labels the model never saw) that the run held out for validation, labelled.
TextDataset held_out_part(const TextDataset& file, const HeldOut& held_out, const LabelSet& labels) {
  const std::vector<int> rows =
      split_training_rows(held_out.settings, file, sampled_rows(held_out.settings, file), labels).val;
  BERTRAIN_CHECK(held_out.validation_rows < 0 || static_cast<long>(rows.size()) == held_out.validation_rows,
                 file.source << ": " << rows.size() << " rows held out where the run validated on "
                             << held_out.validation_rows << " (read otherwise than its training read it?)");
  TextDataset part;
  part.source = file.source;
  part.skipped = file.skipped;
  part.skip_reasons = file.skip_reasons;
  for (const int r : rows) {
    const auto i = static_cast<std::size_t>(r);
    part.ids.push_back(file.ids[i]);
    part.lines.push_back(file.lines[i]);
    part.raw_text.push_back(file.raw_text[i]);
    part.tags.push_back(file.tags[i]);
    part.examples.push_back(file.examples[i]);
    part.examples.back().labels = labels.require_all(file.tags[i], file.source + ":" + std::to_string(file.lines[i]));
    part.cut.push_back(file.cut[i]);
    part.truncated += file.cut[i] ? 1 : 0;
  }
  return part;
}

}  // namespace

int run_evaluate(const std::vector<std::string>& args) {
  ArgParser p("evaluate",
              "Evaluates a model on a labelled CSV, TSV or JSON Lines file and prints JSON. Single-label models:\n"
              "Made-With-ML's evaluate (overall weighted precision/recall/f1, per_class sorted by f1, slices\n"
              "nlp_llm and short_text, confusion matrix). Multi-label models: overall micro, macro, weighted and\n"
              "samples averages and per_class metrics (scikit-learn's), a label predicted at p >= --threshold.\n"
              "Throughput goes to stderr.");
  p.usage("bertrain evaluate (--model DIR | --run-id ID) --data FILE [options] (or: bertrain evaluate --model RUN_DIR "
          "--validation [--data FILE] [options])");
  add_model_source_flags(p,
                         "log the overall metrics (eval_*) and this JSON into the MLflow run of --run-id, or of "
                         "--model RUN_DIR trained with --mlflow-dir, in this file store",
                         "the MLflow experiment of that run (default: any; MLflow run ids are unique)");
  p.option("data", "", "labelled dataset file (the text and label columns the model was trained on); - for standard input, "
                           "with --format").value_name("FILE");
  p.flag("validation", "the rows --model RUN_DIR validated on, as its training read them (its --val-data, or the "
                       "part of its --train-data it held out, which must be unchanged; with --data FILE: that file "
                       "where it is now)");
  p.option("out", "", "also write the JSON to this file (replaced atomically)").value_name("FILE");
  p.option("threshold", "0.5", "multi-label models: predict a label when its probability is >= RATE (single-label "
                               "models take the top label)")
      .value_name("RATE");
  add_data_flags(p, false);
  add_inference_flags(p);
  p.flag("quiet", "no throughput line on stderr (notes and errors are still printed)");
  if (!p.parse(args)) return 0;
  const double threshold = p.get_double("threshold");
  if (!(threshold >= 0 && threshold <= 1)) throw UsageError("evaluate: --threshold must be in [0, 1]");
  const InferenceOptions inference = inference_options(p);

  // The model, the flags and the data are the user's input: what fails here exits 2.
  p.refuse_empty("out", "give the file to write, or leave the flag out to print the JSON only");
  const ModelSource source = model_source(p);
  const bool validation = p.get_flag("validation");
  if (!validation && !p.given("data")) {
    throw UsageError("evaluate: give --data FILE, or --validation (the rows --model RUN_DIR validated on)");
  }
  if (validation && source.run) throw UsageError("evaluate: --validation reads a run's files: give --model RUN_DIR");
  // The columns and separator choose which rows and labels the split saw: the run's, as config.json recorded them.
  for (const char* flag : {"text-columns", "label-column", "label-separator"}) {
    if (validation && p.given(flag)) {
      throw UsageError(std::string("evaluate: --") + flag + " with --validation: the rows the run validated on are "
                       "read as its training read them");
    }
  }
  const HeldOut held_out =
      validation ? input_step([&] { return held_out_rows_of(p.get("model"), p.given("data") ? p.get("data") : ""); })
                 : HeldOut{};
  const std::string data_path = validation ? held_out.path : data_file(p, "evaluate");
  if (p.given("out")) check_out_spares_inputs(p.get("out"), data_path, source);
  if (p.given("experiment") && source.store.dir.empty()) {
    throw UsageError("evaluate: --experiment names the experiment of an MLflow run: give --mlflow-dir too (or set "
                     "MLFLOW_TRACKING_URI)");
  }
  std::optional<MlflowRunInfo> mlflow_run = input_step([&] { return run_to_log(p, source); });
  // Logging into the run that trained --model RUN_DIR: not while a train (or another evaluate) writes that run, whose
  // best/ is not yet its model and whose results the train would write over.
  std::optional<DirectoryLock> run_dir_lock;
  if (mlflow_run && !source.run) {
    try {
      run_dir_lock.emplace(p.get("model"), "--model");
    } catch (const DirectoryInUseError&) {
      const std::string why = p.get("model") + " is in use by another bertrain process (a training, or an evaluate "
                                               "logging into its run)";
      // Logging was asked for: refused. Found through MLFLOW_TRACKING_URI only: evaluated, not logged.
      if (source.store.origin == "--mlflow-dir") {
        throw InputError("evaluate: " + why + ": evaluate it once it has ended, or without --mlflow-dir");
      }
      std::fprintf(stderr, "evaluate: note: %s: not logged into its MLflow run\n", why.c_str());
      mlflow_run.reset();
    } catch (const Error&) {
      // A RUN_DIR this process cannot write (another's, a read-only mount): no train writes it either.
    }
  }
  Predictor predictor = input_step([&] { return Predictor(source.path, inference); });
  DatasetOptions options;  // as the model was trained, then the flags
  const TextDataset data = input_step([&] {
    options = predictor.dataset_options();
    apply_data_flags(p, &options);
    // --validation: the format and bad rows as the training read the file, unless the flags say otherwise.
    if (validation && !p.given("format")) options.format = held_out.settings.data.format;
    if (validation && !p.get_flag("skip-bad-rows")) options.skip_bad_rows = held_out.settings.data.skip_bad_rows;
    predictor.check_dataset_options(options);
    options.read_labels = true;
    // Labels are checked here: a label the model does not know is an error naming the file and line.
    if (validation && held_out.split) {
      return held_out_part(load_text_dataset(data_path, predictor.tokenizer(), nullptr, options), held_out,
                           predictor.labels());
    }
    return load_text_dataset(data_path, predictor.tokenizer(), &predictor.labels(), options);
  });
  if (const std::string note = unrecorded_cleaning_note(predictor.config(), predictor.model_dir(), options);
      !note.empty()) {
    std::fprintf(stderr, "evaluate: note: %s\n", note.c_str());
  }
  std::fputs(reading_notes("evaluate", data.skipped, data.skip_reasons, data.truncated, options.max_length).c_str(),
             stderr);
  const auto start = std::chrono::steady_clock::now();
  std::vector<float> probs, logits;
  predictor.predict(data.examples, &probs, &logits);
  if (const long bad = first_non_finite_row(probs, predictor.labels().size()); bad >= 0) {
    throw InputError(non_finite_scores(predictor.model_dir(), "row " + std::to_string(bad + 1) + " of the data read"));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!p.get_flag("quiet")) {
    std::fprintf(stderr, "evaluate: %s in %.2f s (%.0f rows/s) on %s, batches of %d\n",
                 count_of(data.examples.size(), "row").c_str(), seconds, data.examples.size() / seconds,
                 predictor.engine_description().c_str(), predictor.batch_size());
  }

  const std::string data_name =
      validation ? data_path + (held_out.split ? " (the rows " + p.get("model") + " held out for validation)" : "")
                 : p.get("data");
  const ordered_json out = evaluation_json(predictor, data_name, data, probs, logits, threshold,
                                           mlflow_run ? mlflow_run->run_id : std::string());
  const std::string text = out.dump(2) + "\n";
  // --out last: a failed evaluate leaves none.
  if (mlflow_run) log_to_mlflow(*mlflow_run, out, text);
  if (!p.get("out").empty()) write_file_atomically(p.get("out"), text);
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace bertrain

// Where bertrain's MLflow runs are and how a run is found again: the tracking location of every command
// (--mlflow-dir, else MLFLOW_TRACKING_URI) as the directory of an MLflow 2.x file store, the experiments and runs
// in it (the layout is described in engine/mlflow_run.h), and a finished run's model (MLflow's `runs:/<id>/model`,
// as Made-With-ML's evaluate.py and predict.py --run-id load their best checkpoint).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bertrain {

enum class MlflowStatus { kRunning = 1, kFinished = 3, kFailed = 4, kKilled = 5 };  // MLflow's RunStatus numbers

// "RUNNING", "FINISHED", ... (MLflow's names); "status N" for a number MLflow has no name for here.
std::string mlflow_status_name(int status);

// The directory of the MLflow file store that `uri_or_path` names, as MLflow reads a tracking URI: a path
// ("mlruns", "/abs/mlruns"), or a file: URI ("file:///abs/mlruns", "file:/abs", "file:relative",
// "file://localhost/abs"), percent-decoded ("file:///a%20b" is "/a b"). Throws InputError naming `origin` (the
// flag or variable it came from) for every other scheme (http, https, databricks, sqlite, ...: bertrain writes
// file stores only; serve one with `mlflow server --backend-store-uri DIR`), a file: URI of another host, with a
// query or fragment, a malformed %-escape or %00, or no path.
std::string mlflow_store_path(const std::string& uri_or_path, const std::string& origin);

// The file store a command uses, and where that was said.
struct MlflowStore {
  std::string dir;     // the store's directory; empty: no MLflow
  std::string origin;  // "--mlflow-dir" or "MLFLOW_TRACKING_URI" (for messages); empty with dir
};

// --mlflow-dir when the command line gave it (an empty value turns MLflow off, whatever the environment says),
// else MLFLOW_TRACKING_URI when set and not empty (an empty variable is unset), else none. Throws InputError as
// mlflow_store_path.
MlflowStore mlflow_store(bool flag_given, const std::string& flag_value);

// The id of the active experiment named `name` in store `dir`; "" when there is none.
std::string find_mlflow_experiment(const std::string& dir, const std::string& name);

// The experiment holding run `run_id`, which a resumed training or study continues, in store `dir`: `experiment`'s
// when it holds the run, else any that does. Error naming the store and the run when no experiment holds it, or
// the run or its experiment is deleted (a resume must not bring either back); nothing is created.
std::string continued_run_experiment(const std::string& dir, const std::string& experiment, const std::string& run_id);

// A run as the store's meta.yaml files describe it.
struct MlflowRunInfo {
  std::string store;                             // the store's directory
  std::string experiment_id, experiment_name;
  std::string run_id, run_name;
  std::string dir;                               // store/<experiment_id>/<run_id>
  int status = 0;                                // MlflowStatus's numbers
  int64_t start_time_ms = 0;
  std::string artifact_uri;                      // as meta.yaml has it

  // "MLflow run <id> (experiment '<name>', store <dir>)", for messages.
  std::string describe() const;
};

// Throws Error unless `run_id` is an id MLflow could have made: a letter or digit, then letters, digits, '_' or
// '-', 256 characters at most (MLflow's own rule; it also keeps the id from naming a path outside the store).
void check_mlflow_run_id(const std::string& run_id);

// Run `run_id` in store `store_dir`: in the experiment named `experiment` when that is not empty, else in any
// active experiment (MLflow run ids are unique). Throws Error naming the store, the experiment and the id when the
// store, the experiment or the run is missing, or the run is deleted.
MlflowRunInfo find_mlflow_run(const std::string& store_dir, const std::string& run_id, const std::string& experiment);

// The ids of the runs in experiment `experiment_id` of store `dir` that are children of run `parent_run_id`
// (their tag mlflow.parentRunId) named `run_name` (mlflow.runName): a tune trial's runs. Runs that cannot be read
// are left out.
std::vector<std::string> find_mlflow_child_runs(const std::string& dir, const std::string& experiment_id,
                                                const std::string& parent_run_id, const std::string& run_name);
// The directory of the artifacts of `run`: its artifact_uri's folder when that is a local file: URI that exists,
// else <run dir>/artifacts (a store copied elsewhere keeps its old absolute artifact_uri).
std::string mlflow_artifacts_dir(const MlflowRunInfo& run);

// The model a FINISHED run logged: artifacts/model (the MLflow Model, engine/mlflow_model.h), else artifacts/best
// (runs logged before bertrain wrote MLflow Models). Throws Error saying the status of a run that did not finish,
// or that the run has no model.
std::string mlflow_run_model_dir(const MlflowRunInfo& run);

// "name: value" of a meta.yaml written by MLflow or by bertrain, unquoted; "" when absent.
std::string mlflow_yaml_field(const std::string& path, const std::string& key);

// `s` as a YAML scalar that yaml.safe_load reads back as the same string: single-quoted, '' for a quote.
std::string mlflow_yaml_string(const std::string& s);

}  // namespace bertrain

// An MLflow run written natively into an MLflow 2.x file store (the layout `mlflow ui --backend-store-uri DIR`
// and MlflowClient("file:DIR") read), so that bertrain needs no MLflow to log what Made-With-ML logs to it:
//   DIR/<experiment_id>/meta.yaml                    the experiment (name, artifact location, lifecycle)
//   DIR/<experiment_id>/<run_id>/meta.yaml           the run (name, status, start and end time, artifact uri)
//   DIR/<experiment_id>/<run_id>/params/<key>        one value per file
//   DIR/<experiment_id>/<run_id>/metrics/<key>       "<timestamp ms> <value> <step>" lines, appended
//   DIR/<experiment_id>/<run_id>/tags/<key>          one value per file (mlflow.runName, mlflow.source.name, ...)
//   DIR/<experiment_id>/<run_id>/artifacts/...       files and folders (the model: engine/mlflow_model.h)
// Experiment ids are numeric strings as MLflow's file store makes them; an experiment is found by name, a run by
// id (engine/mlflow_store.h).
// meta.yaml, params and tags are replaced atomically; metric lines are appended (a kill can leave a partial last
// line), and a resumed training rewrites its metric files to agree with its checkpoint (reset_metric,
// truncate_metric), which also drops such a line.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "engine/mlflow_store.h"

namespace bertrain {

// A random version-4 UUID as 32 hex digits, as MLflow's uuid.uuid4().hex makes run ids and model_uuid.
std::string random_uuid_hex();

// The user MLflow records (mlflow.user, meta.yaml's user_id): as Python's getpass.getuser, the first of LOGNAME,
// USER, LNAME and USERNAME that is set, else the password database's name of this process's uid, else "unknown".
std::string mlflow_user();

class MlflowRun {
 public:
  // The run `run_id` of experiment `experiment` in `root` when run_id is non-empty (a resumed training continues
  // its run, status RUNNING again), else a new run named `run_name`; the experiment is created when missing.
  // A new run gets MLflow's tags for a script run: mlflow.runName, mlflow.user, mlflow.source.name (the program
  // as the command line named it, argv[0]), mlflow.source.type LOCAL, and mlflow.source.git.commit when the build
  // knows its commit (core/build_info.h).
  MlflowRun(const std::string& root, const std::string& experiment, const std::string& run_name,
            const std::string& run_id);
  // Logs into the run `run` found in its store (find_mlflow_run) as MLflow's client logs into an ended run: its
  // meta.yaml (status, end time, names) is left as it was, whatever happens (evaluate --run-id).
  explicit MlflowRun(const MlflowRunInfo& run);
  // A run this object set RUNNING and that an exception leaves without set_status does not stay RUNNING (which
  // --run-id reads as "still running or killed"): a run it continued gets its meta.yaml back as it was found, a new
  // run ends FAILED.
  ~MlflowRun();
  MlflowRun(const MlflowRun&) = delete;
  MlflowRun& operator=(const MlflowRun&) = delete;

  const std::string& run_id() const { return run_id_; }
  const std::string& experiment_id() const { return experiment_id_; }
  const std::string& run_dir() const { return run_dir_; }
  // Where the artifacts go: <run dir>/artifacts for a new run, the folder of its artifact_uri for a run continued.
  const std::string& artifacts_dir() const { return artifacts_dir_; }

  // params/<key>: a JSON string as its text, anything else as its JSON text (MLflow stores params as strings).
  void log_params(const nlohmann::json& params);
  void log_metric(const std::string& key, double value, long step);
  // Rewrites metrics/<key> as exactly `values` [(step, value)], keeping each step's earlier timestamp: a resumed
  // training makes its run's metrics agree with its checkpoint (a kill may have come between an epoch's metrics and
  // its checkpoint, or before a line was whole).
  void reset_metric(const std::string& key, const std::vector<std::pair<long, double>>& values);
  // Drops the lines of metrics/<key> with a step above `max_step` (a resumed training redoes those steps).
  void truncate_metric(const std::string& key, long max_step);
  void set_tag(const std::string& key, const std::string& value);
  // The value of tag `key`; "" when the run has none.
  std::string tag(const std::string& key) const;
  // Copies a file or a folder (recursively) to artifacts/<name>.
  void log_artifact(const std::string& source, const std::string& name);
  // Writes `contents` as the file artifacts/<name>.
  void write_artifact(const std::string& name, const std::string& contents);
  // Replaces the folder artifacts/<name> (created when missing) with the one `fill` writes into a fresh temporary
  // folder, swapped in atomically (core/files.h): a reader sees the old folder or the whole new one.
  void write_artifact_dir(const std::string& name, const std::function<void(const std::string& dir)>& fill);
  // Status and end time; FINISHED, FAILED or KILLED end the run.
  void set_status(MlflowStatus status);

 private:
  void write_meta(MlflowStatus status, bool ended);
  // A new run's folders and tags.
  void create();

  std::string root_, experiment_id_, run_id_, run_name_, run_dir_, artifact_uri_, artifacts_dir_;
  int64_t start_time_ms_ = 0;
  bool running_ = false;          // this object wrote status RUNNING and no set_status has ended the run since
  std::string found_meta_;        // a continued run's meta.yaml as it was found ("" for a new run)
  int uncaught_at_start_ = 0;     // std::uncaught_exceptions() when this object was made
};

}  // namespace bertrain

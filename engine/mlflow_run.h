// An MLflow run written natively into an MLflow 2.x file store (the layout `mlflow ui --backend-store-uri DIR`
// and MlflowClient("file:DIR") read), so that bertrain needs no MLflow to log what Made-With-ML logs to it:
//   DIR/<experiment_id>/meta.yaml                    the experiment (name, artifact location, lifecycle)
//   DIR/<experiment_id>/<run_id>/meta.yaml           the run (name, status, start and end time, artifact uri)
//   DIR/<experiment_id>/<run_id>/params/<key>        one value per file
//   DIR/<experiment_id>/<run_id>/metrics/<key>       "<timestamp ms> <value> <step>" lines, appended
//   DIR/<experiment_id>/<run_id>/tags/<key>          one value per file (mlflow.runName, mlflow.source.name, ...)
//   DIR/<experiment_id>/<run_id>/artifacts/...       copied files and folders
// Experiment ids are numeric strings as MLflow's file store makes them; an experiment is found by name.
// meta.yaml, params and tags are replaced atomically; metric lines are appended (a kill can leave a partial last
// line), and a resumed training rewrites its metric files to agree with its checkpoint (reset_metric,
// truncate_metric), which also drops such a line.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace bertrain {

enum class MlflowStatus { kRunning = 1, kFinished = 3, kFailed = 4, kKilled = 5 };  // MLflow's RunStatus numbers

class MlflowRun {
 public:
  // The run `run_id` of experiment `experiment` in `root` when run_id is non-empty (a resumed training continues
  // its run, status RUNNING again), else a new run named `run_name`; the experiment is created when missing.
  MlflowRun(const std::string& root, const std::string& experiment, const std::string& run_name,
            const std::string& run_id);

  // Throws Error naming what is missing unless run `run_id` of experiment `experiment` is in `root`; writes nothing.
  static void check_exists(const std::string& root, const std::string& experiment, const std::string& run_id);

  const std::string& run_id() const { return run_id_; }
  const std::string& experiment_id() const { return experiment_id_; }
  const std::string& run_dir() const { return run_dir_; }

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
  // Copies a file or a folder (recursively) to artifacts/<name>.
  void log_artifact(const std::string& source, const std::string& name);
  // Writes `contents` as the file artifacts/<name>.
  void write_artifact(const std::string& name, const std::string& contents);
  // Status and end time; FINISHED, FAILED or KILLED end the run.
  void set_status(MlflowStatus status);

 private:
  void write_meta(MlflowStatus status, bool ended);

  std::string root_, experiment_id_, run_id_, run_name_, run_dir_;
  int64_t start_time_ms_ = 0;
};

}  // namespace bertrain

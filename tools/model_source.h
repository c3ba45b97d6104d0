// Where evaluate and predict (and later serve) take their model from: --model DIR (a RUN_DIR or a model
// directory), or --run-id ID, the model a FINISHED MLflow run logged (Made-With-ML's evaluate.py / predict.py
// --run-id), found in the file store of --mlflow-dir or MLFLOW_TRACKING_URI, in --experiment when given.
#pragma once

#include <optional>
#include <string>

#include "engine/mlflow_store.h"
#include "tools/args.h"

namespace bertrain {

// --model, --run-id, --mlflow-dir (its help: `mlflow_dir_help`, to which the URI forms and the environment
// variable are added) and --experiment (`experiment_help`).
void add_model_source_flags(ArgParser& p, const std::string& mlflow_dir_help, const std::string& experiment_help);

struct ModelSource {
  std::string path;                   // what Predictor loads: a RUN_DIR, a model directory or the run's model
  MlflowStore store;                  // --mlflow-dir, else MLFLOW_TRACKING_URI; store.dir empty: none
  std::optional<MlflowRunInfo> run;   // --run-id: the run found
};

// Throws UsageError naming both flags unless exactly one of --model and --run-id is given, or when --run-id has no
// store; InputError naming the store, the experiment and the id for a run that is missing, not FINISHED or
// without a model, and for a --mlflow-dir or MLFLOW_TRACKING_URI that is not a file store.
ModelSource model_source(const ArgParser& p);

// evaluate's and predict's --out `out` before any work: writable, not the data file `data`, and none of the files of
// the model read or of its run (engine/run_dir.h: model_and_run_files), which writing it would replace. Throws
// InputError naming --out and the file.
void check_out_spares_inputs(const std::string& out, const std::string& data, const ModelSource& source);

}  // namespace bertrain

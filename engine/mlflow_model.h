// A trained model logged as an MLflow Model: the run's artifact folder model/ holds the checkpoint's files
// (config.json, model.safetensors, vocab.txt, whatever else the model directory has) and an MLmodel file that
// MLflow's `mlflow.models.Model.load("runs:/<run id>/model")` reads, so that MLflow lists the run's model and
// `bertrain evaluate|predict --run-id` (engine/mlflow_store.h) finds it.
//
// The MLmodel names one flavor, `bertrain`, and not MLflow's `transformers` or `python_function`: those would
// promise that MLflow itself can load the model and predict with it. The transformers flavor wants its own layout
// (model/ and components/tokenizer/ folders, a pipeline task and its class) and would run a transformers pipeline
// on the raw text, but a bertrain model was trained on text cleaned its own way (config.json's bertrain_clean_text
// and bertrain_data), so that pipeline's predictions would not be the model's; python_function needs a Python
// loader module and environment that bertrain does not have. The weights do load with the class the flavor names
// (transformers' BertForSequenceClassification.from_pretrained on the folder).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/mlflow_run.h"

namespace bertrain {

// What the MLmodel file says about one logged model.
struct MlflowModelInfo {
  std::string run_id, artifact_path;
  std::string utc_time_created;         // "YYYY-MM-DD HH:MM:SS.ffffff", as MLflow's str(datetime.utcnow())
  std::string model_uuid;               // 32 hex digits
  int64_t model_size_bytes = 0;         // the checkpoint files' bytes (MLflow counts the folder before MLmodel)
  std::string transformers_class;       // config.json's architectures[0]: BertForSequenceClassification
  std::string problem_type;             // single_label_classification | multi_label_classification
  std::vector<std::string> labels;      // by class id (config.json's id2label)
};

// The MLmodel YAML of `model`, laid out as MLflow 2.x's Model.to_yaml does (keys sorted, block style). No
// mlflow_version: no MLflow wrote it, and MLflow reads its absence as unknown.
std::string mlmodel_yaml(const MlflowModelInfo& model);

// Logs the model directory `model_dir` (its files; config.json required) as the MLflow Model
// artifacts/<artifact_path> of `run`, replacing one logged before, and appends it to the run's tag
// mlflow.log-model.history, as MLflow's Model.log does (the MLflow UI lists a run's models from that tag).
// The files are hard links to model_dir's, not copies: the weights are stored once. That is safe because bertrain
// never writes a checkpoint file in place: best/ is replaced by renaming a new folder over it (core/files.h), so
// the logged names keep the inodes, and so the bytes, of the epoch that was logged, whatever happens to best/
// later. Where a link is refused (the store on another filesystem) the files are copied and a note says so on
// stderr. Returns the description written.
MlflowModelInfo log_mlflow_model(MlflowRun& run, const std::string& model_dir, const std::string& artifact_path = "model");

}  // namespace bertrain

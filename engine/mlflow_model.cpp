#include "engine/mlflow_model.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/atomic_file.h"
#include "core/build_info.h"
#include "core/error.h"
#include "core/files.h"
#include "core/json_text.h"

namespace bertrain {

namespace {

using nlohmann::json;

// The current UTC time as Python's str(datetime.utcnow()): "2025-01-31 12:34:56.789012".
std::string utc_time_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const long micros = static_cast<long>(
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[40];
  const std::size_t n = std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &utc);
  std::snprintf(text + n, sizeof text - n, ".%06ld", micros);
  return text;
}

// The MLmodel file's fields as MLflow's Model.to_dict has them.
json mlmodel_json(const MlflowModelInfo& model) {
  return json{{"artifact_path", model.artifact_path},
              {"flavors",
               {{"bertrain",
                 {{"bertrain_version", build_version()},
                  {"labels", model.labels},
                  {"problem_type", model.problem_type},
                  {"transformers_class", model.transformers_class}}}}},
              {"model_size_bytes", model.model_size_bytes},
              {"model_uuid", model.model_uuid},
              {"run_id", model.run_id},
              {"utc_time_created", model.utc_time_created}};
}

// A mapping of strings, numbers, lists of those and such mappings as YAML blocks, keys sorted (nlohmann's order),
// as yaml.safe_dump(default_flow_style=False) writes them; strings single-quoted.
void write_yaml(const json& mapping, int indent, std::ostringstream& out) {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  auto scalar = [](const json& v) { return v.is_string() ? mlflow_yaml_string(v.get<std::string>()) : v.dump(); };
  for (const auto& [key, value] : mapping.items()) {
    out << pad << key << ":";
    if (value.is_object()) {
      out << (value.empty() ? " {}\n" : "\n");
      write_yaml(value, indent + 2, out);
    } else if (value.is_array()) {
      out << (value.empty() ? " []\n" : "\n");
      for (const json& item : value) out << pad << "- " << scalar(item) << "\n";
    } else {
      out << " " << scalar(value) << "\n";
    }
  }
}

// What config.json says of the classifier: its class, problem type and labels by id.
void describe_checkpoint(const std::string& config_path, MlflowModelInfo* model) {
  const json config = read_json_file(config_path);
  const json architectures = config.value("architectures", json::array());
  model->transformers_class = !architectures.empty() && architectures[0].is_string()
                                  ? architectures[0].get<std::string>()
                                  : "BertForSequenceClassification";
  model->problem_type = config.value("problem_type", "single_label_classification");
  const json id2label = config.value("id2label", json::object());
  model->labels.assign(id2label.size(), "");
  for (const auto& [id, label] : id2label.items()) {
    const std::size_t index = std::stoul(id);
    BERTRAIN_CHECK(index < model->labels.size() && label.is_string(),
                   config_path << ": id2label is not the labels 0.." << id2label.size() - 1);
    model->labels[index] = label.get<std::string>();
  }
}

}  // namespace

std::string mlmodel_yaml(const MlflowModelInfo& model) {
  std::ostringstream yaml;
  write_yaml(mlmodel_json(model), 0, yaml);
  return yaml.str();
}

MlflowModelInfo log_mlflow_model(MlflowRun& run, const std::string& model_dir, const std::string& artifact_path) {
  MlflowModelInfo model;
  model.run_id = run.run_id();
  model.artifact_path = artifact_path;
  model.utc_time_created = utc_time_now();
  model.model_uuid = random_uuid_hex();
  describe_checkpoint(model_dir + "/config.json", &model);
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(model_dir)) {
    if (entry.is_regular_file()) files.push_back(entry.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  std::string copied_because;  // why the first file that could not be linked was copied
  run.write_artifact_dir(artifact_path, [&](const std::string& dir) {
    for (const std::string& name : files) {
      const std::string why = link_or_copy_file(model_dir + "/" + name, dir + "/" + name);
      if (copied_because.empty()) copied_because = why;
      model.model_size_bytes += static_cast<int64_t>(std::filesystem::file_size(dir + "/" + name));
    }
    write_file_atomically(dir + "/MLmodel", mlmodel_yaml(model));
  });
  if (!copied_because.empty()) {
    std::fprintf(stderr, "mlflow: %s copied into %s/%s, not hard-linked (%s): the model is stored twice\n",
                 model_dir.c_str(), run.artifacts_dir().c_str(), artifact_path.c_str(), copied_because.c_str());
  }
  // As MLflow's file store records a logged model: the run's list of them, this one appended.
  json history = parse_json_or_discarded(run.tag("mlflow.log-model.history"));
  if (!history.is_array()) history = json::array();
  // MLflow's Model.get_tags_dict: the MLmodel's fields but its size.
  json entry = mlmodel_json(model);
  entry.erase("model_size_bytes");
  history.push_back(entry);
  run.set_tag("mlflow.log-model.history", history.dump());
  return model;
}

}  // namespace bertrain

#include "tools/recorded_train_flags.h"

#include <algorithm>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files.h"
#include "engine/run_dir.h"

namespace bertrain {

namespace {

using nlohmann::json;

// A recorded number or text as the flag's value ("" for a value a flag cannot say).
std::string flag_text(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number()) return value.dump();  // the shortest text that reads back as the same double
  if (value.is_array()) {
    std::string list;
    for (const json& item : value) {
      if (!item.is_string()) return "";
      list += (list.empty() ? "" : ",") + item.get<std::string>();
    }
    return list;
  }
  return "";
}

// Whether `text` says the default `fallback` (numbers compared as numbers: 1e-4 is 0.0001).
bool is_default(const std::string& text, const std::string& fallback) {
  if (text == fallback) return true;
  char* end_text = nullptr;
  char* end_default = nullptr;
  const double a = std::strtod(text.c_str(), &end_text), b = std::strtod(fallback.c_str(), &end_default);
  return !text.empty() && !fallback.empty() && *end_text == '\0' && *end_default == '\0' && a == b;
}

}  // namespace

bool resumes_from_checkpoint_alone(const std::vector<std::string>& args) {
  return has_option_in(args, "resume") && !option_value_in(args, "out").empty() && !has_option_in(args, "model");
}

std::vector<std::string> recorded_train_flags(const std::vector<std::string>& args, const ArgParser& train) {
  const std::string out = option_value_in(args, "out");
  const std::string last = checkpoint_folder(out);
  BERTRAIN_CHECK(file_exists(last + "/trainer_state.json"),
                 "--resume: " << out << "/last/trainer_state.json not found (no run to continue in " << out
                              << "); a new run needs --model and --train-data");
  const json state = read_trainer_state(last);
  json recorded = state.value("params", json::object());
  // The MLflow store, which params do not hold (a resumed run may log elsewhere); a checkpoint of an older bertrain
  // does not name it, and the run would go on without logging into its MLflow run.
  // --mlflow-dir '' (no MLflow) leaves out what only MLflow takes; another store keeps the experiment and run name.
  const bool no_store = has_option_in(args, "mlflow-dir") && option_value_in(args, "mlflow-dir").empty();
  if (no_store) {
    recorded.erase("log_steps");
  } else if (const json store = state.value("mlflow_store", json()); store.is_object()) {
    for (const char* key : {"mlflow_dir", "experiment", "run_name"}) {
      if (store.contains(key)) recorded[key] = store[key];
    }
  } else if (!state.value("mlflow_run_id", "").empty()) {
    const char* uri = std::getenv("MLFLOW_TRACKING_URI");
    BERTRAIN_CHECK(has_option_in(args, "mlflow-dir") || (uri != nullptr && *uri != '\0'),
                   "--resume: the run logs into MLflow run " << state.value("mlflow_run_id", "") << ", in a store "
                       << last << "/trainer_state.json (written by an older bertrain) does not name: give its "
                       << "--mlflow-dir (or --mlflow-dir '' to go on without MLflow)");
  }
  // Relative data and store paths as the training's folder saw them (the model is not read on resume: as given).
  for (const char* key : {"train_data", "val_data", "mlflow_dir"}) {
    if (recorded.contains(key) && recorded[key].is_string()) recorded[key] = recorded_path(state, recorded[key]);
  }
  // --save-total-limit sets --keep too, and the two are refused together: one given, neither comes back; nor with
  // --save-steps 0, which has no step checkpoints to bound.
  const bool bound_given = has_option_in(args, "keep") || has_option_in(args, "save-total-limit") ||
                           option_value_in(args, "save-steps") == "0";
  std::vector<std::string> flags;
  for (const auto& [key, value] : recorded.items()) {
    if (key == "out" || key == "threads" || value.is_null()) continue;
    std::string name = key;
    std::replace(name.begin(), name.end(), '_', '-');
    if (key == "collective_timeout_s") name = "collective-timeout";
    if (key == "clean") {  // recorded as what it does, given as --no-clean
      if (value == false && !has_option_in(args, "no-clean")) flags.push_back("--no-clean");
      continue;
    }
    if (!train.has_option(name) || has_option_in(args, name)) continue;
    if ((name == "keep" || name == "save-total-limit") && bound_given) continue;
    if (name == "keep" && recorded.value("save_total_limit", 0) > 0) continue;  // given as --save-total-limit
    if (train.is_switch(name)) {
      if (value == true) flags.push_back("--" + name);
      continue;
    }
    const std::string text = flag_text(value);
    if (text.empty() || is_default(text, train.default_of(name))) continue;
    flags.push_back("--" + name);
    flags.push_back(text);
  }
  return flags;
}

}  // namespace bertrain

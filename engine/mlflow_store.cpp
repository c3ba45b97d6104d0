#include "engine/mlflow_store.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/ascii.h"
#include "core/error.h"
#include "core/files.h"

namespace bertrain {

namespace {

namespace fs = std::filesystem;

// The scheme of a URI as Python's urlparse (and so MLflow) finds it: a letter, then letters, digits, '+', '-' or
// '.', then ':'; "" when `s` has none (a plain path).
std::string uri_scheme(const std::string& s) {
  const std::size_t colon = s.find(':');
  if (colon == std::string::npos || colon == 0 || !std::isalpha(static_cast<unsigned char>(s[0]))) return "";
  for (std::size_t i = 1; i < colon; ++i) {
    const char c = s[i];
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') return "";
  }
  return ascii_lower(s.substr(0, colon));
}

// The %-escapes of a file: URI's path decoded, as MLflow's url2pathname does.
std::string percent_decode(const std::string& path, const std::string& uri, const std::string& origin) {
  std::string out;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] != '%') {
      out += path[i];
      continue;
    }
    const int hi = i + 2 < path.size() ? hex_digit(path[i + 1]) : -1;
    const int lo = i + 2 < path.size() ? hex_digit(path[i + 2]) : -1;
    if (hi < 0 || lo < 0) {
      throw InputError(origin + " '" + uri + "': '%' must start an escape of two hex digits (%25 for a '%')");
    }
    if (hi == 0 && lo == 0) throw InputError(origin + " '" + uri + "': %00 names no path");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

// The path of a file: URI (`uri` starts with "file:", any case).
std::string file_uri_path(const std::string& uri, const std::string& origin) {
  const std::string hint = "file:///ABS/PATH or file:REL/PATH";
  if (uri.find_first_of("?#") != std::string::npos) {
    throw InputError(origin + " '" + uri + "': a file: URI with a query or fragment ('?', '#'); write them as %3F "
                     "and %23 in a folder name");
  }
  std::string path = uri.substr(5);
  if (path.rfind("//", 0) == 0) {
    const std::size_t slash = path.find('/', 2);
    const std::string host = path.substr(2, slash == std::string::npos ? std::string::npos : slash - 2);
    if (!host.empty() && ascii_lower(host) != "localhost") {
      throw InputError(origin + " '" + uri + "': the file store is on host '" + host + "', not this machine (" +
                       hint + " names a local folder)");
    }
    path = slash == std::string::npos ? "" : path.substr(slash);
  }
  if (path.empty()) throw InputError(origin + " '" + uri + "' names no folder (" + hint + ")");
  return percent_decode(path, uri, origin);
}

// An integer field of a meta.yaml (status, start_time): `fallback` when absent, else digits only (a damaged or
// hand-edited file's other text is named, not read as 0).
int64_t yaml_int(const std::string& path, const std::string& key, int64_t fallback) {
  const std::string text = mlflow_yaml_field(path, key);
  if (text.empty() || text == "null") return fallback;
  const bool digits = text.find_first_not_of("0123456789") == std::string::npos && text.size() <= 18;
  BERTRAIN_CHECK(digits, path << ": field '" << key << "' is not an integer: '" << text << "'");
  return std::stoll(text);
}

// The experiments of a store: its folders holding a meta.yaml, MLflow's .trash (deleted experiments) left out.
// An entry that cannot be looked at (a link loop, no permission) is no experiment: left out, not a filesystem error.
std::vector<std::string> experiment_ids(const std::string& dir) {
  std::vector<std::string> ids;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    std::error_code unreadable;
    if (it->is_directory(unreadable) && name != ".trash" && file_exists(it->path().string() + "/meta.yaml")) {
      ids.push_back(name);
    }
  }
  BERTRAIN_CHECK(!error, dir << ": cannot list the MLflow store: " << error.message());
  return ids;
}

}  // namespace

std::string mlflow_status_name(int status) {
  switch (status) {
    case 1: return "RUNNING";
    case 2: return "SCHEDULED";
    case 3: return "FINISHED";
    case 4: return "FAILED";
    case 5: return "KILLED";
    default: return "status " + std::to_string(status);
  }
}

std::string mlflow_store_path(const std::string& uri_or_path, const std::string& origin) {
  if (uri_or_path.empty()) throw InputError(origin + " is empty: give the MLflow file store's folder");
  // MLflow takes these three words for Databricks' tracking servers, with no colon.
  const std::string scheme = uri_or_path == "databricks" || uri_or_path == "databricks-uc" || uri_or_path == "uc"
                                 ? uri_or_path
                                 : uri_scheme(uri_or_path);
  if (scheme.empty()) return uri_or_path;
  if (scheme == "file") return file_uri_path(uri_or_path, origin);
  const bool known = scheme == "http" || scheme == "https" || scheme.rfind("databricks", 0) == 0 || scheme == "uc" ||
                     scheme.rfind("sqlite", 0) == 0 || scheme.rfind("postgresql", 0) == 0 ||
                     scheme.rfind("mysql", 0) == 0 || scheme.rfind("mssql", 0) == 0;
  throw InputError(origin + " '" + uri_or_path + "': bertrain writes MLflow file stores only (a folder, or "
                   "file:FOLDER), not to tracking servers or databases; log to a folder and serve it with "
                   "`mlflow server --backend-store-uri FOLDER`" +
                   (known ? std::string() : " (a folder whose name has a ':' is ./" + uri_or_path + ")"));
}

MlflowStore mlflow_store(bool flag_given, const std::string& flag_value) {
  if (flag_given) {
    if (flag_value.empty()) return {};
    return {mlflow_store_path(flag_value, "--mlflow-dir"), "--mlflow-dir"};
  }
  const char* env = std::getenv("MLFLOW_TRACKING_URI");
  if (env == nullptr || *env == '\0') return {};
  return {mlflow_store_path(env, "MLFLOW_TRACKING_URI"), "MLFLOW_TRACKING_URI"};
}

std::string continued_run_experiment(const std::string& dir, const std::string& experiment, const std::string& run_id) {
  std::string found;
  if (directory_exists(dir)) {
    for (const std::string& id : experiment_ids(dir)) {
      if (!file_exists(dir + "/" + id + "/" + run_id + "/meta.yaml")) continue;
      if (found.empty() || mlflow_yaml_field(dir + "/" + id + "/meta.yaml", "name") == experiment) found = id;
    }
  }
  BERTRAIN_CHECK(!found.empty(), dir << ": no experiment holds the MLflow run " << run_id << " that this run started "
                                     << "(was --mlflow-dir or MLFLOW_TRACKING_URI changed, or its meta.yaml removed?)");
  const std::string experiment_meta = dir + "/" + found + "/meta.yaml", run_meta = dir + "/" + found + "/" + run_id +
                                                                                   "/meta.yaml";
  BERTRAIN_CHECK(mlflow_yaml_field(experiment_meta, "lifecycle_stage") != "deleted",
                 experiment_meta << ": the experiment of the MLflow run " << run_id << " is deleted: restore it in "
                                 << "MLflow (mlflow experiments restore), or continue without --mlflow-dir");
  BERTRAIN_CHECK(mlflow_yaml_field(run_meta, "lifecycle_stage") != "deleted",
                 run_meta << ": the MLflow run " << run_id << " is deleted: restore it in MLflow (mlflow runs "
                          << "restore), or continue without --mlflow-dir");
  return found;
}

std::string find_mlflow_experiment(const std::string& dir, const std::string& name) {
  if (!directory_exists(dir)) return "";
  for (const std::string& id : experiment_ids(dir)) {
    const std::string meta = dir + "/" + id + "/meta.yaml";
    if (mlflow_yaml_field(meta, "name") == name && mlflow_yaml_field(meta, "lifecycle_stage") != "deleted") return id;
  }
  return "";
}

std::string MlflowRunInfo::describe() const {
  return "MLflow run " + run_id + " (experiment '" + experiment_name + "', store " + store + ")";
}

void check_mlflow_run_id(const std::string& run_id) {
  bool ok = !run_id.empty() && run_id.size() <= 256 && std::isalnum(static_cast<unsigned char>(run_id[0]));
  for (char c : run_id) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-');
  BERTRAIN_CHECK(ok, "--run-id '" << run_id << "' is not an MLflow run id (letters, digits, '_' and '-', as "
                                     "`mlflow runs list` shows them)");
}

MlflowRunInfo find_mlflow_run(const std::string& store_dir, const std::string& run_id, const std::string& experiment) {
  check_mlflow_run_id(run_id);
  const std::string looking_for =
      "MLflow run " + run_id + (experiment.empty() ? std::string() : " of experiment '" + experiment + "'");
  BERTRAIN_CHECK(directory_exists(store_dir), store_dir << ": no MLflow file store here (--mlflow-dir or "
                                                           "MLFLOW_TRACKING_URI), looking for the "
                                                        << looking_for);
  std::vector<std::string> ids;
  if (!experiment.empty()) {
    const std::string id = find_mlflow_experiment(store_dir, experiment);
    BERTRAIN_CHECK(!id.empty(), store_dir << ": no MLflow experiment named '" << experiment
                                          << "' (--experiment), looking for the MLflow run " << run_id);
    ids.push_back(id);
  } else {
    ids = experiment_ids(store_dir);
  }
  for (const std::string& id : ids) {
    const std::string experiment_meta = store_dir + "/" + id + "/meta.yaml";
    const std::string meta = store_dir + "/" + id + "/" + run_id + "/meta.yaml";
    if (!file_exists(meta) || (experiment.empty() && mlflow_yaml_field(experiment_meta, "lifecycle_stage") == "deleted")) {
      continue;
    }
    MlflowRunInfo run;
    run.store = store_dir;
    run.experiment_id = id;
    run.experiment_name = mlflow_yaml_field(experiment_meta, "name");
    run.run_id = run_id;
    run.run_name = mlflow_yaml_field(meta, "run_name");
    run.dir = store_dir + "/" + id + "/" + run_id;
    // No status is not one MLflow writes: named, where 0 read as "status 0" of a finished run.
    run.status = static_cast<int>(yaml_int(meta, "status", -1));
    BERTRAIN_CHECK(run.status >= 0, meta << ": no field 'status' (the file is damaged or is not an MLflow run's)");
    run.start_time_ms = yaml_int(meta, "start_time", 0);
    run.artifact_uri = mlflow_yaml_field(meta, "artifact_uri");
    BERTRAIN_CHECK(mlflow_yaml_field(meta, "lifecycle_stage") != "deleted", run.describe() << " is deleted");
    return run;
  }
  BERTRAIN_FAIL("no MLflow run " << run_id << " in "
                                 << (experiment.empty() ? "any experiment" : "experiment '" + experiment + "'")
                                 << " of the store " << store_dir);
}

std::vector<std::string> find_mlflow_child_runs(const std::string& dir, const std::string& experiment_id,
                                                const std::string& parent_run_id, const std::string& run_name) {
  // A tag's file holds its value exactly; one that cannot be read is no match.
  const auto tag = [](const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    return in ? std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()) : std::string();
  };
  std::vector<std::string> ids;
  std::error_code error;
  for (fs::directory_iterator it(fs::path(dir) / experiment_id, error), end; !error && it != end; it.increment(error)) {
    const fs::path tags = it->path() / "tags";
    if (tag(tags / "mlflow.parentRunId") == parent_run_id && tag(tags / "mlflow.runName") == run_name) {
      ids.push_back(it->path().filename().string());
    }
  }
  BERTRAIN_CHECK(!error, dir << "/" << experiment_id << ": cannot list the MLflow experiment: " << error.message());
  return ids;
}

std::string mlflow_artifacts_dir(const MlflowRunInfo& run) {
  if (ascii_lower(run.artifact_uri.substr(0, 5)) == "file:") {
    try {
      const std::string dir = file_uri_path(run.artifact_uri, "artifact_uri");
      if (directory_exists(dir)) return dir;
    } catch (const Error&) {
      // Another host's file URI: the run folder's own artifacts, as below.
    }
  }
  return run.dir + "/artifacts";
}

std::string mlflow_run_model_dir(const MlflowRunInfo& run) {
  BERTRAIN_CHECK(run.status == static_cast<int>(MlflowStatus::kFinished),
                 run.describe() << " is " << mlflow_status_name(run.status)
                                << ", not FINISHED: its training "
                                << (run.status == static_cast<int>(MlflowStatus::kRunning)
                                        ? "is still running or was killed (--resume it)"
                                        : run.status == static_cast<int>(MlflowStatus::kKilled)
                                              ? "was stopped (--resume it)"
                                              : "did not end with a model")
                                << "; give --model DIR for a model directory");
  const std::string artifacts = mlflow_artifacts_dir(run);
  for (const char* name : {"model", "best"}) {
    const std::string dir = artifacts + "/" + name;
    if (file_exists(dir + "/config.json")) return dir;
  }
  BERTRAIN_FAIL(run.describe() << " logged no model: neither " << artifacts << "/model nor " << artifacts
                               << "/best holds a config.json");
}

std::string mlflow_yaml_field(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();  // a file saved with CRLF line ends
    if (line.rfind(key + ": ", 0) != 0) continue;
    std::string value = line.substr(key.size() + 2);
    if (value.size() >= 2 && (value.front() == '\'' || value.front() == '"') && value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
      std::string unquoted;
      for (std::size_t i = 0; i < value.size(); ++i) {
        unquoted += value[i];
        if (value[i] == '\'' && i + 1 < value.size() && value[i + 1] == '\'') ++i;
      }
      value = unquoted;
    }
    return value;
  }
  return "";
}

std::string mlflow_yaml_string(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

}  // namespace bertrain

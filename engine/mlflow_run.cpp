#include "engine/mlflow_run.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/files.h"

namespace bertrain {

namespace {

namespace fs = std::filesystem;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A YAML scalar MLflow's yaml.safe_load reads back as the same string: single-quoted, '' for a quote.
std::string yaml_string(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string random_hex(int digits) {
  std::random_device device;
  std::mt19937_64 rng((static_cast<uint64_t>(device()) << 32) ^ device() ^ static_cast<uint64_t>(now_ms()));
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < digits; ++i) out += hex[rng() % 16];
  return out;
}

// "name: value" of a meta.yaml written by MLflow or by us; "" when absent.
std::string yaml_field(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
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

std::string file_uri(const std::string& path) { return "file://" + fs::absolute(path).lexically_normal().string(); }

void write_experiment(const std::string& root, const std::string& id, const std::string& name) {
  const std::string dir = root + "/" + id;
  make_directories(dir);
  const int64_t t = now_ms();
  std::ostringstream yaml;
  yaml << "artifact_location: " << file_uri(dir) << "\ncreation_time: " << t << "\nexperiment_id: "
       << yaml_string(id) << "\nlast_update_time: " << t << "\nlifecycle_stage: active\nname: " << yaml_string(name)
       << "\n";
  write_file_atomically(dir + "/meta.yaml", yaml.str());
}

// The id of the active experiment named `name` in `root`; "" when there is none.
std::string find_experiment(const std::string& root, const std::string& name) {
  if (!directory_exists(root)) return "";
  for (const auto& entry : fs::directory_iterator(root)) {
    const std::string meta = entry.path().string() + "/meta.yaml";
    if (entry.is_directory() && file_exists(meta) && yaml_field(meta, "name") == name &&
        yaml_field(meta, "lifecycle_stage") != "deleted") {
      return entry.path().filename().string();
    }
  }
  return "";
}

// The id of the experiment named `name` in `root`, created (with MLflow's Default experiment 0 in a new store)
// when missing.
std::string find_or_create_experiment(const std::string& root, const std::string& name) {
  make_directories(root + "/.trash");
  if (!directory_exists(root + "/0")) write_experiment(root, "0", "Default");
  if (std::string id = find_experiment(root, name); !id.empty()) return id;
  // MLflow's file store numbers new experiments with random positive integers.
  std::random_device device;
  const std::string id = std::to_string(100000000000ULL + (static_cast<uint64_t>(device()) << 20 ^ device()) % 899999999999ULL);
  write_experiment(root, id, name);
  return id;
}

// One point of a metric file: a "<timestamp ms> <value> <step>" line.
struct MetricPoint {
  long long timestamp;
  double value;
  long step;
};

std::string metric_line(const MetricPoint& point) {
  char line[96];
  std::snprintf(line, sizeof line, "%lld %.17g %ld\n", point.timestamp, point.value, point.step);
  return line;
}

// The whole lines of a metric file (none when it is missing; a line cut by a kill is left out).
std::vector<MetricPoint> read_metric(const std::string& path) {
  std::vector<MetricPoint> points;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    MetricPoint point{};
    if (fields >> point.timestamp >> point.value >> point.step) points.push_back(point);
  }
  return points;
}

// Replaces a metric file with `points`, atomically; with none, removes it (MLflow reads a metric file's last
// line: no file rather than an empty one).
void write_metric(const std::string& path, const std::vector<MetricPoint>& points) {
  if (points.empty()) {
    std::remove(path.c_str());
    return;
  }
  std::string text;
  for (const MetricPoint& point : points) text += metric_line(point);
  write_file_atomically(path, text);
}

}  // namespace

void MlflowRun::check_exists(const std::string& root, const std::string& experiment, const std::string& run_id) {
  BERTRAIN_CHECK(directory_exists(root), root << ": no MLflow file store here (--mlflow-dir)");
  const std::string experiment_id = find_experiment(root, experiment);
  BERTRAIN_CHECK(!experiment_id.empty(), root << ": no MLflow experiment named '" << experiment << "' (--experiment)");
  const std::string meta = root + "/" + experiment_id + "/" + run_id + "/meta.yaml";
  BERTRAIN_CHECK(file_exists(meta), meta << ": the MLflow run of this training is missing (was --mlflow-dir or "
                                            "--experiment different?)");
}

MlflowRun::MlflowRun(const std::string& root, const std::string& experiment, const std::string& run_name,
                     const std::string& run_id)
    : root_(root), run_name_(run_name) {
  BERTRAIN_CHECK(!experiment.empty(), "--experiment must not be empty");
  experiment_id_ = find_or_create_experiment(root, experiment);
  if (!run_id.empty()) {
    run_id_ = run_id;
    run_dir_ = root_ + "/" + experiment_id_ + "/" + run_id_;
    const std::string meta = run_dir_ + "/meta.yaml";
    BERTRAIN_CHECK(file_exists(meta), meta << ": the MLflow run this training started is missing (was --mlflow-dir "
                                                "or --experiment changed?)");
    run_name_ = yaml_field(meta, "run_name");
    start_time_ms_ = std::atoll(yaml_field(meta, "start_time").c_str());
  } else {
    run_id_ = random_hex(32);
    run_dir_ = root_ + "/" + experiment_id_ + "/" + run_id_;
    start_time_ms_ = now_ms();
    for (const char* sub : {"params", "metrics", "tags", "artifacts"}) make_directories(run_dir_ + "/" + sub);
    set_tag("mlflow.runName", run_name_);
    set_tag("mlflow.source.name", "bertrain");
    set_tag("mlflow.source.type", "LOCAL");
    const char* user = std::getenv("USER");
    set_tag("mlflow.user", user != nullptr ? user : "unknown");
  }
  write_meta(MlflowStatus::kRunning, false);
}

void MlflowRun::write_meta(MlflowStatus status, bool ended) {
  const char* user = std::getenv("USER");
  std::ostringstream yaml;
  yaml << "artifact_uri: " << file_uri(run_dir_ + "/artifacts") << "\nend_time: " << (ended ? std::to_string(now_ms()) : "null")
       << "\nentry_point_name: ''\nexperiment_id: " << yaml_string(experiment_id_)
       << "\nlifecycle_stage: active\nrun_id: " << run_id_ << "\nrun_name: " << yaml_string(run_name_)
       << "\nrun_uuid: " << run_id_ << "\nsource_name: ''\nsource_type: 4\nsource_version: ''\nstart_time: "
       << start_time_ms_ << "\nstatus: " << static_cast<int>(status) << "\ntags: []\nuser_id: "
       << yaml_string(user != nullptr ? user : "unknown") << "\n";
  write_file_atomically(run_dir_ + "/meta.yaml", yaml.str());
}

void MlflowRun::log_params(const nlohmann::json& params) {
  for (const auto& [key, value] : params.items()) {
    write_file_atomically(run_dir_ + "/params/" + key, value.is_string() ? value.get<std::string>() : value.dump());
  }
}

void MlflowRun::log_metric(const std::string& key, double value, long step) {
  std::ofstream out(run_dir_ + "/metrics/" + key, std::ios::app);
  out << metric_line({now_ms(), value, step});
  BERTRAIN_CHECK(out.flush(), run_dir_ << "/metrics/" << key << ": cannot append");
}

void MlflowRun::reset_metric(const std::string& key, const std::vector<std::pair<long, double>>& values) {
  const std::string path = run_dir_ + "/metrics/" + key;
  std::map<long, long long> timestamps;  // step -> the first timestamp logged for it
  for (const MetricPoint& point : read_metric(path)) timestamps.emplace(point.step, point.timestamp);
  std::vector<MetricPoint> points;
  for (const auto& [step, value] : values) {
    const auto it = timestamps.find(step);
    points.push_back({it != timestamps.end() ? it->second : now_ms(), value, step});
  }
  write_metric(path, points);
}

void MlflowRun::truncate_metric(const std::string& key, long max_step) {
  const std::string path = run_dir_ + "/metrics/" + key;
  std::vector<MetricPoint> points = read_metric(path);
  points.erase(std::remove_if(points.begin(), points.end(), [&](const MetricPoint& p) { return p.step > max_step; }),
               points.end());
  write_metric(path, points);
}

void MlflowRun::set_tag(const std::string& key, const std::string& value) {
  write_file_atomically(run_dir_ + "/tags/" + key, value);
}

void MlflowRun::log_artifact(const std::string& source, const std::string& name) {
  const fs::path target = fs::path(run_dir_) / "artifacts" / name;
  std::error_code ec;
  fs::remove_all(target, ec);
  fs::copy(source, target, fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
  BERTRAIN_CHECK(!ec, "MLflow artifact " << target.string() << ": cannot copy " << source << ": " << ec.message());
}

void MlflowRun::write_artifact(const std::string& name, const std::string& contents) {
  write_file_atomically(run_dir_ + "/artifacts/" + name, contents);
}

void MlflowRun::set_status(MlflowStatus status) { write_meta(status, status != MlflowStatus::kRunning); }

}  // namespace bertrain

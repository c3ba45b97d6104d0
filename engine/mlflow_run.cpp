#include "engine/mlflow_run.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "core/atomic_file.h"
#include "core/build_info.h"
#include "core/error.h"
#include "core/files.h"

namespace bertrain {

namespace {

namespace fs = std::filesystem;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// 32 random hex digits.
std::string random_hex() {
  std::random_device device;
  std::mt19937_64 rng((static_cast<uint64_t>(device()) << 32) ^ device() ^ static_cast<uint64_t>(now_ms()));
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 32; ++i) out += hex[rng() % 16];
  return out;
}

// The program as the command line named it (argv[0], what MLflow records as mlflow.source.name for a script), read
// from /proc so that no command has to pass it down; "bertrain" where /proc is not there.
std::string program_name() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string argv0;
  std::getline(in, argv0, '\0');
  return argv0.empty() ? "bertrain" : argv0;
}

// As Python's pathlib.Path.as_uri, which MLflow writes: every byte but letters, digits, "-._~" and "/" as %XX, so that a
// folder named with a space, '#', '%' or ': ' reads back as itself (unencoded, MLflow cut the URI at '#', decoded
// "%41" to "A", and a ': ' made meta.yaml invalid YAML).
std::string file_uri(const std::string& path) {
  static const char* const kHex = "0123456789ABCDEF";
  std::string uri = "file://";
  for (const unsigned char c : fs::absolute(path).lexically_normal().string()) {
    if (std::isalnum(c) != 0 || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      uri += static_cast<char>(c);
    } else {
      uri += '%';
      uri += kHex[c >> 4];
      uri += kHex[c & 15];
    }
  }
  return uri;
}

void write_experiment(const std::string& root, const std::string& id, const std::string& name) {
  const std::string dir = root + "/" + id;
  make_directories(dir);
  const int64_t t = now_ms();
  std::ostringstream yaml;
  yaml << "artifact_location: " << file_uri(dir) << "\ncreation_time: " << t << "\nexperiment_id: "
       << mlflow_yaml_string(id) << "\nlast_update_time: " << t << "\nlifecycle_stage: active\nname: "
       << mlflow_yaml_string(name)
       << "\n";
  write_file_atomically(dir + "/meta.yaml", yaml.str());
}

// The id of the experiment named `name` in `root`, created (with MLflow's Default experiment 0 in a new store)
// when missing. Looking and creating are one step under a lock on the store (a file MLflow, which lists folders,
// does not see): trains started together each made an experiment of the name, and MLflow then showed one of them.
std::string find_or_create_experiment(const std::string& root, const std::string& name) {
  make_directories(root + "/.trash");
  const std::string lock_path = root + "/.bertrain-experiments.lock";
  const int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  BERTRAIN_CHECK(lock >= 0, lock_path << ": cannot open the lock file: " << std::strerror(errno));
  const struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }  // closing releases the lock
  } unlock{lock};
  while (::flock(lock, LOCK_EX) != 0) {
    BERTRAIN_CHECK(errno == EINTR, lock_path << ": cannot lock: " << std::strerror(errno));
  }
  if (!directory_exists(root + "/0")) write_experiment(root, "0", "Default");
  if (std::string id = find_mlflow_experiment(root, name); !id.empty()) return id;
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

// The whole lines of a metric file (none when it is missing; a line cut by a kill is left out). Values as MLflow
// writes them, "nan" and "inf" included (a stream's >> refused those, and a rewrite dropped their lines).
std::vector<MetricPoint> read_metric(const std::string& path) {
  std::vector<MetricPoint> points;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    MetricPoint point{};
    char rest = 0;
    if (std::sscanf(line.c_str(), "%lld %lf %ld %c", &point.timestamp, &point.value, &point.step, &rest) == 3) {
      points.push_back(point);
    }
  }
  return points;
}

// Replaces a metric file with `points`, atomically (the temporary file in `run_dir`: MLflow takes every file of
// metrics/ for a metric); with none, removes it (MLflow reads a metric file's last line: no file rather than an
// empty one).
void write_metric(const std::string& path, const std::vector<MetricPoint>& points, const std::string& run_dir) {
  if (points.empty()) {
    std::remove(path.c_str());
    return;
  }
  std::string text;
  for (const MetricPoint& point : points) text += metric_line(point);
  write_file_atomically(path, text, run_dir);
}

}  // namespace

std::string random_uuid_hex() {
  std::string hex = random_hex();
  hex[12] = '4';                                                   // version 4
  hex[16] = "89ab"[std::stoi(hex.substr(16, 1), nullptr, 16) % 4];  // variant 10xx
  return hex;
}

std::string mlflow_user() {
  for (const char* name : {"LOGNAME", "USER", "LNAME", "USERNAME"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return value;
  }
  const passwd* entry = ::getpwuid(::getuid());
  return entry != nullptr && entry->pw_name != nullptr ? entry->pw_name : "unknown";
}

MlflowRun::MlflowRun(const std::string& root, const std::string& experiment, const std::string& run_name,
                     const std::string& run_id)
    : root_(root), run_name_(run_name) {
  BERTRAIN_CHECK(!experiment.empty(), "--experiment must not be empty");
  if (run_id.empty()) {
    experiment_id_ = find_or_create_experiment(root, experiment);
    create();
  } else {
    run_id_ = run_id;
    experiment_id_ = continued_run_experiment(root, experiment, run_id);
    run_dir_ = root_ + "/" + experiment_id_ + "/" + run_id_;
    // Temporary files a killed run left (MLflow would read one in params/ as a parameter, in metrics/ as a metric).
    for (const char* folder : {"", "/params", "/metrics", "/tags"}) remove_abandoned_temporary_files(run_dir_ + folder);
    const std::string meta = run_dir_ + "/meta.yaml";  // there: continued_run_experiment found the run by it
    found_meta_ = read_file(meta, "MLflow run meta.yaml");
    run_name_ = mlflow_yaml_field(meta, "run_name");
    start_time_ms_ = std::atoll(mlflow_yaml_field(meta, "start_time").c_str());
    artifacts_dir_ = run_dir_ + "/artifacts";
    artifact_uri_ = mlflow_yaml_field(meta, "artifact_uri");
    if (artifact_uri_.empty()) artifact_uri_ = file_uri(artifacts_dir_);
  }
  uncaught_at_start_ = std::uncaught_exceptions();
  write_meta(MlflowStatus::kRunning, false);
  running_ = true;
}

MlflowRun::~MlflowRun() {
  if (!running_ || std::uncaught_exceptions() <= uncaught_at_start_) return;
  try {
    if (found_meta_.empty()) {
      write_meta(MlflowStatus::kFailed, true);
    } else {
      write_file_atomically(run_dir_ + "/meta.yaml", found_meta_);
    }
  } catch (...) {
    // The error on its way out says what failed; the store may then show the run RUNNING, as after a kill.
  }
}

MlflowRun::MlflowRun(const MlflowRunInfo& run)
    : root_(run.store),
      experiment_id_(run.experiment_id),
      run_id_(run.run_id),
      run_name_(run.run_name),
      run_dir_(run.dir),
      artifact_uri_(run.artifact_uri),
      artifacts_dir_(mlflow_artifacts_dir(run)),
      start_time_ms_(run.start_time_ms) {}

void MlflowRun::create() {
  run_id_ = random_uuid_hex();
  run_dir_ = root_ + "/" + experiment_id_ + "/" + run_id_;
  artifacts_dir_ = run_dir_ + "/artifacts";
  artifact_uri_ = file_uri(artifacts_dir_);
  start_time_ms_ = now_ms();
  for (const char* sub : {"params", "metrics", "tags", "artifacts"}) make_directories(run_dir_ + "/" + sub);
  set_tag("mlflow.runName", run_name_);
  set_tag("mlflow.user", mlflow_user());
  set_tag("mlflow.source.name", program_name());
  set_tag("mlflow.source.type", "LOCAL");
  if (!build_git_commit().empty()) set_tag("mlflow.source.git.commit", build_git_commit());
}

void MlflowRun::write_meta(MlflowStatus status, bool ended) {
  const std::string end_time = ended ? std::to_string(now_ms()) : "null";
  if (!found_meta_.empty()) {
    // A continued run: its meta.yaml as found, only its status and end time changed, so that what bertrain does not
    // write itself (a run name PyYAML wrapped onto two lines, user_id, source_name, quoting) stays as it was.
    std::string yaml;
    bool status_written = false, end_written = false;
    std::istringstream lines(found_meta_);
    for (std::string line; std::getline(lines, line);) {
      const bool crlf = !line.empty() && line.back() == '\r';
      const std::string eol = crlf ? "\r\n" : "\n";
      if (line.rfind("status: ", 0) == 0) {
        yaml += "status: " + std::to_string(static_cast<int>(status)) + eol;
        status_written = true;
      } else if (line.rfind("end_time: ", 0) == 0) {
        yaml += "end_time: " + end_time + eol;
        end_written = true;
      } else {
        yaml += line + "\n";
      }
    }
    if (!end_written) yaml += "end_time: " + end_time + "\n";
    if (!status_written) yaml += "status: " + std::to_string(static_cast<int>(status)) + "\n";
    write_file_atomically(run_dir_ + "/meta.yaml", yaml);
    return;
  }
  std::ostringstream yaml;
  yaml << "artifact_uri: " << artifact_uri_ << "\nend_time: " << end_time
       << "\nentry_point_name: ''\nexperiment_id: " << mlflow_yaml_string(experiment_id_)
       << "\nlifecycle_stage: active\nrun_id: " << run_id_ << "\nrun_name: " << mlflow_yaml_string(run_name_)
       << "\nrun_uuid: " << run_id_ << "\nsource_name: ''\nsource_type: 4\nsource_version: ''\nstart_time: "
       << start_time_ms_ << "\nstatus: " << static_cast<int>(status) << "\ntags: []\nuser_id: "
       << mlflow_yaml_string(mlflow_user()) << "\n";
  write_file_atomically(run_dir_ + "/meta.yaml", yaml.str());
}

// Files of params/, tags/, metrics/ and artifacts/ are written through temporary files in the run's folder: MLflow
// lists those folders and took a temporary file for a param ("seed.tmp.<pid>"), or failed reading one renamed away.
void MlflowRun::log_params(const nlohmann::json& params) {
  for (const auto& [key, value] : params.items()) {
    write_file_atomically(run_dir_ + "/params/" + key, value.is_string() ? value.get<std::string>() : value.dump(),
                          run_dir_);
  }
}

void MlflowRun::log_metric(const std::string& key, double value, long step) {
  // Appended as MLflow's client appends; a line that cannot be written whole (a full disk) is cut off again, since
  // MLflow reads a torn line as a point of step 0 and an empty metric file fails its whole experiment's listing.
  const std::string path = run_dir_ + "/metrics/" + key;
  const std::string line = metric_line({now_ms(), value, step});
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
  BERTRAIN_CHECK(fd >= 0, path << ": cannot append: " << std::strerror(errno));
  struct stat st;
  const off_t before = ::fstat(fd, &st) == 0 ? st.st_size : -1;
  int error = 0;
  if (write_all(fd, line.data(), line.size(), &error) != line.size() && error == 0) error = ENOSPC;  // no progress
  if (error != 0 && before == 0) ::unlink(path.c_str());
  // Should the cut fail too, the torn line stays until a resume rewrites the file from its checkpoint (reset_metric).
  if (error != 0 && before > 0) (void)!::ftruncate(fd, before);
  ::close(fd);
  BERTRAIN_CHECK(error == 0, path << ": cannot append: " << std::strerror(error));
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
  write_metric(path, points, run_dir_);
}

void MlflowRun::truncate_metric(const std::string& key, long max_step) {
  const std::string path = run_dir_ + "/metrics/" + key;
  std::vector<MetricPoint> points = read_metric(path);
  points.erase(std::remove_if(points.begin(), points.end(), [&](const MetricPoint& p) { return p.step > max_step; }),
               points.end());
  write_metric(path, points, run_dir_);
}

void MlflowRun::set_tag(const std::string& key, const std::string& value) {
  write_file_atomically(run_dir_ + "/tags/" + key, value, run_dir_);
}

std::string MlflowRun::tag(const std::string& key) const {
  const std::string path = run_dir_ + "/tags/" + key;
  return file_exists(path) ? read_file(path, "MLflow tag") : "";
}

void MlflowRun::log_artifact(const std::string& source, const std::string& name) {
  // Replaced whole or not at all: a copy that fails (a full disk) leaves the artifact logged before, not a part.
  const fs::path target = fs::path(artifacts_dir_) / name;
  try {
    if (!fs::is_directory(source)) {
      write_file_atomically(target.string(), read_file(source, "artifact"), run_dir_);
      return;
    }
    make_directories(target.parent_path().string());
    replace_directory_atomically(target.string(), [&](const std::string& dir) {
      fs::copy(source, dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    });
  } catch (const std::exception& e) {
    throw Error("MLflow artifact " + target.string() + ": cannot copy " + source + ": " + e.what());
  }
}

void MlflowRun::write_artifact(const std::string& name, const std::string& contents) {
  write_file_atomically(artifacts_dir_ + "/" + name, contents, run_dir_);
}

void MlflowRun::write_artifact_dir(const std::string& name,
                                   const std::function<void(const std::string& dir)>& fill) {
  const fs::path dir = fs::path(artifacts_dir_) / name;
  make_directories(dir.parent_path().string());
  replace_directory_atomically(dir.string(), fill);
}

void MlflowRun::set_status(MlflowStatus status) {
  write_meta(status, status != MlflowStatus::kRunning);
  running_ = status == MlflowStatus::kRunning;
}

}  // namespace bertrain

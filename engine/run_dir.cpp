#include "engine/run_dir.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <system_error>

#include <sys/stat.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/file_hash.h"
#include "core/files.h"
#include "data/csv_parser.h"
#include "engine/predictor.h"
#include "model/model_dir.h"

namespace bertrain {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// A file's identity (device, inode): the hard links to one file have the same.
using FileId = std::pair<std::uintmax_t, std::uintmax_t>;

// The regular files under `path` (a file or a folder, recursively; links not followed) and their sizes, each file
// once however many hard links to it there are; unreadable entries are left out.
std::map<FileId, std::uintmax_t> files_under(const fs::path& path) {
  std::map<FileId, std::uintmax_t> files;
  auto add = [&](const fs::path& file) {
    struct stat st;
    if (::lstat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      files[{static_cast<std::uintmax_t>(st.st_dev), static_cast<std::uintmax_t>(st.st_ino)}] =
          static_cast<std::uintmax_t>(st.st_size);
    }
  };
  std::error_code error;
  if (!fs::is_directory(fs::symlink_status(path, error))) {
    add(path);
    return files;
  }
  for (fs::recursive_directory_iterator it(path, error), end; !error && it != end; it.increment(error)) add(it->path());
  return files;
}

std::string megabytes(std::uintmax_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f MB", static_cast<double>(bytes) / 1e6);
  return text;
}

// The step checkpoints in RUN_DIR/checkpoints, oldest first; interrupted writes are repaired (removed) on the way.
std::vector<std::pair<long, std::string>> step_checkpoints(const std::string& folder) {
  std::vector<std::pair<long, std::string>> found;  // (step, path)
  if (!directory_exists(folder)) return found;
  for (const auto& entry : fs::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    const std::size_t tmp = name.find(".tmp-");
    if (name.rfind("step-", 0) == 0 && tmp != std::string::npos) {
      recover_directory(folder + "/" + name.substr(0, tmp));  // removes it when its writer was killed
      continue;
    }
    if (name.rfind("step-", 0) != 0 || name.size() == 5 ||
        name.find_first_not_of("0123456789", 5) != std::string::npos) {
      continue;
    }
    found.emplace_back(std::stol(name.substr(5)), entry.path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

// Whether a finished run (results.json written) already did what `args` asks: a run that stopped early is done;
// otherwise its training budget (--epochs, --max-steps) must cover the one asked for now.
bool finished_as_asked(const TrainArgs& args, const json& state) {
  if (state.value("stopped_early", json()).is_object()) return true;
  const json& ran = state.value("params", json::object());
  const long ran_max_steps = ran.value("max_steps", 0L);
  if (ran_max_steps != args.max_steps) return false;
  if (args.max_steps == 0 && ran.value("epochs", 0) < args.epochs) return false;
  // Checkpoints written before "training_done" existed: an epoch-end checkpoint of the last epoch.
  return state.value("training_done", !state.contains("steps_in_epoch") && state.value("epochs_done", 0) >= args.epochs);
}

}  // namespace

OptimizerSaving parse_optimizer_saving(const std::string& text) {
  if (text == "always") return OptimizerSaving::kAlways;
  if (text == "during") return OptimizerSaving::kDuring;
  if (text == "never") return OptimizerSaving::kNever;
  BERTRAIN_FAIL("--save-optimizer must be always, during or never, got '" << text << "'");
}

std::string to_string(OptimizerSaving saving) {
  switch (saving) {
    case OptimizerSaving::kAlways: return "always";
    case OptimizerSaving::kDuring: return "during";
    case OptimizerSaving::kNever: return "never";
  }
  return "?";
}

json read_trainer_state(const std::string& dir) {
  const std::string path = dir + "/trainer_state.json";
  const json state = read_json_file(path);
  BERTRAIN_CHECK(state.is_object(), path << ": expected a JSON object, found " << state.type_name());
  const auto check = [&](const char* field, bool required, bool (json::*is_type)() const, const char* type) {
    const auto it = state.find(field);
    if (it == state.end()) {
      BERTRAIN_CHECK(!required, path << ": field '" << field << "' is missing");
      return;
    }
    BERTRAIN_CHECK(((*it).*is_type)(),
                   path << ": field '" << field << "' must be " << type << ", found " << it->dump());
  };
  for (const char* field : {"epochs_done", "best_epoch"}) check(field, true, &json::is_number_integer, "an integer");
  for (const char* field : {"steps_in_epoch", "optimizer_steps", "total_steps", "best_step", "period_rows"}) {
    check(field, false, &json::is_number_integer, "an integer");
  }
  check("elapsed_s", true, &json::is_number, "a number");
  check("epoch_train_seconds", false, &json::is_number, "a number");
  check("scheduler", true, &json::is_object, "an object");
  for (const char* field : {"params", "early_stopping", "running_loss", "running_grad_norm", "log_window_loss",
                            "mlflow_store"}) {
    check(field, false, &json::is_object, "an object");
  }
  // The settings a --resume of a finished run compares with its command (finished_as_asked).
  if (state.contains("params")) {
    for (const char* field : {"epochs", "max_steps"}) {
      const auto it = state["params"].find(field);
      BERTRAIN_CHECK(it == state["params"].end() || it->is_number_integer(),
                     path << ": field 'params." << field << "' must be an integer, found " << it->dump());
    }
  }
  check("history", true, &json::is_array, "an array");
  check("resumes", false, &json::is_array, "an array");
  check("mlflow_run_id", false, &json::is_string, "a string");
  check("training_done", false, &json::is_boolean, "true or false");
  check("tokenizer_files", false, &json::is_object, "an object");
  check("cwd", false, &json::is_string, "a string");
  for (const char* field : {"epochs_done", "steps_in_epoch", "optimizer_steps", "total_steps"}) {
    BERTRAIN_CHECK(state.value(field, 0L) >= 0, path << ": field '" << field << "' must be >= 0, found "
                                                      << state.at(field).dump());
  }
  return state;
}

std::string working_directory() {
  std::error_code error;
  const fs::path here = fs::current_path(error);
  return error ? std::string() : here.string();
}

std::string checkpoint_folder(const std::string& out_dir) {
  return file_exists(out_dir + "/last/trainer_state.json") ? out_dir + "/last" : out_dir + "/last.old";
}

std::string recorded_path(const json& state, const std::string& path) {
  const std::string then = state.value("cwd", std::string());
  if (path.empty() || fs::path(path).is_absolute() || then.empty() || then == working_directory()) return path;
  return (fs::path(then) / path).lexically_normal().string();
}

json tokenizer_fingerprints(const std::string& dir) {
  json fingerprints = json::object();
  for (const std::string& name : tokenizer_file_names()) {
    const std::string path = dir + "/" + name;
    if (file_exists(path)) fingerprints[name] = file_fingerprint(path);
  }
  return fingerprints;
}

std::vector<std::string> run_files_in(const std::string& dir) {
  std::vector<std::string> present;
  for (const char* name : kRunFiles) {
    if (path_exists(dir + "/" + name)) present.push_back(name);
  }
  return present;
}

bool is_inside(const std::string& path, const std::string& folder) {
  std::error_code ignored;  // a path that cannot be resolved (empty) is not compared
  const auto resolved = [&](const std::string& p) {
    if (p.empty()) return fs::path();
    fs::path r = fs::weakly_canonical(fs::absolute(p, ignored), ignored).lexically_normal();
    return r.has_filename() ? r : r.parent_path();  // "best/" is "best"
  };
  const fs::path inner = resolved(path), outer = resolved(folder);
  if (inner.empty() || outer.empty()) return false;
  const auto [end, unused] = std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end());
  return end == outer.end();
}

std::vector<std::string> model_and_run_files(const std::string& path) {
  const fs::path model = resolve_model_dir(path);
  std::vector<std::string> trees = {model.string()};
  // The run the model belongs to: the RUN_DIR given, or the one whose best/ (or last/) was given.
  std::error_code error;
  for (const fs::path& run : {fs::path(path), model.parent_path()}) {
    if (run.empty() || (!fs::exists(run / "results.json", error) && !fs::exists(run / "last", error))) continue;
    for (const char* name : {"last", "best", "checkpoints", "metrics.jsonl", "results.json"}) {
      trees.push_back((run / name).string());
    }
    break;
  }
  return regular_files_in(trees);
}

RunDirs prepare_run_dir(const TrainArgs& args, Communicator& comm, std::optional<DirectoryLock>* lock) {
  RunDirs dirs{args.out_dir + "/last", args.out_dir + "/best", "", "", {}, false};
  BERTRAIN_CHECK(!(args.resume && args.overwrite), "--resume continues the run in --out and --overwrite replaces it: "
                                                   "give one of them");
  BERTRAIN_CHECK(!path_exists(args.out_dir) || directory_exists(args.out_dir),
                 "--out " << args.out_dir << " is a file, not a run directory");
  if (comm.rank() == 0) {
    // Rank 0 writes RUN_DIR: one that cannot be written fails now, not at the first checkpoint.
    check_writable_directory(args.out_dir, "--out");
    // The MLflow store too: one that cannot be written fails before --overwrite removes the earlier run.
    if (!args.mlflow_dir.empty()) check_writable_directory(args.mlflow_dir, "--mlflow-dir");
    // Before RUN_DIR is read, let alone repaired: what is found there (a finished run, a checkpoint) is then what
    // this process alone will write over or continue; a second train, --resume or --overwrite stops here.
    lock->emplace(args.out_dir, "--out");
    recover_directory(dirs.last);
    recover_directory(dirs.best);
  }
  // Every rank reads RUN_DIR below: wait until rank 0 has repaired it.
  comm.all_true(true);
  if (args.resume) {
    BERTRAIN_CHECK(file_exists(dirs.last + "/trainer_state.json"),
                   "--resume: " << dirs.last << "/trainer_state.json not found (no run to continue in " << args.out_dir
                                << ")");
    // results.json is written last: with it, the run finished. Asked for no more, there is nothing to do, and
    // saying so with exit status 0 makes a requeued or retried job step idempotent.
    if (file_exists(args.out_dir + "/results.json")) {
      dirs.finished = finished_as_asked(args, read_trainer_state(dirs.last));
    }
    if (!dirs.finished) {
      BERTRAIN_CHECK(file_exists(dirs.last + "/" + kOptimizerFile),
                     "--resume: " << dirs.last << " holds no optimizer state (the run was trained with --save-optimizer "
                                  << "never, or during and it had finished), so a resumed run would not continue the "
                                  << "same training; start a new run from its weights with --model " << dirs.last);
    }
  } else {
    const std::vector<std::string> present = run_files_in(args.out_dir);
    if (!present.empty() && !args.overwrite) {
      BERTRAIN_FAIL(args.out_dir << " already holds a run (" << join_names(present) << "); pass --resume to continue it, --overwrite "
                                 << "to replace it, or choose another --out");
    }
    for (const std::string& name : present) dirs.to_clear.push_back(args.out_dir + "/" + name);
  }
  dirs.source = args.resume ? dirs.last : resolve_model_dir(args.model_dir);
  // --overwrite removes the earlier run before the new one writes its first checkpoint, which copies the tokenizer
  // files from --model: a --model inside what it removes would leave checkpoints without a tokenizer.
  for (const std::string& path : dirs.to_clear) {
    BERTRAIN_CHECK(!is_inside(dirs.source, path), "--model " << args.model_dir << " is inside " << path << ", which "
                                                  << "--overwrite removes: copy the model elsewhere first, or train "
                                                  << "into another --out");
  }
  // The MLflow store neither: a store in best/ (or last/, checkpoints/) went with the folder's next replacement.
  if (!args.mlflow_dir.empty()) {
    for (const std::string& folder : {dirs.last, dirs.best, args.out_dir + "/checkpoints"}) {
      BERTRAIN_CHECK(!is_inside(args.mlflow_dir, folder), "--mlflow-dir " << args.mlflow_dir << " is inside " << folder
                                                          << ", which the run replaces with its checkpoints: keep the "
                                                          << "store outside them");
    }
  }
  dirs.tokenizer = dirs.source;
  return dirs;
}

void write_run_files(const std::string& out, const json& history, const json* results) {
  std::string lines;
  for (const json& m : history) lines += m.dump() + "\n";
  write_file_atomically(out + "/metrics.jsonl", lines);
  if (results != nullptr) write_json_file(out + "/results.json", *results);
}

void write_checkpoint(const TrainArgs& args, const RunDirs& dirs, const LoadedModel& model, TrainingBackend& engine,
                      const std::vector<float>& weights, const json& state, bool step_checkpoint) {
  const bool with_optimizer = parse_optimizer_saving(args.save_optimizer) != OptimizerSaving::kNever;
  auto write = [&](const std::string& dir) {
    save_model_dir(dir, model.config, model.layout, weights.data(), dirs.tokenizer);
    if (with_optimizer) engine.save_optimizer(dir + "/" + kOptimizerFile);
    write_json_file(dir + "/trainer_state.json", state);
  };
  replace_directory_atomically(dirs.last, write);
  if (!step_checkpoint || args.keep == 0) return;
  const std::string folder = args.out_dir + "/checkpoints";
  make_directories(folder);
  // The step checkpoint is last/ as just written: its files hard-linked, stored once (last/ is only ever replaced
  // whole, never written in place, so the step's files keep their bytes when last/ moves on).
  replace_directory_atomically(folder + "/step-" + std::to_string(engine.optimizer_steps()), [&](const std::string& dir) {
    for (const auto& entry : std::filesystem::directory_iterator(dirs.last)) {
      link_or_copy_file(entry.path().string(), dir + "/" + entry.path().filename().string());
    }
  });
  const auto kept = step_checkpoints(folder);
  for (std::size_t i = 0; i + static_cast<std::size_t>(args.keep) < kept.size(); ++i) remove_tree(kept[i].second);
}

void save_best(const RunDirs& dirs, const LoadedModel& model, const std::vector<float>& weights, bool in_last) {
  replace_directory_atomically(dirs.best, [&](const std::string& dir) {
    if (!in_last) return save_model_dir(dir, model.config, model.layout, weights.data(), dirs.tokenizer);
    // last/ holds these weights in the file save_model_dir writes (it is only ever replaced whole, never written in
    // place, so the file keeps its bytes when last/ moves on): linked, not written again. The small files are
    // written, so that editing best/config.json by hand does not edit last/'s.
    link_or_copy_file(dirs.last + "/" + kModelWeightsFile, dir + "/" + kModelWeightsFile);
    save_model_config(dir, model.config, dirs.tokenizer);
  });
}

void drop_optimizer_state(const std::string& out_dir) {
  remove_tree(out_dir + "/last/" + kOptimizerFile);
  for (const auto& step : step_checkpoints(out_dir + "/checkpoints")) {
    remove_tree(step.second + "/" + kOptimizerFile);
  }
}

std::string disk_use_summary(const std::string& out_dir) {
  struct Part {
    std::uintmax_t bytes = 0;
    std::string name;
    std::map<FileId, std::uintmax_t> files;
  };
  std::vector<Part> parts;
  std::map<FileId, std::uintmax_t> all;
  std::error_code error;
  for (fs::directory_iterator it(out_dir, error), end; !error && it != end; it.increment(error)) {
    std::map<FileId, std::uintmax_t> files = files_under(it->path());
    all.insert(files.begin(), files.end());
    if (!it->is_directory(error)) continue;
    Part part{0, it->path().filename().string() + "/", std::move(files)};
    for (const auto& file : part.files) part.bytes += file.second;
    parts.push_back(std::move(part));
  }
  std::uintmax_t total = 0;
  for (const auto& file : all) total += file.second;
  std::sort(parts.begin(), parts.end(),
            [](const Part& a, const Part& b) { return a.bytes != b.bytes ? a.bytes > b.bytes : a.name < b.name; });
  std::string text = megabytes(total) + " in " + out_dir;
  if (parts.empty()) return text;
  // Each folder's own size, then what folders share (hard links: a step checkpoint and last/, best/ and last/): the
  // total counts each file once, as du does.
  std::string listed, shared;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    listed += (i > 0 ? ", " : "") + parts[i].name + " " + megabytes(parts[i].bytes);
    std::uintmax_t common = 0;
    std::vector<bool> with(i, false);  // the earlier folders it shares a file with
    for (const auto& file : parts[i].files) {
      bool counted = false;
      for (std::size_t j = 0; j < i; ++j) {
        if (parts[j].files.count(file.first) == 0) continue;
        if (!counted) common += file.second;
        counted = true;
        with[j] = true;
      }
    }
    if (common == 0) continue;
    std::vector<std::string> names;
    for (std::size_t j = 0; j < i; ++j) {
      if (with[j]) names.push_back(parts[j].name);
    }
    shared += (shared.empty() ? "; " : ", ") + parts[i].name + " shares " + megabytes(common) + " with " + names[0];
    for (std::size_t k = 1; k < names.size(); ++k) shared += (k + 1 == names.size() ? " and " : ", ") + names[k];
  }
  if (!shared.empty()) shared += ": hard links, counted once";
  return text + " (" + listed + shared + ")";
}

}  // namespace bertrain

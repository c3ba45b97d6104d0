// engine/mlflow_store.h: tracking locations as MLflow reads them (paths, file: URIs percent-decoded, every other
// scheme refused, MLFLOW_TRACKING_URI when no flag), and runs found by id in a store that MlflowRun wrote: in any
// experiment or the one named, their status, their model (artifacts/model, else the older artifacts/best), in a
// store copied elsewhere too.
#include "engine/mlflow_store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/files.h"
#include "engine/mlflow_run.h"
#include "tests/scoped_env.h"
#include "tests/temp_dir.h"

namespace bertrain {
namespace {

namespace fs = std::filesystem;
using testing::ScopedEnv;

// The message of the exception of type E (an Error, or the InputError of an input's fault) that `f` throws; ""
// and a failure when it throws none, or another type.
template <typename E = Error, typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not the expected type of error: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error";
  return "";
}

template <typename F>
std::string input_error_of(F f) {
  return error_of<InputError>(f);
}

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

TEST(MlflowStorePath, PathsAndFileUrisAsMlflowReadsThem) {
  const std::pair<const char*, const char*> cases[] = {
      {"mlruns", "mlruns"},
      {"/abs/mlruns", "/abs/mlruns"},
      {"./a:b", "./a:b"},  // no scheme: a path that starts with '.'
      {"file:///abs/mlruns", "/abs/mlruns"},
      {"file:/abs/mlruns", "/abs/mlruns"},
      {"file:rel/mlruns", "rel/mlruns"},
      {"file://localhost/abs", "/abs"},
      {"FILE://LocalHost/abs", "/abs"},
      {"file:///my%20runs/a%2Fb%25", "/my runs/a/b%"},  // url2pathname's unquote, %2F included
      {"file:///caf%C3%A9", "/caf\xC3\xA9"},
  };
  for (const auto& [uri, path] : cases) EXPECT_EQ(mlflow_store_path(uri, "--mlflow-dir"), path) << uri;
}

TEST(MlflowStorePath, FileUrisThatNameNoLocalFolderAreInputErrors) {
  const std::pair<const char*, const char*> cases[] = {
      {"file://server/abs", "host 'server', not this machine"},
      {"file://mlruns", "host 'mlruns'"},  // "file://" + a relative path: the path is read as a host
      {"file:", "names no folder"},
      {"file://", "names no folder"},
      {"file:///a%zzb", "two hex digits"},
      {"file:///a%2", "two hex digits"},
      {"file:///a%00b", "%00"},
      {"file:///a?b", "query or fragment"},
      {"file:///a#b", "query or fragment"},
  };
  for (const auto& [uri, why] : cases) {
    const std::string message = input_error_of([&] { mlflow_store_path(uri, "--mlflow-dir"); });
    EXPECT_HAS(message, why);
    EXPECT_HAS(message, "--mlflow-dir '" + std::string(uri) + "'");
  }
  EXPECT_HAS(input_error_of([] { mlflow_store_path("", "--mlflow-dir"); }), "--mlflow-dir is empty");
}

// A tracking server or database is refused in one line that says what works instead; never taken as a folder.
TEST(MlflowStorePath, OtherSchemesAreRefusedWithTheWayToUseAFileStore) {
  for (const char* uri : {"http://127.0.0.1:5000", "HTTPS://mlflow.example.com", "databricks", "databricks://profile",
                          "databricks-uc", "sqlite:///mlflow.db", "postgresql://u@h/db", "mlruns:2"}) {
    const std::string message = input_error_of([&] { mlflow_store_path(uri, "MLFLOW_TRACKING_URI"); });
    EXPECT_HAS(message, "MLFLOW_TRACKING_URI '" + std::string(uri) + "'");
    EXPECT_HAS(message, "bertrain writes MLflow file stores only");
    EXPECT_HAS(message, "mlflow server --backend-store-uri FOLDER");
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  // A scheme MLflow does not know either may be meant as a folder: say how to name one.
  EXPECT_HAS(input_error_of([] { mlflow_store_path("mlruns:2", "--mlflow-dir"); }), "./mlruns:2");
}

TEST(MlflowStore, TheFlagWinsThenTheEnvironmentVariable) {
  {
    ScopedEnv env("MLFLOW_TRACKING_URI", nullptr);
    EXPECT_EQ(mlflow_store(false, "").dir, "");
    EXPECT_EQ(mlflow_store(true, "file:///x").dir, "/x");
    EXPECT_EQ(mlflow_store(true, "file:///x").origin, "--mlflow-dir");
  }
  {
    ScopedEnv env("MLFLOW_TRACKING_URI", "file:///from/env");
    EXPECT_EQ(mlflow_store(false, "").dir, "/from/env");
    EXPECT_EQ(mlflow_store(false, "").origin, "MLFLOW_TRACKING_URI");
    EXPECT_EQ(mlflow_store(true, "flag").dir, "flag");
    EXPECT_EQ(mlflow_store(true, "").dir, "");  // --mlflow-dir '': no MLflow, whatever the environment says
  }
  {
    ScopedEnv env("MLFLOW_TRACKING_URI", "");  // empty: unset
    EXPECT_EQ(mlflow_store(false, "").dir, "");
  }
  {
    ScopedEnv env("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000");
    EXPECT_HAS(input_error_of([] { mlflow_store(false, ""); }), "MLFLOW_TRACKING_URI 'http://127.0.0.1:5000'");
    EXPECT_EQ(mlflow_store(true, "dir").dir, "dir");  // the flag's store: the variable is not read
  }
}

class MlflowStoreRuns : public ::testing::Test {
 protected:
  // A finished run in experiment "b" (beside "a") whose artifacts hold `model_folder` ("" for none).
  std::string finished_run(const std::string& model_folder) {
    MlflowRun(store_, "a", "other", "").set_status(MlflowStatus::kFinished);
    MlflowRun run(store_, "b", "mine", "");
    if (!model_folder.empty()) {
      make_directories(run.artifacts_dir() + "/" + model_folder);
      std::ofstream(run.artifacts_dir() + "/" + model_folder + "/config.json") << "{}";
    }
    run.set_status(MlflowStatus::kFinished);
    return run.run_id();
  }

  testing::TempDir temp_{"bertrain_mlflow_store"};
  const std::string store_ = temp_.path("mlruns");
};

TEST_F(MlflowStoreRuns, ARunIsFoundByIdInAnyExperimentOrTheOneNamed) {
  const std::string id = finished_run("model");
  const MlflowRunInfo run = find_mlflow_run(store_, id, "");
  EXPECT_EQ(run.experiment_name, "b");
  EXPECT_EQ(run.run_name, "mine");
  EXPECT_EQ(run.status, static_cast<int>(MlflowStatus::kFinished));
  EXPECT_EQ(run.dir, store_ + "/" + run.experiment_id + "/" + id);
  EXPECT_EQ(find_mlflow_run(store_, id, "b").experiment_id, run.experiment_id);
  EXPECT_EQ(mlflow_run_model_dir(run), run.dir + "/artifacts/model");
  EXPECT_EQ(run.describe(), "MLflow run " + id + " (experiment 'b', store " + store_ + ")");
}

// A tune trial's runs: children of the study's run (mlflow.parentRunId) with the trial's name (mlflow.runName); runs
// of another parent or name, without tags, or a stray file in the experiment are not.
TEST_F(MlflowStoreRuns, ChildRunsAreFoundByParentAndName) {
  MlflowRun study(store_, "s", "study", "");
  const auto child = [&](const std::string& name, const std::string& parent) {
    MlflowRun run(store_, "s", name, "");
    if (!parent.empty()) run.set_tag("mlflow.parentRunId", parent);
    return run.run_id();
  };
  const std::string first = child("study-trial-000", study.run_id());
  const std::string again = child("study-trial-000", study.run_id());
  child("study-trial-001", study.run_id());
  child("study-trial-000", "another");
  child("study-trial-000", "");
  std::ofstream(store_ + "/" + study.experiment_id() + "/stray.txt") << "x";
  std::vector<std::string> found = find_mlflow_child_runs(store_, study.experiment_id(), study.run_id(), "study-trial-000");
  std::sort(found.begin(), found.end());
  std::vector<std::string> want{first, again};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(found, want);
  EXPECT_TRUE(find_mlflow_child_runs(store_, study.experiment_id(), study.run_id(), "study-trial-002").empty());
  EXPECT_HAS(error_of([&] { find_mlflow_child_runs(store_, "999", study.run_id(), "x"); }),
             "/999: cannot list the MLflow experiment");
}

TEST_F(MlflowStoreRuns, WhatIsMissingIsNamedWithStoreExperimentAndId) {
  const std::string id = finished_run("model");
  std::string message = error_of([&] { find_mlflow_run(store_, id, "a"); });
  EXPECT_HAS(message, "no MLflow run " + id + " in experiment 'a' of the store " + store_);
  message = error_of([&] { find_mlflow_run(store_, "0123abcd", ""); });
  EXPECT_HAS(message, "no MLflow run 0123abcd in any experiment of the store " + store_);
  EXPECT_HAS(error_of([&] { find_mlflow_run(store_, id, "c"); }),
             store_ + ": no MLflow experiment named 'c' (--experiment), looking for the MLflow run " + id);
  EXPECT_HAS(error_of([&] { find_mlflow_run(store_ + "-missing", id, "c"); }),
             store_ + "-missing: no MLflow file store here (--mlflow-dir or MLFLOW_TRACKING_URI), looking for the "
                      "MLflow run " + id + " of experiment 'c'");
  for (const char* bad : {"../0", "a/b", "", "-x", "a b"}) {
    EXPECT_HAS(error_of([&] { find_mlflow_run(store_, bad, ""); }), "is not an MLflow run id");
  }
}

TEST_F(MlflowStoreRuns, OnlyAFinishedRunWithAModelGivesOne) {
  MlflowRun running(store_, "b", "running", "");
  EXPECT_HAS(error_of([&] { mlflow_run_model_dir(find_mlflow_run(store_, running.run_id(), "")); }),
             "(experiment 'b', store " + store_ + ") is RUNNING, not FINISHED");
  running.set_status(MlflowStatus::kKilled);
  EXPECT_HAS(error_of([&] { mlflow_run_model_dir(find_mlflow_run(store_, running.run_id(), "")); }),
             "is KILLED, not FINISHED");
  running.set_status(MlflowStatus::kFinished);
  EXPECT_HAS(error_of([&] { mlflow_run_model_dir(find_mlflow_run(store_, running.run_id(), "")); }),
             "logged no model");
  // A run logged before MLflow Models: its best/.
  const std::string old = finished_run("best");
  const MlflowRunInfo run = find_mlflow_run(store_, old, "");
  EXPECT_EQ(mlflow_run_model_dir(run), run.dir + "/artifacts/best");
}

// artifact_uri is absolute: in a store copied elsewhere the run's own artifacts folder is read.
// An entry of the store that cannot be looked at (a symbolic link to itself) is no experiment: the runs beside it are
// found (it was a bare "filesystem error: status: Too many levels of symbolic links").
TEST_F(MlflowStoreRuns, AnUnreadableEntryOfTheStoreIsNoExperiment) {
  const std::string id = finished_run("model");
  fs::create_symlink("loop", store_ + "/loop");
  EXPECT_EQ(find_mlflow_run(store_, id, "").run_name, "mine");
  EXPECT_EQ(find_mlflow_experiment(store_, "b"), find_mlflow_run(store_, id, "").experiment_id);
}

// A resumed run rewrites its step metrics: lines MLflow writes with nan and inf are kept (they were dropped), a line
// cut by a kill is left out, and the steps after the checkpoint go.
TEST_F(MlflowStoreRuns, RewrittenMetricsKeepNanAndInfLines) {
  MlflowRun run(store_, "e", "r", "");
  const std::string file = run.run_dir() + "/metrics/step_train_loss";
  std::ofstream(file) << "100 nan 1\n101 inf 2\n102 0.5 3\n103 0.25 4\n104 0.1";
  run.truncate_metric("step_train_loss", 3);
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "100 nan 1\n101 inf 2\n102 0.5 3\n");
}

// An artifact is replaced whole or not at all: a copy that fails leaves the one logged before (it was removed first,
// then copied: a full disk left a part or nothing).
TEST_F(MlflowStoreRuns, AnArtifactThatCannotBeCopiedLeavesTheOneBefore) {
  MlflowRun run(store_, "e", "r", "");
  const std::string results = temp_.path("results.json"), model = temp_.path("best");
  std::ofstream(results) << "{\"f1\": 0.9}";
  make_directories(model);
  std::ofstream(model + "/config.json") << "{}";
  run.log_artifact(results, "results.json");
  run.log_artifact(model, "best");
  EXPECT_HAS(error_of([&] { run.log_artifact(temp_.path("missing.json"), "results.json"); }),
             "MLflow artifact " + run.artifacts_dir() + "/results.json: cannot copy " + temp_.path("missing.json"));
  fs::create_symlink(temp_.path("nothing"), model + "/dangling");  // a folder whose copy fails half-way
  EXPECT_HAS(error_of([&] { run.log_artifact(model, "best"); }), "MLflow artifact " + run.artifacts_dir() + "/best");
  std::ifstream in(run.artifacts_dir() + "/results.json");
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()), "{\"f1\": 0.9}");
  EXPECT_TRUE(fs::exists(run.artifacts_dir() + "/best/config.json"));
  EXPECT_FALSE(fs::exists(run.artifacts_dir() + "/best/dangling"));
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(run.artifacts_dir())) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"best", "results.json"}));  // no temporary file or folder left
}

// A metric line that cannot be written whole (here a file size limit; a full disk alike) is cut off again: MLflow
// read a torn line as a point of step 0, and an empty metric file failed its experiment's listing.
TEST_F(MlflowStoreRuns, AMetricLineThatCannotBeWrittenWholeIsCutOff) {
  MlflowRun run(store_, "e", "r", "");
  run.log_metric("val_loss", 0.5, 1);
  const std::string file = run.run_dir() + "/metrics/val_loss", fresh = run.run_dir() + "/metrics/val_f1";
  const auto size = fs::file_size(file);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG past the limit, as with ENOSPC
    int failures = 0;
    // 5 bytes of each line fit: past the end of val_loss's line, and in a new file val_f1.
    for (const auto& [key, limit] : {std::pair<const char*, rlim_t>{"val_loss", size + 5}, {"val_f1", 5}}) {
      const rlimit fsize{limit, RLIM_INFINITY};
      ::setrlimit(RLIMIT_FSIZE, &fsize);
      try {
        run.log_metric(key, 0.25, 2);
      } catch (const Error& e) {
        failures += std::string(e.what()).find("/metrics/" + std::string(key) + ": cannot append: File too large") !=
                            std::string::npos ? 1 : 0;
      }
    }
    ::_exit(failures);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);  // both refused, by name and reason
  EXPECT_EQ(fs::file_size(file), size);
  EXPECT_FALSE(fs::exists(fresh));
}

// A run continued (train --resume) loses the temporary files a killed writer left in it, which MLflow read as a
// parameter or metric of their own ("batch_size.tmp.4242").
TEST_F(MlflowStoreRuns, AContinuedRunLosesTheTemporaryFilesOfAKilledWriter) {
  std::string id, dir;
  {
    MlflowRun run(store_, "e", "r", "");
    run.log_params({{"batch_size", 32}});
    run.set_status(MlflowStatus::kKilled);
    id = run.run_id(), dir = run.run_dir();
  }
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  const std::string dead = std::to_string(child);
  for (const char* folder : {"/params/batch_size", "/metrics/train_loss", "/tags/mlflow.runName", "/meta.yaml"}) {
    std::ofstream(dir + folder + ".tmp." + dead) << "3";
  }
  MlflowRun continued(store_, "e", "", id);
  for (const char* folder : {"/params/batch_size", "/metrics/train_loss", "/tags/mlflow.runName", "/meta.yaml"}) {
    EXPECT_FALSE(fs::exists(dir + folder + ".tmp." + dead)) << folder;
  }
  EXPECT_TRUE(fs::exists(dir + "/params/batch_size"));
  continued.set_status(MlflowStatus::kFinished);
}

// Runs started at once in a new store with a new experiment name share one experiment of that name: looking it up
// and creating it were two steps, and trains started together each made one (MLflow then listed one of them by
// name, with a part of the runs).
TEST_F(MlflowStoreRuns, RunsStartedTogetherShareOneNewExperiment) {
  constexpr int kProcesses = 8;
  int start[2];  // the children start together, when the parent closes the pipe
  ASSERT_EQ(::pipe(start), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < kProcesses; ++i) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::close(start[1]);
      char byte;
      while (::read(start[0], &byte, 1) < 0 && errno == EINTR) {
      }
      try {
        MlflowRun(store_, "together", "run", "").set_status(MlflowStatus::kFinished);
      } catch (...) {
        ::_exit(1);
      }
      ::_exit(0);
    }
    children.push_back(child);
  }
  ::close(start[0]);
  ::close(start[1]);
  for (const pid_t child : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  int named = 0, runs = 0;
  for (const auto& entry : fs::directory_iterator(store_)) {
    if (!fs::exists(entry.path() / "meta.yaml")) continue;
    std::ifstream meta(entry.path() / "meta.yaml");
    const std::string yaml((std::istreambuf_iterator<char>(meta)), std::istreambuf_iterator<char>());
    if (yaml.find("\nname: 'together'\n") == std::string::npos) continue;
    ++named;
    for (const auto& run : fs::directory_iterator(entry.path())) runs += fs::is_directory(run.path()) ? 1 : 0;
  }
  EXPECT_EQ(named, 1);
  EXPECT_EQ(runs, kProcesses);
}

TEST_F(MlflowStoreRuns, AStoreCopiedElsewhereFindsItsOwnArtifacts) {
  const std::string id = finished_run("model");
  const std::string copy = temp_.path("copied");
  fs::copy(store_, copy, fs::copy_options::recursive);
  remove_tree(store_);
  const MlflowRunInfo run = find_mlflow_run(copy, id, "");
  EXPECT_EQ(run.artifact_uri.rfind("file://" + store_, 0), 0u) << run.artifact_uri;
  EXPECT_EQ(mlflow_run_model_dir(run), run.dir + "/artifacts/model");
}

// A store in a folder whose name holds what a URI or YAML would misread (a space, '#', "%41", ": ", UTF-8) is written
// as MLflow writes it (Path.as_uri: %XX), and the artifact URI reads back as that folder.
TEST(MlflowStoreUris, OddFolderNamesArePercentEncoded) {
  testing::TempDir temp("bertrain_mlflow_uri");
  const std::string store = temp.path("a b#c%41: d\xC3\xA9");
  MlflowRun run(store, "e", "r", "");
  run.set_status(MlflowStatus::kFinished);
  const MlflowRunInfo info = find_mlflow_run(store, run.run_id(), "");
  EXPECT_EQ(info.artifact_uri.find_first_of(" #"), std::string::npos) << info.artifact_uri;
  EXPECT_NE(info.artifact_uri.find("a%20b%23c%2541%3A%20d%C3%A9/"), std::string::npos) << info.artifact_uri;
  EXPECT_EQ(mlflow_store_path(info.artifact_uri, "artifact_uri"), fs::absolute(run.artifacts_dir()).lexically_normal().string());
}

TEST(MlflowStatusName, MlflowsNames) {
  EXPECT_EQ(mlflow_status_name(1), "RUNNING");
  EXPECT_EQ(mlflow_status_name(3), "FINISHED");
  EXPECT_EQ(mlflow_status_name(4), "FAILED");
  EXPECT_EQ(mlflow_status_name(5), "KILLED");
  EXPECT_EQ(mlflow_status_name(9), "status 9");
}

}  // namespace
}  // namespace bertrain

// CLI tests of MLflow tracking locations and models: a training logs its best model as the MLflow Model
// artifacts/model (hard links to best/'s files, kept when best/ is replaced or the run directory removed) with
// MLflow's script tags; evaluate and predict --run-id load it (Made-With-ML's --run-id), from --mlflow-dir or
// MLFLOW_TRACKING_URI, a folder or a file: URI; tracking servers are refused (exit 2, no folder named "http:");
// an unknown, RUNNING or old-style (artifacts/best) run; the build's commit.
#include <sys/stat.h>

#include "core/build_info.h"
#include "core/files.h"
#include "tests/tools/cli_test.h"

namespace bertrain {
namespace cli_test {
namespace {

class CliMlflowTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    // The commands read it when no --mlflow-dir is given: these tests set it themselves.
    ::unsetenv("MLFLOW_TRACKING_URI");
  }

  // The MLflow run id a training in `run_dir` logged to.
  static std::string run_id_of(const std::string& run_dir) {
    return json::parse(slurp(run_dir + "/last/trainer_state.json")).value("mlflow_run_id", "");
  }

  // store/<experiment id>/<run_id>: the run's folder.
  static std::string run_folder(const std::string& store, const std::string& run_id) {
    for (const auto& e : fs::directory_iterator(store)) {
      if (fs::exists(e.path() / run_id / "meta.yaml")) return (e.path() / run_id).string();
    }
    ADD_FAILURE() << "no run " << run_id << " in " << store;
    return "";
  }

  std::vector<std::string> predict_text(std::vector<std::string> source) const {
    std::vector<std::string> args{"predict", "--text", "the image segmentation camera model", "--device", "cpu"};
    args.insert(args.end(), source.begin(), source.end());
    return args;
  }
};

ino_t inode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

// A training's model as an MLflow Model that evaluate and predict --run-id load: the same predictions and metrics
// as --model RUN_DIR, evaluate logging into the run; the logged files hard links to best/'s that keep the logged
// epoch when the run directory is trained over, or removed.
TEST_F(CliMlflowTest, TrainLogsAModelThatRunIdEvaluatesAndPredicts) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--mlflow-dir", path("mlruns"), "--lr", "1e-3"}))));
  const std::string id = run_id_of(path("run"));
  const std::string folder = run_folder(path("mlruns"), id), model = folder + "/artifacts/model";
  for (const char* name : {"config.json", "model.safetensors", "vocab.txt"}) {
    EXPECT_EQ(inode_of(model + "/" + name), inode_of(path("run/best/") + name)) << name;
  }
  EXPECT_FALSE(fs::exists(folder + "/artifacts/best"));
  EXPECT_EQ(slurp(folder + "/artifacts/results.json"), slurp(path("run/results.json")));
  const std::string mlmodel = slurp(model + "/MLmodel");
  for (const std::string& line : std::vector<std::string>{
           "artifact_path: 'model'\n", "run_id: '" + id + "'\n", "  bertrain:\n",
           "    transformers_class: 'BertForSequenceClassification'\n", "    - 'mlops'\n"}) {
    EXPECT_NE(mlmodel.find(line), std::string::npos) << line << " not in\n" << mlmodel;
  }
  const json history = json::parse(slurp(folder + "/tags/mlflow.log-model.history"));
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0]["artifact_path"], "model");
  // MLflow's tags for a script run.
  EXPECT_EQ(slurp(folder + "/tags/mlflow.source.name"), binary());
  EXPECT_EQ(slurp(folder + "/tags/mlflow.source.type"), "LOCAL");
  EXPECT_FALSE(slurp(folder + "/tags/mlflow.user").empty());
  if (build_git_commit().empty()) {
    EXPECT_FALSE(fs::exists(folder + "/tags/mlflow.source.git.commit"));
  } else {
    EXPECT_EQ(slurp(folder + "/tags/mlflow.source.git.commit"), build_git_commit());
  }

  const RunResult by_model = run(predict_text({"--model", path("run")}));
  const RunResult by_id = run(predict_text({"--run-id", id, "--mlflow-dir", path("mlruns")}));
  ASSERT_TRUE(succeeded(by_model));
  ASSERT_TRUE(succeeded(by_id));
  EXPECT_EQ(by_id.out, by_model.out);
  const RunResult evaluated_by_model = run({"evaluate", "--model", path("run"), "--data", data(), "--device", "cpu"});
  const RunResult evaluated = run({"evaluate", "--run-id", id, "--mlflow-dir", path("mlruns"), "--data", data(),
                                   "--device", "cpu", "--out", path("eval.json")});
  ASSERT_TRUE(succeeded(evaluated_by_model));
  ASSERT_TRUE(succeeded(evaluated));
  const json a = json::parse(evaluated_by_model.out), b = json::parse(evaluated.out);
  EXPECT_EQ(b["overall"], a["overall"]);
  EXPECT_EQ(b["confusion_matrix"], a["confusion_matrix"]);
  EXPECT_EQ(b["run_id"], id);
  EXPECT_FALSE(a.contains("run_id"));  // no store: nothing logged, no run named
  EXPECT_EQ(b["model"], model);
  // evaluate --run-id logs into the run it evaluated.
  EXPECT_TRUE(fs::exists(folder + "/metrics/eval_f1"));
  EXPECT_EQ(slurp(folder + "/artifacts/evaluation.json"), evaluated.out);
  EXPECT_NE(slurp(folder + "/meta.yaml").find("\nstatus: 3\n"), std::string::npos);

  // best/ replaced by another training in the same RUN_DIR: the logged model is still the first one.
  const auto logged = snapshot(model);
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--overwrite", "--lr", "3e-3", "--seed", "7"}))));
  EXPECT_NE(slurp(path("run/best/model.safetensors")), logged.at("model.safetensors"));
  EXPECT_EQ(snapshot(model), logged);
  fs::remove_all(path("run"));
  EXPECT_EQ(snapshot(model), logged);
  const RunResult after = run(predict_text({"--run-id", id, "--mlflow-dir", path("mlruns")}));
  ASSERT_TRUE(succeeded(after));
  EXPECT_EQ(after.out, by_model.out);
}

// The store from MLFLOW_TRACKING_URI when no --mlflow-dir is given (an empty flag turns it off), and file: URIs,
// absolute (percent-encoded) and relative.
// --log-steps N logs what Trainer's logging_steps does: the mean loss of the N steps since the last line (a run
// logging every step gives those steps' losses), and the gradient norm of the step it is logged at.
TEST_F(CliMlflowTest, LogStepsLogsTheMeanLossOfTheirSteps) {
  const auto logged = [&](const std::string& out, int every) {
    EXPECT_TRUE(succeeded(run(train_args(path(out), {"--epochs", "1", "--mlflow-dir", path("mlruns"), "--log-steps",
                                                     std::to_string(every)}))));
    std::map<std::string, std::map<long, double>> metrics;
    for (const char* name : {"step_train_loss", "step_grad_norm"}) {
      for (const std::string& line : lines_of(slurp(run_folder(path("mlruns"), run_id_of(path(out))) + "/metrics/" + name))) {
        std::istringstream fields(line);
        long long timestamp = 0;
        double value = 0;
        long step = 0;
        fields >> timestamp >> value >> step;
        metrics[name][step] = value;
      }
    }
    return metrics;
  };
  auto each = logged("every-step", 1), pairs = logged("every-2", 2);
  ASSERT_EQ(each["step_train_loss"].size(), 4u);  // 30 training rows in batches of 8
  ASSERT_EQ(pairs["step_train_loss"].size(), 2u);
  for (long step : {2L, 4L}) {
    const double mean = (each["step_train_loss"][step - 1] + each["step_train_loss"][step]) / 2;
    EXPECT_NEAR(pairs["step_train_loss"][step], mean, 1e-6 * mean) << step;
    EXPECT_NE(pairs["step_train_loss"][step], each["step_train_loss"][step]) << step;  // not the step's own
    EXPECT_EQ(pairs["step_grad_norm"][step], each["step_grad_norm"][step]) << step;
  }
}

TEST_F(CliMlflowTest, StoresFromTheEnvironmentAndFileUris) {
  const std::string store = path("my runs");
  const std::string uri = "file://" + path("my%20runs");
  const std::vector<std::string> env{"MLFLOW_TRACKING_URI=" + uri};
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "1"}), env)));
  const std::string id = run_id_of(path("run"));
  ASSERT_EQ(id.size(), 32u);
  EXPECT_TRUE(fs::exists(run_folder(store, id) + "/artifacts/model/MLmodel"));
  EXPECT_FALSE(fs::exists(path("my%20runs")));
  // --mlflow-dir '': no MLflow although the variable is set.
  ASSERT_TRUE(succeeded(run(train_args(path("plain"), {"--epochs", "1", "--mlflow-dir", ""}), env)));
  EXPECT_EQ(run_id_of(path("plain")), "");

  const RunResult expected = run(predict_text({"--model", path("run")}));
  ASSERT_TRUE(succeeded(expected));
  const RunResult from_env = run(predict_text({"--run-id", id}), env);
  ASSERT_TRUE(succeeded(from_env));
  EXPECT_EQ(from_env.out, expected.out);
  for (const std::string& flag : {"file:" + store, "file://localhost" + store, uri}) {
    const RunResult r = run(predict_text({"--run-id", id, "--mlflow-dir", flag}));
    ASSERT_TRUE(succeeded(r)) << flag;
    EXPECT_EQ(r.out, expected.out) << flag;
  }
  const RunResult relative = run_in(dir_.string(), predict_text({"--run-id", id, "--mlflow-dir", "file:my runs"}));
  ASSERT_TRUE(succeeded(relative));
  EXPECT_EQ(relative.out, expected.out);
  // With only the variable, evaluate of a model that was not logged evaluates without logging.
  const RunResult unlogged = run({"evaluate", "--model", path("plain"), "--data", data(), "--device", "cpu"}, env);
  ASSERT_TRUE(succeeded(unlogged));
  EXPECT_FALSE(json::parse(unlogged.out).contains("run_id"));
  // ... and a RUN_DIR that was logged evaluates into its run, but not while a train holds it (its best/ is not yet
  // the run's model): before, each epoch's best/ was logged into the RUNNING run.
  {
    DirectoryLock training(path("run"), "--out");
    const RunResult held = run({"evaluate", "--model", path("run"), "--data", data(), "--device", "cpu"}, env);
    ASSERT_TRUE(succeeded(held));
    EXPECT_FALSE(json::parse(held.out).contains("run_id"));
    EXPECT_NE(held.err.find("evaluate: note: " + path("run") + " is in use by another bertrain process (a training, "
                            "or an evaluate logging into its run): not logged into its MLflow run"),
              std::string::npos)
        << held.err;
    EXPECT_FALSE(fs::exists(run_folder(store, id) + "/metrics/eval_f1"));
    // With --mlflow-dir logging was asked for: refused.
    expect_error(run({"evaluate", "--model", path("run"), "--data", data(), "--device", "cpu", "--mlflow-dir", store}),
                 "evaluate: " + path("run") + " is in use by another bertrain process (a training, or an evaluate "
                 "logging into its run): evaluate it once it has ended, or without --mlflow-dir");
  }
  const RunResult logged = run({"evaluate", "--model", path("run"), "--data", data(), "--device", "cpu"}, env);
  ASSERT_TRUE(succeeded(logged));
  EXPECT_EQ(json::parse(logged.out)["run_id"], id);
  EXPECT_TRUE(fs::exists(run_folder(store, id) + "/metrics/eval_f1"));
}

// A tracking server, database or Databricks URI is refused by every command with exit 2 and one line; nothing
// is written, no folder named after the URI above all.
TEST_F(CliMlflowTest, TrackingServersAreRefused) {
  const std::vector<std::vector<std::string>> commands{
      train_args("run", {"--epochs", "1"}),
      {"evaluate", "--run-id", "abc", "--data", data()},
      {"predict", "--run-id", "abc", "--text", "a model"}};
  for (const std::vector<std::string>& command : commands) {
    for (const std::string uri : {"http://127.0.0.1:5000", "https://mlflow.example.com/", "databricks",
                                   "sqlite:///mlflow.db", "file://otherhost/mlruns"}) {
      std::vector<std::string> with_flag = command;
      with_flag.insert(with_flag.end(), {"--mlflow-dir", uri});
      const RunResult flagged = run_in(dir_.string(), with_flag);
      expect_error(flagged, "--mlflow-dir '" + uri + "'");
      expect_error(run_in(dir_.string(), command, {"MLFLOW_TRACKING_URI=" + uri}), "MLFLOW_TRACKING_URI '" + uri + "'");
      if (uri.rfind("file:", 0) != 0) {
        EXPECT_NE(flagged.err.find("mlflow server --backend-store-uri"), std::string::npos) << flagged.err;
      }
    }
  }
  for (const auto& e : fs::directory_iterator(dir_)) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name == "model" || name == "data.csv") << "written: " << name;
  }
}

// --run-id's errors: both or neither of --model and --run-id, no store, an unknown id or experiment, a RUNNING
// (killed) run; and a run logged before MLflow Models (its artifacts/best) still loads.
TEST_F(CliMlflowTest, RunIdErrorsAndOldRuns) {
  const std::string store = path("mlruns");
  for (const char* command : {"evaluate", "predict"}) {
    const std::vector<std::string> rest = std::string(command) == "evaluate"
                                              ? std::vector<std::string>{"--data", data()}
                                              : std::vector<std::string>{"--text", "a model"};
    std::vector<std::string> both{command, "--model", model(), "--run-id", "abc", "--mlflow-dir", store};
    std::vector<std::string> neither{command};
    std::vector<std::string> no_store{command, "--run-id", "abc"};
    std::vector<std::string> unknown{command, "--run-id", "0123abcd", "--mlflow-dir", store};
    for (auto* args : {&both, &neither, &no_store, &unknown}) args->insert(args->end(), rest.begin(), rest.end());
    expect_error(run(both), "give one of --model DIR and --run-id ID");
    expect_error(run(neither), "give one of --model DIR and --run-id ID");
    expect_error(run(no_store), "--run-id abc needs the MLflow file store it is in: --mlflow-dir DIR or "
                                "MLFLOW_TRACKING_URI");
    expect_error(run(unknown), store + ": no MLflow file store here");
  }
  expect_error(run({"predict", "--model", model(), "--mlflow-dir", store, "--text", "a"}), "give --run-id too");

  // A training killed mid-way: its run is RUNNING.
  const RunResult killed = run(train_args(path("run"), {"--mlflow-dir", store, "--save-steps", "2"}),
                               {"BERTRAIN_TEST_CRASH_AFTER_STEP=2"});
  ASSERT_EQ(killed.exit_code, 137) << killed.describe();
  const std::string id = run_id_of(path("run"));
  expect_error(run(predict_text({"--run-id", id, "--mlflow-dir", store})),
               "MLflow run " + id + " (experiment 'bertrain', store " + store + ") is RUNNING, not FINISHED");
  expect_error(run(predict_text({"--run-id", "0123abcd", "--mlflow-dir", store})),
               "no MLflow run 0123abcd in any experiment of the store " + store);
  expect_error(run(predict_text({"--run-id", id, "--mlflow-dir", store, "--experiment", "other"})),
               "no MLflow experiment named 'other'");
  expect_error(run(predict_text({"--run-id", "../" + id, "--mlflow-dir", store})), "is not an MLflow run id");

  // Finished, then made to look as bertrain logged runs before: artifacts/best, no MLmodel.
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--mlflow-dir", store, "--save-steps", "2", "--resume"}))));
  const std::string artifacts = run_folder(store, id) + "/artifacts";
  fs::rename(artifacts + "/model", artifacts + "/best");
  fs::remove(artifacts + "/best/MLmodel");
  const RunResult old = run(predict_text({"--run-id", id, "--mlflow-dir", store, "--experiment", "bertrain"}));
  ASSERT_TRUE(succeeded(old));
  EXPECT_EQ(old.out, run(predict_text({"--model", path("run")})).out);
}

// The commit the build reports (--version, the tag mlflow.source.git.commit) is the one its sources are at: the
// header is rewritten at every build, so a commit made since the last cmake run shows too. --version also says
// whether tracked files had changes (as they have now, when the tests run right after a build).
// A damaged or changed store is named, and a command that fails leaves its run as it found it (an MLflow audit,
// 2026-11-29): a finished run stayed RUNNING after a failed evaluate or resume, a meta.yaml without a readable status
// read as "status 0", and a resume brought a deleted run (or one saved with CRLF line ends) back to active.
TEST_F(CliMlflowTest, AFailedCommandLeavesTheStoreAsItFoundIt) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--mlflow-dir", path("mlruns"), "--epochs", "1"}))));
  const std::string id = run_id_of(path("run")), folder = run_folder(path("mlruns"), id);
  const std::string meta = slurp(folder + "/meta.yaml");
  ASSERT_NE(meta.find("\nstatus: 3\n"), std::string::npos) << meta;
  // evaluate into the run, whose artifacts/evaluation.json cannot be written: no metric logged, status as it was.
  fs::create_directories(folder + "/artifacts/evaluation.json");
  const std::vector<std::string> evaluate{"evaluate", "--run-id", id, "--mlflow-dir", path("mlruns"), "--data",
                                          data(), "--device", "cpu"};
  const RunResult refused = run(evaluate);  // after its "evaluate: N rows in ..." line
  EXPECT_EQ(refused.exit_code, 1) << refused.describe();
  EXPECT_NE(refused.err.find("evaluation.json': not a regular file"), std::string::npos) << refused.describe();
  EXPECT_FALSE(fs::exists(folder + "/metrics/eval_f1"));
  EXPECT_EQ(slurp(folder + "/meta.yaml"), meta);
  fs::remove(folder + "/artifacts/evaluation.json");
  // A resume that fails writing to the run: its meta.yaml back as it was, not RUNNING.
  fs::remove(folder + "/params/lr");
  fs::create_directories(folder + "/params/lr");
  const std::vector<std::string> resume = train_args(path("run"), {"--mlflow-dir", path("mlruns"), "--epochs", "2",
                                                                   "--resume"});
  expect_error(run(resume), "params/lr", 1);
  EXPECT_EQ(slurp(folder + "/meta.yaml"), meta);
  fs::remove(folder + "/params/lr");
  // A meta.yaml whose status cannot be read is named, where it read as "status 0".
  std::string damaged = meta;
  damaged.replace(damaged.find("\nstatus: 3\n"), 11, "\nstatus: FINISHED\n");
  spit(folder + "/meta.yaml", damaged);
  expect_error(run(evaluate), folder + "/meta.yaml: field 'status' is not an integer: 'FINISHED'");
  // A deleted run is not brought back by a resume, nor used by --run-id when its file has CRLF line ends.
  std::string deleted = meta;
  deleted.replace(deleted.find("lifecycle_stage: active"), 23, "lifecycle_stage: deleted");
  spit(folder + "/meta.yaml", deleted);
  expect_error(run(resume), folder + "/meta.yaml: the MLflow run " + id + " is deleted");
  EXPECT_EQ(slurp(folder + "/meta.yaml"), deleted);
  std::string crlf;
  for (char c : deleted) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  spit(folder + "/meta.yaml", crlf);
  expect_error(run(evaluate), "is deleted");
  EXPECT_EQ(slurp(folder + "/meta.yaml"), crlf);
}

// `train --resume --out RUN_DIR` alone goes on logging into the run's MLflow run, in its store and experiment,
// which the checkpoint records beside the params.
TEST_F(CliMlflowTest, AResumeWithOnlyOutLogsIntoTheSameRun) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--mlflow-dir", path("mlruns"), "--experiment", "kept",
                                                     "--run-name", "mine", "--epochs", "1", "--log-steps", "2"}))));
  const std::string id = run_id_of(path("run"));
  const RunResult r = run({"train", "--resume", "--out", path("run"), "--epochs", "2"});
  ASSERT_TRUE(succeeded(r));
  EXPECT_NE(r.out.find("--experiment kept --log-steps 2 --mlflow-dir " + path("mlruns")), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--run-name mine"), std::string::npos) << r.out;
  EXPECT_EQ(run_id_of(path("run")), id);
  const std::string folder = run_folder(path("mlruns"), id);
  const auto val_loss_points = [&] { return count_occurrences(slurp(folder + "/metrics/val_loss"), "\n"); };
  EXPECT_EQ(val_loss_points(), 2u);
  EXPECT_NE(slurp(folder + "/meta.yaml").find("\nstatus: 3\n"), std::string::npos);
  // The store given again keeps the recorded experiment and run name for later resumes.
  ASSERT_TRUE(succeeded(run({"train", "--resume", "--out", path("run"), "--epochs", "3", "--mlflow-dir",
                             path("mlruns"), "--quiet"})));
  EXPECT_EQ(json::parse(slurp(path("run/last/trainer_state.json")))["mlflow_store"]["experiment"], "kept");
  EXPECT_EQ(val_loss_points(), 3u);
  // --mlflow-dir '' (no MLflow) leaves out what only MLflow takes (the experiment, the run name, --log-steps: train
  // refuses them without a store), and logs nothing.
  ASSERT_TRUE(succeeded(run({"train", "--resume", "--out", path("run"), "--epochs", "4", "--mlflow-dir", "", "--quiet"})));
  EXPECT_EQ(val_loss_points(), 3u);
  // A checkpoint of an older bertrain names the run but not its store: refused rather than going on unlogged, until
  // a store is given, or none (--mlflow-dir '').
  json state = json::parse(slurp(path("run/last/trainer_state.json")));
  state.erase("mlflow_store");
  spit(path("run/last/trainer_state.json"), state.dump());
  expect_error(run({"train", "--resume", "--out", path("run"), "--epochs", "5"}),
               "--resume: the run logs into MLflow run " + id + ", in a store " + path("run/last") +
                   "/trainer_state.json (written by an older bertrain) does not name: give its --mlflow-dir");
  ASSERT_TRUE(succeeded(run({"train", "--resume", "--out", path("run"), "--epochs", "5", "--mlflow-dir", path("mlruns"),
                             "--experiment", "kept", "--run-name", "mine", "--quiet"})));
}

// A training whose end the store could not take (a full disk after results.json: the run left RUNNING, its model
// and results.json not logged) exits 1, which `launch` answers with --resume: that resume logs the end now. The
// temporary files a killed writer left in the run go too (MLflow read them as parameters).
TEST_F(CliMlflowTest, AResumeLogsTheEndOfAFinishedTrainingItsRunMissed) {
  const std::vector<std::string> train = train_args(path("run"), {"--mlflow-dir", path("mlruns"), "--epochs", "1"});
  ASSERT_TRUE(succeeded(run(train)));
  const std::string id = run_id_of(path("run")), folder = run_folder(path("mlruns"), id);
  std::string meta = slurp(folder + "/meta.yaml");
  const std::size_t status = meta.find("\nstatus: 3\n"), end = meta.find("\nend_time: ");
  ASSERT_NE(status, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  meta.replace(status, 11, "\nstatus: 1\n");
  meta.replace(end, meta.find('\n', end + 1) - end, "\nend_time: null");
  spit(folder + "/meta.yaml", meta);
  fs::remove_all(folder + "/artifacts/model");
  fs::remove(folder + "/artifacts/results.json");
  spit(folder + "/params/batch_size.tmp.999999999", "8");  // no process has that pid (Linux's largest is 4194304)
  std::vector<std::string> resume = without_quiet(train);
  resume.push_back("--resume");
  const RunResult r = run(resume);
  ASSERT_TRUE(succeeded(r)) << r.describe();
  EXPECT_NE(r.out.find("mlflow: run " + id + " was RUNNING; its end is logged now (FINISHED)"), std::string::npos)
      << r.out;
  EXPECT_NE(slurp(folder + "/meta.yaml").find("\nstatus: 3\n"), std::string::npos);
  EXPECT_EQ(slurp(folder + "/artifacts/results.json"), slurp(path("run/results.json")));
  EXPECT_TRUE(fs::exists(folder + "/artifacts/model/MLmodel"));
  EXPECT_FALSE(fs::exists(folder + "/params/batch_size.tmp.999999999"));
  // Once FINISHED, a resume leaves the run as it is.
  const std::string finished = slurp(folder + "/meta.yaml");
  const RunResult again = run(resume);
  ASSERT_TRUE(succeeded(again)) << again.describe();
  EXPECT_EQ(again.out.find("its end is logged now"), std::string::npos) << again.out;
  EXPECT_EQ(slurp(folder + "/meta.yaml"), finished);
}

// A store inside what a run or a study replaces whole (best/, last/, checkpoints/; a study's best/ and trials/) went
// with the next replacement (exit 1, its experiments gone): refused before anything is written.
TEST_F(CliMlflowTest, AStoreInsideWhatARunReplacesIsRefused) {
  for (const char* store : {"run/best", "run/last/mlruns", "run/checkpoints/"}) {
    expect_error(run(train_args(path("run"), {"--mlflow-dir", path(store), "--epochs", "1"})),
                 "--mlflow-dir " + path(store) + " is inside " + path("run/"), 2);
    expect_no_run(path("run"));
  }
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--mlflow-dir", path("run/mlruns"), "--epochs", "1"}))));
  for (const char* store : {"study/best", "study/trials/000/mlruns"}) {
    spit(path("space.json"), R"({"lr": {"type": "choice", "values": [1e-4, 2e-4]}})");
    expect_error(run({"tune", "--space", path("space.json"), "--out", path("study"), "--mlflow-dir", path(store), "--",
                      "--model", model(), "--train-data", data(), "--epochs", "1"}),
                 "--mlflow-dir " + path(store) + " is inside " + path("study/"), 2);
    EXPECT_FALSE(fs::exists(path("study")));
  }
}

// A resume changes only its run's status and end time in meta.yaml: what MLflow or a user wrote there (a run name
// PyYAML wrapped onto two lines, user_id) stays (it was rewritten from the fields bertrain knows: the name cut to
// its first line, user_id replaced).
TEST_F(CliMlflowTest, AResumedRunKeepsWhatItsMetaYamlSaid) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--mlflow-dir", path("mlruns"), "--epochs", "1"}))));
  const std::string folder = run_folder(path("mlruns"), run_id_of(path("run")));
  std::string meta = slurp(folder + "/meta.yaml");
  const std::size_t name = meta.find("\nrun_name: "), user = meta.find("\nuser_id: ");
  ASSERT_NE(name, std::string::npos);
  ASSERT_NE(user, std::string::npos);
  meta = meta.substr(0, user) + "\nuser_id: alice\n";
  meta.replace(name, meta.find('\n', name + 1) - name, "\nrun_name: a long name that PyYAML\n  wrapped");
  spit(folder + "/meta.yaml", meta);
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--mlflow-dir", path("mlruns"), "--epochs", "2", "--resume"}))));
  const std::string after = slurp(folder + "/meta.yaml");
  EXPECT_NE(after.find("\nrun_name: a long name that PyYAML\n  wrapped\n"), std::string::npos) << after;
  EXPECT_NE(after.find("\nuser_id: alice\n"), std::string::npos) << after;
  EXPECT_NE(after.find("\nstatus: 3\n"), std::string::npos) << after;
  EXPECT_EQ(after.find("end_time: null"), std::string::npos) << after;
}

TEST_F(CliMlflowTest, TheBuildsCommitIsTheSourcesHead) {
  const RunResult head = ::bertrain::testing::run_process(
      {"/bin/sh", "-c", "exec git -C '" BERTRAIN_SOURCE_DIR "' rev-parse --verify HEAD 2>/dev/null"});
  if (head.exit_code != 0) GTEST_SKIP() << "the sources are not a git checkout here (or no git): no commit to compare";
  EXPECT_EQ(build_git_commit() + "\n", head.out);
  const RunResult changes = ::bertrain::testing::run_process(
      {"/bin/sh", "-c", "exec git -C '" BERTRAIN_SOURCE_DIR "' status --porcelain --untracked-files=no"});
  ASSERT_EQ(changes.exit_code, 0);
  EXPECT_EQ(build_git_dirty(), !changes.out.empty()) << changes.out;
  const RunResult version = run({"--version"});
  ASSERT_TRUE(succeeded(version));
  const std::string line =
      "\n  commit " + build_git_commit() + (build_git_dirty() ? ", with uncommitted changes" : "") + "\n";
  EXPECT_NE(version.out.find(line), std::string::npos) << version.out;
}

}  // namespace
}  // namespace cli_test
}  // namespace bertrain

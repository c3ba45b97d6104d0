// The main job as a user runs it, ./bertrain.sh run, on the tiny model and synthetic data: stopped after a
// checkpoint it prints the command that resumes it, and that command finishes the run and ends with the summary;
// diverged, it prints none.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/tools/cli_test.h"

#ifndef BERTRAIN_SOURCE_DIR
#error "BERTRAIN_SOURCE_DIR must name the checkout (where bertrain.sh is)"
#endif

namespace bertrain {
namespace {

using namespace cli_test;

// Made-With-ML's two files of synthetic rows written into `data`/madewithml, and the environment that has
// ./bertrain.sh run train `model` on them into `run`. The binary under test is BUILD_DIR/bertrain, taken as it is
// (SKIP_BUILD): a build from here would relink the test programs running beside this one whenever the tree's commit
// changed since they were built (the commit is compiled in), and they failed, not found or busy, in the meantime.
std::vector<std::string> main_job_env(const std::string& data, const std::string& model, const std::string& run) {
  fs::create_directories(data + "/madewithml");
  spit(data + "/madewithml/dataset.csv", to_csv(synthetic_rows()));
  spit(data + "/madewithml/holdout.csv", to_csv(synthetic_rows()));
  return {"SKIP_BUILD=1", "BUILD_DIR=" + fs::path(binary()).parent_path().string(), "BERTRAIN_DATA_DIR=" + data,
          "BERTRAIN_MODEL_DIR=" + model, "RUN_DIR=" + run};
}

TEST_F(CliTest, TheMainJobSaysHowToResumeAndEndsWithASummary) {
  const std::vector<std::string> env = main_job_env(path("data"), model(), path("run"));
  std::vector<std::string> crash_env = env;
  crash_env.push_back("BERTRAIN_TEST_CRASH_AFTER_STEP=5");  // 4 batches an epoch: inside the second epoch
  const std::string script = std::string(BERTRAIN_SOURCE_DIR) + "/bertrain.sh";
  const RunResult stopped = ::bertrain::testing::run_process(
      {script, "run", "--epochs", "2", "--batch-size", "8", "--device", "cpu", "--save-steps", "1", "--quiet"},
      crash_env, 600);
  ASSERT_EQ(stopped.exit_code, 137) << stopped.describe();
  const std::string resume = "RUN_DIR=" + path("run") +
                             " ./bertrain.sh run --epochs 2 --batch-size 8 --device cpu --save-steps 1 --quiet --resume";
  EXPECT_NE(stopped.err.find("to resume it:\n  " + resume + "\n"), std::string::npos) << stopped.describe();

  // The printed command, as a user would paste it in the checkout.
  const RunResult resumed = ::bertrain::testing::run_process(
      {"/bin/bash", "-c", "cd " + std::string(BERTRAIN_SOURCE_DIR) + " && " + resume}, env, 600);
  ASSERT_TRUE(succeeded(resumed));
  EXPECT_EQ(resumed.out.find("\"per_class\""), std::string::npos) << "evaluate's JSON belongs in evaluation.json";
  const std::string summary = resumed.out.substr(resumed.out.find("== summary\n"));
  EXPECT_EQ(summary.rfind("== summary\n" + path("run") + ": finished 2 epochs in ", 0), 0u) << summary;
  EXPECT_NE(summary.find("; best epoch "), std::string::npos) << summary;
  EXPECT_NE(summary.find("its model in " + path("run") + "/best\n"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\n  evaluated on " + path("data") + "/madewithml/holdout.csv (40 rows): precision "),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("(weighted); " + path("run") + "/evaluation.json\n"), std::string::npos) << summary;
  EXPECT_EQ(lines_of(summary).back(), "report: 1 run -> " + path("run") + "/report.html");
  EXPECT_TRUE(fs::exists(path("run/report.html")));
}

// A run that diverges after its first checkpoint (linear warm-up: the first step's rate is 0, the next ones 1e30 / 2
// and up) leaves last/, but resumed it would diverge again, and --resume refuses a lower --lr: no resume command.
TEST_F(CliTest, TheMainJobGivesNoResumeCommandAfterADivergence) {
  const std::vector<std::string> env = main_job_env(path("data"), model(), path("run"));
  const RunResult diverged = ::bertrain::testing::run_process(
      {std::string(BERTRAIN_SOURCE_DIR) + "/bertrain.sh", "run", "--epochs", "2", "--batch-size", "8", "--device",
       "cpu", "--save-steps", "1", "--quiet", "--lr", "1e30", "--lr-scheduler", "linear", "--warmup-steps", "2"},
      env, 600);
  EXPECT_EQ(diverged.exit_code, bertrain::kExitDiverged) << diverged.describe();
  EXPECT_NE(diverged.err.find("training stopped (last/ holds the last checkpoint; try a lower --lr in a new run"),
            std::string::npos) << diverged.describe();
  EXPECT_TRUE(fs::exists(path("run/last/trainer_state.json")));
  EXPECT_EQ(diverged.err.find("to resume it"), std::string::npos) << diverged.describe();
}

}  // namespace
}  // namespace bertrain

// CLI tests of the trainer's Hugging Face Trainer-style features: step-wise schedules with warmup, --max-steps,
// --eval-steps, validation metrics and --metric-for-best, early stopping, gradient accumulation (also across a
// crash and --resume), gradient clipping, honest resume, --save-optimizer, --save-total-limit and the disk line, predict --id-column.
// The synthetic data (tests/tools/cli_test.h): 30 training rows, 10 validation rows; batches of 8 make 4 steps an
// epoch.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/tools/cli_test.h"

namespace bertrain {
namespace {

using namespace cli_test;

class CliTraining : public CliTest {};

json results_of(const std::string& run_dir) { return json::parse(slurp(run_dir + "/results.json")); }

// linear with 2 warmup steps over 8 steps: the rate after step s is 1e-4 · (8 - s) / 6 (transformers' lambda); the
// record of an evaluation holds the rate the next step uses.
TEST_F(CliTraining, LinearScheduleWithWarmupSetsTheRateEveryStep) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--lr-scheduler", "linear", "--warmup-steps", "2"}))));
  const std::vector<json> m = read_jsonl(path("run") + "/metrics.jsonl");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0]["step"], 4);
  EXPECT_NEAR(m[0]["lr"].get<double>(), 1e-4 * 4.0 / 6.0, 1e-12);
  EXPECT_EQ(m[1]["step"], 8);
  EXPECT_EQ(m[1]["lr"].get<double>(), 0.0);
  const json r = results_of(path("run"));
  EXPECT_EQ(r["params"]["lr_scheduler"], "linear");
  EXPECT_EQ(r["total_steps"], 8);
  // A warmup without a step-wise schedule is refused, naming the flags.
  expect_error(run(train_args(path("bad"), {"--warmup-steps", "2"})), "need a step-wise --lr-scheduler");
  expect_error(run(train_args(path("bad"), {"--lr-scheduler", "exponential"})), "--lr-scheduler");
  // So are ReduceLROnPlateau's settings beside a step-wise schedule, which would ignore them.
  expect_error(run(train_args(path("bad"), {"--lr-scheduler", "linear", "--lr-factor", "0.5"})),
               "--lr-factor is ReduceLROnPlateau's (--lr-scheduler plateau); --lr-scheduler linear sets the rate");
  expect_error(run(train_args(path("bad"), {"--lr-scheduler", "cosine", "--lr-patience", "2"})),
               "--lr-patience is ReduceLROnPlateau's");
  EXPECT_FALSE(fs::exists(path("bad")));
}

TEST_F(CliTraining, MaxStepsOverridesEpochsAndEvalStepsValidatesBetweenEpochEnds) {
  ASSERT_TRUE(succeeded(run(train_args(path("max"), {"--epochs", "5", "--max-steps", "6"}))));
  json r = results_of(path("max"));
  EXPECT_EQ(r["optimizer_steps"], 6);
  std::vector<json> m = read_jsonl(path("max") + "/metrics.jsonl");
  ASSERT_EQ(m.size(), 2u);  // the end of epoch 1 (step 4) and the last step (6, in epoch 2)
  EXPECT_EQ(m[1]["step"], 6);
  EXPECT_EQ(m[1]["epoch"], 1);

  ASSERT_TRUE(succeeded(run(train_args(path("eval"), {"--eval-steps", "3"}))));
  m = read_jsonl(path("eval") + "/metrics.jsonl");
  ASSERT_EQ(m.size(), 3u);  // steps 3, 6 and the last, 8
  EXPECT_EQ(m[0]["step"], 3);
  EXPECT_EQ(m[1]["step"], 6);
  EXPECT_EQ(m[2]["step"], 8);
  r = results_of(path("eval"));
  EXPECT_GE(r["best_step"].get<long>(), 3);
}

// On a terminal, the progress line of --max-steps's short last epoch counts that epoch's steps (2 of 2, not 2 of 4).
// util-linux's script(1) gives the run a terminal.
TEST_F(CliTraining, TheProgressLineOfAShortLastEpochCountsItsSteps) {
  const std::string script = "/usr/bin/script";  // Debian's bsdutils, an essential package
  if (!fs::exists(script)) GTEST_SKIP() << script << " is not installed";
  std::string command;
  for (const std::string& a : without_quiet(train_args(path("max"), {"--max-steps", "6", "--device", "cpu"}))) {
    command += (command.empty() ? "'" + binary() + "' " : std::string()) + "'" + a + "' ";
  }
  const RunResult r = testing::run_process({script, "-qefc", command, "/dev/null"}, {}, 120);
  ASSERT_TRUE(succeeded(r));
  EXPECT_NE(r.out.find("epoch 1/2 [########################] step 4/4 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("epoch 2/2 [########################] step 2/2 "), std::string::npos) << r.out;
  for (std::size_t at = r.out.find("epoch 2/2 ["); at != std::string::npos; at = r.out.find("epoch 2/2 [", at + 1)) {
    const std::size_t step = r.out.find("] step ", at);
    ASSERT_NE(step, std::string::npos) << r.out;
    EXPECT_EQ(r.out.substr(step + 8, 3), "/2 ") << r.out.substr(at, 60);
  }
}

// A batch too large for the memory the process may use (here under ulimit -v) is refused before anything is
// allocated or written: one line with the need, what there is and the flags that lower it, exit 2, which launch
// does not retry. Before, it was std::bad_alloc's "out of memory" (exit 1, retried three times by launch), or, where
// the allocation fitted the kernel's overcommit, the OOM killer's SIGKILL while the arena was zeroed.
TEST_F(CliTraining, ABatchTooLargeForMemoryIsRefusedNamingTheFlags) {
#ifdef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "AddressSanitizer's shadow memory cannot be mapped under ulimit -v";
#endif
  // 50,000 rows of 34 tokens: 1.4 million tokens in one batch of 40,000 training rows, about 6 GiB of activations
  // against the 3 GB of address space (of which the process maps about 1.3 GB itself).
  spit(path("many.csv"), to_csv(many_long_rows()));
  std::vector<std::string> args = train_args(path("run"), {"--batch-size", "65536", "--device", "cpu"});
  args[4] = path("many.csv");  // --train-data
  const RunResult r = testing::run_process({"/bin/sh", "-c", "ulimit -v 3000000 && exec " + shell_command(args)});
  expect_error(r, "train: the CPU engine needs ");
  for (const char* part : {"for batches of up to 40000 rows and ", "GiB of activations",
                           "of address space is left to it under ulimit -v (RLIMIT_AS) of 2.9 GiB", "--batch-size",
                           "--grad-accum-steps", "--max-length", "--gradient-checkpointing"}) {
    EXPECT_NE(r.err.find(part), std::string::npos) << part << "\n" << r.describe();
  }
  EXPECT_FALSE(fs::exists(path("run"))) << "nothing is written for a run that cannot start";
  std::vector<std::string> launch{"launch", "--restart-delay", "0", "--", binary()};
  launch.insert(launch.end(), args.begin(), args.end());
  const RunResult launched = testing::run_process({"/bin/sh", "-c", "ulimit -v 3000000 && exec " + shell_command(launch)});
  EXPECT_EQ(launched.exit_code, 2) << launched.describe();
  EXPECT_EQ(launched.err.find("restart 1"), std::string::npos) << launched.describe();
}

// Where stderr is not a terminal (here a pipe), progress is a plain line at most every --progress-interval seconds,
// never on a terminal's overwriting escapes; 0 and --quiet print none. Before, a log held only the epoch lines.
TEST_F(CliTraining, ProgressInALogIsAPlainLineEveryInterval) {
  const RunResult r = run(without_quiet(train_args(path("run"), {"--progress-interval", "0.000001"})));
  ASSERT_TRUE(succeeded(r));
  EXPECT_NE(r.err.find("epoch 1/2  step 1/"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("epoch 2/2  step "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\033'), std::string::npos) << r.err;
  std::istringstream lines(r.err);
  int progress = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("epoch ", 0) != 0) continue;
    ++progress;
    EXPECT_NE(line.find("  loss "), std::string::npos) << line;
    EXPECT_NE(line.find(" samples/s  run ETA "), std::string::npos) << line;
  }
  EXPECT_GE(progress, 2);
  EXPECT_EQ(r.out.find("  step "), std::string::npos) << "progress belongs on stderr\n" << r.out;
  const std::vector<std::vector<std::string>> silent{{"--progress-interval", "0"},
                                                     {"--progress-interval", "0.000001", "--quiet"}};
  for (const std::vector<std::string>& quiet : silent) {
    std::vector<std::string> args = without_quiet(train_args(path("run"), {"--overwrite"}));
    args.insert(args.end(), quiet.begin(), quiet.end());
    const RunResult none = run(args);
    ASSERT_TRUE(succeeded(none));
    EXPECT_EQ(none.err.find("  step "), std::string::npos) << none.err;
  }
  expect_error(run(train_args(path("bad"), {"--progress-interval", "-1"})), "--progress-interval must be 0");
}

// A best model that gets no validation row of a label right is said at the end, once, with --quiet too (the epoch
// lines' val_f1 weights labels by rows, so a rare label's F1 of 0 hardly moves it), with the macro F1 beside it and
// --class-weights as advice unless it is on. The tiny model after one epoch predicts one label for every row.
TEST_F(CliTraining, ABestModelThatNeverGetsALabelRightIsSaid) {
  const RunResult r = run(train_args(path("run"), {"--epochs", "1"}));
  ASSERT_TRUE(succeeded(r));
  EXPECT_EQ(count_occurrences(r.err, "bertrain: warning: the best model predicts no validation row of labels '"), 1u)
      << r.err;
  EXPECT_NE(r.err.find(" right: F1 0 (val_f1 "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" weights labels by their rows; their mean, val_f1_macro, is "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("); --class-weights weighs the loss by how rare each label is\n"), std::string::npos) << r.err;
  const RunResult weighted = run(train_args(path("weighted"), {"--epochs", "1", "--class-weights"}));
  ASSERT_TRUE(succeeded(weighted));
  EXPECT_NE(weighted.err.find("the best model predicts no validation row of label"), std::string::npos)
      << weighted.err;
  EXPECT_EQ(weighted.err.find("--class-weights"), std::string::npos) << weighted.err;
}

TEST_F(CliTraining, ValidationMetricsPerEvaluationAndMetricForBest) {
  const RunResult trained = run(without_quiet(train_args(path("run"), {"--metric-for-best", "f1"})));
  ASSERT_TRUE(succeeded(trained));
  const std::vector<json> m = read_jsonl(path("run") + "/metrics.jsonl");
  ASSERT_EQ(m.size(), 2u);
  // Each epoch line names its numbers as metrics.jsonl does ("val_accuracy", not "val_acc"), with their values.
  std::istringstream out(trained.out);
  std::size_t epoch_lines = 0;
  for (std::string line; std::getline(out, line);) {
    if (line.rfind("epoch ", 0) != 0) continue;
    ASSERT_LT(epoch_lines, m.size()) << trained.out;
    const json& e = m[epoch_lines++];
    std::istringstream words(line.substr(line.find("  ")));
    std::string name, value;
    int named = 0;
    while (words >> name && name != "lr" && words >> value) {
      ASSERT_TRUE(e.contains(name)) << name << " in: " << line;
      EXPECT_NEAR(std::stod(value), e[name].get<double>(), 1e-4) << name;
      ++named;
    }
    EXPECT_EQ(named, 4) << line;
  }
  EXPECT_EQ(epoch_lines, m.size()) << trained.out;
  double best = -1;
  int best_epoch = -1;
  for (const json& e : m) {
    for (const char* key : {"val_accuracy", "val_f1", "val_f1_micro", "val_f1_macro"}) {
      ASSERT_TRUE(e.contains(key)) << key;
      EXPECT_GE(e[key].get<double>(), 0.0);
      EXPECT_LE(e[key].get<double>(), 1.0);
    }
    // Single-label: micro F1 is the accuracy.
    EXPECT_DOUBLE_EQ(e["val_f1_micro"].get<double>(), e["val_accuracy"].get<double>());
    if (e["val_f1"].get<double>() > best) {
      best = e["val_f1"].get<double>();
      best_epoch = e["epoch"].get<int>();
    }
  }
  const json r = results_of(path("run"));
  EXPECT_EQ(r["best_metric"]["name"], "f1");
  EXPECT_EQ(r["best_metric"]["value"].get<double>(), best);
  EXPECT_EQ(r["best_epoch"], best_epoch);
  expect_error(run(train_args(path("bad"), {"--metric-for-best", "recall"})), "--metric-for-best");
}

// A threshold no improvement can pass: the first evaluation sets the best, the next two do not improve on it, and
// patience 2 stops the run there, saying why, with results.json recording it.
TEST_F(CliTraining, EarlyStoppingStopsAndSaysWhy) {
  const RunResult r = run(without_quiet(train_args(
      path("run"), {"--epochs", "10", "--early-stopping-patience", "2", "--early-stopping-threshold", "100"})));
  ASSERT_TRUE(succeeded(r));
  EXPECT_NE(r.out.find("stopping early: val_loss did not improve"), std::string::npos) << r.out;
  EXPECT_EQ(read_jsonl(path("run") + "/metrics.jsonl").size(), 3u);
  const json results = results_of(path("run"));
  ASSERT_TRUE(results["stopped_early"].is_object()) << results.dump();
  EXPECT_EQ(results["stopped_early"]["epoch"], 2);
  EXPECT_EQ(results["stopped_early"]["step"], 12);
  // Resuming it has nothing to do.
  const RunResult again = run(without_quiet(train_args(
      path("run"), {"--epochs", "10", "--early-stopping-patience", "2", "--early-stopping-threshold", "100", "--resume"})));
  ASSERT_TRUE(succeeded(again));
  EXPECT_NE(again.out.find("stopped early"), std::string::npos) << again.out;
  // Patience running out at the last evaluation cut nothing short: no early stop, so a --resume with more epochs
  // trains on (before, it was "stopped early; nothing to do"), and stops early at its first evaluation.
  const std::vector<std::string> patient{"--early-stopping-patience", "2", "--early-stopping-threshold", "100"};
  std::vector<std::string> three{"--epochs", "3"}, five{"--epochs", "5", "--resume"};
  three.insert(three.end(), patient.begin(), patient.end());
  five.insert(five.end(), patient.begin(), patient.end());
  const RunResult last = run(without_quiet(train_args(path("last"), three)));
  ASSERT_TRUE(succeeded(last));
  EXPECT_EQ(last.out.find("stopping early"), std::string::npos) << last.out;
  EXPECT_FALSE(results_of(path("last"))["stopped_early"].is_object()) << results_of(path("last")).dump();
  ASSERT_TRUE(succeeded(run(train_args(path("last"), five))));
  EXPECT_EQ(read_jsonl(path("last") + "/metrics.jsonl").size(), 4u);
  EXPECT_EQ(results_of(path("last"))["stopped_early"]["epoch"], 3);
}

// Batches of 4 accumulated twice train (and validate) what batches of 8 do, to float32 rounding, and a run with
// accumulation killed after a step checkpoint resumes bit for bit.
TEST_F(CliTraining, GradientAccumulationMatchesTheLargerBatchAndResumesBitForBit) {
  ASSERT_TRUE(succeeded(run(train_args(path("b8"), {}))));
  ASSERT_TRUE(succeeded(run(train_args(path("b4x2"), {"--batch-size", "4", "--grad-accum-steps", "2"}))));
  const std::vector<json> a = read_jsonl(path("b8") + "/metrics.jsonl"), b = read_jsonl(path("b4x2") + "/metrics.jsonl");
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    for (const char* key : {"train_loss", "val_loss", "val_f1"}) {
      const double x = a[i][key], y = b[i][key];
      EXPECT_NEAR(y, x, 1e-5 * std::abs(x)) << key << " of evaluation " << i;
    }
  }
  EXPECT_EQ(results_of(path("b4x2"))["optimizer_steps"], 8);

  const std::vector<std::string> flags{"--batch-size", "4", "--grad-accum-steps", "2", "--save-steps", "1"};
  ASSERT_TRUE(succeeded(run(train_args(path("whole"), flags))));
  ASSERT_EQ(run(train_args(path("killed"), flags), {"BERTRAIN_TEST_CRASH_AFTER_STEP=3"}).exit_code, 137);
  std::vector<std::string> resume = flags;
  resume.push_back("--resume");
  ASSERT_TRUE(succeeded(run(train_args(path("killed"), resume))));
  EXPECT_TRUE(slurp(path("whole") + "/best/model.safetensors") == slurp(path("killed") + "/best/model.safetensors"));
  EXPECT_TRUE(slurp(path("whole") + "/last/model.safetensors") == slurp(path("killed") + "/last/model.safetensors"));
  EXPECT_EQ(read_jsonl(path("whole") + "/metrics.jsonl").back()["val_loss"],
            read_jsonl(path("killed") + "/metrics.jsonl").back()["val_loss"]);
}

// --gradient-checkpointing: the same run bit for bit (weights and every loss), recorded in results.json; a resume
// may turn it on or off (it changes memory and time, not the arithmetic) and still ends as the uninterrupted run.
// (Dropout inside the layers, which the fixture has not, is covered by RecomputingModel in test_golden.)
TEST_F(CliTraining, GradientCheckpointingTrainsTheSameRunBitForBit) {
  const RunResult kept = run(without_quiet(train_args(path("kept"), {"--dropout", "0.3"})));
  const RunResult recomputed =
      run(without_quiet(train_args(path("recomputed"), {"--dropout", "0.3", "--gradient-checkpointing"})));
  ASSERT_TRUE(succeeded(kept));
  ASSERT_TRUE(succeeded(recomputed));
  // The engine line says the memory the CPU engine holds: less when it recomputes.
  const auto engine_memory = [](const RunResult& r) {
    const std::size_t at = r.out.find(" of memory for parameters, gradients, optimizer state and activations");
    EXPECT_NE(at, std::string::npos) << r.out;
    const std::size_t number = r.out.rfind("; ", at) + 2;
    std::istringstream words(r.out.substr(number, at - number));
    double value = 0;
    std::string unit;
    words >> value >> unit;
    return value * (unit == "GiB" ? 1 << 30 : unit == "MiB" ? 1 << 20 : unit == "KiB" ? 1 << 10 : 0);
  };
  EXPECT_LT(engine_memory(recomputed), engine_memory(kept));
  EXPECT_GT(engine_memory(recomputed), 0);
  EXPECT_TRUE(slurp(path("kept") + "/last/model.safetensors") == slurp(path("recomputed") + "/last/model.safetensors"));
  const std::vector<json> a = read_jsonl(path("kept") + "/metrics.jsonl");
  const std::vector<json> b = read_jsonl(path("recomputed") + "/metrics.jsonl");
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    for (const char* key : {"train_loss", "val_loss", "grad_norm", "val_f1"}) EXPECT_EQ(a[i][key], b[i][key]) << key;
  }
  EXPECT_EQ(results_of(path("kept"))["params"]["gradient_checkpointing"], false);
  EXPECT_EQ(results_of(path("recomputed"))["params"]["gradient_checkpointing"], true);
  const std::string engine = results_of(path("recomputed"))["params"]["engine"];
  EXPECT_NE(engine.find(", activations recomputed in backward"), std::string::npos) << engine;

  ASSERT_TRUE(succeeded(run(train_args(path("switched"), {"--dropout", "0.3", "--epochs", "1"}))));
  ASSERT_TRUE(succeeded(run(train_args(path("switched"), {"--dropout", "0.3", "--resume", "--gradient-checkpointing"}))));
  EXPECT_TRUE(slurp(path("kept") + "/last/model.safetensors") == slurp(path("switched") + "/last/model.safetensors"));
}

// --max-grad-norm: above the gradient's norm it changes nothing, bit for bit; far below it every update is clipped
// and the run trains elsewhere. It is recorded, a resume must keep it, and a negative or infinite one is refused.
// (The clipped arithmetic itself is checked against torch's clip_grad_norm_ in test_golden.)
TEST_F(CliTraining, MaxGradNormClipsOnlyAboveTheGradientsNorm) {
  ASSERT_TRUE(succeeded(run(train_args(path("plain"), {"--epochs", "1"}))));
  ASSERT_TRUE(succeeded(run(train_args(path("loose"), {"--epochs", "1", "--max-grad-norm", "1e9"}))));
  ASSERT_TRUE(succeeded(run(train_args(path("tight"), {"--epochs", "1", "--max-grad-norm", "1e-6"}))));
  const std::string plain = slurp(path("plain") + "/last/model.safetensors");
  EXPECT_TRUE(plain == slurp(path("loose") + "/last/model.safetensors"));
  EXPECT_FALSE(plain == slurp(path("tight") + "/last/model.safetensors"));
  EXPECT_NE(read_jsonl(path("plain") + "/metrics.jsonl").back()["val_loss"],
            read_jsonl(path("tight") + "/metrics.jsonl").back()["val_loss"]);
  EXPECT_EQ(results_of(path("tight"))["params"]["max_grad_norm"], 1e-6);
  // metrics.jsonl's grad_norm is the norm before clipping: the same in the two unclipped runs, far above 1e-6 here.
  EXPECT_EQ(read_jsonl(path("plain") + "/metrics.jsonl")[0]["grad_norm"],
            read_jsonl(path("loose") + "/metrics.jsonl")[0]["grad_norm"]);
  EXPECT_GT(read_jsonl(path("tight") + "/metrics.jsonl")[0]["grad_norm"].get<double>(), 1e-3);
  EXPECT_EQ(results_of(path("plain"))["params"]["max_grad_norm"], 0.0);
  expect_error(run(train_args(path("tight"), {"--epochs", "2", "--resume", "--max-grad-norm", "1"})),
               "--max-grad-norm 1e-06 (checkpoint) vs 1.0 (now)");
  expect_error(run(train_args(path("bad"), {"--max-grad-norm", "-1"})), "--max-grad-norm must be 0 (no clipping) or");
  expect_error(run(train_args(path("bad"), {"--max-grad-norm", "inf"})), "--max-grad-norm");
}

// Infinite optimizer settings are flag errors (exit 2, naming the flag), not a run that diverges at its first step
// (exit 3): --weight-decay inf made every weight non-finite.
TEST_F(CliTraining, InfiniteOptimizerSettingsAreFlagErrors) {
  expect_error(run(train_args(path("bad"), {"--weight-decay", "inf"})), "--weight-decay must be 0 or within float32");
  expect_error(run(train_args(path("bad"), {"--weight-decay", "-0.01"})), "--weight-decay must be 0 or within float32");
  expect_error(run(train_args(path("bad"), {"--adam-eps", "inf"})), "--adam-eps must be positive");
  // The engine computes in float32: 1e39 is infinite there, 1e-50 is 0 (an lr that learns nothing, an eps that
  // makes 0 / 0 of a parameter without gradient). Before, these ran.
  expect_error(run(train_args(path("bad"), {"--lr", "1e39"})), "--lr must be within float32's range, 1.2e-38 to 3.4e38");
  expect_error(run(train_args(path("bad"), {"--lr", "1e-50"})), "--lr must be within float32's range");
  expect_error(run(train_args(path("bad"), {"--adam-eps", "1e-50"})), "--adam-eps must be within float32's range");
  expect_error(run(train_args(path("bad"), {"--weight-decay", "1e39"})),
               "--weight-decay must be 0 or within float32's range, 1.2e-38 to 3.4e38");
  expect_error(run(train_args(path("bad"), {"--max-grad-norm", "1e39"})),
               "--max-grad-norm must be 0 (no clipping) or within float32's range, 1.2e-38 to 3.4e38");
  // ... and below it: --max-grad-norm 1e-50 clipped every gradient to 0 (the weights never moved), --weight-decay
  // 1e-50 was no decay.
  expect_error(run(train_args(path("bad"), {"--max-grad-norm", "1e-50"})),
               "--max-grad-norm must be 0 (no clipping) or");
  expect_error(run(train_args(path("bad"), {"--weight-decay", "1e-50"})), "--weight-decay must be 0 or within float32");
  // Rows of one optimizer step past an int: a flag error (exit 2), not the batcher's internal one (exit 1).
  expect_error(run(train_args(path("bad"), {"--batch-size", "65536", "--grad-accum-steps", "65536"})),
               "--batch-size x --grad-accum-steps, the rows of one optimizer step, must be at most 2147483647");
  expect_no_run(path("bad"));
}

// A batch size near INT_MAX trains (one batch of every row): the batcher's count of micro-batches overflowed int,
// and the model refused a batch larger than the token bound it had computed ("outside [1, 240]", exit 1).
TEST_F(CliTraining, ABatchSizeNearIntMaxTrains) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "1", "--batch-size", "2147483647"}))));
}

// --resume refuses training settings that differ from the checkpoint's, one line naming each; the resumable ones
// may change and results.json records them.
TEST_F(CliTraining, ResumeRefusesChangedSettingsAndRecordsAllowedChanges) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "1"}))));
  auto resumed = [&](std::vector<std::string> extra) {
    std::vector<std::string> a{"--resume"};
    a.insert(a.end(), extra.begin(), extra.end());
    return run(train_args(path("run"), a));
  };
  RunResult r = resumed({"--epochs", "2", "--lr", "5e-5", "--seed", "7"});
  expect_error(r, "--lr 0.0001 (checkpoint) vs 5e-05 (now)");
  EXPECT_NE(r.err.find("--seed 42 (checkpoint) vs 7 (now)"), std::string::npos) << r.err;
  expect_error(resumed({"--epochs", "2", "--grad-accum-steps", "2"}), "--grad-accum-steps 1 (checkpoint) vs 2 (now)");
  // The data file's content changed under the same name.
  const std::string original = slurp(data());
  spit(data(), original + "99,an extra row,about images,computer-vision\n");
  expect_error(resumed({"--epochs", "2"}), "--train-data content");
  spit(data(), original);
  ASSERT_TRUE(succeeded(resumed({"--epochs", "2", "--threads", "1"})));
  const json results = results_of(path("run"));
  ASSERT_EQ(results["resumes"].size(), 1u) << results.dump();
  EXPECT_EQ(results["resumes"][0]["changed"]["epochs"], json::array({1, 2}));
  EXPECT_EQ(results["resumes"][0]["changed"]["threads"], json::array({0, 1}));
  EXPECT_EQ(results["params"]["epochs"], 2);
}

// --save-optimizer: always (the default) keeps the Adam moments, during drops them once the run finishes, never
// writes them; the run ends by saying what it holds on disk.
TEST_F(CliTraining, SaveOptimizerAndDiskUse) {
  const RunResult during = run(without_quiet(train_args(path("during"), {"--epochs", "1", "--save-optimizer", "during"})));
  ASSERT_TRUE(succeeded(during));
  EXPECT_FALSE(fs::exists(path("during") + "/last/optimizer.safetensors"));
  EXPECT_TRUE(fs::exists(path("during") + "/last/model.safetensors"));
  EXPECT_NE(during.out.find("disk: "), std::string::npos) << during.out;
  EXPECT_NE(during.out.find(" MB in " + path("during") + " ("), std::string::npos) << during.out;
  EXPECT_NE(during.out.find("best/ "), std::string::npos) << during.out;
  // Its one evaluation is the best: best/ shares last/'s weights file (a hard link where the filesystem has them)
  // instead of a second copy, and writes its own config.json; the disk line counts the shared file once.
  const std::string best = path("during") + "/best/", last = path("during") + "/last/";
  EXPECT_EQ(slurp(best + "model.safetensors"), slurp(last + "model.safetensors"));
  std::error_code no_links;
  fs::create_hard_link(last + "config.json", path("link-probe"), no_links);
  if (!no_links) {
    EXPECT_TRUE(fs::equivalent(best + "model.safetensors", last + "model.safetensors"));
    EXPECT_FALSE(fs::equivalent(best + "config.json", last + "config.json"));
    EXPECT_NE(during.out.find(" shares "), std::string::npos) << during.out;
    const auto weights = static_cast<double>(fs::file_size(last + "model.safetensors"));
    const std::size_t at = during.out.find("disk: ") + 6;
    const double total_mb = std::stod(during.out.substr(at));
    EXPECT_LT(total_mb, 1.5 * weights / 1e6) << during.out;  // once, not twice
  }
  // Training it further would not continue the same training: refused, saying what to do instead.
  expect_error(run(train_args(path("during"), {"--epochs", "2", "--resume"})), "holds no optimizer state");
  // Resuming it with nothing more to do is fine.
  ASSERT_TRUE(succeeded(run(train_args(path("during"), {"--epochs", "1", "--resume"}))));

  ASSERT_TRUE(succeeded(run(train_args(path("always"), {"--epochs", "1"}))));
  EXPECT_TRUE(fs::exists(path("always") + "/last/optimizer.safetensors"));
  ASSERT_TRUE(succeeded(run(train_args(path("always"), {"--epochs", "2", "--resume"}))));

  // never: not even while training (a stopped run is not resumable).
  ASSERT_EQ(run(train_args(path("never"), {"--epochs", "2", "--save-optimizer", "never"}),
                {"BERTRAIN_TEST_CRASH_AFTER_STEP=4"})
                .exit_code,
            137);
  EXPECT_TRUE(fs::exists(path("never") + "/last/model.safetensors"));
  EXPECT_FALSE(fs::exists(path("never") + "/last/optimizer.safetensors"));
  expect_error(run(train_args(path("never"), {"--epochs", "2", "--save-optimizer", "never", "--resume"})),
               "holds no optimizer state");
  expect_error(run(train_args(path("bad"), {"--save-optimizer", "sometimes"})), "--save-optimizer");
}

// --save-total-limit N: N distinct points to resume from, as Trainer's: the newest N step checkpoints, the newest
// the same files as last/ (hard links: stored once), the older ones as last/ was at their step.
TEST_F(CliTraining, SaveTotalLimitBoundsTheCheckpoints) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--save-steps", "1", "--save-total-limit", "3"}))));
  std::vector<std::string> steps;
  for (const auto& e : fs::directory_iterator(path("run") + "/checkpoints")) steps.push_back(e.path().filename());
  std::sort(steps.begin(), steps.end());
  EXPECT_EQ(steps, (std::vector<std::string>{"step-6", "step-7", "step-8"}));
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "trainer_state.json"}) {
    EXPECT_TRUE(fs::equivalent(path("run") + "/last/" + file, path("run") + "/checkpoints/step-8/" + file)) << file;
  }
  EXPECT_NE(slurp(path("run") + "/checkpoints/step-7/model.safetensors"), slurp(path("run") + "/last/model.safetensors"));
  EXPECT_EQ(json::parse(slurp(path("run") + "/checkpoints/step-7/trainer_state.json"))["optimizer_steps"], 7);
  expect_error(run(train_args(path("bad"), {"--save-steps", "1", "--save-total-limit", "2", "--keep", "1"})),
               "--save-total-limit and --keep");
  expect_error(run(train_args(path("bad"), {"--save-total-limit", "3"})), "--save-steps");
}

TEST_F(CliTraining, PredictIdsComeFromTheIdColumn) {
  const std::string out = path("predictions.jsonl");
  ASSERT_TRUE(succeeded(run({"predict", "--model", suite_run(), "--data", data(), "--id-column", "title", "--out", out})));
  const std::vector<json> rows = read_jsonl(out);
  ASSERT_EQ(rows.size(), static_cast<std::size_t>(kRows));
  EXPECT_EQ(rows[1]["id"], synthetic_rows()[1].title);
  expect_error(run({"predict", "--model", suite_run(), "--data", data(), "--id-column", "uuid"}),
               "missing id column 'uuid'");
}

}  // namespace
}  // namespace bertrain

// End-to-end tests of the bertrain CLI (harness: tests/tools/cli_test.h). Covers usage errors (exit 2), train / resume / evaluate / predict / tokenize, and
// bad inputs (exit 1, one line on stderr naming the problem, no signal, nothing half-written).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/build_config.h"
#include "core/build_info.h"
#include "core/error.h"
#include "model/model_dir.h"
#include "model/safetensors.h"
#include "tests/run_process.h"
#include "tests/temp_dir.h"
#include "tests/tools/cli_test.h"
#include "tests/xml_check.h"

namespace bertrain {
namespace {

using namespace cli_test;

// ---- help, version, usage errors ------------------------------------------------------------------------

TEST_F(CliTest, TopLevelHelpAndVersion) {
  const RunResult help = run({"--help"});
  ASSERT_TRUE(succeeded(help));
  for (const char* command : {"train", "evaluate", "predict", "tokenize", "launch", "report", "convert"}) {
    EXPECT_NE(help.out.find(command), std::string::npos) << command << "\n" << help.out;
  }
  const RunResult version = run({"--version"});
  ASSERT_TRUE(succeeded(version));
  EXPECT_EQ(version.out.rfind("bertrain ", 0), 0u) << version.out;
  // "help COMMAND" is the command's own --help; "help" with a flag of its own is the top-level help.
  EXPECT_EQ(run({"help", "train"}).out, run({"train", "--help"}).out);
  const RunResult bench_step = run({"help", "bench", "step"});  // the bench commands are two words
  ASSERT_TRUE(succeeded(bench_step));
  EXPECT_EQ(bench_step.out, run({"bench", "step", "--help"}).out);
  EXPECT_EQ(run({"help", "--help"}).out, help.out);
}

// Words after --version or --help's COMMAND are refused, not dropped: "bertrain --version train ..." was
// likely meant as something else.
TEST_F(CliTest, TopLevelFlagsRefuseWordsAfterThem) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--version", "extra"}, {"version", "--verbose"}, {"--help", "train", "extra"}, {"help", "nosuch"},
           {"help", "bench", "step", "extra"}}) {
    const RunResult r = run(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << " " << args[1];
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_NE(run({"--version", "extra"}).err.find("--version takes no arguments (got 'extra')"), std::string::npos);
  EXPECT_NE(run({"help", "nosuch"}).err.find("unknown command 'nosuch'"), std::string::npos);
}

TEST_F(CliTest, CommandHelpListsTheFlags) {
  const std::map<std::string, std::vector<std::string>> flags = {
      {"train",
       {"--model", "--train-data", "--val-data", "--val-fraction", "--out", "--epochs", "--batch-size", "--lr",
        "--dropout", "--lr-factor", "--lr-patience", "--adam-beta1", "--adam-beta2", "--adam-eps", "--weight-decay", "--max-grad-norm",
        "--class-weights", "--num-samples", "--seed", "--device", "--precision", "--resume", "--format",
        "--text-columns", "--label-column", "--multi-label", "--label-separator", "--skip-bad-rows", "--max-length",
        "--head-init"}},
      {"evaluate",
       {"--model", "--data", "--out", "--threshold", "--device", "--precision", "--batch-size", "--format",
        "--text-columns", "--label-column", "--skip-bad-rows", "--max-length", "--no-clean"}},
      {"predict",
       {"--model", "--text", "--title", "--description", "--data", "--out", "--threshold", "--device", "--precision",
        "--batch-size", "--format", "--text-columns", "--skip-bad-rows", "--no-clean"}},
      {"tokenize", {"--vocab", "--text", "--data", "--no-clean", "--format", "--text-columns"}},
      {"report", {"--out", "RUN_DIR..."}}};
  for (const auto& [command, names] : flags) {
    const RunResult r = run({command, "--help"});
    ASSERT_TRUE(succeeded(r));
    EXPECT_TRUE(r.err.empty()) << r.err;
    for (const std::string& name : names) {
      EXPECT_NE(r.out.find(name + " "), std::string::npos) << command << " --help lacks " << name << "\n" << r.out;
    }
  }
}

TEST_F(CliTest, UsageErrorsExitTwoWithOneLineNamingTheProblem) {
  const RunResult none = run({});
  EXPECT_EQ(none.exit_code, 2) << none.describe();
  EXPECT_NE(none.err.find("usage"), std::string::npos) << none.describe();

  expect_error(run({"frobnicate"}), "frobnicate", 2);
  expect_error(run({"train", "--model", model(), "--train-data", data(), "--out", path("run"), "--bogus-flag", "1"}),
               "--bogus-flag", 2);
  expect_error(run({"train", "--model", model(), "--out", path("run")}), "--train-data", 2);
  expect_error(run({"evaluate", "--data", data()}), "--model", 2);
  expect_error(run({"train", "--model", model(), "--train-data", data(), "--out", path("run"), "--epochs", "ten"}),
               "--epochs", 2);
  expect_error(run({"train", "--model", model(), "--train-data", data(), "--out", path("run"), "--lr", "fast"}),
               "--lr", 2);
  expect_error(run({"tokenize", "--vocab"}), "--vocab", 2);  // a flag without its value
  EXPECT_FALSE(fs::exists(path("run")));
}

// ---- train ----------------------------------------------------------------------------------------------

TEST_F(CliTest, TrainWritesTheRunDirectory) {
  ASSERT_TRUE(succeeded(suite_train()));
  const fs::path run_dir = suite_run();

  const std::vector<json> metrics = read_jsonl(run_dir / "metrics.jsonl");
  ASSERT_EQ(metrics.size(), 3u);
  for (std::size_t e = 0; e < metrics.size(); ++e) {
    for (const char* key : kRequiredMetricKeys) {
      ASSERT_TRUE(metrics[e].contains(key)) << "epoch " << e << " lacks " << key << ": " << metrics[e].dump();
      EXPECT_TRUE(metrics[e][key].is_number()) << key << ": " << metrics[e].dump();
    }
    EXPECT_EQ(metrics[e]["epoch"].get<int>(), static_cast<int>(e));
    EXPECT_TRUE(std::isfinite(metrics[e]["train_loss"].get<double>()));
    EXPECT_GT(metrics[e]["val_loss"].get<double>(), 0.0);
    EXPECT_GT(metrics[e]["samples_per_s"].get<double>(), 0.0);
    EXPECT_GT(metrics[e]["grad_norm"].get<double>(), 0.0);
    if (e > 0) {
      EXPECT_GE(metrics[e]["elapsed_s"].get<double>(), metrics[e - 1]["elapsed_s"].get<double>());
    }
  }

  const json results = json::parse(slurp(run_dir / "results.json"));
  for (const char* key : {"params", "num_train", "num_val", "metrics", "best_epoch"}) {
    EXPECT_TRUE(results.contains(key)) << key << " missing from results.json: " << results.dump();
  }
  EXPECT_GT(results.value("time_total_s", -1.0), 0.0) << "total time missing from results.json";
  // Stratified split of 12/11/9/8 rows at 0.2: ceil gives 3 + 3 + 2 + 2 = 10 validation rows.
  EXPECT_EQ(results["num_val"].get<int>(), 10);
  EXPECT_EQ(results["num_train"].get<int>() + results["num_val"].get<int>(), kRows);
  EXPECT_EQ(results["metrics"], json(metrics)) << "results.json metrics differ from metrics.jsonl";
  EXPECT_EQ(results["params"]["epochs"].get<int>(), 3);
  EXPECT_EQ(results["params"]["batch_size"].get<int>(), 8);

  // The best epoch is the (first) epoch with the lowest val_loss.
  std::size_t argmin = 0;
  for (std::size_t e = 1; e < metrics.size(); ++e) {
    if (metrics[e]["val_loss"].get<double>() < metrics[argmin]["val_loss"].get<double>()) argmin = e;
  }
  const int best = results["best_epoch"].get<int>();
  EXPECT_EQ(best, static_cast<int>(argmin));

  for (const char* sub : {"best", "last"}) {
    for (const char* file : {"config.json", "model.safetensors", "vocab.txt"}) {
      EXPECT_TRUE(fs::is_regular_file(run_dir / sub / file)) << sub << "/" << file;
    }
  }
  EXPECT_TRUE(fs::is_regular_file(run_dir / "last" / "optimizer.safetensors"));
  EXPECT_TRUE(fs::is_regular_file(run_dir / "last" / "trainer_state.json"));
  EXPECT_EQ(slurp(run_dir / "best" / "vocab.txt"), slurp(suite_model() / "vocab.txt"));
  // best/ holds the best epoch's weights: the last epoch's exactly when the last epoch was the best.
  const bool same_weights = slurp(run_dir / "best" / "model.safetensors") == slurp(run_dir / "last" / "model.safetensors");
  EXPECT_EQ(same_weights, best == static_cast<int>(metrics.size()) - 1) << "best_epoch " << best;
  EXPECT_NE(slurp(run_dir / "last" / "model.safetensors"), slurp(suite_model() / "model.safetensors"));

  const json config = json::parse(slurp(run_dir / "best" / "config.json"));
  ASSERT_TRUE(config.contains("id2label") && config.contains("label2id")) << config.dump();
  EXPECT_TRUE(config.contains("problem_type")) << config.dump();
  for (std::size_t c = 0; c < kTags.size(); ++c) {
    EXPECT_EQ(config["id2label"][std::to_string(c)], kTags[c]);
    EXPECT_EQ(config["label2id"][kTags[c]], static_cast<int>(c));
  }
  // No temporary or backup directories left next to the checkpoints.
  for (const auto& e : fs::directory_iterator(run_dir)) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name == "best" || name == "last" || name == "metrics.jsonl" || name == "results.json") << name;
  }
}

TEST_F(CliTest, TrainWithValidationFile) {
  std::vector<Row> rows = synthetic_rows();
  // Validation: the first 2 rows of each tag; training: the rest.
  std::vector<Row> train, val;
  std::map<std::string, int> seen;
  for (const Row& r : rows) (seen[r.tag]++ < 2 ? val : train).push_back(r);
  spit(path("train.csv"), to_csv(train));
  spit(path("val.csv"), to_csv(val));
  const RunResult r = run({"train", "--model", model(), "--train-data", path("train.csv"), "--val-data",
                           path("val.csv"), "--out", path("run"), "--epochs", "1", "--batch-size", "8", "--quiet"});
  ASSERT_TRUE(succeeded(r));
  const json results = json::parse(slurp(path("run/results.json")));
  EXPECT_EQ(results["num_train"].get<int>(), kRows - 8);
  EXPECT_EQ(results["num_val"].get<int>(), 8);
  EXPECT_EQ(read_jsonl(path("run/metrics.jsonl")).size(), 1u);
}

TEST_F(CliTest, ValFractionSplitsEachTagWithCeil) {
  // 0.3: ceil(3.6) + ceil(3.3) + ceil(2.7) + ceil(2.4) = 4 + 4 + 3 + 3 = 14 (round would give 13).
  const RunResult r = run(train_args(path("run"), {"--val-fraction", "0.3", "--epochs", "1"}));
  ASSERT_TRUE(succeeded(r));
  const json results = json::parse(slurp(path("run/results.json")));
  EXPECT_EQ(results["num_val"].get<int>(), 14);
  EXPECT_EQ(results["num_train"].get<int>(), kRows - 14);
}

TEST_F(CliTest, ResumeContinuesBitForBit) {
  // Dropout, per-epoch reshuffling and an aggressive plateau schedule all carry state across the resume.
  const std::vector<std::string> knobs{"--dropout", "0.3", "--shuffle", "--lr", "5e-3", "--lr-patience", "0",
                                       "--lr-factor", "0.5"};
  std::vector<std::string> full = train_args(path("full"), knobs);
  full.insert(full.end(), {"--epochs", "4"});
  ASSERT_TRUE(succeeded(run(full)));

  std::vector<std::string> half = train_args(path("split"), knobs);
  ASSERT_TRUE(succeeded(run(half)));  // --epochs 2 (train_args)
  ASSERT_EQ(read_jsonl(path("split/metrics.jsonl")).size(), 2u);
  std::vector<std::string> resume = train_args(path("split"), knobs);
  resume.insert(resume.end(), {"--epochs", "4", "--resume"});
  ASSERT_TRUE(succeeded(run(resume)));

  for (const char* file : {"last/model.safetensors", "last/optimizer.safetensors", "best/model.safetensors",
                           "best/config.json", "last/config.json"}) {
    const std::string a = slurp(path("full") + "/" + file), b = slurp(path("split") + "/" + file);
    EXPECT_FALSE(a.empty()) << file;
    EXPECT_TRUE(a == b) << file << " differs between 4 epochs and 2 + resumed 2";
  }
  const std::vector<json> ma = read_jsonl(path("full/metrics.jsonl")), mb = read_jsonl(path("split/metrics.jsonl"));
  ASSERT_EQ(ma.size(), 4u);
  ASSERT_EQ(mb.size(), 4u);
  for (std::size_t e = 0; e < ma.size(); ++e) {
    for (const char* key : {"epoch", "lr", "train_loss", "val_loss"}) {
      EXPECT_EQ(ma[e][key], mb[e][key]) << "epoch " << e << " " << key;  // exact, as printed by the JSON writer
    }
  }
  const json ra = json::parse(slurp(path("full/results.json"))), rb = json::parse(slurp(path("split/results.json")));
  EXPECT_EQ(ra["best_epoch"], rb["best_epoch"]);
  EXPECT_EQ(ra["num_train"], rb["num_train"]);
  EXPECT_EQ(ra["num_val"], rb["num_val"]);
  EXPECT_EQ(rb["metrics"].size(), 4u);
  const json sa = json::parse(slurp(path("full/last/trainer_state.json")));
  const json sb = json::parse(slurp(path("split/last/trainer_state.json")));
  EXPECT_EQ(sa["optimizer_steps"], sb["optimizer_steps"]);
  EXPECT_EQ(sa["scheduler"], sb["scheduler"]);
}

// Numerics must not depend on where buffers land in memory. The heap layout moves with anything the process
// allocates before training, e.g. the length of the --out path (in 16-byte malloc steps), or large blocks
// coming from mmap; a resumed run allocates differently from an uninterrupted one, so bit-exact resume rests
// on this. MALLOC_PERTURB_ fills fresh allocations with garbage: reading uninitialised memory shows too.
// --save-steps: a run stopped right after a mid-epoch checkpoint (BERTRAIN_TEST_CRASH_AFTER_STEP, an abrupt
// _Exit as a kill -9 would leave it) and resumed ends with the uninterrupted run's weights, optimizer state,
// metrics and best/, bit for bit; checkpointing itself changes nothing; --keep keeps the newest step checkpoints.
TEST_F(CliTest, StepCheckpointsResumeBitForBit) {
  // 30 training rows in batches of 8: 4 steps an epoch, 16 in 4 epochs. Every 3 steps: 3, 6, 9 and 15 are
  // inside an epoch; step 12 ends epoch 3, whose evaluation's checkpoint is also kept as step-12.
  const std::vector<std::string> knobs{"--dropout", "0.3", "--shuffle", "--lr", "5e-3", "--lr-patience", "0",
                                       "--lr-factor", "0.5", "--epochs", "4"};
  std::vector<std::string> plain = train_args(path("plain"), knobs);
  ASSERT_TRUE(succeeded(run(plain)));
  std::vector<std::string> full = train_args(path("full"), knobs);
  full.insert(full.end(), {"--save-steps", "3", "--keep", "2"});
  ASSERT_TRUE(succeeded(run(full)));
  std::vector<std::string> kept;
  for (const auto& e : fs::directory_iterator(path("full/checkpoints"))) kept.push_back(e.path().filename().string());
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(kept, (std::vector<std::string>{"step-12", "step-15"}));
  const json step15 = json::parse(slurp(path("full/checkpoints/step-15/trainer_state.json")));
  EXPECT_EQ(step15["epochs_done"], 3);
  EXPECT_EQ(step15["steps_in_epoch"], 3);
  EXPECT_EQ(step15["optimizer_steps"], 15);
  const json step12 = json::parse(slurp(path("full/checkpoints/step-12/trainer_state.json")));
  EXPECT_EQ(step12["epochs_done"], 3);
  EXPECT_FALSE(step12.contains("steps_in_epoch"));

  auto expect_same_run = [&](const std::string& a, const std::string& b) {
    for (const char* file : {"last/model.safetensors", "last/optimizer.safetensors", "best/model.safetensors"}) {
      EXPECT_TRUE(slurp(path(a) + "/" + file) == slurp(path(b) + "/" + file)) << file << ": " << a << " vs " << b;
    }
    const std::vector<json> ma = read_jsonl(path(a + "/metrics.jsonl")), mb = read_jsonl(path(b + "/metrics.jsonl"));
    ASSERT_EQ(ma.size(), mb.size()) << a << " vs " << b;
    for (std::size_t e = 0; e < ma.size(); ++e) {
      for (const char* key : {"epoch", "lr", "train_loss", "val_loss"}) {
        EXPECT_EQ(ma[e][key], mb[e][key]) << a << " vs " << b << ": epoch " << e << " " << key;
      }
    }
    EXPECT_EQ(json::parse(slurp(path(a + "/results.json")))["best_epoch"],
              json::parse(slurp(path(b + "/results.json")))["best_epoch"]);
  };
  expect_same_run("plain", "full");  // writing checkpoints changes nothing

  for (const char* step : {"3", "6", "9", "15"}) {
    const std::string out = std::string("crash") + step;
    std::vector<std::string> args = train_args(path(out), knobs);
    args.insert(args.end(), {"--save-steps", "3"});
    const RunResult crashed = run(args, {std::string("BERTRAIN_TEST_CRASH_AFTER_STEP=") + step});
    EXPECT_EQ(crashed.exit_code, 137) << crashed.describe();
    const json state = json::parse(slurp(path(out + "/last/trainer_state.json")));
    EXPECT_EQ(state["optimizer_steps"], std::stoi(step));
    EXPECT_TRUE(state.contains("steps_in_epoch")) << state.dump();
    args.push_back("--resume");
    ASSERT_TRUE(succeeded(run(args)));
    expect_same_run("full", out);
  }
  expect_error(run(train_args(path("bad"), {"--keep", "2"})), "--save-steps");
}

// SIGTERM / SIGINT / SIGUSR1: the run finishes its step, writes a checkpoint and exits 75 ("resume me"); resumed, it
// ends where the uninterrupted run does, bit for bit. Two signals at once end it at once, and leave no
// half-written checkpoint for the next start.
TEST_F(CliTest, SignalsStopWithACheckpointThatResumesBitForBit) {
  // Enough epochs (4 steps each) that the signals land inside training on any machine.
  const std::vector<std::string> knobs{"--dropout", "0.3", "--shuffle", "--lr", "1e-3", "--epochs", "150"};
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(succeeded(run(train_args(path("full"), knobs))));
  const double full_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  int stopped_runs = 0;
  for (const int sig : {SIGTERM, SIGINT, SIGUSR1, SIGHUP}) {
    const std::string out = "sig" + std::to_string(sig);
    std::vector<std::string> args = train_args(path(out), knobs);
    const RunResult r = testing::run_process([&] {
      std::vector<std::string> argv{binary()};
      argv.insert(argv.end(), args.begin(), args.end());
      argv.insert(argv.end(), {"--device", "cpu"});
      return argv;
    }(), {}, 120, {{0.0, sig, [&] { return fs::exists(path(out) + "/last/trainer_state.json"); }}});
    // Sent once the first epoch's checkpoint exists, whatever the machine's load: 149 epochs later the run ends.
    ASSERT_EQ(r.exit_code, 75) << r.describe();
    EXPECT_TRUE(is_one_line(r.err)) << r.describe();
    EXPECT_NE(r.err.find("continue with the same command and --resume"), std::string::npos) << r.describe();
    ++stopped_runs;
    args.push_back("--resume");
    ASSERT_TRUE(succeeded(run(args)));
    for (const char* file : {"last/model.safetensors", "last/optimizer.safetensors", "best/model.safetensors"}) {
      EXPECT_TRUE(slurp(path("full") + "/" + file) == slurp(path(out) + "/" + file)) << file << " after signal " << sig;
    }
    const std::vector<json> ma = read_jsonl(path("full/metrics.jsonl")), mb = read_jsonl(path(out + "/metrics.jsonl"));
    ASSERT_EQ(ma.size(), mb.size());
    for (std::size_t e = 0; e < ma.size(); ++e) EXPECT_EQ(ma[e]["train_loss"], mb[e]["train_loss"]) << "epoch " << e;
  }
  EXPECT_EQ(stopped_runs, 4);

  // A second signal 2 ms after the first ends the process at once (its default action; StopSignals.* checks that
  // deterministically), most likely while it writes the checkpoint; or, on a fast disk, the checkpoint is done and
  // it exits 75. Another signal: the same one again so soon would be the same request (kSameSignalWindowS). Either
  // way the next start finds a whole checkpoint, no leftovers, and ends as the full run.
  std::vector<std::string> argv{binary()};
  const std::vector<std::string> args = train_args(path("twice"), knobs);
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--device", "cpu"});
  const double t = 0.3 * full_seconds;
  const RunResult twice = testing::run_process(argv, {}, 120, {{t, SIGTERM}, {t + 0.002, SIGINT}});
  if (twice.exit_code != 0) {
    EXPECT_TRUE(twice.signal == SIGINT || twice.exit_code == 75) << twice.describe();
    std::vector<std::string> resume = args;
    resume.push_back("--resume");
    ASSERT_TRUE(succeeded(run(resume)));
    for (const auto& e : fs::directory_iterator(path("twice"))) {
      EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
    }
    EXPECT_TRUE(slurp(path("full/last/model.safetensors")) == slurp(path("twice/last/model.safetensors")));
  }
}

// `train ... | head -n 1`: the reader of its output goes away after the first line. The next line raises SIGPIPE,
// which stops the run as SIGTERM does (a checkpoint, exit 75) instead of ending it between two checkpoints; resumed,
// it trains to the end. (Enough epochs that head is gone long before the last: each takes milliseconds.)
TEST_F(CliTest, AClosedOutputStopsWithACheckpoint) {
  const auto piped = [&](const std::string& out) {
    return shell_command(without_quiet(train_args(path(out), {"--epochs", "300", "--device", "cpu"})));
  };
  const RunResult r = run_into_head(piped("piped"), "train");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(lines_of(r.out).size(), 1u) << r.describe();
  EXPECT_NE(r.err.find("bertrain: stopped by SIGPIPE (what read its output went away) "), std::string::npos)
      << r.describe();
  EXPECT_NE(r.err.find("train exited 75"), std::string::npos) << r.describe();
  EXPECT_EQ(r.err.find("error"), std::string::npos) << r.describe();  // no "writing to stdout" after the stop
  ASSERT_TRUE(fs::exists(path("piped/last/trainer_state.json")));
  ASSERT_TRUE(succeeded(run(train_args(path("piped"), {"--epochs", "300", "--device", "cpu", "--resume"}))));
  EXPECT_EQ(read_jsonl(path("piped/metrics.jsonl")).size(), 300u);
  // stderr closed too (`2>&1 | head -n 1`): where it stopped goes nowhere, and must not end it by SIGPIPE either.
  const RunResult both = run_into_head(piped("both") + " 2>&1", "train");
  EXPECT_NE(both.err.find("train exited 75"), std::string::npos) << both.describe();
  EXPECT_TRUE(fs::exists(path("both/last/trainer_state.json")));
}

// A checkpoint that cannot be written (here a file-size limit, as a full disk would do) stops training with a
// one-line error naming the file; the previous checkpoint stays as it was and resumes.
TEST_F(CliTest, AFullDiskLeavesThePreviousCheckpointIntact) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "1"}))));
  const auto before = snapshot(path("run"));
  const std::size_t model_bytes = before.at("last/model.safetensors").size();
  ASSERT_GT(model_bytes, 8192u);
  std::vector<std::string> resume = train_args(path("run"), {"--epochs", "3", "--resume", "--device", "cpu"});
  const RunResult full = testing::run_process(
      {"/bin/sh", "-c", "ulimit -f " + std::to_string(model_bytes / 1024 / 2) + " && exec " + shell_command(resume)});
  expect_error(full, "model.safetensors", 1);
  EXPECT_NE(full.err.find("File too large"), std::string::npos) << full.describe();
  EXPECT_EQ(snapshot(path("run")), before);  // last/, best/, metrics: as they were, no temporary directory
  ASSERT_TRUE(succeeded(run(resume)));
  EXPECT_EQ(read_jsonl(path("run/metrics.jsonl")).size(), 3u);
}

// bertrain launch: a run that dies (here right after its step-6 checkpoint) is run again with --resume and ends
// as the uninterrupted run; results.json and the log say why and how often. A command that keeps failing is
// given up after --max-restarts; usage and input errors (exit 2) and a divergence (exit 3) are not retried.
TEST_F(CliTest, LaunchRestartsAFailedRunWithResume) {
  const std::vector<std::string> knobs{"--dropout", "0.3", "--shuffle", "--lr", "5e-3", "--epochs", "3",
                                       "--save-steps", "3", "--device", "cpu"};
  ASSERT_TRUE(succeeded(run(train_args(path("full"), knobs))));
  std::vector<std::string> launch{"launch", "--max-restarts", "2", "--restart-delay", "0", "--", binary()};
  const std::vector<std::string> train = train_args(path("launched"), knobs);
  launch.insert(launch.end(), train.begin(), train.end());
  const RunResult r = run(launch, {"BERTRAIN_TEST_CRASH_AFTER_STEP=6"});
  ASSERT_TRUE(succeeded(r));
  // The hook ends the process with _Exit(137), as a shell reports a kill -9.
  EXPECT_NE(r.err.find("bertrain launch: exit status 137; restart 1 of 2 with --resume"), std::string::npos)
      << r.describe();
  for (const char* file : {"last/model.safetensors", "last/optimizer.safetensors", "best/model.safetensors"}) {
    EXPECT_TRUE(slurp(path("full") + "/" + file) == slurp(path("launched") + "/" + file)) << file;
  }
  const json results = json::parse(slurp(path("launched/results.json")));
  ASSERT_TRUE(results.contains("restarts")) << results.dump();
  ASSERT_EQ(results["restarts"].size(), 1u);
  EXPECT_EQ(results["restarts"][0]["restart"], 1);
  EXPECT_EQ(results["restarts"][0]["after"], "exit status 137");

  // A failure while working (exit 1: here a command that says so, counting its attempts) is retried until
  // --max-restarts.
  const std::string attempts = path("attempts.txt");
  const RunResult gave_up = run({"launch", "--max-restarts", "2", "--restart-delay", "0", "--", "/bin/sh", "-c",
                                 "echo attempt >> '" + attempts + "'; exit 1", "sh", "--out", path("failing")});
  EXPECT_EQ(gave_up.exit_code, 1) << gave_up.describe();
  EXPECT_NE(gave_up.err.find("giving up after 2 restarts"), std::string::npos) << gave_up.describe();
  EXPECT_NE(gave_up.err.find("restart 2 of 2 (no checkpoint yet)"), std::string::npos) << gave_up.describe();
  EXPECT_EQ(slurp(attempts), "attempt\nattempt\nattempt\n");
  // A training that diverged (exit 3) is not: resumed from its checkpoint it would repeat the same steps to the
  // same end.
  std::vector<std::string> diverging{"launch", "--max-restarts", "2", "--restart-delay", "0", "--", binary()};
  const std::vector<std::string> train_diverging = train_args(path("diverging"), {"--lr", "1e30"});
  diverging.insert(diverging.end(), train_diverging.begin(), train_diverging.end());
  const RunResult diverged = run(diverging);
  EXPECT_EQ(diverged.exit_code, bertrain::kExitDiverged) << diverged.describe();
  EXPECT_NE(diverged.err.find("(the training diverged: resumed, it would diverge again): not restarting"),
            std::string::npos) << diverged.describe();
  EXPECT_EQ(diverged.err.find("restart 1"), std::string::npos) << diverged.describe();
  // Usage and input errors (exit 2), and a command that cannot run, are not retried.
  const std::vector<std::vector<std::string>> never_retried{
      {binary(), "train", "--out", path("u"), "--bogus"},
      train_args(path("missing-data"), {"--train-data", path("missing.csv")}),
      train_args(path("zero-batch"), {"--batch-size", "0"})};
  for (std::vector<std::string> command : never_retried) {
    if (command[0] == "train") command.insert(command.begin(), binary());
    std::vector<std::string> args{"launch", "--max-restarts", "2", "--restart-delay", "0", "--"};
    args.insert(args.end(), command.begin(), command.end());
    const RunResult r = run(args);
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_NE(r.err.find("(a usage or input error): not restarting"), std::string::npos) << r.describe();
    EXPECT_EQ(r.err.find("restart 1"), std::string::npos) << r.describe();
  }
  // A command that cannot be started is named in one line, exit 2 (it was the child's 127 and a second line).
  expect_error(run({"launch", "--restart-delay", "0", "--", path("no-such-program"), "--out", path("n")}),
               "launch: cannot run '" + path("no-such-program") + "': No such file or directory", 2);
  expect_error(run({"launch", "--", binary(), "train"}), "--out", 2);

  // A signal to the launcher is passed on (the run checkpoints and exits 75) and ends it without a restart.
  std::vector<std::string> stopped{"launch", "--restart-delay", "0", "--", binary()};
  const std::vector<std::string> long_run = train_args(path("stopped"), {"--epochs", "300", "--device", "cpu"});
  stopped.insert(stopped.end(), long_run.begin(), long_run.end());
  std::vector<std::string> argv{binary()};
  argv.insert(argv.end(), stopped.begin(), stopped.end());
  const RunResult signalled = testing::run_process(argv, {}, 120, {{1.0, SIGTERM}});
  EXPECT_EQ(signalled.exit_code, 75) << signalled.describe();
  EXPECT_NE(signalled.err.find("not restarting"), std::string::npos) << signalled.describe();
}

// --mlflow-dir: the run as an MLflow 2.x file-store run (the layout MlflowClient reads: checked with the real
// mlflow package by tests/reference/check_mlflow_run.py): params, per-epoch metrics, tags, status, artifacts; a
// killed and resumed training continues its own run; a second training adds a second run to the experiment.
TEST_F(CliTest, MlflowRunIsWrittenAndContinuedOnResume) {
  const std::vector<std::string> mlflow{"--mlflow-dir", path("mlruns"), "--experiment", "tags", "--lr", "1e-3",
                                        "--save-steps", "3", "--epochs", "3", "--log-steps", "2"};
  std::vector<std::string> args = train_args(path("run"), mlflow);
  const RunResult crashed = run(args, {"BERTRAIN_TEST_CRASH_AFTER_STEP=6"});
  ASSERT_EQ(crashed.exit_code, 137) << crashed.describe();
  const std::string run_id = json::parse(slurp(path("run/last/trainer_state.json")))["mlflow_run_id"];
  ASSERT_EQ(run_id.size(), 32u);
  std::string experiment_dir;
  for (const auto& e : fs::directory_iterator(path("mlruns"))) {
    if (fs::exists(e.path() / run_id)) experiment_dir = e.path().string();
  }
  ASSERT_FALSE(experiment_dir.empty());
  const std::string run_dir = experiment_dir + "/" + run_id;
  EXPECT_NE(slurp(run_dir + "/meta.yaml").find("\nstatus: 1\n"), std::string::npos);  // RUNNING: it was killed
  EXPECT_NE(slurp(experiment_dir + "/meta.yaml").find("name: 'tags'"), std::string::npos);
  args.push_back("--resume");
  ASSERT_TRUE(succeeded(run(args)));
  EXPECT_EQ(json::parse(slurp(path("run/last/trainer_state.json")))["mlflow_run_id"], run_id);  // the same run
  const std::string meta = slurp(run_dir + "/meta.yaml");
  EXPECT_NE(meta.find("\nstatus: 3\n"), std::string::npos) << meta;  // FINISHED
  EXPECT_EQ(meta.find("end_time: null"), std::string::npos) << meta;
  EXPECT_EQ(slurp(run_dir + "/params/lr"), "0.001");
  EXPECT_EQ(slurp(run_dir + "/params/text_columns"), "[\"title\",\"description\"]");
  EXPECT_EQ(slurp(run_dir + "/tags/mlflow.runName"), "run");
  const std::vector<json> metrics = read_jsonl(path("run/metrics.jsonl"));
  const std::vector<std::string> lines = lines_of(slurp(run_dir + "/metrics/val_loss"));
  ASSERT_EQ(lines.size(), metrics.size());  // one line per epoch, the killed attempt's first epoch included once
  for (std::size_t e = 0; e < lines.size(); ++e) {
    std::istringstream line(lines[e]);
    long long timestamp = 0;
    double value = 0;
    long step = -1;
    line >> timestamp >> value >> step;
    EXPECT_GT(timestamp, 1700000000000LL);
    EXPECT_EQ(step, static_cast<long>(e));
    EXPECT_EQ(value, metrics[e]["val_loss"].get<double>());
  }
  // --log-steps 2 over 3 epochs of 4 batches: steps 2, 4, …, 12, each once although the run was killed at step 6;
  // the gradient norms with them, positive and finite.
  for (const char* metric : {"step_train_loss", "step_grad_norm"}) {
    std::vector<long> steps;
    for (const std::string& line : lines_of(slurp(run_dir + "/metrics/" + metric))) {
      std::istringstream fields(line);
      long long timestamp = 0;
      double value = 0;
      long step = 0;
      fields >> timestamp >> value >> step;
      steps.push_back(step);
      EXPECT_TRUE(std::isfinite(value) && value > 0) << metric << " " << line;
    }
    EXPECT_EQ(steps, (std::vector<long>{2, 4, 6, 8, 10, 12})) << metric;
  }
  EXPECT_TRUE(fs::exists(run_dir + "/artifacts/model/model.safetensors"));
  EXPECT_EQ(slurp(run_dir + "/artifacts/results.json"), slurp(path("run/results.json")));
  // evaluate --mlflow-dir logs into the training's run.
  const RunResult evaluated = run({"evaluate", "--model", path("run"), "--data", data(), "--device", "cpu",
                                   "--mlflow-dir", path("mlruns"), "--experiment", "tags"});
  ASSERT_TRUE(succeeded(evaluated));
  const std::string eval_f1 = slurp(run_dir + "/metrics/eval_f1");
  EXPECT_NE(eval_f1.find(" 0\n"), std::string::npos) << eval_f1;  // step 0
  EXPECT_EQ(slurp(run_dir + "/artifacts/evaluation.json"), evaluated.out);
  EXPECT_NE(slurp(run_dir + "/meta.yaml").find("\nstatus: 3\n"), std::string::npos);
  expect_error(run({"evaluate", "--model", path("run2-missing"), "--data", data(), "--mlflow-dir", path("mlruns")}),
               "run2-missing");
  expect_error(run(train_args(path("run3"), {"--log-steps", "2"})), "--mlflow-dir");
  // Another training, the same experiment: a second run, named after --out's folder despite a trailing '/'.
  ASSERT_TRUE(succeeded(run(train_args(path("run2") + "/", {"--mlflow-dir", path("mlruns"), "--experiment", "tags",
                                                            "--epochs", "1"}))));
  int runs = 0;
  for (const auto& e : fs::directory_iterator(experiment_dir)) {
    if (!fs::exists(e.path() / "meta.yaml")) continue;
    ++runs;
    if (e.path().filename() != run_id) {
      EXPECT_EQ(slurp(e.path() / "tags/mlflow.runName"), "run2");
    }
  }
  EXPECT_EQ(runs, 2);
}

// ---- report ---------------------------------------------------------------------------------------------

// The values of the points of one series in a chart, in order (the report writes them exactly in data-y).
std::vector<double> chart_series(const testing::XmlElement& svg, const std::string& series) {
  std::vector<double> values;
  for (const testing::XmlElement* p : svg.find_all("circle")) {
    const std::string* cls = p->attribute("class");
    if (cls && *cls == "point" && *p->attribute("data-series") == series) values.push_back(std::stod(*p->attribute("data-y")));
  }
  return values;
}

TEST_F(CliTest, ReportOfATrainedAndEvaluatedRun) {
  ASSERT_TRUE(succeeded(suite_train()));
  fs::copy(suite_run(), path("run"), fs::copy_options::recursive);
  ASSERT_TRUE(succeeded(run({"evaluate", "--model", path("run"), "--data", data(), "--out", path("run/evaluation.json")})));
  const RunResult r = run({"report", path("run")});
  ASSERT_TRUE(succeeded(r));
  EXPECT_EQ(lines_of(r.out).back(), "report: 1 run -> " + path("run") + "/report.html");
  EXPECT_EQ(r.out.rfind(path("run") + ": finished 3 epochs in ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("\n  evaluated on "), std::string::npos) << r.out;
  const std::string html = slurp(path("run/report.html"));
  const testing::XmlElement page = testing::parse_xml(html);  // throws (fails the test) unless well-formed
  const auto charts = page.find_all("svg");
  // loss, validation accuracy and F1, throughput, gradient norm, per-class bars, confusion matrix; 3 epochs at
  // --lr-patience 3 keep the rate, said in a line
  ASSERT_EQ(charts.size(), 6u);
  EXPECT_EQ(testing::attr(*charts[3], "aria-label"), "Gradient norm per epoch");
  EXPECT_NE(html.find("Learning rate: 0.001 throughout"), std::string::npos);
  std::vector<double> train_loss, val_loss;
  for (const json& m : read_jsonl(path("run/metrics.jsonl"))) {
    train_loss.push_back(m["train_loss"].get<double>());
    val_loss.push_back(m["val_loss"].get<double>());
  }
  EXPECT_EQ(chart_series(*charts[0], "train_loss"), train_loss);
  EXPECT_EQ(chart_series(*charts[0], "val_loss"), val_loss);
  const json eval = json::parse(slurp(path("run/evaluation.json")));
  long cells = 0;
  for (const testing::XmlElement* c : charts[5]->find_all("rect")) {
    const std::string* row = c->attribute("data-row");
    if (row == nullptr) continue;
    const auto labels = eval["confusion_matrix"]["labels"].get<std::vector<std::string>>();
    const auto i = std::find(labels.begin(), labels.end(), *row) - labels.begin();
    const auto j = std::find(labels.begin(), labels.end(), *c->attribute("data-column")) - labels.begin();
    EXPECT_EQ(std::stol(*c->attribute("data-count")), eval["confusion_matrix"]["matrix"][i][j].get<long>());
    ++cells;
  }
  EXPECT_EQ(cells, static_cast<long>(kTags.size() * kTags.size()));

  // Two runs overlaid, into --out.
  ASSERT_TRUE(succeeded(run(train_args(path("run2"), {"--lr", "3e-4"}))));
  const RunResult both = run({"report", path("run"), path("run2"), "--out", path("both.html")});
  ASSERT_TRUE(succeeded(both));
  const testing::XmlElement both_page = testing::parse_xml(slurp(path("both.html")));
  const auto overlaid = both_page.find_all("svg");
  ASSERT_EQ(overlaid.size(), 6u);  // the charts above, the validation metrics of both runs overlaid too
  EXPECT_EQ(chart_series(*overlaid[0], "run val_loss"), val_loss);
  EXPECT_EQ(chart_series(*overlaid[0], "run2 val_loss").size(), 2u);

  // Errors: a one-line message, exit 2 (usage and input, an --out that cannot be written too), no report written.
  expect_error(run({"report"}), "RUN_DIR is required", 2);
  expect_error(run({"report", path("nothing-here")}), "nothing-here' not found");
  expect_error(run({"report", path("run"), "--out", path("no-such-dir/report.html")}),
               "folder '" + path("no-such-dir") + "' does not exist");
  EXPECT_FALSE(fs::exists(path("nothing-here")));
  EXPECT_FALSE(fs::exists(path("no-such-dir")));
}

TEST_F(CliTest, TrainingDoesNotDependOnTheHeapLayout) {
  const std::vector<std::string> knobs{"--dropout", "0.5", "--shuffle", "--lr", "5e-3"};
  ASSERT_TRUE(succeeded(run(train_args(path("r"), knobs))));
  struct Variant {
    std::string out;
    std::vector<std::string> env;
  };
  std::vector<Variant> variants;
  for (int extra = 16; extra <= 64; extra += 16) variants.push_back({path("r" + std::string(extra, 'x')), {}});
  variants.push_back({path("mmap"), {"GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4096"}});
  // Every buffer on the heap (a 32 MiB mmap threshold), at whatever 16-byte alignment the heap gives: the model's
  // arena aligns its slices itself (before it did, this variant changed the weights in the last bits).
  variants.push_back({path("heap"), {"MALLOC_MMAP_THRESHOLD_=33554432"}});
  variants.push_back({path("perturb"), {"MALLOC_PERTURB_=165"}});
  for (const Variant& v : variants) {
    ASSERT_TRUE(succeeded(run(train_args(v.out, knobs), v.env)));
    for (const char* file : {"last/model.safetensors", "last/optimizer.safetensors", "best/model.safetensors"}) {
      const std::string a = slurp(path("r") + "/" + file), b = slurp(v.out + "/" + file);
      EXPECT_FALSE(a.empty()) << file;
      EXPECT_TRUE(a == b) << file << " changes with the heap layout: --out " << v.out
                          << (v.env.empty() ? "" : " with " + v.env[0]);
    }
  }
}

TEST_F(CliTest, NumSamplesLimitsTheRows) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--num-samples", "20", "--epochs", "1"}))));
  const json results = json::parse(slurp(path("run/results.json")));
  EXPECT_EQ(results["num_train"].get<int>() + results["num_val"].get<int>(), 20);
  EXPECT_EQ(results["params"]["num_samples"].get<int>(), 20);
}

TEST_F(CliTest, OutOfRangeValuesAreRejectedBeforeAnythingIsWritten) {
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"--epochs", "0"}, {"--batch-size", "-1"}, {"--val-fraction", "1.5"}, {"--dropout", "1"},
           {"--lr", "-0.1"}, {"--lr-factor", "2"}}) {
    const RunResult r = run(train_args(path("run"), bad));
    // An error (1) or a usage error (2); either way one line naming the flag, and no run directory.
    EXPECT_TRUE(r.exit_code == 1 || r.exit_code == 2) << bad[0] << "\n" << r.describe();
    EXPECT_TRUE(is_one_line(r.err)) << r.describe();
    EXPECT_NE(r.err.find(bad[0]), std::string::npos) << r.describe();
    EXPECT_FALSE(fs::exists(path("run"))) << bad[0];
  }
}

TEST_F(CliTest, ValidationTagUnknownToTheTrainingData) {
  std::vector<Row> rows = synthetic_rows();
  rows[3].tag = "robotics";
  spit(path("val.csv"), to_csv(rows));
  const RunResult r = run(train_args(path("run"), {"--val-data", path("val.csv")}));
  expect_error(r, "robotics");
  EXPECT_NE(r.err.find(path("val.csv")), std::string::npos) << r.describe();
  expect_no_run(path("run"));
}

// --overwrite removes the earlier run only once the new one can start: an --mlflow-dir that cannot be written, or a
// --model inside the run it would remove (whose tokenizer files the new checkpoints copy), is an input error that
// leaves the run as it was.
TEST_F(CliTest, OverwriteKeepsTheRunWhenTheNewOneCannotStart) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "1"}))));
  const auto before = snapshot(path("run"));
  spit(path("mlfile"), "x");
  expect_error(run(train_args(path("run"), {"--epochs", "1", "--overwrite", "--mlflow-dir", path("mlfile")})),
               "--mlflow-dir '" + path("mlfile") + "'");
  EXPECT_EQ(snapshot(path("run")), before);
  std::vector<std::string> from_itself = train_args(path("run"), {"--epochs", "1", "--overwrite"});
  std::replace(from_itself.begin(), from_itself.end(), model(), path("run/best"));
  expect_error(run(from_itself), "which --overwrite removes");
  EXPECT_EQ(snapshot(path("run")), before);
}

TEST_F(CliTest, OutIsAFile) {
  spit(path("taken"), "not a directory");
  const RunResult r = run(train_args(path("taken")));
  expect_error(r, path("taken"));
  EXPECT_EQ(slurp(path("taken")), "not a directory");
}

TEST_F(CliTest, ResumeWithoutARunFails) {
  const RunResult r = run(train_args(path("run"), {"--resume"}));
  expect_error(r, "--resume");
  expect_no_run(path("run"));
}

// A checkpoint damaged on disk or by hand is refused by name (exit 2), nothing trained: a trainer_state.json field of
// the wrong type (a library's type error before), one that puts the run at another step than its optimizer state
// (it skipped or repeated steps, exit 0), a vocabulary that is not the one the checkpoint was written with (a valid
// vocabulary that tokenizes differently: it trained on).
TEST_F(CliTest, ADamagedCheckpointIsRefusedByName) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "1"}))));
  const std::string state_path = path("run/last/trainer_state.json"), vocab_path = path("run/last/vocab.txt");
  const std::string state_text = slurp(state_path), vocab = slurp(vocab_path);
  const auto before = snapshot(path("run"));
  const std::vector<std::string> resume = train_args(path("run"), {"--epochs", "2", "--resume"});
  const json state = json::parse(state_text);
  const std::pair<json, std::string> damages[] = {
      {json{{"optimizer_steps", "x"}}, state_path + ": field 'optimizer_steps' must be an integer, found \"x\""},
      {json{{"scheduler", 5}}, state_path + ": field 'scheduler' must be an object, found 5"},
      {json{{"epochs_done", -1}}, state_path + ": field 'epochs_done' must be >= 0, found -1"},
      {json{{"epochs_done", 7}}, state_path + ": epochs_done and steps_in_epoch place the checkpoint after step "},
      {json{{"steps_in_epoch", 3}}, "the checkpoint is damaged"}};
  for (const auto& [damage, why] : damages) {
    SCOPED_TRACE(damage.dump());
    json damaged = state;
    damaged.update(damage);
    spit(state_path, damaged.dump());
    expect_error(run(resume), why);
  }
  json damaged = state;  // a setting a resume of the finished run compares (a bare library type error before)
  damaged["params"]["max_steps"] = "2";
  spit(state_path, damaged.dump());
  expect_error(run(resume), state_path + ": field 'params.max_steps' must be an integer, found \"2\"");
  spit(state_path, state_text);
  spit(vocab_path, vocab.substr(0, vocab.size() / 2));
  expect_error(run(resume), vocab_path + " is not the file the checkpoint was written with (its content differs)");
  spit(vocab_path, vocab);
  EXPECT_EQ(snapshot(path("run")), before) << "a refused resume changed the run";
  ASSERT_TRUE(succeeded(run(resume)));  // the repaired checkpoint resumes
}

TEST_F(CliTest, TrainingIntoAnExistingRunFailsAndLeavesItUntouched) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "1"}))));
  const auto before = snapshot(path("run"));
  ASSERT_FALSE(before.empty());
  const RunResult again = run(train_args(path("run")));
  expect_error(again, path("run"));
  EXPECT_NE(again.err.find("--resume"), std::string::npos) << again.describe();
  EXPECT_EQ(snapshot(path("run")), before) << "the existing run was modified";
}

// A --resume with other data is refused in one line: the other data's warnings (here a label of one row) are not
// printed before it.
TEST_F(CliTest, AResumeWithOtherDataIsOneErrorLine) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "1"}))));
  std::vector<Row> rows;  // the same labels, one of them down to a single row
  bool kept = false;
  for (const Row& row : synthetic_rows()) {
    if (row.tag != "other" || !kept) rows.push_back(row);
    kept = kept || row.tag == "other";
  }
  spit(path("other.csv"), to_csv(rows));
  expect_error(run(train_args(path("run"), {"--epochs", "2", "--resume", "--train-data", path("other.csv")})),
               "--train-data");
}

// A Slurm requeue or a retried job step resumes a run that may have finished: that is done, exit 0, nothing touched.
TEST_F(CliTest, ResumeOfAFinishedRunExitsZeroAndChangesNothing) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "1"}))));
  const auto before = snapshot(path("run"));
  const RunResult again = run(without_quiet(train_args(path("run"), {"--epochs", "1", "--resume"})));
  ASSERT_TRUE(succeeded(again));
  EXPECT_NE(again.out.find(path("run") + " already finished 1 epoch; nothing to do (best/: epoch 1, val_loss "),
            std::string::npos)
      << again.describe();
  EXPECT_EQ(again.out.find("training "), std::string::npos) << "it loaded the data and model again\n" << again.out;
  EXPECT_EQ(snapshot(path("run")), before);
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "1", "--resume", "--quiet"}))));
  EXPECT_EQ(snapshot(path("run")), before);
  // Stopped after its last checkpoint but before its run files: --resume writes them, and trains nothing.
  const std::string results = slurp(path("run/results.json")), metrics = slurp(path("run/metrics.jsonl"));
  fs::remove(path("run/results.json"));
  fs::remove(path("run/metrics.jsonl"));
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "1", "--resume"}))));
  EXPECT_EQ(slurp(path("run/metrics.jsonl")), metrics);
  const json a = json::parse(results), b = json::parse(slurp(path("run/results.json")));
  EXPECT_EQ(a["metrics"], b["metrics"]);
  EXPECT_EQ(a["best_epoch"], b["best_epoch"]);
  EXPECT_EQ(slurp(path("run/last/model.safetensors")), before.at("last/model.safetensors"));
}

TEST_F(CliTest, BadMultiGpuOptionsAreRejectedBeforeAnythingIsWritten) {
  expect_error(run(train_args(path("run"), {"--grad-reduce", "fp16"})), "--grad-reduce");
  expect_no_run(path("run"));
  expect_error(run(train_args(path("run"), {"--collective-timeout", "0"})), "--collective-timeout");
  expect_no_run(path("run"));
  expect_error(run(train_args(path("run"), {"--gpu-collectives", "gloo"})), "--gpu-collectives must be auto, nccl or mpi");
  expect_no_run(path("run"));
}

TEST_F(CliTest, CudaAndBf16AreRejectedWithoutADevice) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is visible: --device cuda and bf16 are valid here";
  const RunResult cuda = run(train_args(path("run"), {"--device", "cuda"}));
  expect_error(cuda, "cuda");
  // Said as the machine is: no GPU, not a driver to update ("CUDA driver version is insufficient").
#if BERTRAIN_HAS_CUDA
  EXPECT_NE(cuda.err.find("no NVIDIA driver or GPU found"), std::string::npos) << cuda.describe();
  EXPECT_NE(run({"--version"}).out.find("CUDA devices: 0 (no NVIDIA driver or GPU found)"), std::string::npos);
#endif
  expect_no_run(path("run"));
  const RunResult bf16 = run(train_args(path("run"), {"--precision", "bf16"}));
  expect_error(bf16, "bf16");
  expect_no_run(path("run"));
  // The benchmarks say so as train does (exit 2: no retry changes the machine).
  expect_error(run({"bench", "allreduce", "--device", "cuda", "--max-bytes", "4096"}),
               "bench allreduce --device cuda: ");
  expect_error(run({"bench", "step", "--device", "cuda", "--steps", "1"}), "cuda");
  const RunResult tpu = run(train_args(path("run"), {"--device", "tpu"}));
  EXPECT_NE(tpu.exit_code, 0) << tpu.describe();
  EXPECT_EQ(tpu.signal, 0);
  EXPECT_NE(tpu.err.find("tpu"), std::string::npos) << tpu.describe();
}

// ---- bad files: exit 1, one line naming the file, nothing written ------------------------------------------

TEST_F(CliTest, ModelDirWithoutConfig) {
  fs::remove(path("model/config.json"));
  const RunResult r = run(train_args(path("run")));
  expect_error(r, "config.json");
  expect_no_run(path("run"));
  expect_error(run({"predict", "--model", model(), "--title", "image"}), model());
}

TEST_F(CliTest, TruncatedSafetensors) {
  const std::string weights = slurp(path("model/model.safetensors"));
  spit(path("model/model.safetensors"), weights.substr(0, weights.size() / 2));
  const RunResult r = run(train_args(path("run")));
  expect_error(r, "model.safetensors");
  expect_no_run(path("run"));
  expect_error(run({"predict", "--model", model(), "--title", "image"}), "model.safetensors");
}

TEST_F(CliTest, ConfigWithInvalidJson) {
  spit(path("model/config.json"), "{\"hidden_size\": 32, \"num_hidden_layers\": ");
  const RunResult r = run(train_args(path("run")));
  expect_error(r, "config.json");
  expect_no_run(path("run"));
}

// config.json sizes the weights do not have are named by the first tensor that disagrees, before anything of those
// sizes is allocated (they were std::bad_alloc, exit 1, or at 2^30 layers the OOM killer); a layer count beyond
// any BERT's is refused by its field, since the parameter layout lists every layer before the shapes are compared.
TEST_F(CliTest, ConfigSizesTheWeightsDoNotHaveAreNamedBeforeAllocating) {
  const json config = json::parse(slurp(path("model/config.json")));
  const std::pair<const char*, long> sizes[] = {
      {"vocab_size", 1L << 30}, {"max_position_embeddings", 1000000000L}, {"intermediate_size", 1L << 30},
      {"hidden_size", 1L << 30}, {"type_vocab_size", 1L << 30}};
  for (const auto& [field, value] : sizes) {
    SCOPED_TRACE(field);
    json changed = config;
    changed[field] = value;
    spit(path("model/config.json"), changed.dump());
    const RunResult r = run({"predict", "--model", model(), "--text", "image"}, {}, 60);
    expect_error(r, path("model/model.safetensors") + ": tensor '");
    EXPECT_NE(r.err.find("but config.json implies"), std::string::npos) << r.describe();
  }
  json deep = config;
  deep["num_hidden_layers"] = 1 << 30;
  spit(path("model/config.json"), deep.dump());
  expect_error(run(train_args(path("run")), {}, 60),
               "num_hidden_layers 1073741824 is more than bertrain supports (1024)");
  expect_no_run(path("run"));
}

// A model whose config.json does not record how its training text was prepared (one bertrain did not train) is
// given cleaned text, with a note saying so; --no-clean gives it the text as it is (which it had no way to before).
TEST_F(CliTest, NoCleanGivesAModelTheTextAsItIs) {
  const std::string raw = "The IMAGE segmentation, of the camera!";
  const RunResult cleaned = run({"predict", "--model", model(), "--text", raw});
  ASSERT_TRUE(succeeded(cleaned)) << cleaned.describe();
  EXPECT_NE(cleaned.err.find("predict: note: " + model() + "/config.json does not record how the model's training "
                             "text was prepared (bertrain_clean_text, written by bertrain train): texts are cleaned "
                             "as Made-With-ML's clean_text, as bertrain trains; --no-clean gives the model the text "
                             "as it is\n"),
            std::string::npos)
      << cleaned.describe();
  // Made-With-ML's clean_text of the raw text, given as it is, is what the model saw.
  const RunResult as_cleaned = run({"predict", "--model", model(), "--text", "image segmentation camera", "--no-clean"});
  ASSERT_TRUE(succeeded(as_cleaned)) << as_cleaned.describe();
  EXPECT_EQ(as_cleaned.out, cleaned.out);
  EXPECT_EQ(as_cleaned.err.find("note:"), std::string::npos) << as_cleaned.describe();
  const RunResult as_is = run({"predict", "--model", model(), "--text", raw, "--no-clean"});
  ASSERT_TRUE(succeeded(as_is)) << as_is.describe();
  EXPECT_NE(as_is.out, cleaned.out);
  // A model bertrain trained records its cleaning: no note (evaluate reads its file with the same flags).
  const RunResult evaluated = run({"evaluate", "--model", suite_run(), "--data", data()});
  ASSERT_TRUE(succeeded(evaluated)) << evaluated.describe();
  EXPECT_EQ(evaluated.err.find("note:"), std::string::npos) << evaluated.describe();
  EXPECT_TRUE(succeeded(run({"evaluate", "--model", suite_run(), "--data", data(), "--no-clean"})));
}

// A NaN or infinite weight is the weights file's fault, named with its tensor (exit 2): predict answered null
// probabilities (exit 0), and train stopped on a diverging loss (exit 3).
TEST_F(CliTest, NonFiniteWeightsAreNamedWithTheirTensor) {
  std::string weights = slurp(path("model/model.safetensors"));
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, weights.data(), sizeof header_bytes);
  const json header = json::parse(weights.substr(8, header_bytes));
  const std::string tensor = "bert.embeddings.position_embeddings.weight";
  ASSERT_EQ(header.at(tensor).at("dtype"), "F32");
  const std::size_t at = 8 + header_bytes + header.at(tensor).at("data_offsets")[0].get<std::size_t>() + 5 * 4;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(&weights[at], &nan, sizeof nan);
  spit(path("model/model.safetensors"), weights);
  const std::string why = path("model/model.safetensors") + ": tensor '" + tensor + "' holds nan at element 5 " +
                          "(weights must be finite)";
  expect_error(run({"predict", "--model", model(), "--text", "image"}), why);
  expect_error(run(train_args(path("run"))), why);
  expect_no_run(path("run"));
}

// Finite weights that overflow float32 on the way (scores of nan): predict and evaluate refuse to answer with them (exit 2, naming the row), where they printed null probabilities
// and metrics of nan logits, exit 0.
TEST_F(CliTest, ScoresThatAreNotFiniteAreRefusedNamingTheRow) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "1"}))));
  make_scores_overflow(path("run/best/model.safetensors"));
  expect_error(run({"predict", "--model", path("run"), "--text", "image segmentation"}),
               "gives scores that are not finite for the text: its weights overflow float32 on the way");
  expect_error(run({"predict", "--model", path("run"), "--data", data(), "--out", path("p.jsonl")}),
               "gives scores that are not finite for the row with id ");
  EXPECT_FALSE(fs::exists(path("p.jsonl")));
  expect_error(run({"evaluate", "--model", path("run"), "--data", data()}), "gives scores that are not finite for row 1 of");
}

// A learning rate that blows the weights up: the first non-finite loss or gradient stops the run with a
// one-line error naming the epoch and step, and nothing of that epoch is saved.
TEST_F(CliTest, NonFiniteLossStopsTrainingNamingTheStep) {
  const RunResult r = run(train_args(path("run"), {"--lr", "1e30"}));
  expect_error(r, "training stopped", bertrain::kExitDiverged);
  EXPECT_NE(r.err.find("epoch 1, step "), std::string::npos) << r.describe();
  // The advice fits the run: fp32 here, so no "--precision fp32"; no weight decay to lower.
  EXPECT_NE(r.err.find("try a lower --lr in a new run: another --out, or --overwrite)"), std::string::npos)
      << r.describe();
  const RunResult decayed = run(train_args(path("decayed"), {"--lr", "1e30", "--weight-decay", "0.01"}));
  EXPECT_EQ(decayed.exit_code, bertrain::kExitDiverged) << decayed.describe();
  EXPECT_NE(decayed.err.find("try a lower --lr or --weight-decay in a new run"), std::string::npos)
      << decayed.describe();
  EXPECT_FALSE(fs::exists(path("run/last"))) << "a checkpoint of the diverged epoch was written";
  EXPECT_FALSE(fs::exists(path("run/best")));
}

// The last update can overflow the weights with no training loss left to show it (a loss is computed before its
// step's update): the validation, or the weights themselves before a checkpoint, stop the run instead. Before, one
// step at --lr 1e30 ended exit 0 naming a best/ that was never written (val_loss nan), and at 1e39 wrote last/ with
// non-finite weights that --resume then refused. The message says what is left to resume from.
TEST_F(CliTest, AnUpdateThatOverflowsTheWeightsStopsTheRunBeforeAnyCheckpoint) {
  const RunResult one = run(train_args(path("one"), {"--max-steps", "1", "--lr", "1e30"}));
  expect_error(one, "after optimizer step 1 the validation loss is nan; training stopped (no checkpoint was written; "
                    "try a lower --lr in a new run: another --out, or --overwrite)", bertrain::kExitDiverged);
  EXPECT_FALSE(fs::exists(path("one/last")));
  EXPECT_FALSE(fs::exists(path("one/best")));
  EXPECT_FALSE(fs::exists(path("one/results.json")));
  // Step checkpoints between evaluations: the weights are checked before they are written (a rate at float32's top
  // makes some of them infinite at once).
  const RunResult overflowed = run(train_args(path("overflowed"), {"--lr", "3.4e38", "--save-steps", "1"}));
  expect_error(overflowed, "after optimizer step 1 the weights are not finite; training stopped (no checkpoint was "
                           "written; try a lower --lr in a new run", bertrain::kExitDiverged);
  EXPECT_FALSE(fs::exists(path("overflowed/last")));
  EXPECT_FALSE(fs::exists(path("overflowed/checkpoints/step-1")));
}

TEST_F(CliTest, CsvWithUnterminatedQuote) {
  spit(path("bad.csv"), "title,description,tag\nimage,\"camera video,computer-vision\nmlops,docker,mlops\n");
  const RunResult r = run({"train", "--model", model(), "--train-data", path("bad.csv"), "--out", path("run"),
                           "--epochs", "1", "--quiet"});
  expect_error(r, path("bad.csv"));
  expect_no_run(path("run"));
}

TEST_F(CliTest, CsvMissingDescriptionColumn) {
  spit(path("bad.csv"), "title,tag\nimage camera,computer-vision\ndocker,mlops\n");
  const RunResult r = run({"train", "--model", model(), "--train-data", path("bad.csv"), "--out", path("run"),
                           "--epochs", "1", "--quiet"});
  expect_error(r, path("bad.csv"));
  EXPECT_NE(r.err.find("description"), std::string::npos) << r.describe();
  expect_no_run(path("run"));
}

TEST_F(CliTest, EmptyCsv) {
  spit(path("empty.csv"), "");
  const RunResult r = run({"train", "--model", model(), "--train-data", path("empty.csv"), "--out", path("run"),
                           "--epochs", "1", "--quiet"});
  expect_error(r, path("empty.csv"));
  expect_no_run(path("run"));
  spit(path("header.csv"), "title,description,tag\n");
  expect_error(run({"train", "--model", model(), "--train-data", path("header.csv"), "--out", path("run"),
                    "--epochs", "1", "--quiet"}),
               path("header.csv"));
  expect_no_run(path("run"));
}

TEST_F(CliTest, NonexistentTrainData) {
  const RunResult r = run({"train", "--model", model(), "--train-data", path("nope.csv"), "--out", path("run"),
                           "--epochs", "1", "--quiet"});
  expect_error(r, path("nope.csv"));
  expect_no_run(path("run"));
  EXPECT_FALSE(fs::exists(path("run")));
}

TEST_F(CliTest, NonexistentValData) {
  const RunResult r = run(train_args(path("run"), {"--val-data", path("nope.csv")}));
  expect_error(r, path("nope.csv"));
  expect_no_run(path("run"));
}

// ---- evaluate -------------------------------------------------------------------------------------------

// evaluate --validation: the rows the run validated on, found again from its recorded settings: as many as
// results.json's num_val, scored as the best epoch's val_f1 (the same weighted F1 of the same model on the same
// rows); the run's --val-data when it had one; refused once --train-data changed, and without a run.
TEST_F(CliTest, EvaluateOnTheRowsTheRunValidatedOn) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "3", "--lr", "5e-3"}))));
  const json results = json::parse(slurp(path("run/results.json")));
  const RunResult r = run({"evaluate", "--model", path("run"), "--validation", "--device", "cpu", "--quiet"});
  ASSERT_TRUE(succeeded(r));
  const json out = json::parse(r.out);
  EXPECT_EQ(out["num_rows"], results["num_val"]);
  EXPECT_EQ(out["data"], data() + " (the rows " + path("run") + " held out for validation)");
  const json best = results["metrics"][results["best_epoch"].get<std::size_t>()];
  EXPECT_NEAR(out["overall"]["f1"].get<double>(), best["val_f1"].get<double>(), 1e-9) << out["overall"] << best;
  // With --val-data, that file.
  spit(path("val.csv"), slurp(data()));
  ASSERT_TRUE(succeeded(run(train_args(path("with_val"), {"--epochs", "1", "--val-data", path("val.csv")}))));
  const RunResult v = run({"evaluate", "--model", path("with_val"), "--validation", "--device", "cpu", "--quiet"});
  ASSERT_TRUE(succeeded(v));
  EXPECT_EQ(json::parse(v.out)["data"], path("val.csv"));
  EXPECT_EQ(json::parse(v.out)["num_rows"], kRows);
  // The training file changed since: its held-out rows cannot be found again.
  spit(path("changed.csv"), slurp(data()));
  ASSERT_TRUE(succeeded(run(train_args(path("changing"), {"--epochs", "1", "--train-data", path("changed.csv")}))));
  spit(path("changed.csv"), slurp(data()) + "98,An extra row,about cameras,computer-vision\n");
  expect_error(run({"evaluate", "--model", path("changing"), "--validation"}),
               path("changed.csv") + " is not the file " + path("changing") + " trained with as --train-data (its "
               "content differs): the rows it validated on cannot be found in it");
  expect_error(run({"evaluate", "--model", model(), "--validation"}), "--validation needs --model RUN_DIR of a training "
                                                                     "run: " + model() + "/last/trainer_state.json "
                                                                     "not found");
  expect_error(run({"evaluate", "--model", path("run")}), "evaluate: give --data FILE, or --validation");
  expect_error(run({"evaluate", "--model", path("run"), "--validation", "--label-column", "title"}),
               "evaluate: --label-column with --validation: the rows the run validated on are read as its training "
               "read them");
  expect_error(run({"evaluate", "--model", path("run/best"), "--validation"}),
               "--validation needs --model RUN_DIR of a training run: " + path("run/best") + " is a model of the run " +
                   path("run") + ": give that");
  // The run's file moved: --data names it where it is now (the same content).
  spit(path("moved.csv"), slurp(data()));
  const RunResult moved = run({"evaluate", "--model", path("run"), "--validation", "--data", path("moved.csv"),
                               "--device", "cpu", "--quiet"});
  ASSERT_TRUE(succeeded(moved));
  EXPECT_EQ(json::parse(moved.out)["overall"], out["overall"]);
  // A relative --train-data is found from the folder the training ran in, wherever evaluate runs.
  ASSERT_TRUE(succeeded(train_with_relative_data("there")));
  const RunResult far = run_in(dir_.string(), {"evaluate", "--model", "there/relrun", "--validation", "--device", "cpu",
                                               "--quiet"});
  ASSERT_TRUE(succeeded(far));
  EXPECT_EQ(json::parse(far.out)["data"], path("there/rel.csv") + " (the rows there/relrun held out for validation)");
  // --num-samples left out rows with a label the model never saw: the held-out rows alone are labelled.
  std::string rare = slurp(data());
  rare += "99,The rare thing,nothing like the rest,rare-label\n";
  spit(path("rare.csv"), rare);
  bool checked = false;
  for (int seed = 1; seed <= 10 && !checked; ++seed) {  // a sample that leaves the rare row out (about 3 in 4 do)
    const std::string out = path("sampled" + std::to_string(seed));
    ASSERT_TRUE(succeeded(run(train_args(out, {"--epochs", "1", "--train-data", path("rare.csv"), "--num-samples", "10",
                                               "--split-seed", std::to_string(seed)}))));
    const json sampled = json::parse(slurp(out + "/results.json"));
    if (std::find(sampled["labels"].begin(), sampled["labels"].end(), "rare-label") != sampled["labels"].end()) continue;
    const RunResult s = run({"evaluate", "--model", out, "--validation", "--device", "cpu", "--quiet"});
    ASSERT_TRUE(succeeded(s));
    EXPECT_EQ(json::parse(s.out)["num_rows"], sampled["num_val"]);
    checked = true;
  }
  EXPECT_TRUE(checked) << "every sample took the rare row: the check did not run";
}

TEST_F(CliTest, EvaluateReportsMetricsOverEveryRow) {
  ASSERT_TRUE(succeeded(suite_train()));
  const RunResult r = run({"evaluate", "--model", suite_run(), "--data", data(), "--out", path("eval.json")});
  ASSERT_TRUE(succeeded(r));
  const ordered_json out = ordered_json::parse(r.out);
  for (const char* key : {"overall", "per_class", "slices", "confusion_matrix"}) {
    ASSERT_TRUE(out.contains(key)) << key << "\n" << r.out;
  }
  for (const char* key : {"precision", "recall", "f1", "num_samples"}) {
    ASSERT_TRUE(out["overall"].contains(key)) << key;
    EXPECT_TRUE(out["overall"][key].is_number()) << key;
  }
  EXPECT_EQ(out["overall"]["num_samples"].get<double>(), kRows);
  for (const char* key : {"precision", "recall", "f1"}) {
    const double v = out["overall"][key].get<double>();
    EXPECT_TRUE(v >= 0 && v <= 1) << key << " = " << v;
  }

  // per_class: every tag, sorted by f1 descending, supports equal to the rows of each tag.
  ASSERT_EQ(out["per_class"].size(), kTags.size());
  double previous_f1 = 2;
  for (const auto& [tag, m] : out["per_class"].items()) {
    const auto t = std::find(kTags.begin(), kTags.end(), tag);
    ASSERT_NE(t, kTags.end()) << tag;
    EXPECT_EQ(m["num_samples"].get<double>(), kRowsPerTag[static_cast<std::size_t>(t - kTags.begin())]) << tag;
    EXPECT_LE(m["f1"].get<double>(), previous_f1) << "per_class not sorted by f1: " << out["per_class"].dump();
    previous_f1 = m["f1"].get<double>();
  }

  // Slices: both are populated by the synthetic data (nlp rows mention bert/transformer/llm; short rows).
  for (const char* slice : {"nlp_llm", "short_text"}) {
    ASSERT_TRUE(out["slices"].contains(slice)) << slice << "\n" << out["slices"].dump();
    EXPECT_GT(out["slices"][slice]["num_samples"].get<double>(), 0) << slice;
    EXPECT_LT(out["slices"][slice]["num_samples"].get<double>(), kRows) << slice;
    // Made-With-ML's types: a slice's len() is an int, the overall and per-class supports numpy floats.
    EXPECT_TRUE(out["slices"][slice]["num_samples"].is_number_integer()) << out["slices"].dump();
  }
  EXPECT_TRUE(out["overall"]["num_samples"].is_number_float()) << out["overall"].dump();

  // Confusion matrix: 4 × 4, sums to the row count, row sums are the per-tag counts.
  const ordered_json& cm = out["confusion_matrix"];
  ASSERT_TRUE(cm.contains("matrix")) << cm.dump();
  EXPECT_EQ(cm["labels"], ordered_json(kTags));
  ASSERT_EQ(cm["matrix"].size(), kTags.size());
  long total = 0;
  for (std::size_t i = 0; i < kTags.size(); ++i) {
    ASSERT_EQ(cm["matrix"][i].size(), kTags.size());
    long row_sum = 0;
    for (const auto& v : cm["matrix"][i]) row_sum += v.get<long>();
    EXPECT_EQ(row_sum, kRowsPerTag[i]) << "row of " << kTags[i];
    total += row_sum;
  }
  EXPECT_EQ(total, kRows);

  // --out: the same JSON as printed.
  EXPECT_EQ(slurp(path("eval.json")), r.out);

  // A model directory works as well as a run directory (RUN_DIR means RUN_DIR/best).
  const RunResult direct = run({"evaluate", "--model", suite_run() + "/best", "--data", data()});
  ASSERT_TRUE(succeeded(direct));
  const ordered_json direct_out = ordered_json::parse(direct.out);
  EXPECT_EQ(direct_out["overall"], out["overall"]);
  EXPECT_EQ(direct_out["confusion_matrix"], out["confusion_matrix"]);
}

TEST_F(CliTest, EvaluateRejectsAnUnknownTag) {
  ASSERT_TRUE(succeeded(suite_train()));
  std::vector<Row> rows = synthetic_rows();
  rows[5].tag = "robotics";
  spit(path("unknown.csv"), to_csv(rows));
  const RunResult r = run({"evaluate", "--model", suite_run(), "--data", path("unknown.csv"), "--out",
                           path("eval.json")});
  expect_error(r, "robotics");
  EXPECT_NE(r.err.find(path("unknown.csv")), std::string::npos) << r.describe();
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_FALSE(fs::exists(path("eval.json")));
}

TEST_F(CliTest, EvaluateNeedsTheTagColumn) {
  ASSERT_TRUE(succeeded(suite_train()));
  spit(path("untagged.csv"), to_csv(synthetic_rows(), /*with_tag=*/false));
  const RunResult r = run({"evaluate", "--model", suite_run(), "--data", path("untagged.csv")});
  expect_error(r, "'tag'");
  EXPECT_NE(r.err.find(path("untagged.csv")), std::string::npos) << r.describe();
}

TEST_F(CliTest, EvaluateOnANonModelDirectory) {
  expect_error(run({"evaluate", "--model", path("nowhere"), "--data", data()}), path("nowhere"));
}

// ---- predict --------------------------------------------------------------------------------------------

// Checks one prediction object; returns its probabilities by tag.
std::map<std::string, double> check_prediction(const json& p) {
  std::map<std::string, double> probs;
  EXPECT_TRUE(p.contains("prediction") && p.contains("probabilities")) << p.dump();
  if (!p.contains("probabilities")) return probs;
  double sum = 0;
  for (const auto& [tag, v] : p["probabilities"].items()) {
    probs[tag] = v.get<double>();
    EXPECT_TRUE(v.get<double>() >= 0 && v.get<double>() <= 1) << tag << " " << v;
    sum += v.get<double>();
  }
  EXPECT_NEAR(sum, 1.0, 1e-5) << p.dump();
  std::vector<std::string> tags;
  for (const auto& kv : probs) tags.push_back(kv.first);
  EXPECT_EQ(tags, kTags) << p.dump();
  return probs;
}

// predict --data's JSON Lines: one object per line.
json parse_jsonl(const std::string& text) {
  json out = json::array();
  for (const std::string& line : lines_of(text)) out.push_back(json::parse(line));
  return out;
}

std::string argmax(const std::map<std::string, double>& probs) {
  return std::max_element(probs.begin(), probs.end(), [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

TEST_F(CliTest, PredictOneText) {
  ASSERT_TRUE(succeeded(suite_train()));
  const RunResult r = run({"predict", "--model", suite_run(), "--title", "Image segmentation", "--description",
                           "a camera and video model"});
  ASSERT_TRUE(succeeded(r));
  // One JSON object on one line, as a line of predict --data (without the id).
  ASSERT_TRUE(is_one_line(r.out)) << r.out;
  const json out = json::parse(r.out);
  ASSERT_TRUE(out.is_object()) << r.out;
  EXPECT_FALSE(out.contains("id"));
  const auto probs = check_prediction(out);
  EXPECT_EQ(out["prediction"], argmax(probs));

  // Without --description as well, and --text.
  for (const std::vector<std::string>& input : std::vector<std::vector<std::string>>{
           {"--title", "docker kubernetes serving"}, {"--text", "docker kubernetes serving"}}) {
    std::vector<std::string> args{"predict", "--model", suite_run()};
    args.insert(args.end(), input.begin(), input.end());
    const RunResult one = run(args);
    ASSERT_TRUE(succeeded(one));
    ASSERT_TRUE(is_one_line(one.out)) << one.out;
    check_prediction(json::parse(one.out));
  }
}

TEST_F(CliTest, PredictEveryRowInOrder) {
  ASSERT_TRUE(succeeded(suite_train()));
  const std::vector<Row> rows = synthetic_rows();
  spit(path("untagged.csv"), to_csv(rows, /*with_tag=*/false));  // predict needs no tag column
  const RunResult r = run({"predict", "--model", suite_run(), "--data", path("untagged.csv"), "--batch-size", "7"});
  ASSERT_TRUE(succeeded(r));
  const json out = parse_jsonl(r.out);
  ASSERT_EQ(out.size(), static_cast<std::size_t>(kRows));
  for (std::size_t i = 0; i < out.size(); ++i) {
    check_prediction(out[i]);
    EXPECT_EQ(out[i]["id"], std::to_string(i));  // the id column, in file order
  }
  EXPECT_NE(r.err.find("rows/s"), std::string::npos) << r.err;
  // --out: the same lines, written atomically.
  const RunResult to_file = run({"predict", "--model", suite_run(), "--data", path("untagged.csv"), "--out",
                                 path("predictions.jsonl"), "--batch-size", "7"});
  ASSERT_TRUE(succeeded(to_file));
  EXPECT_TRUE(to_file.out.empty()) << to_file.out;
  EXPECT_EQ(parse_jsonl(slurp(path("predictions.jsonl"))), out);
  // Row i of the batch output is the prediction of row i alone (the quoted multi-line row included).
  for (std::size_t i : {std::size_t{0}, std::size_t{1}, std::size_t{17}, std::size_t{kRows - 1}}) {
    const RunResult one = run({"predict", "--model", suite_run(), "--title", rows[i].title, "--description",
                               rows[i].description});
    ASSERT_TRUE(succeeded(one));
    const json single = json::parse(one.out);
    EXPECT_EQ(single["prediction"], out[i]["prediction"]) << "row " << i;
    for (const std::string& tag : kTags) {
      EXPECT_NEAR(single["probabilities"][tag].get<double>(), out[i]["probabilities"][tag].get<double>(), 1e-5)
          << "row " << i << " " << tag;
    }
  }
}

TEST_F(CliTest, PredictLeavesNoFileBehindOnABadRow) {
  ASSERT_TRUE(succeeded(suite_train()));
  std::string csv = to_csv(synthetic_rows(), /*with_tag=*/false);
  csv += "40,, \n";  // line 43 (row 0's description spans two lines): no text at all
  spit(path("bad.csv"), csv);
  const RunResult bad = run({"predict", "--model", suite_run(), "--data", path("bad.csv"), "--batch-size", "8",
                             "--out", path("p.jsonl")});
  expect_error(bad, path("bad.csv") + ":43: all text columns (title, description) are empty");
  EXPECT_FALSE(fs::exists(path("p.jsonl")));  // five batches were predicted, none of them is left behind
  for (const auto& e : fs::directory_iterator(dir_)) EXPECT_EQ(e.path().string().find("p.jsonl"), std::string::npos);
  const RunResult skipped = run({"predict", "--model", suite_run(), "--data", path("bad.csv"), "--batch-size", "8",
                                 "--out", path("p.jsonl"), "--skip-bad-rows"});
  ASSERT_TRUE(succeeded(skipped));
  EXPECT_NE(skipped.err.find("predict: skipped 1 bad row (--skip-bad-rows); the first:\n  " + path("bad.csv") +
                             ":43: all text columns"),
            std::string::npos)
      << skipped.err;
  EXPECT_EQ(parse_jsonl(slurp(path("p.jsonl"))).size(), static_cast<std::size_t>(kRows));
}

// evaluate and predict say what they skipped and truncated as train does: the count of bad rows with the first five
// (README), and the count of truncated rows (which evaluate's JSON records as well).
TEST_F(CliTest, EvaluateAndPredictSaySkippedAndTruncatedRows) {
  ASSERT_TRUE(succeeded(suite_train()));
  std::string csv = to_csv(synthetic_rows());
  for (int i = 0; i < 7; ++i) csv += std::to_string(100 + i) + ",, ,mlops\n";  // no text at all
  spit(path("bad.csv"), csv);
  const std::vector<std::string> flags{"--data", path("bad.csv"), "--skip-bad-rows", "--max-length", "6"};
  for (const std::string command : {"evaluate", "predict"}) {
    SCOPED_TRACE(command);
    std::vector<std::string> args{command, "--model", suite_run()};
    args.insert(args.end(), flags.begin(), flags.end());
    const RunResult r = run(args);
    ASSERT_TRUE(succeeded(r));
    EXPECT_NE(r.err.find(command + ": skipped 7 bad rows (--skip-bad-rows); the first:\n"), std::string::npos) << r.err;
    EXPECT_EQ(count_occurrences(r.err, "\n  " + path("bad.csv") + ":"), 5u) << r.err;
    const std::string truncated = " longer than 6 tokens were truncated\n";
    EXPECT_NE(r.err.find(truncated), std::string::npos) << r.err;
    if (command == "evaluate") {
      const json e = json::parse(r.out);
      EXPECT_EQ(e["skipped_rows"].get<int>(), 7);
      EXPECT_NE(r.err.find("evaluate: " + std::to_string(e["truncated_rows"].get<int>()) + " rows" + truncated),
                std::string::npos)
          << r.err;
    }
  }
}

TEST_F(CliTest, PredictThreshold) {
  ASSERT_TRUE(succeeded(suite_train()));
  const RunResult all = run({"predict", "--model", suite_run(), "--data", data(), "--threshold", "1.0"});
  ASSERT_TRUE(succeeded(all));
  const json out = parse_jsonl(all.out);
  ASSERT_EQ(out.size(), static_cast<std::size_t>(kRows));
  for (const json& p : out) EXPECT_EQ(p["prediction"], "other") << p.dump();

  const RunResult none = run({"predict", "--model", suite_run(), "--data", data(), "--threshold", "0"});
  ASSERT_TRUE(succeeded(none));
  for (const json& p : parse_jsonl(none.out)) EXPECT_EQ(p["prediction"], argmax(check_prediction(p))) << p.dump();

  expect_error(run({"predict", "--model", suite_run(), "--title", "image", "--threshold", "1.5"}), "--threshold", 2);
  expect_error(run({"predict", "--model", suite_run(), "--title", "image", "--threshold", "high"}), "--threshold", 2);
}

TEST_F(CliTest, PredictInputUsageErrors) {
  expect_error(run({"predict", "--model", suite_run(), "--title", "image", "--data", data()}), "--data", 2);
  expect_error(run({"predict", "--model", suite_run()}), "--title", 2);
  expect_error(run({"predict", "--model", suite_run(), "--text", "image", "--out", path("p.jsonl")}), "--out", 2);
  expect_error(run({"predict", "--model", suite_run(), "--text", "image", "--batch-size", "0"}), "--batch-size", 2);
  expect_error(run({"predict", "--model", suite_run(), "--text", "image", "--device", "tpu"}), "--device");
}

// ---- any dataset: formats, columns, multi-label, bad rows, truncation ---------------------------------

// The synthetic rows as JSON Lines {"id", "text", "topics"}: topics = the row's tag, plus "uses-model" when its
// text mentions "model" (a second label that co-occurs with all four tags).
std::string to_multilabel_jsonl(const std::vector<Row>& rows) {
  std::string text;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string joined = rows[i].title + " " + rows[i].description;
    json topics = json::array({rows[i].tag});
    if (joined.find("model") != std::string::npos) topics.push_back("uses-model");
    text += json{{"id", "r" + std::to_string(i)}, {"text", joined}, {"topics", topics}}.dump() + "\n";
  }
  return text;
}

TEST_F(CliTest, MultiLabelJsonLinesTrainEvaluatePredict) {
  const std::vector<Row> rows = synthetic_rows();
  spit(path("topics.jsonl"), to_multilabel_jsonl(rows));
  const std::vector<std::string> columns{"--text-columns", "text", "--label-column", "topics"};
  std::vector<std::string> train{"train", "--model", model(), "--train-data", path("topics.jsonl"), "--out",
                                 path("run"), "--epochs", "3", "--batch-size", "8", "--lr", "1e-3", "--quiet",
                                 "--multi-label"};
  train.insert(train.end(), columns.begin(), columns.end());
  ASSERT_TRUE(succeeded(run(train)));
  const json results = json::parse(slurp(path("run/results.json")));
  EXPECT_EQ(results["problem_type"], "multi_label_classification");
  EXPECT_EQ(results["labels"], json({"computer-vision", "mlops", "natural-language-processing", "other", "uses-model"}));
  EXPECT_EQ(results["num_val"].get<int>(), 8);  // ceil(0.2 · 40) rows, a random split
  EXPECT_EQ(results["params"]["multi_label"], true);
  const json config = json::parse(slurp(path("run/best/config.json")));
  EXPECT_EQ(config["problem_type"], "multi_label_classification");
  EXPECT_EQ(config["bertrain_data"]["text_columns"], json({"text"}));

  // evaluate reads the columns from config.json; its micro F1 is the one of predict's labels at 0.5.
  const RunResult eval = run({"evaluate", "--model", path("run"), "--data", path("topics.jsonl"), "--device", "cpu"});
  ASSERT_TRUE(succeeded(eval));
  const json e = json::parse(eval.out);
  EXPECT_EQ(e["problem_type"], "multi_label_classification");
  for (const char* avg : {"micro", "macro", "weighted", "samples"}) {
    ASSERT_TRUE(e["overall"].contains(avg)) << e.dump();
    for (const char* key : {"precision", "recall", "f1", "num_samples"}) EXPECT_TRUE(e["overall"][avg][key].is_number());
  }
  EXPECT_EQ(e["per_class"].size(), 5u);
  const RunResult pred = run({"predict", "--model", path("run"), "--data", path("topics.jsonl"), "--device", "cpu"});
  ASSERT_TRUE(succeeded(pred));
  const json lines = parse_jsonl(pred.out);
  ASSERT_EQ(lines.size(), rows.size());
  long tp = 0, fp = 0, fn = 0;
  const std::vector<std::string> truth = lines_of(to_multilabel_jsonl(rows));
  for (std::size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["id"], "r" + std::to_string(i));
    const json want = json::parse(truth[i])["topics"];
    ASSERT_TRUE(lines[i]["prediction"].is_array()) << lines[i].dump();
    for (const auto& [label, p] : lines[i]["probabilities"].items()) {
      const bool predicted = p.get<double>() >= 0.5;
      const bool wanted = std::find(want.begin(), want.end(), label) != want.end();
      const bool listed = std::find(lines[i]["prediction"].begin(), lines[i]["prediction"].end(), label) !=
                          lines[i]["prediction"].end();
      EXPECT_EQ(predicted, listed) << lines[i].dump();
      tp += predicted && wanted, fp += predicted && !wanted, fn += !predicted && wanted;
    }
  }
  EXPECT_NEAR(e["overall"]["micro"]["f1"].get<double>(), 2.0 * tp / (2.0 * tp + fp + fn), 1e-12);
  EXPECT_EQ(e["overall"]["micro"]["num_samples"].get<double>(), static_cast<double>(tp + fn));
}

TEST_F(CliTest, TsvWithOtherColumnsAndSkippedBadRows) {
  std::string tsv = "headline\tbody\tcategory\n";
  const std::vector<Row> rows = synthetic_rows();
  for (std::size_t i = 1; i < rows.size(); ++i) tsv += rows[i].title + "\t" + rows[i].title + "\t" + rows[i].tag + "\n";
  tsv += "\t \tmlops\n";                 // line 41: both text columns empty
  tsv += "a headline\tand a body\t\n";    // line 42: empty label
  spit(path("data.tsv"), tsv);
  std::vector<std::string> args{"train", "--model", model(), "--train-data", path("data.tsv"), "--out", path("run"),
                                "--epochs", "1", "--batch-size", "8", "--text-columns", "headline,body",
                                "--label-column", "category"};
  const RunResult bad = run(args);
  expect_error(bad, path("data.tsv") + ":41: all text columns (headline, body) are empty");
  expect_no_run(path("run"));
  args.push_back("--skip-bad-rows");
  const RunResult good = run(args);
  ASSERT_TRUE(succeeded(good));
  EXPECT_NE(good.out.find("skipped 2 bad rows"), std::string::npos) << good.out;
  EXPECT_NE(good.out.find(":42: label column 'category' is empty"), std::string::npos) << good.out;
  const json results = json::parse(slurp(path("run/results.json")));
  EXPECT_EQ(results["skipped_rows"].get<int>(), 2);
  EXPECT_EQ(results["num_train"].get<int>() + results["num_val"].get<int>(), kRows - 1);
  EXPECT_EQ(results["problem_type"], "single_label_classification");
  // A column the header lacks is an error whatever --skip-bad-rows says.
  expect_error(run({"train", "--model", model(), "--train-data", path("data.tsv"), "--out", path("run2"),
                    "--text-columns", "headline,summary", "--skip-bad-rows"}),
               "missing text column 'summary'");
  expect_no_run(path("run2"));
  // An extension that names no format needs --format.
  spit(path("data.txt"), tsv);
  expect_error(run({"train", "--model", model(), "--train-data", path("data.txt"), "--out", path("run3")}), "--format");
}

TEST_F(CliTest, MaxLengthTruncatesAndCounts) {
  const RunResult r = run(train_args(path("run"), {"--epochs", "1", "--max-length", "6"}));
  ASSERT_TRUE(succeeded(r));
  const json results = json::parse(slurp(path("run/results.json")));
  EXPECT_GT(results["truncated_rows"].get<int>(), 20);  // most rows have more than 4 words
  EXPECT_EQ(results["max_length"].get<int>(), 6);
  EXPECT_EQ(json::parse(slurp(path("run/best/config.json")))["bertrain_data"]["max_length"], 6);
  const RunResult verbose = run({"train", "--model", model(), "--train-data", data(), "--out", path("run2"),
                                 "--epochs", "1", "--max-length", "6"});
  ASSERT_TRUE(succeeded(verbose));
  EXPECT_NE(verbose.out.find("longer than 6 tokens were truncated"), std::string::npos) << verbose.out;
  expect_error(run(train_args(path("run3"), {"--max-length", "100000"})), "max_position_embeddings");
}

TEST_F(CliTest, HeadInitIsRecorded) {
  // The fixture's head was trained for kTags: training on them keeps it; the five topics need a new one.
  ASSERT_TRUE(succeeded(suite_train()));
  EXPECT_EQ(json::parse(slurp(suite_run() + "/results.json"))["head_init"], "loaded");
  spit(path("topics.jsonl"), to_multilabel_jsonl(synthetic_rows()));
  for (const char* init : {"torch", "hf"}) {
    const std::string out = path(std::string("run_") + init);
    std::vector<std::string> args{"train", "--model", model(), "--train-data", path("topics.jsonl"), "--out", out,
                                  "--epochs", "1", "--quiet", "--multi-label", "--text-columns", "text",
                                  "--label-column", "topics"};
    if (std::string(init) == "hf") args.insert(args.end(), {"--head-init", "hf"});
    ASSERT_TRUE(succeeded(run(args)));
    EXPECT_EQ(json::parse(slurp(out + "/results.json"))["head_init"], init);
    EXPECT_EQ(json::parse(slurp(out + "/results.json"))["params"]["head_init"], init);
  }
  expect_error(run(train_args(path("run2"), {"--head-init", "xavier"})), "--head-init");
}

// ---- tokenize -------------------------------------------------------------------------------------------

TEST_F(CliTest, TokenizeText) {
  const RunResult r = run({"tokenize", "--vocab", path("model/vocab.txt"), "--text", "Image segmentation, camera!"});
  ASSERT_TRUE(succeeded(r));
  const std::vector<std::string> lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  const json ids = json::parse(lines[0]);
  // [CLS]=2 image=5 segmentation=7 camera=11 [SEP]=3 (punctuation is removed by the cleaning).
  EXPECT_EQ(ids, json::parse("[2, 5, 7, 11, 3]"));
}

TEST_F(CliTest, TokenizeCsvGivesOneLinePerRow) {
  const RunResult r = run({"tokenize", "--vocab", path("model/vocab.txt"), "--data", data()});
  ASSERT_TRUE(succeeded(r));
  const std::vector<std::string> lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(kRows)) << r.out;
  for (const std::string& line : lines) {
    const json ids = json::parse(line);
    ASSERT_TRUE(ids.is_array() && ids.size() >= 3) << line;
    EXPECT_EQ(ids.front(), 2) << line;
    EXPECT_EQ(ids.back(), 3) << line;
    for (const auto& id : ids) EXPECT_TRUE(id.get<int>() >= 0 && id.get<int>() < 67) << line;
  }
  // Row 0 is the quoted multi-line field: the CSV row tokenizes as its title + " " + description.
  const RunResult first = run({"tokenize", "--vocab", path("model/vocab.txt"), "--text",
                               synthetic_rows()[0].title + " " + synthetic_rows()[0].description});
  ASSERT_TRUE(succeeded(first));
  EXPECT_EQ(lines_of(first.out).at(0), lines[0]);
}

TEST_F(CliTest, TokenizeNoCleanKeepsStopwords) {
  const std::string text = "The image with a camera";
  const RunResult clean = run({"tokenize", "--vocab", path("model/vocab.txt"), "--text", text});
  const RunResult raw = run({"tokenize", "--vocab", path("model/vocab.txt"), "--text", text, "--no-clean"});
  ASSERT_TRUE(succeeded(clean));
  ASSERT_TRUE(succeeded(raw));
  EXPECT_EQ(json::parse(clean.out), json::parse("[2, 5, 11, 3]"));
  // The stopwords stay (unknown to this vocabulary: [UNK] = 1).
  EXPECT_EQ(json::parse(raw.out), json::parse("[2, 1, 5, 1, 1, 11, 3]"));
}

TEST_F(CliTest, TokenizeBadVocab) {
  expect_error(run({"tokenize", "--vocab", path("missing_vocab.txt"), "--text", "image"}), "missing_vocab.txt");
  expect_error(run({"tokenize", "--vocab", path("model/vocab.txt"), "--text", "image", "--data", data()}), "--text", 2);
}

// ---- convert and pytorch_model.bin -----------------------------------------------------------------------

// The model directory with its weights as torch.save wrote them (tests/fixtures/torch_bin) instead of
// model.safetensors.
void use_torch_weights(const fs::path& dir, const char* fixture) {
  fs::remove(dir / "model.safetensors");
  fs::copy_file(fs::path(BERTRAIN_FIXTURES_DIR) / "torch_bin" / fixture, dir / "pytorch_model.bin");
}

TEST_F(CliTest, TrainingFromPytorchModelBinMatchesSafetensorsBitForBit) {
  ASSERT_TRUE(succeeded(run(train_args(path("from_safetensors")))));
  use_torch_weights(model(), "legacy_f32.bin");
  ASSERT_TRUE(succeeded(run(train_args(path("from_bin")))));
  for (const char* file : {"last/model.safetensors", "last/optimizer.safetensors", "best/model.safetensors"}) {
    const std::string a = slurp(path("from_safetensors") + "/" + file), b = slurp(path("from_bin") + "/" + file);
    EXPECT_FALSE(a.empty()) << file;
    EXPECT_TRUE(a == b) << file << " differs between model.safetensors and the same weights as pytorch_model.bin";
  }
}

TEST_F(CliTest, ConvertWritesSafetensorsThatLoadAsTheOriginal) {
  use_torch_weights(model(), "legacy_gamma_beta.bin");  // bert.* names, gamma/beta, cls.* heads, position_ids
  const RunResult r = run({"convert", model(), "--out", path("converted")});
  ASSERT_TRUE(succeeded(r));
  EXPECT_NE(r.out.find("model.safetensors"), std::string::npos) << r.out;
  const fs::path fixture = fs::path(BERTRAIN_FIXTURES_DIR) / "tiny_gelu_bce_adam";
  // Same tensors, names and bytes as the reference written by transformers' save_pretrained (F32, bert.*).
  const SafetensorsFile converted(path("converted/model.safetensors"));
  const SafetensorsFile reference((fixture / "model.safetensors").string());
  ASSERT_EQ(converted.tensors().size(), reference.tensors().size());
  for (const TensorInfo& t : reference.tensors()) {
    ASSERT_TRUE(converted.contains(t.name)) << t.name;
    EXPECT_EQ(converted.info(t.name).dtype, DType::F32) << t.name;
    EXPECT_EQ(converted.info(t.name).shape, t.shape) << t.name;
    EXPECT_EQ(converted.read_float(t.name), reference.read_float(t.name)) << t.name;
  }
  EXPECT_EQ(converted.metadata().at("format"), "pt");
  EXPECT_EQ(slurp(path("converted/config.json")), slurp(path("model/config.json")));
  EXPECT_EQ(slurp(path("converted/vocab.txt")), slurp(path("model/vocab.txt")));
  // An empty --out (a script's unset variable) is refused rather than taken as "in place".
  expect_error(run({"convert", model(), "--out", ""}), "convert: --out is empty");
  EXPECT_FALSE(fs::exists(path("model/model.safetensors")));
  // The converted directory trains; in place (no --out) the source directory gains model.safetensors.
  ASSERT_TRUE(succeeded(run({"convert", model()})));
  EXPECT_EQ(slurp(path("model/model.safetensors")), slurp(path("converted/model.safetensors")));
  const LoadedModel a = load_model_dir(path("converted"), {}, 0), b = load_model_dir((fixture).string(), {}, 0);
  EXPECT_EQ(a.params, b.params);
}

TEST_F(CliTest, ConvertErrors) {
  expect_error(run({"convert"}), "DIR is required", 2);
  const RunResult help = run({"convert", "--help"});
  ASSERT_TRUE(succeeded(help));
  EXPECT_NE(help.out.find("--out "), std::string::npos) << help.out;
  use_torch_weights(model(), "legacy_f32.bin");
  const std::string weights = slurp(path("model/pytorch_model.bin"));
  spit(path("model/pytorch_model.bin"), weights.substr(0, weights.size() / 2));
  expect_error(run({"convert", model(), "--out", path("out")}), path("model/pytorch_model.bin"));
  EXPECT_FALSE(fs::exists(path("out/model.safetensors")));
  expect_error(run(train_args(path("run"))), "pytorch_model.bin");
  expect_no_run(path("run"));
  fs::remove(path("model/pytorch_model.bin"));
  expect_error(run({"convert", model()}), "pytorch_model.bin");
}

// bench step on a tiny random model: one synthetic batch, then Made-With-ML-style lengths drawn from a CSV
// (the lengths file is what bench_torch_step.py --lengths reads; --padded extends each row to its batch's
// longest), and its usage errors.
TEST_F(CliTest, BenchStepTimesPackedAndPaddedBatchesFromACsv) {
  const std::vector<std::string> tiny = {"bench", "step", "--layers", "1", "--hidden", "32", "--heads", "2",
                                         "--intermediate", "64", "--vocab", "100", "--batch", "4", "--steps", "2",
                                         "--warmup", "1", "--threads", "1"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = tiny;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const RunResult synthetic = run(with({"--seq", "8"}));
  ASSERT_TRUE(succeeded(synthetic));
  const json line = json::parse(lines_of(synthetic.out).back());
  EXPECT_EQ(line.at("lengths"), "synthetic");
  EXPECT_EQ(line.at("longest"), 8);
  EXPECT_LT(line.at("tokens_per_s").get<double>(), 8.0 * line.at("samples_per_s").get<double>())
      << "synthetic rows run from S/2 to S tokens";
  EXPECT_EQ(line.at("step"), "train");
  // Evaluation steps: no update, so every step's loss is the same.
  const RunResult forward = run(with({"--seq", "8", "--forward-only"}));
  ASSERT_TRUE(succeeded(forward));
  EXPECT_EQ(json::parse(lines_of(forward.out).back()).at("step"), "forward");
  std::vector<std::string> losses;
  for (const std::string& l : lines_of(forward.out)) {
    if (l.rfind("step ", 0) == 0) losses.push_back(l.substr(l.find("loss"), 15));
  }
  ASSERT_EQ(losses.size(), 3u);  // 1 warm-up + 2 timed
  EXPECT_EQ(losses[0], losses[2]);
  const RunResult full = run(with({"--seq", "8", "--full-rows"}));
  ASSERT_TRUE(succeeded(full));
  const json full_line = json::parse(lines_of(full.out).back());
  EXPECT_EQ(full_line.at("lengths"), "full");
  // Every row has S = 8 tokens: tokens/s is exactly 8 × samples/s (up to the printed rounding).
  EXPECT_NEAR(full_line.at("tokens_per_s").get<double>(), 8.0 * full_line.at("samples_per_s").get<double>(), 8.0);

  const std::vector<std::string> from_csv = {"--lengths-from", data(), "--vocab-file", model() + "/vocab.txt"};
  std::vector<std::string> packed_args = from_csv;
  packed_args.insert(packed_args.end(), {"--lengths-out", path("lengths.json")});
  const RunResult packed = run(with(packed_args));
  ASSERT_TRUE(succeeded(packed));
  EXPECT_EQ(json::parse(lines_of(packed.out).back()).at("lengths"), "dataset");
  const json lengths = json::parse(slurp(path("lengths.json")));
  ASSERT_EQ(lengths.at("batches").size(), 3u);  // warm-up + timed steps
  bool ragged = false;
  for (const json& batch : lengths.at("batches")) {
    ASSERT_EQ(batch.size(), 4u);
    for (const json& l : batch) {
      EXPECT_GE(l.get<int>(), 3) << "a row is [CLS] words [SEP]";
      ragged = ragged || l != batch.front();
    }
  }
  EXPECT_TRUE(ragged) << "the synthetic CSV's rows have different lengths";

  std::vector<std::string> padded_args = from_csv;
  padded_args.insert(padded_args.end(), {"--padded", "--lengths-out", path("padded.json")});
  const RunResult padded = run(with(padded_args));
  ASSERT_TRUE(succeeded(padded));
  const json padded_lengths = json::parse(slurp(path("padded.json")));
  for (std::size_t i = 0; i < padded_lengths.at("batches").size(); ++i) {
    const json& batch = padded_lengths.at("batches")[i];
    int longest = 0;
    for (const json& l : lengths.at("batches")[i]) longest = std::max(longest, l.get<int>());
    for (const json& l : batch) EXPECT_EQ(l.get<int>(), longest) << "batch " << i;  // same draws, padded
  }

  expect_error(run(with({"--padded"})), "--padded needs --lengths-from", 2);
  // Flags that only mean something with another were ignored without a word.
  expect_error(run(with({"--max-length", "64"})), "--max-length goes with --lengths-from", 2);
  expect_error(run(with({"--peak-tflops", "-1"})), "--peak-tflops must be >= 0", 2);
  expect_error(run(with({"--lengths-out", ""})), "bench step: --lengths-out is empty", 2);
  // Its output is none of its inputs (the dataset, the vocabulary), which it replaced with JSON, exit 0.
  const std::string dataset = slurp(data()), vocab = slurp(model() + "/vocab.txt");
  for (const std::string& input : {data(), model() + "/vocab.txt"}) {
    std::vector<std::string> args = from_csv;
    args.insert(args.end(), {"--lengths-out", input});
    expect_error(run(with(args)), "--lengths-out '" + input + "' is the input", 2);
  }
  EXPECT_EQ(slurp(data()), dataset);
  EXPECT_EQ(slurp(model() + "/vocab.txt"), vocab);
  expect_error(run(with({"--full-rows", "--lengths-from", data(), "--vocab-file", model() + "/vocab.txt"})),
               "--full-rows is for synthetic batches", 2);
  expect_error(run(with({"--lengths-from", data()})), "--lengths-from needs --vocab-file", 2);
  expect_error(run(with({"--lengths-from", path("missing.csv"), "--vocab-file", model() + "/vocab.txt"})),
               "missing.csv");
}

}  // namespace
}  // namespace bertrain

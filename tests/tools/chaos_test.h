// Chaos: training processes killed with SIGKILL at random moments — inside steps and inside checkpoint writes
// (a step checkpoint after every optimizer step makes writing most of the time) — then resumed, again and again,
// until they finish. Every run must end with the uninterrupted run's weights, optimizer state, best/ and losses,
// bit for bit, and no start may find a half-written checkpoint. The fixture and the test, parameterised by the
// engine; instantiated for the CPU by test_chaos.cpp (label slow) and for the GPU by test_gpu_runs.cpp (label gpu).
#pragma once

#include <gtest/gtest.h>

#include <csignal>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "model/safetensors.h"
#include "tests/gpu_skip.h"
#include "tests/run_process.h"
#include "tests/temp_dir.h"

#ifndef BERTRAIN_BINARY
#error "BERTRAIN_BINARY must name the bertrain executable"
#endif

namespace bertrain {
namespace chaos {

namespace fs = std::filesystem;
using nlohmann::json;

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The engine an interrupted run trains on, how many interrupted runs the chaos test makes, and whether some of
// its kills must land inside a checkpoint write: on the CPU a tiny model's step is short next to a write, so they
// do; on a GPU, process start and CUDA's initialisation take much of each run (and on the emulated GPU the steps
// are long), so a few runs need not hit one. The write path is the same host code on every engine.
struct Engine {
  std::string device;     // cpu | cuda
  std::string precision;  // fp32 | bf16
  int runs;
  bool kills_inside_writes;
};
inline void PrintTo(const Engine& e, std::ostream* os) { *os << e.device << " " << e.precision << ", " << e.runs << " runs"; }
inline std::string engine_name(const ::testing::TestParamInfo<Engine>& info) {
  return info.param.device + "_" + info.param.precision;
}

class InterruptedRunTest : public ::testing::TestWithParam<Engine> {
 protected:
  void SetUp() override {
    if (GetParam().device == "cuda") BERTRAIN_REQUIRE_GPU();
    const fs::path fixture = fs::path(BERTRAIN_FIXTURES_DIR) / "tiny_gelu_bce_adam";
    fs::create_directories(dir_.path() / "model");
    for (const char* f : {"config.json", "model.safetensors", "vocab.txt"}) {
      fs::copy_file(fixture / f, dir_.path() / "model" / f);
    }
    std::vector<std::string> words;
    std::ifstream vocab(fixture / "vocab.txt");
    for (std::string w; std::getline(vocab, w);) {
      if (!w.empty() && w[0] != '[' && w[0] != '#') words.push_back(w);
    }
    ASSERT_GE(words.size(), 8u);
    std::mt19937 rng(7);
    std::string csv = "title,description,tag\n";
    for (int i = 0; i < 40; ++i) {
      std::string title, description;
      for (int k = 0; k < 3; ++k) title += (k ? " " : "") + words[rng() % words.size()];
      for (int k = 0; k < 9; ++k) description += (k ? " " : "") + words[rng() % words.size()];
      csv += title + "," + description + "," + (i % 3 == 0 ? "x" : i % 3 == 1 ? "y" : "z") + "\n";
    }
    std::ofstream(dir_.path() / "data.csv") << csv;
  }

  // 32 training rows in batches of 8: 4 optimizer steps an epoch, a step checkpoint after each.
  std::vector<std::string> train_argv(const std::string& out, bool resume, int epochs = 5) const {
    std::vector<std::string> argv{BERTRAIN_BINARY, "train", "--model", dir_.path("model"), "--train-data",
                                  dir_.path("data.csv"), "--out", dir_.path(out), "--epochs", std::to_string(epochs),
                                  "--batch-size", "8",
                                  "--save-steps", "1", "--dropout", "0.3", "--shuffle", "--lr", "5e-3", "--device",
                                  GetParam().device, "--precision", GetParam().precision, "--quiet"};
    if (resume) argv.push_back("--resume");
    return argv;
  }

  // A checkpoint directory a start may find: absent, or whole (every file readable and complete).
  static void expect_whole(const fs::path& dir, const std::string& when) {
    if (!fs::exists(dir)) return;
    SCOPED_TRACE(dir.string() + " " + when);
    EXPECT_NO_THROW({ SafetensorsFile model((dir / "model.safetensors").string()); model.read_float(model.tensors()[0].name); });
    EXPECT_NO_THROW(json::parse(slurp(dir / "config.json")));
    if (dir.filename() == "last") {
      EXPECT_NO_THROW(json::parse(slurp(dir / "trainer_state.json")));
      EXPECT_NO_THROW({ SafetensorsFile optimizer((dir / "optimizer.safetensors").string()); });
    }
  }

  // Run `b` ended as run `a`: the same last/ and best/ weights and optimizer state, bit for bit, and the same
  // per-epoch numbers but the timings.
  static void expect_same_as(const std::string& a, const std::string& b) {
    for (const char* file : {"last/model.safetensors", "last/optimizer.safetensors", "best/model.safetensors"}) {
      EXPECT_TRUE(slurp(a + "/" + file) == slurp(b + "/" + file)) << b << ": " << file << " differs from " << a << "'s";
    }
    const json ra = json::parse(slurp(a + "/results.json")), rb = json::parse(slurp(b + "/results.json"));
    EXPECT_EQ(ra["metrics"].size(), rb["metrics"].size()) << b;
    for (std::size_t e = 0; e < ra["metrics"].size() && e < rb["metrics"].size(); ++e) {
      for (const char* key : {"epoch", "lr", "train_loss", "val_loss", "grad_norm"}) {  // but the timings
        EXPECT_EQ(ra["metrics"][e][key], rb["metrics"][e][key]) << b << " epoch " << e << " " << key;
      }
    }
    EXPECT_EQ(ra["best_epoch"], rb["best_epoch"]) << b;
  }

  testing::TempDir dir_{"bertrain_chaos"};
};

TEST_P(InterruptedRunTest, KilledAtRandomAndResumedEndsAsTheUninterruptedRun) {
  const int runs = GetParam().runs;
  const auto started = std::chrono::steady_clock::now();
  const testing::RunResult reference = testing::run_process(train_argv("reference", false));
  ASSERT_EQ(reference.exit_code, 0) << reference.describe();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  std::mt19937 rng(20261123);
  int kills = 0, mid_write = 0, restarts = 0;
  for (int r = 0; r < runs; ++r) {
    const std::string out = "chaos" + std::to_string(r);
    // Kill moments are drawn within what an uninterrupted run takes. Measured once, on a loaded machine that can
    // be longer than the same run takes a moment later, which then ends before its kill: such a run is started
    // again from nothing, its kills drawn within the time it took, so that every run is interrupted.
    double window = seconds;
    int attempts = 0;
    for (;; ++attempts) {
      ASSERT_LT(attempts, 10) << out << " does not finish";
      // results.json is the last thing a run writes: a kill after it (the process already exiting) ended a
      // finished run, which --resume rightly refuses to train again.
      if (fs::exists(dir_.path(out) + "/results.json")) break;
      const bool resume = fs::exists(dir_.path(out) + "/last/trainer_state.json");
      expect_whole(dir_.path() / out / "last", "before attempt " + std::to_string(attempts));
      expect_whole(dir_.path() / out / "best", "before attempt " + std::to_string(attempts));
      // Up to 3 kills per run, each at a random moment of what an uninterrupted run takes.
      std::vector<testing::TimedSignal> kill;
      if (attempts < 3) kill.push_back({std::uniform_real_distribution<double>(0.05, 1.0)(rng) * window, SIGKILL});
      const auto attempt_started = std::chrono::steady_clock::now();
      const testing::RunResult run = testing::run_process(train_argv(out, resume), {}, 120, kill);
      if (run.exit_code == 0 && attempts == 0 && restarts < 3 * runs) {  // ended before its kill
        window = std::chrono::duration<double>(std::chrono::steady_clock::now() - attempt_started).count();
        fs::remove_all(dir_.path(out));
        ++restarts;
        attempts = -1;  // the loop's ++attempts starts it again at attempt 0
        continue;
      }
      if (run.exit_code == 0) break;
      ASSERT_EQ(run.signal, SIGKILL) << run.describe();
      ++kills;
      if (!fs::exists(dir_.path(out))) continue;  // killed before it made RUN_DIR (still loading)
      for (const auto& e : fs::directory_iterator(dir_.path(out))) {
        if (e.path().filename().string().find(".tmp-") != std::string::npos) ++mid_write;
      }
    }
    expect_same_as(dir_.path("reference"), dir_.path(out));
  }
  std::printf("chaos (%s %s): %d kills over %d runs (an uninterrupted run takes %.2f s), %d of them inside a "
              "checkpoint write (its temporary directory left behind, and removed by the next start); %d runs "
              "started again after ending before their kill\n",
              GetParam().device.c_str(), GetParam().precision.c_str(), kills, runs, seconds, mid_write, restarts);
  EXPECT_GE(kills, runs);
  if (GetParam().kills_inside_writes) {
    EXPECT_GT(mid_write, 0);
  }
}

}  // namespace chaos
}  // namespace bertrain

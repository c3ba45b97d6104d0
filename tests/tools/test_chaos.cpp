// Chaos (label slow): training processes killed with SIGKILL at random moments — inside steps and inside
// checkpoint writes (a step checkpoint after every optimizer step makes writing most of the time) — then
// resumed, again and again, until they finish. Every run must end with the uninterrupted run's weights,
// optimizer state, best/ and losses, bit for bit, and no start may find a half-written checkpoint.
#include <gtest/gtest.h>

#include <csignal>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "model/safetensors.h"
#include "tests/run_process.h"
#include "tests/temp_dir.h"

#ifndef BERTRAIN_BINARY
#error "BERTRAIN_BINARY must name the bertrain executable"
#endif

namespace bertrain {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class ChaosTest : public ::testing::Test {
 protected:
  void SetUp() override {
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

  std::vector<std::string> train_argv(const std::string& out, bool resume) const {
    std::vector<std::string> argv{BERTRAIN_BINARY, "train", "--model", dir_.path("model"), "--train-data",
                                  dir_.path("data.csv"), "--out", dir_.path(out), "--epochs", "5", "--batch-size", "8",
                                  "--save-steps", "1", "--dropout", "0.3", "--shuffle", "--lr", "5e-3", "--device",
                                  "cpu", "--quiet"};
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

  testing::TempDir dir_{"bertrain_chaos"};
};

TEST_F(ChaosTest, KilledAtRandomAndResumedEndsAsTheUninterruptedRun) {
  const auto started = std::chrono::steady_clock::now();
  const testing::RunResult reference = testing::run_process(train_argv("reference", false));
  ASSERT_EQ(reference.exit_code, 0) << reference.describe();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  std::mt19937 rng(20261123);
  int kills = 0, mid_write = 0;
  for (int r = 0; r < 20; ++r) {
    const std::string out = "chaos" + std::to_string(r);
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
      if (attempts < 3) kill.push_back({std::uniform_real_distribution<double>(0.05, 1.0)(rng) * seconds, SIGKILL});
      const testing::RunResult run = testing::run_process(train_argv(out, resume), {}, 120, kill);
      if (run.exit_code == 0) break;
      ASSERT_EQ(run.signal, SIGKILL) << run.describe();
      ++kills;
      if (!fs::exists(dir_.path(out))) continue;  // killed before it made RUN_DIR (still loading)
      for (const auto& e : fs::directory_iterator(dir_.path(out))) {
        if (e.path().filename().string().find(".tmp-") != std::string::npos) ++mid_write;
      }
    }
    for (const char* file : {"last/model.safetensors", "last/optimizer.safetensors", "best/model.safetensors"}) {
      EXPECT_TRUE(slurp(dir_.path("reference") + "/" + file) == slurp(dir_.path(out) + "/" + file))
          << out << ": " << file << " differs from the uninterrupted run's";
    }
    const json a = json::parse(slurp(dir_.path("reference/results.json")));
    const json b = json::parse(slurp(dir_.path(out) + "/results.json"));
    EXPECT_EQ(a["metrics"].size(), b["metrics"].size()) << out;
    for (std::size_t e = 0; e < a["metrics"].size() && e < b["metrics"].size(); ++e) {
      for (const char* key : {"epoch", "lr", "train_loss", "val_loss"}) {  // all but the timings
        EXPECT_EQ(a["metrics"][e][key], b["metrics"][e][key]) << out << " epoch " << e << " " << key;
      }
    }
    EXPECT_EQ(a["best_epoch"], b["best_epoch"]) << out;
  }
  std::printf("chaos: %d kills over 20 runs (an uninterrupted run takes %.2f s), %d of them inside a checkpoint "
              "write (its temporary directory left behind, and removed by the next start)\n",
              kills, seconds, mid_write);
  EXPECT_GE(kills, 20);
  EXPECT_GT(mid_write, 0);
}

}  // namespace
}  // namespace bertrain

// Data-parallel training under mpirun on one machine (label mpi): N ranks end with the parameters one
// process reaches with the same global batch, also with dropout, uneven last batches, empty rank slices
// and a resume at another world size; a failing or dying rank ends the whole job promptly and non-zero.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iterator>
#include <thread>
#include <random>
#include <csignal>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/build_config.h"
#include "core/build_info.h"
#include "core/error.h"
#include "model/safetensors.h"
#include "tests/gpu_skip.h"
#include "tests/run_process.h"
#include "tests/temp_dir.h"
#include "tests/tolerance.h"

namespace bertrain {
namespace {

namespace fs = std::filesystem;
using testing::RunResult;

const std::string kFixture = std::string(BERTRAIN_FIXTURES_DIR) + "/tiny_gelu_bce_adam";

// The PATH's mpirun first (a GPU machine's gpu-check puts the Open MPI it built with there), else Debian's.
std::string find_mpirun() {
  std::vector<std::string> dirs;
  std::istringstream path(std::getenv("PATH") != nullptr ? std::getenv("PATH") : "");
  for (std::string dir; std::getline(path, dir, ':');) {
    if (!dir.empty()) dirs.push_back(dir);
  }
  dirs.insert(dirs.end(), {"/usr/bin", "/usr/local/bin"});
  for (const std::string& dir : dirs) {
    const std::string candidate = dir + "/mpirun";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

class MpiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!BERTRAIN_HAS_MPI) GTEST_SKIP() << "built without MPI (BERTRAIN_MPI=OFF or libopenmpi-dev missing)";
    mpirun_ = find_mpirun();
    if (mpirun_.empty()) GTEST_SKIP() << "mpirun not found (Debian: openmpi-bin)";
    // The fixture's tiny model with BERT's usual dropouts switched on, so that the masks are tested too.
    const fs::path model = temp_.path() / "model";
    fs::create_directories(model);
    for (const char* file : {"model.safetensors", "vocab.txt"}) fs::copy_file(kFixture + "/" + file, model / file);
    nlohmann::json config = nlohmann::json::parse(std::ifstream(kFixture + "/config.json"));
    config["hidden_dropout_prob"] = 0.1;
    config["attention_probs_dropout_prob"] = 0.1;
    std::ofstream(model / "config.json") << config.dump(2);
    // 29 rows of letters (the fixture's vocabulary holds single letters): 23 train / 6 validation rows.
    std::ofstream csv(temp_.path("data.csv"));
    csv << "title,description,tag\n";
    const char* tags[] = {"computer-vision", "mlops", "natural-language-processing", "other"};
    for (int r = 0; r < 29; ++r) {
      csv << "b c d e" << char('f' + r % 13) << "," << char('g' + r % 7) << " h " << char('j' + r % 11) << ","
          << tags[r % 4] << "\n";
    }
  }

  // bertrain train on the tiny model into RUN_DIR `out`, with `ranks` processes (0: no mpirun at all).
  RunResult train(int ranks, const std::string& out, int epochs, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv;
    if (ranks > 0) argv = mpi_prefix(ranks);
    const std::vector<std::string> command = train_command(out, epochs, extra);
    argv.insert(argv.end(), command.begin(), command.end());
    return testing::run_process(argv, {}, 300);
  }

  std::vector<std::string> mpi_prefix(int ranks) const {
    std::vector<std::string> argv{mpirun_, "-np", std::to_string(ranks), "--oversubscribe", "-x", "OMP_NUM_THREADS=1"};
    if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
    return argv;
  }

  std::vector<std::string> train_command(const std::string& out, int epochs,
                                         const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> argv{BERTRAIN_BINARY, "train", "--model", temp_.path("model"), "--train-data",
                                  temp_.path("data.csv"), "--out", temp_.path(out), "--epochs",
                                  std::to_string(epochs), "--batch-size", "5", "--lr", "3e-3", "--no-clean",
                                  // Adam's update is lr·g/(|g| + eps): with the default eps 1e-8, gradients that
                                  // are rounding noise (the key biases' are exactly zero in exact arithmetic)
                                  // become steps of ~lr that differ between summation orders. eps 1e-4 keeps
                                  // the comparison about the data-parallel arithmetic.
                                  "--adam-eps", "1e-4", "--quiet"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    // The device is always explicit: with the default (auto) every rank of a one-GPU machine would take
    // GPU 0, which NCCL refuses. GPU variants pass --device cuda themselves.
    if (std::find(extra.begin(), extra.end(), "--device") == extra.end()) argv.insert(argv.end(), {"--device", "cpu"});
    return argv;
  }

  // Every parameter of `a`/last equals `b`/last within float32 summation-order noise.
  void expect_same_parameters(const std::string& a, const std::string& b) {
    const SafetensorsFile fa(temp_.path(a) + "/last/model.safetensors"), fb(temp_.path(b) + "/last/model.safetensors");
    ASSERT_EQ(fa.tensors().size(), fb.tensors().size());
    for (const TensorInfo& t : fa.tensors()) {
      const std::vector<float> x = fa.read_float(t.name), y = fb.read_float(t.name);
      // float32 summation-order noise through 15 Adam steps (see --adam-eps above).
      EXPECT_TRUE(testing::all_close(a + " vs " + b + " " + t.name, x.data(), y.data(), x.size(), 2e-5, 1e-4));
    }
    expect_same_losses(a, b, 1e-5);
  }

  // Every epoch's train_loss and val_loss of run `a` equal run `b`'s within `rtol` (and 1e-6 absolute).
  void expect_same_losses(const std::string& a, const std::string& b, double rtol) {
    const auto losses = [&](const std::string& run) {
      std::vector<double> out;
      std::ifstream in(temp_.path(run) + "/metrics.jsonl");
      for (std::string line; std::getline(in, line);) {
        const nlohmann::json m = nlohmann::json::parse(line);
        out.push_back(m.at("train_loss").get<double>());
        out.push_back(m.at("val_loss").get<double>());
      }
      return out;
    };
    const std::vector<double> la = losses(a), lb = losses(b);
    ASSERT_EQ(la.size(), lb.size());
    EXPECT_TRUE(testing::all_close(a + " vs " + b + " losses", la.data(), lb.data(), la.size(), 1e-6, rtol));
  }

  // Runs `argv` + sh -c `script` (each rank runs the script) and expects the job to end non-zero well
  // before the 120 s timeout.
  RunResult expect_prompt_failure(std::vector<std::string> argv, const std::string& script) {
    argv.insert(argv.end(), {"/bin/sh", "-c", script});
    const auto start = std::chrono::steady_clock::now();
    const RunResult r = testing::run_process(argv, {}, 120);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_FALSE(r.timed_out) << r.describe();
    EXPECT_NE(r.exit_code, 0) << r.describe();
    EXPECT_LT(seconds, 60) << r.describe();
    return r;
  }

  testing::TempDir temp_{"bertrain_mpi"};
  std::string mpirun_;
};

// How many times bertrain said "bertrain: error:" in `err` (once per rank that reported).
std::size_t error_lines(const std::string& err) {
  std::size_t n = 0;
  for (std::size_t at = err.find("bertrain: error:"); at != std::string::npos; at = err.find("bertrain: error:", at + 1)) {
    ++n;
  }
  return n;
}

// What the run in `out` trained on: results.json's params.engine (the engine's description).
std::string engine_of(const std::string& out) {
  std::ifstream in(out + "/results.json");
  return nlohmann::json::parse(in).at("params").at("engine").get<std::string>();
}

TEST_F(MpiTest, RanksMatchOneProcess) {
  // 23 training rows in batches of 5: the last batch has 3 rows, so with 2 ranks it splits 2 / 1 and with
  // 3 ranks 1 / 1 / 1; with 4 ranks one slice of it is empty.
  const RunResult single = train(0, "single", 3);
  ASSERT_EQ(single.exit_code, 0) << single.describe();
  for (int ranks : {2, 3, 4}) {
    const std::string run = "np" + std::to_string(ranks);
    const RunResult r = train(ranks, run, 3);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    expect_same_parameters("single", run);
    EXPECT_FALSE(fs::exists(temp_.path(run) + "/last.old"));
  }
}

// Gradient accumulation across ranks: steps of 6 rows as 2 micro-batches of 3 over 2 ranks, or 3 of 2 over 3 ranks
// (gradients summed locally, one allreduce per optimizer step), train what one process does with batches of 6.
TEST_F(MpiTest, AccumulatedRanksMatchOneProcess) {
  const RunResult single = train(0, "single6", 3, {"--batch-size", "6"});
  ASSERT_EQ(single.exit_code, 0) << single.describe();
  const std::vector<std::pair<int, std::vector<std::string>>> jobs = {
      {2, {"--batch-size", "3", "--grad-accum-steps", "2"}}, {3, {"--batch-size", "2", "--grad-accum-steps", "3"}}};
  for (const auto& [ranks, flags] : jobs) {
    const std::string run = "accumulated" + std::to_string(ranks);
    const RunResult r = train(ranks, run, 3, flags);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    expect_same_parameters("single6", run);
  }
}

// Gradient clipping scales by the norm of the gradient summed over ranks, not of a rank's own share: 2 ranks clip
// as one process does (a rank clipping its share by its own norm would land elsewhere).
TEST_F(MpiTest, ClippedRanksMatchOneProcess) {
  const std::vector<std::string> clip{"--max-grad-norm", "1e-3"};
  const RunResult single = train(0, "clipped_single", 3, clip);
  ASSERT_EQ(single.exit_code, 0) << single.describe();
  const RunResult r = train(2, "clipped2", 3, clip);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  expect_same_parameters("clipped_single", "clipped2");
}

// The same on GPUs with NCCL, one GPU per rank, fp32: runs only where every rank has a GPU of its own.
// (GpuRanksSummingThroughHostMemoryMatchOneGpuProcess below runs the GPU path on one GPU, through MPI.)
TEST_F(MpiTest, GpuRanksMatchOneGpuProcess) {
  if (!BERTRAIN_HAS_NCCL) GTEST_SKIP() << "built without NCCL";
  const int gpus = cuda_device_count();
  if (gpus < 2) GTEST_SKIP() << "GPU test skipped: needs a GPU per rank (2), this machine has " << gpus;
  const std::vector<std::string> cuda{"--device", "cuda"};
  const RunResult single = train(0, "gpu_single", 3, cuda);
  ASSERT_EQ(single.exit_code, 0) << single.describe();
  const int ranks = std::min(gpus, 4);
  const RunResult r = train(ranks, "gpu_ranks", 3, {"--device", "cuda", "--gpu-collectives", "nccl"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(engine_of(temp_.path("gpu_ranks")).find("gradients summed by NCCL"), std::string::npos);
  expect_same_parameters("gpu_single", "gpu_ranks");
}

TEST_F(MpiTest, ResumeAtAnotherWorldSize) {
  const RunResult single = train(0, "single", 3);
  ASSERT_EQ(single.exit_code, 0) << single.describe();
  const RunResult first = train(2, "resumed", 2);
  ASSERT_EQ(first.exit_code, 0) << first.describe();
  const RunResult second = train(3, "resumed", 3, {"--resume"});
  ASSERT_EQ(second.exit_code, 0) << second.describe();
  expect_same_parameters("single", "resumed");
}

// A mid-epoch step checkpoint written by 2 ranks (the job then stopped abruptly right after it) resumes on 3
// ranks and ends where one process does.
TEST_F(MpiTest, StepCheckpointResumesAtAnotherWorldSize) {
  // 23 training rows in batches of 5: 5 steps an epoch; step 8 is the third batch of the second epoch.
  const RunResult single = train(0, "single", 3);
  ASSERT_EQ(single.exit_code, 0) << single.describe();
  std::vector<std::string> argv = mpi_prefix(2);
  argv.insert(argv.end(), {"-x", "BERTRAIN_TEST_CRASH_AFTER_STEP=8"});
  const std::vector<std::string> command = train_command("stepped", 3, {"--save-steps", "4"});
  argv.insert(argv.end(), command.begin(), command.end());
  const RunResult crashed = testing::run_process(argv, {}, 300);
  EXPECT_NE(crashed.exit_code, 0) << crashed.describe();
  std::ifstream state_file(temp_.path("stepped") + "/last/trainer_state.json");
  const nlohmann::json state = nlohmann::json::parse(state_file);
  EXPECT_EQ(state.at("optimizer_steps"), 8);
  EXPECT_EQ(state.at("steps_in_epoch"), 3);
  const RunResult resumed = train(3, "stepped", 3, {"--save-steps", "4", "--resume"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  expect_same_parameters("single", "stepped");
  // results.json records the change of world size (it recorded none: the world size joined the settings after
  // the resume was checked).
  std::ifstream results_file(temp_.path("stepped") + "/results.json");
  const nlohmann::json results = nlohmann::json::parse(results_file);
  ASSERT_EQ(results.at("resumes").size(), 1u) << results.dump();
  EXPECT_EQ(results["resumes"][0]["changed"].value("world_size", nlohmann::json()), nlohmann::json::array({2, 3}))
      << results.dump();
}

// The pids of the processes of the job training into `out` whose command line `match` accepts: the ranks
// (`... bertrain train ... --out <out>`) or mpirun (`mpirun ... --out <out>`); not `bertrain launch`.
template <typename Match>
std::vector<pid_t> job_pids(const std::string& out, Match match) {
  std::vector<pid_t> pids;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    std::vector<std::string> argv;
    for (std::string a; std::getline(in, a, '\0');) argv.push_back(a);
    if (argv.size() >= 2 && match(argv) && std::find(argv.begin(), argv.end(), out) != argv.end()) {
      pids.push_back(static_cast<pid_t>(std::stol(name)));
    }
  }
  return pids;
}

bool is_rank(const std::vector<std::string>& argv) {
  return argv[1] == "train" && argv[0].find("bertrain") != std::string::npos;
}
// Open MPI 5's mpirun execs prterun (PRRTE's launcher), which then holds the job; Open MPI 4's is orterun.
bool is_mpirun(const std::vector<std::string>& argv) {
  const std::string name = fs::path(argv[0]).filename().string();
  return name == "mpirun" || name == "mpiexec" || name == "prterun" || name == "orterun";
}

std::vector<pid_t> rank_pids(const std::string& out) { return job_pids(out, is_rank); }

// The ranks of the job training into `out` still there once mpirun has returned: a rank mpirun killed as it exited
// may still be in /proc for a moment (seen once in a fresh-clone run: "1 rank(s) outlived the job", then 6 of 6
// passes), so it is given up to `grace_s` to go; one that stays is one that outlived the job.
std::vector<pid_t> ranks_left(const std::string& out, double grace_s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  std::vector<pid_t> left = rank_pids(out);
  while (!left.empty() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    left = rank_pids(out);
  }
  return left;
}

// Waits until the job training into `out` has written its first checkpoint (every rank is then in its training
// loop, its stop handlers installed) and sends `sig` to one process of job_pids(out, match) (the last found).
// False when the job ended first or no such process was found.
template <typename Match>
bool signal_when_training(const std::string& out, Match match, int sig, const std::atomic<bool>& job_done) {
  while (!job_done && !fs::exists(out + "/last/trainer_state.json")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const std::vector<pid_t> pids = job_pids(out, match);
  return !job_done && !pids.empty() && ::kill(pids.back(), sig) == 0;
}

// Slurm's --signal=USR1@T reaches mpirun, which forwards SIGUSR1 to every rank: the job stops with a checkpoint
// and exit status 75 and, resumed on another number of ranks, ends where one process does.
TEST_F(MpiTest, SignalStopsEveryRankWithACheckpoint) {
  const int epochs = 500;
  const RunResult single = train(0, "single", epochs);
  ASSERT_EQ(single.exit_code, 0) << single.describe();
  std::atomic<bool> done{false};
  bool sent = false;
  std::thread signaller([&] { sent = signal_when_training(temp_.path("signalled"), is_mpirun, SIGUSR1, done); });
  const RunResult stopped = train(2, "signalled", epochs);
  done = true;
  signaller.join();
  ASSERT_TRUE(sent) << "mpirun was not found while the job trained: " << stopped.describe();
  ASSERT_EQ(stopped.exit_code, 75) << stopped.describe();
  EXPECT_NE(stopped.err.find("stopped by SIGUSR1"), std::string::npos) << stopped.describe();
  const RunResult resumed = train(3, "signalled", epochs, {"--resume"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  expect_same_parameters("single", "signalled");
}

TEST_F(MpiTest, SignalToOneRankStopsTheWholeJob) {
  const int epochs = 500;
  const RunResult single = train(0, "single", epochs);
  ASSERT_EQ(single.exit_code, 0) << single.describe();
  std::atomic<bool> done{false};
  bool sent = false;
  std::thread signaller([&] { sent = signal_when_training(temp_.path("one"), is_rank, SIGTERM, done); });
  const RunResult stopped = train(2, "one", epochs);
  done = true;
  signaller.join();
  ASSERT_TRUE(sent) << "the job's ranks were not found running: " << stopped.describe();
  ASSERT_EQ(stopped.exit_code, 75) << stopped.describe();
  EXPECT_NE(stopped.err.find("bertrain: stopped by"), std::string::npos) << stopped.describe();
  const RunResult resumed = train(2, "one", epochs, {"--resume"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  expect_same_parameters("single", "one");
}

// A rank that is stopped (SIGSTOP: a debugger, a frozen node) does not die, so mpirun does not end the job: the rank
// waiting for it in a collective ends it after --collective-timeout, with one line and exit status 1, and mpirun
// takes the stopped rank down too. Before, every rank waited for ever.
TEST_F(MpiTest, AStoppedRankEndsTheJobAfterTheCollectiveTimeout) {
  const std::string out = temp_.path("stopped");
  std::atomic<bool> done{false};
  bool sent = false;
  std::thread stopper([&] { sent = signal_when_training(out, is_rank, SIGSTOP, done); });
  const auto start = std::chrono::steady_clock::now();
  const RunResult r = train(2, "stopped", 100000, {"--collective-timeout", "2"});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  done = true;
  stopper.join();
  std::vector<pid_t> left = ranks_left(out, 5);
  for (const pid_t pid : left) ::kill(pid, SIGKILL);
  ASSERT_TRUE(sent) << "the job's ranks were not found running: " << r.describe();
  EXPECT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_LT(seconds, 60) << r.describe();
  EXPECT_EQ(error_lines(r.err), 1u) << r.describe();  // the waiting rank's; the stopped one never waited that long
  EXPECT_NE(r.err.find("MPI_Allreduce did not finish within 2 s"), std::string::npos) << r.describe();
  EXPECT_TRUE(left.empty()) << left.size() << " rank(s) outlived the job";
}

// Every rank stopped for longer than --collective-timeout and then continued (a job suspended with Ctrl-Z and
// resumed, a node frozen whole) goes on to the end: time a rank was stopped is not time it waited for its peers.
TEST_F(MpiTest, AJobStoppedAndContinuedGoesOn) {
  const std::string out = temp_.path("suspended");
  std::atomic<bool> done{false};
  std::size_t stopped = 0;
  std::thread suspender([&] {
    while (!done && !fs::exists(out + "/last/trainer_state.json")) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const std::vector<pid_t> ranks = done ? std::vector<pid_t>{} : rank_pids(out);
    for (const pid_t pid : ranks) stopped += ::kill(pid, SIGSTOP) == 0 ? 1 : 0;
    std::this_thread::sleep_for(std::chrono::seconds(5));  // two and a half timeouts
    for (const pid_t pid : ranks) ::kill(pid, SIGCONT);
  });
  const RunResult r = train(2, "suspended", 1000, {"--collective-timeout", "2"});
  done = true;
  suspender.join();
  EXPECT_EQ(stopped, 2u) << "the job's two ranks were not both stopped while it trained: " << r.describe();
  EXPECT_EQ(r.exit_code, 0) << r.describe();
}

// Several GPU ranks on however many GPUs there are, summing their gradients through host memory with MPI
// (--gpu-collectives mpi; auto takes it when the ranks outnumber the GPUs, as here on a one-GPU machine): 2 and
// 3 ranks end where one GPU process does, fp32.
TEST_F(MpiTest, GpuRanksSummingThroughHostMemoryMatchOneGpuProcess) {
  BERTRAIN_REQUIRE_GPU();
  const int gpus = cuda_device_count();
  const RunResult single = train(0, "gpu_single", 3, {"--device", "cuda"});
  ASSERT_EQ(single.exit_code, 0) << single.describe();
  for (int ranks : {2, 3}) {
    const std::string run = "gpu_mpi" + std::to_string(ranks), collectives = ranks > gpus ? "auto" : "mpi";
    const RunResult r = train(ranks, run, 3, {"--device", "cuda", "--gpu-collectives", collectives});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_NE(engine_of(temp_.path(run)).find("gradients summed by MPI through host memory"), std::string::npos)
        << run << " (--gpu-collectives " << collectives << "): " << engine_of(temp_.path(run));
    expect_same_parameters("gpu_single", run);
  }
  // --grad-reduce bf16 through host memory: each rank's gradient is rounded to bf16 on the GPU (relative error at
  // most 2^-9), summed as floats by MPI and rounded to bf16 once more. An Adam step is at most about lr, so the
  // rounding moves a parameter by at most about lr·2^-8 a step: 15 steps × 3e-3 × 2^-8 ≈ 1.8e-4, which moves these
  // losses (about 0.6) by far less than 0.1 % (2026-11-27, emulated GPU: 3.1e-6 relative at most).
  const RunResult bf16 = train(2, "gpu_mpi_bf16", 3, {"--device", "cuda", "--gpu-collectives", "mpi", "--grad-reduce", "bf16"});
  ASSERT_EQ(bf16.exit_code, 0) << bf16.describe();
  expect_same_losses("gpu_single", "gpu_mpi_bf16", 1e-3);
}

// A 2-rank GPU job summing through host memory, stopped by SIGTERM to one rank early in its first epoch (every
// rank stops with the checkpoint, exit 75), resumed from that mid-epoch step checkpoint as one GPU process, ends
// where one uninterrupted GPU process does. A checkpoint every step: the signal goes out once the first exists,
// and the 100 steps still to come take long enough, also on a fast GPU, for it to arrive before the job ends.
TEST_F(MpiTest, GpuJobStoppedBySigtermResumesOnOneRank) {
  BERTRAIN_REQUIRE_GPU();
  const int epochs = 20;
  const RunResult single = train(0, "gpu_single", epochs, {"--device", "cuda"});
  ASSERT_EQ(single.exit_code, 0) << single.describe();
  std::atomic<bool> done{false};
  bool sent = false;
  std::thread signaller([&] { sent = signal_when_training(temp_.path("gpu_stopped"), is_rank, SIGTERM, done); });
  const RunResult stopped =
      train(2, "gpu_stopped", epochs, {"--device", "cuda", "--gpu-collectives", "mpi", "--save-steps", "1"});
  done = true;
  signaller.join();
  ASSERT_TRUE(sent) << "the job's ranks were not found running: " << stopped.describe();
  ASSERT_EQ(stopped.exit_code, 75) << stopped.describe();
  std::ifstream state_file(temp_.path("gpu_stopped") + "/last/trainer_state.json");
  const long stopped_at = nlohmann::json::parse(state_file).at("optimizer_steps").get<long>();
  EXPECT_LT(stopped_at, 5L * epochs) << "the job was not stopped early";
  const RunResult resumed = train(0, "gpu_stopped", epochs, {"--device", "cuda", "--save-steps", "1", "--resume"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  std::printf("stopped after optimizer step %ld of %d, resumed on 1 rank\n", stopped_at, 5 * epochs);
  expect_same_parameters("gpu_single", "gpu_stopped");
}

// Chaos, MPI variant: one rank of a 2-rank job killed with SIGKILL at random moments, twice per run; mpirun ends
// the job, `bertrain launch` runs it again with --resume; every run ends bit for bit as the uninterrupted job.
TEST_F(MpiTest, ChaosKillingOneRankEndsAsTheUninterruptedJob) {
  const auto started = std::chrono::steady_clock::now();
  const RunResult reference = train(2, "reference", 6, {"--save-steps", "1"});
  ASSERT_EQ(reference.exit_code, 0) << reference.describe();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::mt19937 rng(11);
  int kills = 0, restarts = 0;
  // Kill moments are drawn within what the uninterrupted job took. Measured once, on a loaded machine that can be
  // longer than the same job takes a moment later, which then ends before its kills: such a run is started again
  // from nothing, its kills drawn within the time it took (as in tests/tools/chaos_test.h).
  double window = seconds;
  for (int r = 0; r < 5; ++r) {
    const std::string out = "chaos" + std::to_string(r);
    std::vector<std::string> argv{BERTRAIN_BINARY, "launch", "--max-restarts", "6", "--restart-delay", "0", "--"};
    const std::vector<std::string> job = mpi_prefix(2);
    argv.insert(argv.end(), job.begin(), job.end());
    const std::vector<std::string> command = train_command(out, 6, {"--save-steps", "1"});
    argv.insert(argv.end(), command.begin(), command.end());
    std::atomic<bool> finished{false};
    int run_kills = 0;
    std::thread killer([&, out] {
      for (int k = 0; k < 2; ++k) {
        const double at = std::uniform_real_distribution<double>(0.3, 0.9)(rng) * window;
        std::this_thread::sleep_for(std::chrono::duration<double>(at));
        // Between attempts (and on a loaded machine, before mpirun has started them) there are no ranks yet: wait
        // for the next ones rather than give up the kill, unless the job has ended.
        std::vector<pid_t> ranks;
        while (!finished && (ranks = rank_pids(temp_.path(out))).empty()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        if (ranks.empty()) break;
        ::kill(ranks[rng() % ranks.size()], SIGKILL);
        ++run_kills;
      }
    });
    const auto run_started = std::chrono::steady_clock::now();
    const RunResult launched = testing::run_process(argv, {}, 300);
    finished = true;
    killer.join();
    ASSERT_EQ(launched.exit_code, 0) << launched.describe();
    kills += run_kills;
    if (run_kills == 0 && restarts < 10) {  // ended before its first kill
      window = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_started).count();
      fs::remove_all(temp_.path(out));
      ++restarts;
      --r;
      continue;
    }
    for (const char* file : {"last/model.safetensors", "last/optimizer.safetensors", "best/model.safetensors"}) {
      std::ifstream a(temp_.path("reference") + "/" + file, std::ios::binary), b(temp_.path(out) + "/" + file, std::ios::binary);
      const std::string x((std::istreambuf_iterator<char>(a)), {}), y((std::istreambuf_iterator<char>(b)), {});
      EXPECT_TRUE(!x.empty() && x == y) << out << ": " << file << " differs from the uninterrupted job's\n" << launched.err;
    }
  }
  std::printf("chaos (MPI): %d ranks killed over 5 runs of a job that takes %.2f s uninterrupted; %d runs started "
              "again after ending before their first kill\n", kills, seconds, restarts);
  EXPECT_GE(kills, 5);
}

// Rank 1 is started with a training file that does not exist: the whole job must end, non-zero, with
// a message naming the host and the rank, while rank 0 would otherwise wait in a collective forever.
TEST_F(MpiTest, AFailingRankEndsTheJob) {
  std::vector<std::string> argv = mpi_prefix(2);
  std::string good, bad;
  for (const std::string& a : train_command("failing", 2)) good += "'" + a + "' ";
  bad = good;
  bad.replace(bad.find(temp_.path("data.csv")), temp_.path("data.csv").size(), temp_.path("missing.csv"));
  const RunResult r = expect_prompt_failure(
      argv, "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then exec " + bad + "; else exec " + good + "; fi");
  EXPECT_NE(r.err.find("rank 1"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("missing.csv"), std::string::npos) << r.describe();
  EXPECT_FALSE(fs::exists(temp_.path("failing") + "/last"));
}

// A mistake every rank meets alike, in the command line (before MPI starts) or in input every rank reads (after), is
// said once, by rank 0, not once per rank.
TEST_F(MpiTest, AMistakeEveryRankMeetsIsSaidOnce) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--lr", "-1"}, "--lr must be positive"},
      {{"--val-data", temp_.path("missing.csv")}, "missing.csv"}};
  for (const auto& [extra, needle] : cases) {
    std::vector<std::string> argv = mpi_prefix(3);
    for (const std::string& a : train_command("mistake", 1, extra)) argv.push_back(a);
    const RunResult r = testing::run_process(argv, {}, 120);
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_EQ(error_lines(r.err), 1u) << r.describe();
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.describe();
  }
}

// A loss that diverges is the same on every rank (it is summed over them): said once, by rank 0, exit 3.
TEST_F(MpiTest, ADivergingLossIsSaidOnce) {
  std::vector<std::string> argv = mpi_prefix(3);
  for (const std::string& a : train_command("diverging", 2, {"--lr", "1e30"})) argv.push_back(a);
  const RunResult r = testing::run_process(argv, {}, 120);
  EXPECT_EQ(r.exit_code, bertrain::kExitDiverged) << r.describe();
  EXPECT_EQ(error_lines(r.err), 1u) << r.describe();
  EXPECT_NE(r.err.find("training stopped"), std::string::npos) << r.describe();
}

// Ranks launched with other flags, or with another copy of the data, are named by the first rank and setting that
// differs, exit 2, before any collective could mismatch: a different --epochs hung (rank 0 in MPI_Finalize, rank 1
// in an allreduce), different data aborted in MPI with a truncated message and a backtrace.
TEST_F(MpiTest, RanksThatDoNotTrainTheSameThingAreNamed) {
  std::string rows;
  {
    std::ifstream in(temp_.path("data.csv"));
    rows.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::ofstream(temp_.path("other.csv")) << rows.substr(0, rows.rfind('\n', rows.size() - 2) + 1);  // a row fewer
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--epochs", "5"}, "--epochs 5 where rank 0 has 3"},
      {{"--train-data", temp_.path("other.csv")}, "--train-data content \"fnv1a64:"}};
  for (const auto& [rank1_extra, needle] : cases) {
    SCOPED_TRACE(needle);
    std::string good, bad;
    for (const std::string& a : train_command("disagree", 3)) good += "'" + a + "' ";
    for (const std::string& a : train_command("disagree", 3, rank1_extra)) bad += "'" + a + "' ";
    const RunResult r = expect_prompt_failure(
        mpi_prefix(2), "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then exec " + bad + "; else exec " + good + "; fi");
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_EQ(error_lines(r.err), 1u) << r.describe();
    EXPECT_NE(r.err.find("rank 1 does not train what rank 0 trains"), std::string::npos) << r.describe();
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.describe();
    EXPECT_FALSE(fs::exists(temp_.path("disagree") + "/last"));
  }
}

// RUN_DIR is compared as a place, not as spelt: rank 1's `DIR/./spelt` is rank 0's `DIR/spelt` (refused before).
TEST_F(MpiTest, RunDirSpeltOtherwiseIsTheSameFolder) {
  std::string rank0, rank1;
  for (const std::string& a : train_command("spelt", 1)) rank0 += "'" + a + "' ";
  std::vector<std::string> other = train_command("spelt", 1);
  *(std::find(other.begin(), other.end(), "--out") + 1) = temp_.path(".") + "/./spelt/";
  for (const std::string& a : other) rank1 += "'" + a + "' ";
  std::vector<std::string> argv = mpi_prefix(2);
  argv.insert(argv.end(), {"/bin/sh", "-c",
                           "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then exec " + rank1 + "; else exec " + rank0 + "; fi"});
  const RunResult r = testing::run_process(argv, {}, 120);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(fs::exists(temp_.path("spelt") + "/results.json")) << r.describe();
}

// Ranks that find different runs in RUN_DIR (here a finished one on rank 0 and none on rank 1, as a RUN_DIR that is
// not on a shared filesystem would give) stop with one error line: rank 0 used to return "finished" while rank 1
// waited in its first collective for ever.
TEST_F(MpiTest, RanksThatFindDifferentRunsAreNamed) {
  const RunResult done = train(0, "done", 3);
  ASSERT_EQ(done.exit_code, 0) << done.describe();
  std::string finished, fresh;
  for (const std::string& a : train_command("done", 3, {"--resume"})) finished += "'" + a + "' ";
  for (const std::string& a : train_command("fresh", 3)) fresh += "'" + a + "' ";
  const RunResult r = expect_prompt_failure(
      mpi_prefix(2), "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then exec " + fresh + "; else exec " + finished + "; fi");
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(error_lines(r.err), 1u) << r.describe();
  EXPECT_NE(r.err.find("the run directory's state \"new\" where rank 0 has \"finished\""), std::string::npos)
      << r.describe();
}

// Rank 1 dies from a signal before taking part in any collective: mpirun must end rank 0 too.
TEST_F(MpiTest, ADyingRankEndsTheJob) {
  std::vector<std::string> argv = mpi_prefix(2);
  std::string good;
  for (const std::string& a : train_command("dying", 50)) good += "'" + a + "' ";
  expect_prompt_failure(argv, "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then kill -9 $$; else exec " + good + "; fi");
}

TEST_F(MpiTest, AllreduceBenchmarkVerifiesItsSums) {
  std::vector<std::string> argv = mpi_prefix(3);
  argv.insert(argv.end(), {BERTRAIN_BINARY, "bench", "allreduce", "--max-bytes", "65536", "--iters", "2", "--json"});
  const RunResult r = testing::run_process(argv, {}, 120);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  int sizes = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json m = nlohmann::json::parse(line);
    EXPECT_EQ(m.at("ranks"), 3);
    EXPECT_TRUE(m.at("correct").get<bool>()) << line;
    EXPECT_NEAR(m.at("busbw_gbps").get<double>(), m.at("algbw_gbps").get<double>() * 4.0 / 3.0, 1e-3) << line;
    ++sizes;
  }
  EXPECT_EQ(sizes, 7);  // 1 KiB .. 64 KiB
}

// The same for GPU buffers summed through host memory, 3 ranks on however many GPUs there are.
TEST_F(MpiTest, GpuAllreduceThroughHostMemoryVerifiesItsSums) {
  BERTRAIN_REQUIRE_GPU();
  std::vector<std::string> argv = mpi_prefix(3);
  argv.insert(argv.end(), {BERTRAIN_BINARY, "bench", "allreduce", "--device", "cuda", "--gpu-collectives", "mpi",
                           "--max-bytes", "65536", "--iters", "2", "--json"});
  const RunResult r = testing::run_process(argv, {}, 120);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  int sizes = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_TRUE(nlohmann::json::parse(line).at("correct").get<bool>()) << line;
    ++sizes;
  }
  EXPECT_EQ(sizes, 7);
}

}  // namespace
}  // namespace bertrain

// `bertrain tune` end to end. Most studies run tests/tools/fake_trial.cpp as the trials' --launcher (a
// deterministic objective with a known optimum, written as the trainer writes its run directory), so that the
// scheduler's decisions, parallelism, failures, signals and --resume are tested exactly and fast; one short study
// runs the real `bertrain train` on the tiny model, with MLflow.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "core/files.h"
#include "tests/tools/cli_test.h"

#ifndef BERTRAIN_FAKE_TRIAL
#error "BERTRAIN_FAKE_TRIAL must name the fake trial program"
#endif

namespace bertrain {
namespace cli_test {
namespace {

class CliTune : public CliTest {
 protected:
  // tune with the fake trial as its launcher; TRAIN FLAGS need only what the fake reads (and train's required ones).
  std::vector<std::string> tune_args(const std::string& space, const std::string& out, std::vector<std::string> own,
                                     std::vector<std::string> train = {"--epochs", "4"}) {
    spit(dir_ / "space.json", space);
    std::vector<std::string> a{"tune", "--space", path("space.json"), "--out", out, "--launcher", BERTRAIN_FAKE_TRIAL};
    a.insert(a.end(), own.begin(), own.end());
    a.insert(a.end(), {"--", "--model", model(), "--train-data", data()});
    a.insert(a.end(), train.begin(), train.end());
    return a;
  }
  // A random search over lr, `trials` trials two at a time, no scheduler: the studies the signal tests stop.
  std::vector<std::string> lr_study_args(const std::string& out, int trials) {
    return tune_args(R"({"lr": {"type": "loguniform", "low": 1e-5, "high": 1e-2}})", out,
                     {"--search", "random", "--trials", std::to_string(trials), "--parallel", "2", "--scheduler", "none"},
                     {"--epochs", "4"});
  }
  static json study(const fs::path& dir) { return json::parse(slurp(dir / "study.json")); }
  static std::vector<std::string> statuses(const json& s) {
    std::vector<std::string> out;
    for (const json& t : s["trials"]) out.push_back(t["status"]);
    return out;
  }
  static std::vector<long> epochs(const json& s) {
    std::vector<long> out;
    for (const json& t : s["trials"]) out.push_back(t["epochs"]);
    return out;
  }
  // Each trial's metrics.jsonl holds epochs 0 .. n-1 once each.
  static void expect_whole_histories(const fs::path& out, const json& s, long epochs_each) {
    for (const json& t : s["trials"]) {
      const std::vector<json> lines = read_jsonl(out / t["dir"].get<std::string>() / "metrics.jsonl");
      ASSERT_EQ(static_cast<long>(lines.size()), epochs_each) << t;
      for (long e = 0; e < epochs_each; ++e) EXPECT_EQ(lines[static_cast<std::size_t>(e)]["epoch"], e) << t;
    }
  }
};

// A grid runs every point after --initial-params' (Ray runs points_to_evaluate in addition: the initial points took the
// grid's first places, so lr-patience 1 never ran), and a searched --epochs (without ASHA) is each trial's own.
TEST_F(CliTune, AGridRunsWholeAfterTheInitialPointsAndSearchedEpochsAreEachTrials) {
  const std::string out = path("study");
  const RunResult r = run(tune_args(R"({"epochs": {"type": "int", "low": 1, "high": 2},
                                         "lr-patience": {"type": "randint", "low": 1, "high": 3}})",
                                    out, {"--search", "grid", "--scheduler", "none", "--initial-params",
                                          R"({"epochs": 2, "lr-patience": 2})"},
                                    {}),
                          {"FAKE_TRIAL_EPOCH_MS=50"});
  ASSERT_TRUE(succeeded(r)) << r.describe();
  const json s = study(out);
  std::vector<json> params;
  for (const json& t : s["trials"]) params.push_back(t["params"]);
  EXPECT_EQ(params, (std::vector<json>{json{{"epochs", 2}, {"lr-patience", 2}}, json{{"epochs", 1}, {"lr-patience", 1}},
                                       json{{"epochs", 1}, {"lr-patience", 2}}, json{{"epochs", 2}, {"lr-patience", 1}},
                                       json{{"epochs", 2}, {"lr-patience", 2}}}));
  EXPECT_EQ(statuses(s), std::vector<std::string>(5, "completed"));
  EXPECT_EQ(epochs(s), (std::vector<long>{2, 1, 1, 2, 2}));
  EXPECT_NE(r.out.find("trial 001 epoch 1/1:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("trial 000 epoch 2/2:"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("epoch 2/1"), std::string::npos) << r.out;
}

// A searched uniform --epochs records as max_t the most a trial can run: train takes the integer part, and uniform
// (1, 3) never proposes 3 itself.
TEST_F(CliTune, SearchedUniformEpochsRecordTheMostATrialRuns) {
  const std::string out = path("study");
  const RunResult r = run(tune_args(R"({"epochs": {"type": "uniform", "low": 1, "high": 3}})", out,
                                    {"--scheduler", "none", "--trials", "2"}, {}),
                          {"FAKE_TRIAL_EPOCH_MS=50"});
  ASSERT_TRUE(succeeded(r)) << r.describe();
  const json s = study(out);
  EXPECT_EQ(s["settings"]["max_t"], 2) << s["settings"];
  for (const long e : epochs(s)) EXPECT_LE(e, 2);
}

// Grid order lr = 1e-4, 10^-3.5, 1e-3, 1e-5, 2e-4 (dropout 0.35): val_loss after epoch e is (log10 lr + 3.5)^2 +
// 0.5 / (e + 1). One trial at a time, ASHA with grace period 1 and reduction factor 2 over 4 epochs (rungs at 1
// and 2 epochs; rewards are -val_loss):
//   000 (base 0.25)   rung 1 empty, records -0.75; rung 2 empty, records -0.5; trains its 4 epochs.
//   001 (base 0)      rung 1 {-0.75}: -0.5 is not below -0.75; rung 2 {-0.5}: -0.25 not below -0.5; 4 epochs.
//   002 (base 0.25)   rung 1 {-0.75, -0.5}: cutoff -0.625, -0.75 is below: stopped after epoch 1.
//   003 (base 2.25)   rung 1 {-0.75, -0.5, -0.75}: cutoff -0.75, -2.75 is below: stopped after epoch 1.
//   004 (base 0.0396) rung 1 {-2.75, -0.75, -0.75, -0.5}: cutoff -0.75, -0.5396 goes on; rung 2 {-0.5, -0.25}:
//                     cutoff -0.375, -0.2896 goes on; 4 epochs.
TEST_F(CliTune, AshaDecisionsEqualAHandComputedTrace) {
  const std::string out = path("study");
  const RunResult r = run(tune_args(R"({"lr": {"type": "choice", "values": [1e-4, 0.00031622776601683794, 1e-3, 1e-5, 2e-4]},
                                         "dropout": 0.35})",
                                    out, {"--search", "grid", "--reduction-factor", "2", "--grace-period", "1"}),
                          {"FAKE_TRIAL_EPOCH_MS=400"});
  ASSERT_TRUE(succeeded(r));
  const json s = study(out);
  EXPECT_EQ(statuses(s), (std::vector<std::string>{"completed", "completed", "stopped", "stopped", "completed"}));
  // A stopped trial ends within the epoch after its stop (SIGTERM lands while it runs; tune looks every 100 ms);
  // what it records after the stop is not the scheduler's (Ray hears nothing more from a stopped trial).
  const std::vector<long> e = epochs(s);
  EXPECT_EQ(e[0], 4);
  EXPECT_EQ(e[1], 4);
  EXPECT_EQ(e[4], 4);
  for (int i : {2, 3}) EXPECT_TRUE(e[i] == 1 || e[i] == 2) << "trial " << i << ": " << e[i] << " epochs";
  EXPECT_EQ(s["best_trial"], "001");
  EXPECT_NEAR(s["trials"][1]["best_metric"].get<double>(), 0.125, 1e-12);  // 0 + 0.5 / 4
  EXPECT_EQ(s["trials"][1]["best_epoch"], 3);
  // The scheduler's inputs, in order: every evaluation of a trial up to its stop (the one at max_t too, which
  // decides nothing), one trial at a time.
  std::vector<std::pair<std::string, long>> events;
  for (const json& ev : s["scheduler_events"]) events.emplace_back(ev["trial"], ev["iteration"]);
  const std::vector<std::pair<std::string, long>> expected{{"000", 1}, {"000", 2}, {"000", 3}, {"000", 4},
                                                           {"001", 1}, {"001", 2}, {"001", 3}, {"001", 4},
                                                           {"002", 1}, {"003", 1}, {"004", 1}, {"004", 2},
                                                           {"004", 3}, {"004", 4}};
  EXPECT_EQ(events, expected);
  EXPECT_NE(r.out.find("trial 002 stopped by ASHA after epoch 1: val_loss 0.75000 is not in the best 1/2 at that rung "
                       "(cutoff 0.62500)"),
            std::string::npos)
      << r.out;
  // The table: best first.
  const std::size_t head = r.out.find("trial  status");
  ASSERT_NE(head, std::string::npos) << r.out;
  EXPECT_LT(r.out.find("001    completed", head), r.out.find("004    completed", head));
  EXPECT_LT(r.out.find("004    completed", head), r.out.find("000    completed", head));
  // best/ is the best trial's best model; results.json has Made-With-ML's fields.
  EXPECT_EQ(slurp(fs::path(out) / "best/model.safetensors"), "epoch 3\n");
  const json results = json::parse(slurp(fs::path(out) / "results.json"));
  for (const char* key : {"timestamp", "run_id", "params", "metrics"}) EXPECT_TRUE(results.contains(key)) << key;
  EXPECT_EQ(results["params"]["lr"], 0.00031622776601683794);
  EXPECT_EQ(results["metrics"].size(), 4u);
  EXPECT_EQ(results["metrics"][0]["epoch"], 0);
  EXPECT_TRUE(results["run_id"].is_null());  // no MLflow
}

// ASHA's stop can come after a trial's training ended (its last epochs were written before tune read the one the
// decision was on): the trial is completed, and the line says why it was not stopped. Each line after a trial says
// the trial's own time and the study's.
TEST_F(CliTune, AStopThatCameTooLateIsSaid) {
  const std::string out = path("study");
  const RunResult r = run(tune_args(R"({"lr": {"type": "choice", "values": [0.00031622776601683794, 1e-5]}, "dropout": 0.35})",
                                    out, {"--search", "grid", "--reduction-factor", "2"}, {"--epochs", "2"}),
                          {"FAKE_TRIAL_EPOCH_MS=100", "FAKE_TRIAL_IGNORE_STOP=1"});
  ASSERT_TRUE(succeeded(r));
  EXPECT_NE(r.out.find("trial 001 stopped by ASHA after epoch 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("trial 001 completed after 2 epochs (its training ended before ASHA's stop took effect): "),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("trial 000 completed after 2 epochs (its"), std::string::npos) << r.out;
  EXPECT_EQ(statuses(study(out)), (std::vector<std::string>{"completed", "completed"}));
  EXPECT_NE(r.out.find("  took "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 of 2 trials done; best so far: trial 000, val_loss 0.25000 (study: "), std::string::npos) << r.out;
}

TEST_F(CliTune, TrialsRunInParallelWithFlagsAsTrainTakesThem) {
  const std::string out = path("study");
  const RunResult r = run(tune_args(R"({"lr": {"type": "loguniform", "low": 1e-5, "high": 1e-2},
                                         "dropout": {"type": "uniform", "low": 0.1, "high": 0.6},
                                         "lr-patience": {"type": "uniform", "low": 1, "high": 10},
                                         "shuffle": {"type": "choice", "values": [true]}})",
                                    out, {"--search", "random", "--trials", "4", "--parallel", "2", "--scheduler", "none",
                                          "--seed", "5"},
                                    {"--epochs", "3"}),
                          {"FAKE_TRIAL_EPOCH_MS=300"});
  ASSERT_TRUE(succeeded(r));
  const json s = study(out);
  EXPECT_EQ(statuses(s), std::vector<std::string>(4, "completed"));
  // Each trial's [start, end] from its times.txt: trials 000 and 001 started together and overlapped.
  std::vector<std::pair<long long, long long>> spans;
  for (int i = 0; i < 4; ++i) {
    std::istringstream in(slurp(fs::path(out) / ("trials/00" + std::to_string(i)) / "times.txt"));
    std::string word;
    long long start = 0, end = 0;
    in >> word >> start >> word >> end;
    spans.emplace_back(start, end);
  }
  EXPECT_LT(spans[1].first, spans[0].second) << "trial 001 started after trial 000 ended";
  EXPECT_LT(spans[0].first, spans[1].second);
  // The flags as train takes them: an integer flag's integer part, a switch alone, and a share of the cores.
  const std::vector<std::string> argv = lines_of(slurp(fs::path(out) / "trials/000/argv.txt"));
  const double patience = s["trials"][0]["params"]["lr-patience"].get<double>();
  const auto at = std::find(argv.begin(), argv.end(), "--lr-patience");
  ASSERT_NE(at, argv.end());
  EXPECT_EQ(*(at + 1), std::to_string(static_cast<long>(patience)));
  // The lines and the table show the value the trial ran with; study.json keeps the drawn one.
  EXPECT_NE(patience, std::trunc(patience));
  EXPECT_NE(r.out.find("trial 000 started:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lr-patience=" + std::to_string(static_cast<long>(patience)) + " "), std::string::npos) << r.out;
  EXPECT_EQ(s["integers"], json::array({"lr-patience"})) << s;  // so that report shows it as the trial ran
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--shuffle"), argv.end());
  // Through a launcher, placing the trials is the launcher's business: no --threads (the real study below checks
  // the cores' split without one).
  EXPECT_EQ(std::find(argv.begin(), argv.end(), "--threads"), argv.end());
  EXPECT_EQ(*(std::find(argv.begin(), argv.end(), "--out") + 1), out + "/trials/000");
  // The same seed proposes the same trials.
  const std::string again = path("again");
  const RunResult quiet = run(tune_args(slurp(dir_ / "space.json"), again,
                                        {"--search", "random", "--trials", "4", "--parallel", "2", "--scheduler",
                                         "none", "--seed", "5", "--quiet"},
                                        {"--epochs", "1"}),
                              {"FAKE_TRIAL_EPOCH_MS=1"});
  ASSERT_TRUE(succeeded(quiet));
  // --quiet: no trial lines; the table and the summary, as --help says.
  EXPECT_EQ(quiet.out.rfind("trial  status", 0), 0u) << quiet.out;
  EXPECT_NE(quiet.out.find("\nbest: trial "), std::string::npos) << quiet.out;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(study(again)["trials"][i]["params"], s["trials"][i]["params"]) << i;
  // --metric takes train's name of a metric as well as metrics.jsonl's.
  const std::string by_accuracy = path("accuracy");
  ASSERT_TRUE(succeeded(run(tune_args(slurp(dir_ / "space.json"), by_accuracy,
                                      {"--search", "random", "--trials", "1", "--scheduler", "none", "--metric", "accuracy",
                                       "--quiet"},
                                      {"--epochs", "1"}),
                            {"FAKE_TRIAL_EPOCH_MS=1"})));
  EXPECT_EQ(study(by_accuracy)["metric"], "val_accuracy");
  const std::vector<std::string> trial = lines_of(slurp(fs::path(by_accuracy) / "trials/000/argv.txt"));
  const auto metric = std::find(trial.begin(), trial.end(), "--metric-for-best");
  ASSERT_NE(metric, trial.end());
  EXPECT_EQ(*(metric + 1), "accuracy");
}

TEST_F(CliTune, DevicesGiveEachRunningTrialItsOwnGpu) {
  const std::string out = path("study");
  // Two devices: two trials at once by default, each on the device its slot holds; the third takes a freed slot.
  ASSERT_TRUE(succeeded(run(tune_args(R"({"lr": {"type": "choice", "values": [1e-4, 2e-4, 3e-4]}})", out,
                                      {"--search", "grid", "--devices", "3,5", "--scheduler", "none", "--quiet"},
                                      {"--epochs", "2"}),
                            {"FAKE_TRIAL_EPOCH_MS=300"})));
  EXPECT_EQ(slurp(fs::path(out) / "trials/000/cuda_visible_devices.txt"), "3");
  EXPECT_EQ(slurp(fs::path(out) / "trials/001/cuda_visible_devices.txt"), "5");
  const std::string third = slurp(fs::path(out) / "trials/002/cuda_visible_devices.txt");
  EXPECT_TRUE(third == "3" || third == "5") << third;
  // Trials 000 and 001 ran together.
  const auto span = [&](const char* id) {
    std::istringstream in(slurp(fs::path(out) / "trials" / id / "times.txt"));
    std::string word;
    long long start = 0, end = 0;
    in >> word >> start >> word >> end;
    return std::make_pair(start, end);
  };
  EXPECT_LT(span("001").first, span("000").second);
  expect_error(run(tune_args(R"({"lr": {"type": "choice", "values": [1e-4]}})", path("bad"), {"--devices", "0,,1"})),
               "--devices: an empty item in '0,,1'");
}

TEST_F(CliTune, TpeFindsTheOptimumBetterThanRandomOnAverage) {
  // The fake objective's optimum is lr = 10^-3.5, dropout = 0.35 (loss 0 + 0.5 / epochs).
  const std::string space = R"({"lr": {"type": "loguniform", "low": 1e-6, "high": 1e-1},
                                "dropout": {"type": "uniform", "low": 0.0, "high": 0.9}})";
  double tpe = 0, random = 0;
  for (const std::string seed : {"1", "2", "3"}) {
    for (const std::string search : {"tpe", "random"}) {
      const std::string out = path(search + seed);
      ASSERT_TRUE(succeeded(run(tune_args(space, out, {"--search", search, "--trials", "30", "--startup-trials", "8",
                                                       "--scheduler", "none", "--seed", seed, "--quiet"},
                                          {"--epochs", "1"}),
                                {"FAKE_TRIAL_EPOCH_MS=0"})));
      const json s = study(out);
      const double best = s["trials"][std::stoi(s["best_trial"].get<std::string>())]["best_metric"].get<double>() - 0.5;
      (search == "tpe" ? tpe : random) += best / 3;
    }
  }
  EXPECT_LT(tpe, random) << "mean best loss above the optimum: tpe " << tpe << ", random " << random;
}

TEST_F(CliTune, AFailedTrialIsRecordedAndTheStudyGoesOn) {
  const std::string out = path("study");
  const RunResult r = run(tune_args(R"({"weight-decay": {"type": "choice", "values": [0, 1]}})", out,
                                    {"--search", "grid"}, {"--epochs", "2"}));
  ASSERT_TRUE(succeeded(r));
  const json s = study(out);
  EXPECT_EQ(statuses(s), (std::vector<std::string>{"completed", "failed"}));
  EXPECT_NE(s["trials"][1]["error"].get<std::string>().find("exit status 1: bertrain: error: fake failure"),
            std::string::npos)
      << s["trials"][1];
  EXPECT_EQ(s["best_trial"], "000");
  // Every trial failing is the study's failure.
  const RunResult all = run(tune_args(R"({"weight-decay": {"type": "choice", "values": [0.7, 1]}})", path("bad"),
                                      {"--search", "grid", "--quiet"}, {"--epochs", "2"}));
  EXPECT_EQ(all.exit_code, 1) << all.describe();
  EXPECT_NE(all.err.find("tune: no trial finished with a val_loss; trial 000: exit status 1: bertrain: error: fake failure"),
            std::string::npos)
      << all.err;
}

// A real trial that diverges (exit 3) advises the study's settings: tune chooses each trial's --out and --overwrite,
// which train's own advice to a diverged run names.
TEST_F(CliTune, ADivergedTrialsAdviceNamesTheStudysSettings) {
  spit(dir_ / "space.json", R"({"lr": {"type": "choice", "values": [1e30]}})");
  const RunResult r = run({"tune", "--space", path("space.json"), "--out", path("study"), "--search", "grid",
                           "--scheduler", "none", "--quiet", "--", "--model", model(), "--train-data", data(),
                           "--epochs", "1", "--batch-size", "8", "--device", "cpu"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  const json s = study(path("study"));
  ASSERT_EQ(s["trials"].size(), 1u) << s;
  const std::string error = s["trials"][0]["error"];
  EXPECT_NE(error.find("exit status 3: bertrain: error: epoch 1, step "), std::string::npos) << error;
  EXPECT_NE(error.find("try a lower --lr in a new study: its --space or TRAIN FLAGS)"), std::string::npos) << error;
  EXPECT_EQ(error.find("--overwrite"), std::string::npos) << error;
  EXPECT_EQ(r.err.find("--overwrite"), std::string::npos) << r.err;
}

// One tune per study folder: a second tune, or a --resume beside a running study, is refused before it reads the
// study (before, both ran, rerunning and failing each other's trials, and the study recorded finished trials as
// failed). Here this test holds the study, through the same lock.
TEST_F(CliTune, AStudyInUseIsRefused) {
  const std::string out = path("study");
  const std::string in_use = "--out '" + out + "' is in use by another bertrain process (pid " +
                             std::to_string(::getpid()) + ")";
  {
    DirectoryLock held(out, "--out");
    const std::string space = R"({"lr": {"type": "choice", "values": [1e-3]}})";
    expect_error(run(tune_args(space, out, {"--search", "grid"})), in_use);
    expect_error(run(tune_args(space, out, {"--search", "grid", "--resume"})), in_use);
  }
  EXPECT_FALSE(fs::exists(out)) << "a refused tune left the folder its lock made";
  ASSERT_TRUE(succeeded(run(tune_args(R"({"lr": {"type": "choice", "values": [1e-3]}})", out, {"--search", "grid"}))));
  EXPECT_FALSE(fs::exists(out + "/.bertrain-lock"));
}

// Starts tune in the background (stdout in a file); returns its pid.
pid_t start_tune(const std::vector<std::string>& args, const std::vector<std::string>& env, const std::string& log) {
  std::vector<std::string> argv_storage{binary()};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<std::string> env_storage = testing::child_environment(env);
  const std::vector<char*> argv = testing::exec_pointers(argv_storage);
  const std::vector<char*> envp = testing::exec_pointers(env_storage);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    testing::default_signals_in_child();
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  return pid;
}

// Waits (at most 60 s) until `ready` holds for the study.json in `dir`.
bool wait_for_study(const fs::path& dir, const std::function<bool(const json&)>& ready) {
  for (int i = 0; i < 600; ++i) {
    if (fs::exists(dir / "study.json")) {
      const json s = json::parse(slurp(dir / "study.json"), nullptr, false);
      if (!s.is_discarded() && ready(s)) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Both running trials have at least one epoch.
bool two_running_with_an_epoch(const json& s) {
  int n = 0;
  for (const json& t : s["trials"]) n += t["status"] == "running" && t["epochs"].get<long>() >= 1 ? 1 : 0;
  return n == 2;
}

// tune `args` (the fake trial, 300 ms epochs) started, signalled with `sig` once two trials have an epoch, and waited
// for: tune's exit status (its output in `log`).
int signalled_study_exit(const std::vector<std::string>& args, const fs::path& out, int sig, const std::string& log) {
  const pid_t pid = start_tune(args, {"FAKE_TRIAL_EPOCH_MS=300"}, log);
  if (!wait_for_study(out, two_running_with_an_epoch)) {
    ADD_FAILURE() << "no two trials with an epoch: " << slurp(log);
    ::kill(pid, SIGKILL);
    wait_exit(pid);
    return -1;
  }
  ::kill(pid, sig);
  return wait_exit(pid);
}

// Slurm's warning (SIGUSR1) and a closed terminal (SIGHUP) stop a study as SIGTERM does: its trials with their
// checkpoints, exit 75 (before, they ended tune by their default action, 138 and 129, study.json saying "running").
TEST_F(CliTune, EveryStopSignalStopsTheStudyWithItsCheckpoints) {
  for (const int sig : {SIGUSR1, SIGHUP}) {
    const std::string out = path("study-" + std::to_string(sig));
    const std::vector<std::string> args = lr_study_args(out, 2);
    const std::string log = path("tune-" + std::to_string(sig) + ".log");
    EXPECT_EQ(signalled_study_exit(args, out, sig, log), 75) << slurp(log);
    EXPECT_NE(slurp(log).find("bertrain: tune stopped by " + signal_name(sig)), std::string::npos) << slurp(log);
    EXPECT_EQ(statuses(study(out)), (std::vector<std::string>{"interrupted", "interrupted"})) << slurp(log);
  }
}

// A trial whose run directory another process still holds when --resume starts (a trial of a study killed outright,
// still writing its checkpoint; here `flock` holds it for a second) is waited for, not resumed at once into "in use"
// and recorded failed for good.
TEST_F(CliTune, AResumeWaitsForATrialStillLetGoOf) {
  const std::string out = path("study");
  const std::vector<std::string> args = lr_study_args(out, 2);
  ASSERT_EQ(signalled_study_exit(args, out, SIGTERM, path("tune.log")), 75) << slurp(path("tune.log"));
  std::vector<std::string> resume = args;
  resume.insert(resume.begin() + 1, "--resume");
  const std::string script =
      "flock '" + out + "/trials/000/.bertrain-lock' sleep 1 & sleep 0.3; " + shell_command(resume);
  const RunResult r = testing::run_process({"/bin/sh", "-c", script}, {"FAKE_TRIAL_EPOCH_MS=20"});
  ASSERT_TRUE(succeeded(r)) << r.describe();
  EXPECT_NE(r.err.find("tune: trial 000: waiting for its earlier process to let go of"), std::string::npos) << r.err;
  EXPECT_EQ(statuses(study(out)), std::vector<std::string>(2, "completed")) << r.describe();
}

TEST_F(CliTune, SigtermStopsEveryTrialWithItsCheckpointAndResumeFinishesTheStudy) {
  const std::string out = path("study");
  const std::vector<std::string> args = lr_study_args(out, 3);
  EXPECT_EQ(signalled_study_exit(args, out, SIGTERM, path("tune.log")), 75) << slurp(path("tune.log"));
  const json stopped = study(out);
  EXPECT_EQ(statuses(stopped), (std::vector<std::string>{"interrupted", "interrupted"})) << stopped.dump(1);
  EXPECT_FALSE(fs::exists(fs::path(out) / "best"));
  EXPECT_NE(slurp(path("tune.log")).find("continue with the same command and --resume"), std::string::npos);
  // Through a launcher the trials are told with SIGUSR1, which mpirun forwards to its ranks (SIGTERM ends its job).
  EXPECT_NE(slurp(fs::path(out) / "trials/000/train.log").find("stopped by SIGUSR1"), std::string::npos);
  // The same command without --resume refuses to start over the study.
  expect_error(run(args), "holds a study (study.json): continue it with --resume");

  std::vector<std::string> resume = args;
  resume.insert(resume.begin() + 1, "--resume");
  const RunResult r = run(resume, {"FAKE_TRIAL_EPOCH_MS=20"});
  ASSERT_TRUE(succeeded(r));
  EXPECT_NE(r.out.find("resuming 2 trials"), std::string::npos) << r.out;
  const json s = study(out);
  EXPECT_EQ(statuses(s), std::vector<std::string>(3, "completed"));
  expect_whole_histories(out, s, 4);
  // Interrupted trials went on from their checkpoints (two runs each), the new one ran once.
  EXPECT_NE(slurp(fs::path(out) / "trials/000/argv.txt").find("--resume"), std::string::npos);
  EXPECT_EQ(slurp(fs::path(out) / "trials/002/argv.txt").find("--resume"), std::string::npos);
  for (const json& t : stopped["trials"]) {
    const int i = std::stoi(t["id"].get<std::string>());
    EXPECT_EQ(s["trials"][i]["params"], t["params"]);  // a resumed trial keeps its parameters
  }
}

TEST_F(CliTune, ATrialEndedByTheStudysSigtermAfterItsTrainingIsNotAFailure) {
  const std::string out = path("study");
  const std::vector<std::string> args = tune_args(R"({"lr": {"type": "choice", "values": [1e-4]}})", out,
                                                  {"--scheduler", "none"}, {"--epochs", "2"});
  // The trial trains its 2 epochs, then takes 5 s to exit, with SIGTERM no longer caught.
  const pid_t pid = start_tune(args, {"FAKE_TRIAL_EPOCH_MS=10", "FAKE_TRIAL_LINGER_MS=5000"}, path("tune.log"));
  ASSERT_TRUE(wait_for_study(out, [](const json& s) { return !s["trials"].empty() && s["trials"][0]["epochs"] == 2; }))
      << slurp(path("tune.log"));
  for (int i = 0; i < 50 && slurp(fs::path(out) / "trials/000/times.txt").find("end") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid), 75) << slurp(path("tune.log"));
  EXPECT_EQ(study(out)["trials"][0]["status"], "interrupted") << slurp(path("tune.log"));
  std::vector<std::string> resume = args;
  resume.insert(resume.begin() + 1, "--resume");
  ASSERT_TRUE(succeeded(run(resume)));
  EXPECT_EQ(study(out)["trials"][0]["status"], "completed");
}

TEST_F(CliTune, AStudyKilledWithoutWarningResumes) {
  const std::string out = path("study");
  const std::vector<std::string> args = lr_study_args(out, 2);
  const pid_t pid = start_tune(args, {"FAKE_TRIAL_EPOCH_MS=300"}, path("tune.log"));
  ASSERT_TRUE(wait_for_study(out, two_running_with_an_epoch)) << slurp(path("tune.log"));
  ::kill(pid, SIGKILL);
  EXPECT_EQ(wait_exit(pid), 128 + SIGKILL);
  // The kernel stops the orphaned trials (SIGTERM): each writes "end" when it exits.
  for (int i = 0; i < 100; ++i) {
    const std::string a = slurp(fs::path(out) / "trials/000/times.txt"), b = slurp(fs::path(out) / "trials/001/times.txt");
    if (a.find("end") != std::string::npos && b.find("end") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (const char* t : {"000", "001"}) {
    EXPECT_NE(slurp(fs::path(out) / "trials" / t / "times.txt").find("end"), std::string::npos) << t << " still running";
  }
  std::vector<std::string> resume = args;
  resume.insert(resume.begin() + 1, "--resume");
  ASSERT_TRUE(succeeded(run(resume, {"FAKE_TRIAL_EPOCH_MS=20"})));
  const json s = study(out);
  EXPECT_EQ(statuses(s), std::vector<std::string>(2, "completed"));
  expect_whole_histories(out, s, 4);
}

TEST_F(CliTune, BadInputIsOneLineNamingWhatToFix) {
  const std::string out = path("study");
  expect_error(run(tune_args(R"({"dropout_p": {"type": "uniform", "low": 0.3, "high": 0.9}})", out, {})),
               "\"dropout-p\" is not a flag of bertrain train (see bertrain train --help); Made-With-ML's dropout_p is --dropout");
  expect_error(run(tune_args(R"({"lr": {"type": "loguniform", "low": 0, "high": 1}})", out, {})),
               "\"lr\": a loguniform's low must be positive");
  expect_error(run(tune_args(R"({"lr": {"type": "uniform", "low": 1, "high": 1}})", out, {})),
               "\"lr\": low (1) must be below high (1)");
  expect_error(run(tune_args(R"({"batch-size": {"type": "choice", "values": []}})", out, {})),
               "\"batch-size\": a choice needs at least one value");
  expect_error(run(tune_args(R"({"shuffle": {"type": "uniform", "low": 0, "high": 1}})", out, {})),
               "\"shuffle\": --shuffle is a switch: give it true / false");
  expect_error(run(tune_args(R"({"out": "x", "lr": {"type": "uniform", "low": 1e-5, "high": 1e-4}})", out, {})),
               "\"out\": tune sets --out itself");
  expect_error(run(tune_args(R"({"lr": {"type": "uniform", "low": 1e-5, "high": 1e-4}})", out, {}, {"--lr", "1e-4"})),
               "\"lr\" is also given after --");
  expect_error(run(tune_args(R"({"lr": {"type": "uniform", "low": 1e-5, "high": 1e-4}})", out, {}, {"--epochz", "3"})),
               "tune: TRAIN FLAGS: train: unknown option '--epochz'");
  expect_error(run(tune_args(R"({"lr": {"type": "uniform", "low": 1e-5, "high": 1e-4}})", out, {}, {"--out", "x"})),
               "tune: --out after --: tune sets it for each trial");
  expect_error(run(tune_args(R"({"lr": {"type": "uniform", "low": 1e-5, "high": 1e-4}})", out, {"--search", "grid"})),
               "grid search: \"lr\" is continuous (uniform)");
  expect_error(run(tune_args(R"({"lr": {"type": "uniform", "low": 1e-5, "high": 1e-4}})", out,
                             {"--initial-params", R"({"lr": 1})"})),
               "--initial-params[0]: \"lr\": 1 is not a number in [1e-05, 0.0001]");
  expect_error(run(tune_args(R"({"lr": {"type": "uniform", "low": 1e-5, "high": 1e-4}})", out, {"--grace-period", "5"},
                             {"--epochs", "3"})),
               "--grace-period (5) must not exceed the trials' epochs (3)");
  expect_error(run(tune_args(R"({"lr": {"type": "uniform", "low": 1e-5, "high": 1e-4}})", out, {}, {"--eval-steps", "3"})),
               "--scheduler asha counts epochs; --eval-steps");
  // A launcher /bin/sh cannot parse failed every trial (exit 1, a study of failures); an empty one meant none.
  std::vector<std::string> unbalanced = tune_args(R"({"lr": {"type": "uniform", "low": 1e-5, "high": 1e-4}})", out, {});
  unbalanced[std::find(unbalanced.begin(), unbalanced.end(), "--launcher") - unbalanced.begin() + 1] = "'srun -N1";
  expect_error(run(unbalanced), "tune: --launcher is not shell text /bin/sh can read: ");
  unbalanced[std::find(unbalanced.begin(), unbalanced.end(), "--launcher") - unbalanced.begin() + 1] = "";
  expect_error(run(unbalanced), "tune: --launcher is empty");
  // A space with nothing searched still names a key train does not have or tune sets.
  expect_error(run(tune_args(R"({"nosuchflag": 3})", out, {})), "\"nosuchflag\" is not a flag of bertrain train");
  expect_error(run(tune_args(R"({"out": "x"})", out, {})), "\"out\": tune sets --out itself");
  // The files every trial reads, and the study's folder, are checked before a study exists: a typo there used to
  // fail every trial, exit 1 and leave a study that the corrected command could neither start nor --resume.
  const std::string lr = R"({"lr": {"type": "uniform", "low": 1e-5, "high": 1e-4}})";
  std::vector<std::string> missing_data = tune_args(lr, out, {});
  std::replace(missing_data.begin(), missing_data.end(), data(), path("nothing.csv"));
  expect_error(run(missing_data), "cannot open --train-data '" + path("nothing.csv") + "'");
  expect_error(run(tune_args(lr, out, {}, {"--val-data", path("nothing.csv")})), "cannot open --val-data");
  std::vector<std::string> missing_model = tune_args(lr, out, {});
  std::replace(missing_model.begin(), missing_model.end(), model(), path("no_model"));
  expect_error(run(missing_model), path("no_model") + ": not found");
  // What the trials would read, read as train reads it: a column the data lacks, a max_length the model cannot take.
  expect_error(run(tune_args(lr, out, {}, {"--label-column", "nosuch"})), "nosuch");
  expect_error(run(tune_args(lr, out, {}, {"--max-length", "4096"})), "--max-length 4096");
  // ... and so is every value a searched --model, data file or way of reading it can propose at its ends, named by
  // its key: a model of the choice that is not there used to fail its trials only, after the others had run.
  const auto searched_model = [&](const std::string& space) {
    spit(dir_ / "space.json", space);
    return std::vector<std::string>{"tune", "--space", path("space.json"), "--out", out, "--launcher",
                                    BERTRAIN_FAKE_TRIAL, "--", "--train-data", data(), "--epochs", "1"};
  };
  const std::string no_model = path("no_model");
  expect_error(run(searched_model(R"({"model": {"type": "choice", "values": [")" + model() + R"(", ")" + no_model +
                                  R"("]}})")),
               "space.json: \"model\" can propose \"" + no_model + "\", which train refuses: " + no_model + ": not found");
  const std::string max_length = R"({"max-length": {"type": "int", "low": 8, "high": 4096}})";
  expect_error(run(tune_args(max_length, out, {"--initial-params", R"({"max-length": 8})"})),
               "space.json: \"max-length\" can propose 4096, which train refuses: --max-length 4096 is more than");
  // The first trial's value refused where an end is taken: that value is named.
  expect_error(run(tune_args(max_length, out, {"--initial-params", R"({"max-length": 400})"})),
               "space.json: \"max-length\" can propose 400, which train refuses: --max-length 400 is more than");
  expect_error(run(tune_args(R"({"val-data": {"type": "choice", "values": [")" + data() + R"(", ")" +
                             path("nothing.csv") + R"("]}})", out, {})),
               "space.json: \"val-data\" can propose \"" + path("nothing.csv") + "\", which train refuses: cannot open --val-data");
  EXPECT_FALSE(fs::exists(out));
  // Train's checks of values and combinations too, before a study exists.
  expect_error(run(tune_args(lr, out, {}, {"--dropout", "1.5"})), "TRAIN FLAGS: --dropout must be in [0, 1), got 1.5");
  expect_error(run(tune_args(lr, out, {}, {"--label-separator", "|"})),
               "tune: TRAIN FLAGS: train: --label-separator splits a label field into several labels");
  // A space that can propose what train refuses is named by its key, whichever value the first trial draws.
  expect_error(run(tune_args(R"({"dropout": {"type": "choice", "values": [0.5, 1.5]}})", out, {})),
               "space.json: \"dropout\" can propose 1.5, which train refuses: --dropout must be in [0, 1), got 1.5");
  // (Its end, or the first trial's draw when that is past 1 already.)
  const RunResult range = run(tune_args(R"({"dropout": {"type": "uniform", "low": 0.5, "high": 1.5}})", out, {}));
  expect_error(range, "space.json: \"dropout\" can propose ");
  EXPECT_NE(range.err.find(", which train refuses: --dropout must be in [0, 1)"), std::string::npos) << range.err;
  expect_error(run(tune_args(R"({"warmup-ratio": {"type": "quniform", "low": 0, "high": 1, "q": 0.25},
                                 "lr-scheduler": "linear"})", out, {})),
               "\"warmup-ratio\" can propose 1.0, which train refuses: --warmup-ratio must be in [0, 1)");
  for (const char* first : {R"({"lr-scheduler": "plateau"})", R"({"lr-scheduler": "linear"})"}) {  // the first trial's
    expect_error(run(tune_args(R"({"lr-scheduler": {"type": "choice", "values": ["plateau", "linear"]}})", out,
                               {"--initial-params", first}, {"--warmup-steps", "2"})),
                 "\"lr-scheduler\" can propose \"plateau\", which train refuses: --warmup-steps / --warmup-ratio need a "
                 "step-wise --lr-scheduler");
  }
  // Ends taken alone but refused together: named as the combination, a parse's and a read's.
  expect_error(run(tune_args(R"({"lr-scheduler": {"type": "choice", "values": ["linear", "plateau"]},
                                 "warmup-steps": {"type": "int", "low": 0, "high": 2}})", out,
                             {"--initial-params", R"({"lr-scheduler": "linear", "warmup-steps": 0})"})),
               "space.json: can propose \"lr-scheduler\" \"plateau\" with \"warmup-steps\" 2, which train refuses "
               "together: --warmup-steps / --warmup-ratio need a step-wise --lr-scheduler");
  std::string with_topic = "id,title,description,tag,topic\n";  // data.csv with its tag again as "topic"
  const std::vector<Row> rows = synthetic_rows();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    with_topic += std::to_string(i) + "," + csv_field(rows[i].title) + "," + csv_field(rows[i].description) + "," +
                  csv_field(rows[i].tag) + "," + csv_field(rows[i].tag) + "\n";
  }
  spit(dir_ / "topic.csv", with_topic);
  const std::string data_and_label = R"({"train-data": {"type": "choice", "values": [")" + path("topic.csv") +
                                     R"(", ")" + data() + R"("]}, "label-column": {"type": "choice", "values":
                                     ["tag", "topic"]}})";
  spit(dir_ / "space.json", data_and_label);
  expect_error(run({"tune", "--space", path("space.json"), "--out", out, "--launcher", BERTRAIN_FAKE_TRIAL,
                    "--initial-params", R"({"train-data": ")" + path("topic.csv") + R"(", "label-column": "tag"})", "--",
                    "--model", model(), "--epochs", "1"}),
               "space.json: can propose \"label-column\" \"topic\" with \"train-data\" \"" + data() + "\", which train "
               "refuses together: " + data() + ": missing label column 'topic'");
  EXPECT_FALSE(fs::exists(out));
  spit(dir_ / "afile", "x\n");
  expect_error(run(tune_args(lr, path("afile/study"), {})), "'" + path("afile") + "' is a file, not a directory");
  EXPECT_FALSE(fs::exists(out));
  // A training run's folder is not a study's: the study would replace its best/.
  fs::create_directories(dir_ / "trained" / "best");
  spit(dir_ / "trained" / "metrics.jsonl", "{}\n");
  expect_error(run(tune_args(lr, path("trained"), {})), "holds a run's files (best, metrics.jsonl)");
  EXPECT_EQ(slurp(dir_ / "trained" / "metrics.jsonl"), "{}\n");
  EXPECT_FALSE(fs::exists(dir_ / "trained" / "study.json"));
  spit(dir_ / "broken.json", "{\"lr\": ");
  expect_error(run({"tune", "--space", path("broken.json"), "--out", out, "--", "--model", model(), "--train-data", data()}),
               "broken.json");
  EXPECT_FALSE(fs::exists(fs::path(out) / "study.json"));
  expect_error(run(tune_args(R"({"lr": {"type": "uniform", "low": 1e-5, "high": 1e-4}})", out, {"--resume"})),
               "tune --resume: no study in");

  // --resume with another space is refused, naming the setting.
  ASSERT_TRUE(succeeded(run(tune_args(R"({"lr": {"type": "uniform", "low": 1e-5, "high": 1e-4}})", out,
                                      {"--trials", "1", "--quiet"}, {"--epochs", "1"}),
                            {"FAKE_TRIAL_EPOCH_MS=0"})));
  expect_error(run(tune_args(R"({"lr": {"type": "uniform", "low": 1e-5, "high": 2e-4}})", out, {"--resume"},
                             {"--epochs", "1"})),
               "tune --resume: space differs from the study in");
  // A larger --trials grows a finished study.
  const RunResult more = run(tune_args(R"({"lr": {"type": "uniform", "low": 1e-5, "high": 1e-4}})", out,
                                       {"--trials", "2", "--resume", "--quiet"}, {"--epochs", "1"}),
                             {"FAKE_TRIAL_EPOCH_MS=0"});
  ASSERT_TRUE(succeeded(more));
  EXPECT_EQ(study(out)["trials"].size(), 2u);
  // The best trial's model gone: said before any trial runs (it ran them, then failed, exit 1), the study unchanged.
  const std::string best_trial = study(out)["best_trial"];
  const std::string before = slurp(fs::path(out) / "study.json");
  fs::remove_all(fs::path(out) / "trials" / best_trial / "best");
  expect_error(run(tune_args(R"({"lr": {"type": "uniform", "low": 1e-5, "high": 1e-4}})", out,
                             {"--trials", "3", "--resume", "--quiet"}, {"--epochs", "1"}),
                   {"FAKE_TRIAL_EPOCH_MS=0"}),
               "tune --resume: " + out + "/trials/" + best_trial + "/best is missing: it is the model of trial " +
                   best_trial + ", the best so far");
  EXPECT_EQ(slurp(fs::path(out) / "study.json"), before);
}

// The real trainer on the tiny model: two trials at once, ASHA, MLflow parent and child runs, and a best/ that
// predict loads.
// Trials that evaluate every --eval-steps steps (several an epoch): the study counts evaluations, says where each is
// (step and epoch, not "epoch 3/2"), and its table, study.json and report say evaluations.
TEST_F(CliTune, AStudyOfTrialsThatEvaluateWithinEpochsCountsEvaluations) {
  const std::string out = path("study");
  spit(dir_ / "space.json", R"({"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-2}})");
  // 30 training rows in batches of 8: 4 steps an epoch, 8 in two; evaluations after steps 3, 6 and 8.
  const RunResult r = run({"tune", "--space", path("space.json"), "--out", out, "--trials", "1", "--scheduler", "none",
                           "--", "--model", model(), "--train-data", data(), "--epochs", "2", "--batch-size", "8",
                           "--eval-steps", "3", "--device", "cpu"});
  ASSERT_TRUE(succeeded(r));
  EXPECT_NE(r.out.find("trial 000 evaluation 2 (step 6, epoch 2): val_loss "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("trial 000 completed after 3 evaluations: best val_loss "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("epoch 3/2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("trial  status     evaluations  best val_loss"), std::string::npos) << r.out;
  const json s = study(out);
  EXPECT_EQ(s["iteration"], "evaluation");
  EXPECT_EQ(s["trials"][0]["epochs"], 3);
  const RunResult report = run({"report", out});
  ASSERT_TRUE(succeeded(report));
  EXPECT_NE(report.out.find(" at evaluation "), std::string::npos) << report.out;
  EXPECT_NE(slurp(fs::path(out) / "report.html").find("<th>evaluations</th>"), std::string::npos);
}

TEST_F(CliTune, AShortRealStudyWithMlflow) {
  const std::string out = path("study"), mlruns = path("mlruns");
  spit(dir_ / "space.json", R"({"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-2}, "dropout": 0.1})");
  const RunResult r = run({"tune", "--space", path("space.json"), "--out", out, "--trials", "3", "--parallel", "2",
                           "--search", "random", "--mlflow-dir", mlruns, "--experiment", "tune-test", "--initial-params",
                           R"([{"train_loop_config": {"lr": 1e-3, "dropout_p": 0.1}}])", "--",
                           "--model", model(), "--train-data", data(), "--epochs", "2", "--batch-size", "8",
                           "--device", "cpu"});
  ASSERT_TRUE(succeeded(r));
  const json s = study(out);
  ASSERT_EQ(s["trials"].size(), 3u);
  EXPECT_EQ(s["trials"][0]["params"], json::parse(R"({"lr": 1e-3, "dropout": 0.1})"));  // dropout_p is --dropout
  for (const json& t : s["trials"]) {
    EXPECT_TRUE(t["status"] == "completed" || t["status"] == "stopped") << t;
    EXPECT_TRUE(fs::exists(fs::path(out) / t["dir"].get<std::string>() / "train.log"));
    // A finished or stopped trial keeps no optimizer state (tune gives its trials --save-optimizer during, and drops
    // a stopped one's): neither is ever trained on again.
    EXPECT_FALSE(fs::exists(fs::path(out) / t["dir"].get<std::string>() / "last/optimizer.safetensors")) << t;
  }
  ASSERT_TRUE(s["best_trial"].is_string());
  const fs::path best_trial = fs::path(out) / "trials" / s["best_trial"].get<std::string>();
  EXPECT_EQ(slurp(fs::path(out) / "best/model.safetensors"), slurp(best_trial / "best/model.safetensors"));
  const RunResult predicted = run({"predict", "--model", out + "/best", "--text", "image segmentation with a camera"});
  ASSERT_TRUE(succeeded(predicted));
  // MLflow: the study's run, FINISHED, and each trial's run its child.
  const std::string parent = s["mlflow_run_id"];
  const json results = json::parse(slurp(fs::path(out) / "results.json"));
  ASSERT_TRUE(results["run_id"].is_string()) << results;
  fs::path experiment;
  for (const auto& e : fs::directory_iterator(mlruns)) {
    if (fs::exists(e.path() / parent)) experiment = e.path();
  }
  ASSERT_FALSE(experiment.empty()) << "no experiment holds the study's run " << parent;
  EXPECT_NE(slurp(experiment / "meta.yaml").find("tune-test"), std::string::npos);
  int children = 0;
  for (const auto& run_dir : fs::directory_iterator(experiment)) {
    const fs::path tag = run_dir.path() / "tags/mlflow.parentRunId";
    if (fs::exists(tag)) {
      EXPECT_EQ(slurp(tag), parent);
      ++children;
    }
  }
  EXPECT_EQ(children, 3);
  EXPECT_TRUE(fs::exists(experiment / results["run_id"].get<std::string>() / "artifacts/model"));
  EXPECT_NE(slurp(experiment / parent / "meta.yaml").find("status: 3"), std::string::npos);  // FINISHED
  EXPECT_TRUE(fs::exists(experiment / parent / "artifacts/study.json"));
  // On a CPU the cores are split between the trials running at once.
  const std::string threads = std::to_string(std::max(1u, std::thread::hardware_concurrency() / 2));
  EXPECT_NE(slurp(best_trial / "train.log").find("engine: cpu (" + threads + " thread"), std::string::npos)
      << slurp(best_trial / "train.log");
}

// A trial ASHA stopped is never resumed: its optimizer state goes, as a finished trial's (tune gives trials
// --save-optimizer during, which keeps a stopped run's state for a resume that tune never makes). 200 epochs of a
// few milliseconds: long enough for ASHA's stop (tune looks every 0.1 s) to land before a trial's end.
TEST_F(CliTune, AStoppedTrialKeepsNoOptimizerState) {
  const std::string out = path("study");
  spit(dir_ / "space.json", R"({"lr": {"type": "choice", "values": [1e-2, 1e-7, 1e-8]}})");
  const RunResult r = run({"tune", "--space", path("space.json"), "--out", out, "--search", "grid", "--parallel", "1",
                           "--grace-period", "1", "--reduction-factor", "2", "--quiet", "--", "--model", model(),
                           "--train-data", data(), "--epochs", "200", "--batch-size", "8", "--device", "cpu"});
  ASSERT_TRUE(succeeded(r));
  const json s = study(out);
  int stopped = 0;
  for (const json& t : s["trials"]) {
    stopped += t["status"] == "stopped" ? 1 : 0;
    EXPECT_TRUE(fs::exists(fs::path(out) / t["dir"].get<std::string>() / "last/trainer_state.json")) << t;
    EXPECT_FALSE(fs::exists(fs::path(out) / t["dir"].get<std::string>() / "last/optimizer.safetensors")) << t;
  }
  ASSERT_GE(stopped, 1) << "no trial was stopped: the check of a stopped trial's files did not run\n" << s.dump(1);
}

// A trial killed without warning (SIGKILL, as the kernel's out-of-memory killer does) cannot end its MLflow run:
// tune ends it FAILED (before, it stayed RUNNING for ever), and a resumed study ends one that a full disk kept it
// from ending the first time.
TEST_F(CliTune, AFailedTrialsMlflowRunIsEndedFailed) {
  const std::string out = path("study"), mlruns = path("mlruns");
  spit(dir_ / "space.json", R"({"lr": {"type": "choice", "values": [1e-3]}})");
  // The launcher kills the trial's training once its MLflow run is tagged as the study's child.
  spit(dir_ / "kill_trial.sh", "#!/bin/sh\n\"$@\" &\npid=$!\nfor i in $(seq 600); do\n"
                               "  for tag in '" + mlruns + "'/*/*/tags/mlflow.parentRunId; do\n"
                               "    if [ -f \"$tag\" ]; then kill -9 $pid; wait $pid; exit $?; fi\n"
                               "  done\n  sleep 0.05\ndone\nwait $pid\n");
  fs::permissions(dir_ / "kill_trial.sh", fs::perms::owner_all);
  const std::vector<std::string> args{"tune", "--space", path("space.json"), "--out", out, "--trials", "1",
                                      "--mlflow-dir", mlruns, "--experiment", "tune-test", "--launcher",
                                      path("kill_trial.sh"), "--", "--model", model(), "--train-data", data(),
                                      "--epochs", "50", "--batch-size", "8", "--device", "cpu"};
  const RunResult r = run(args);
  EXPECT_EQ(r.exit_code, 1) << r.describe();  // no trial finished
  const json s = study(out);
  ASSERT_EQ(statuses(s), std::vector<std::string>{"failed"}) << s;
  EXPECT_NE(s["trials"][0]["error"].get<std::string>().find("137"), std::string::npos) << s["trials"][0];
  fs::path trial_run;
  for (const auto& experiment : fs::directory_iterator(mlruns)) {
    if (!experiment.is_directory()) continue;
    for (const auto& run_dir : fs::directory_iterator(experiment.path())) {
      if (fs::exists(run_dir.path() / "tags/mlflow.parentRunId")) trial_run = run_dir.path();
    }
  }
  ASSERT_FALSE(trial_run.empty()) << "no trial run in " << mlruns;
  const std::string meta = slurp(trial_run / "meta.yaml");
  EXPECT_NE(meta.find("status: 4\n"), std::string::npos) << meta;  // FAILED
  EXPECT_EQ(meta.find("end_time: null"), std::string::npos) << meta;
  // As a full disk would have left it: RUNNING. The resumed study ends it.
  std::string running = meta;
  running.replace(running.find("status: 4\n"), 10, "status: 1\n");
  spit(trial_run / "meta.yaml", running);
  std::vector<std::string> resume = args;
  resume.insert(resume.begin() + 1, "--resume");
  const RunResult again = run(resume);
  EXPECT_EQ(again.exit_code, 1) << again.describe();
  EXPECT_NE(slurp(trial_run / "meta.yaml").find("status: 4\n"), std::string::npos) << slurp(trial_run / "meta.yaml");
}

// A trial ASHA stops ends its MLflow run FINISHED, as Ray's MLflowLoggerCallback ends a trial its scheduler stopped
// (train ends a run it is signalled to stop KILLED, which left ASHA's stopped trials looking killed by a user).
// lr 1e-7 learns nothing, so its first epoch is worse than lr 1e-3's, the one result at that rung: stopped.
TEST_F(CliTune, AnAshaStoppedTrialsMlflowRunIsFinished) {
  const std::string out = path("study"), mlruns = path("mlruns");
  spit(dir_ / "space.json", R"({"lr": {"type": "choice", "values": [1e-3, 1e-7]}})");
  const RunResult r = run({"tune", "--space", path("space.json"), "--out", out, "--search", "grid", "--parallel", "1",
                           "--grace-period", "1", "--reduction-factor", "2", "--mlflow-dir", mlruns, "--experiment",
                           "tune-test", "--", "--model", model(), "--train-data", data(), "--epochs", "60",
                           "--batch-size", "8", "--device", "cpu"});
  ASSERT_TRUE(succeeded(r)) << r.describe();
  const json s = study(out);
  ASSERT_EQ(statuses(s), (std::vector<std::string>{"completed", "stopped"})) << r.out;
  int finished = 0, children = 0;
  for (const auto& experiment : fs::directory_iterator(mlruns)) {
    if (!experiment.is_directory()) continue;
    for (const auto& run_dir : fs::directory_iterator(experiment.path())) {
      if (!fs::exists(run_dir.path() / "tags/mlflow.parentRunId")) continue;
      ++children;
      const std::string meta = slurp(run_dir.path() / "meta.yaml");
      finished += meta.find("status: 3\n") != std::string::npos;
      EXPECT_EQ(meta.find("end_time: null"), std::string::npos) << meta;
    }
  }
  EXPECT_EQ(children, 2);
  EXPECT_EQ(finished, 2) << "a trial's run is not FINISHED";
}

}  // namespace
}  // namespace cli_test
}  // namespace bertrain

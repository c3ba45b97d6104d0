// CLI tests of run directories: what a fresh run refuses, --overwrite, --resume's messages, a best/ repaired after
// a kill between the two checkpoint writes of an epoch, and a RUN_DIR as the model to start from.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/files.h"
#include "tests/tools/cli_test.h"

namespace bertrain {
namespace {

using namespace cli_test;

// Each file a run writes makes RUN_DIR a run's: a fresh run there is refused (exit 2), naming what is there,
// unless --overwrite, which replaces the earlier run.
TEST_F(CliTest, ARunDirectoryHoldingRunFilesIsRefusedUnlessOverwrite) {
  for (const char* name : {"results.json", "metrics.jsonl", "evaluation.json", "best"}) {
    const fs::path dir = path(std::string("run-") + name);
    fs::create_directories(dir);
    if (std::string(name) == "best") {
      fs::create_directories(dir / name);
    } else {
      spit(dir / name, "{}\n");
    }
    spit(dir / "notes.txt", "the user's own file\n");
    const auto before = snapshot(dir);
    const RunResult r = run(train_args(dir.string()));
    expect_error(r, std::string("already holds a run (") + name + ")");
    EXPECT_NE(r.err.find("--overwrite"), std::string::npos) << r.describe();
    EXPECT_EQ(snapshot(dir), before) << name;
    ASSERT_TRUE(succeeded(run(train_args(dir.string(), {"--overwrite"})))) << name;
    EXPECT_TRUE(fs::exists(dir / "best/model.safetensors")) << name;
    EXPECT_NE(slurp(dir / "results.json"), "{}\n") << name;
    EXPECT_EQ(slurp(dir / "notes.txt"), "the user's own file\n") << "--overwrite removes only run files";
    if (std::string(name) == "evaluation.json") {
      EXPECT_FALSE(fs::exists(dir / name)) << "the earlier run's evaluation would describe another model";
    }
  }
  // An empty RUN_DIR, or one with other files only, is not a run.
  fs::create_directories(path("empty"));
  ASSERT_TRUE(succeeded(run(train_args(path("empty"), {"--epochs", "1"}))));
  expect_error(run(train_args(path("empty"), {"--resume", "--overwrite"})), "give one of them");
}

// --overwrite removes the earlier run only once the new run's inputs are read and checked.
TEST_F(CliTest, OverwriteKeepsTheEarlierRunWhenTheInputsAreBad) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "1"}))));
  const auto before = snapshot(path("run"));
  expect_error(run(train_args(path("run"), {"--overwrite", "--train-data", path("missing.csv")})), "missing.csv");
  expect_error(run(train_args(path("run"), {"--overwrite", "--text-columns", "headline"})), "headline");
  EXPECT_EQ(snapshot(path("run")), before);
}

// bertrain launch of a command with --overwrite: once the job has its own checkpoint, a restart resumes it (without
// --overwrite, which would replace it).
TEST_F(CliTest, LaunchResumesARunStartedWithOverwrite) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "1"}))));
  ASSERT_TRUE(succeeded(run(train_args(path("full"), {"--save-steps", "3"}))));
  std::vector<std::string> launch{"launch", "--max-restarts", "1", "--restart-delay", "0", "--", binary()};
  const std::vector<std::string> train = train_args(path("run"), {"--overwrite", "--save-steps", "3"});
  launch.insert(launch.end(), train.begin(), train.end());
  const RunResult r = run(launch, {"BERTRAIN_TEST_CRASH_AFTER_STEP=6"});
  ASSERT_TRUE(succeeded(r));
  EXPECT_NE(r.err.find("restart 1 of 1 with --resume"), std::string::npos) << r.describe();
  EXPECT_TRUE(slurp(path("full/last/model.safetensors")) == slurp(path("run/last/model.safetensors")));
}

// launch's first attempt runs the command as given when it says --overwrite: it replaced nothing before, and resumed
// the earlier run instead (a changed --lr was then refused as a resume, an equal one "already finished").
TEST_F(CliTest, LaunchsFirstAttemptOverwritesWhenAsked) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "1", "--lr", "1e-3"}))));
  std::vector<std::string> launch{"launch", "--max-restarts", "1", "--restart-delay", "0", "--", binary()};
  const std::vector<std::string> train = train_args(path("run"), {"--epochs", "1", "--lr", "5e-4", "--overwrite"});
  launch.insert(launch.end(), train.begin(), train.end());
  const RunResult r = run(launch);
  ASSERT_TRUE(succeeded(r)) << r.describe();
  const json results = json::parse(slurp(path("run/results.json")));
  EXPECT_EQ(results["params"]["lr"], 5e-4) << results.dump();
  EXPECT_EQ(results["resumes"].size(), 0u) << results.dump();
}

// A command with --out twice trains into the last (as every bertrain command reads a repeated flag): launch looks for
// its checkpoint there, not in the first, which made it add --resume for a run directory without one.
TEST_F(CliTest, LaunchReadsTheLastOutOfItsCommand) {
  ASSERT_TRUE(succeeded(run(train_args(path("first"), {"--epochs", "1"}))));
  std::vector<std::string> launch{"launch", "--max-restarts", "1", "--restart-delay", "0", "--", binary()};
  const std::vector<std::string> train = train_args(path("first"), {"--epochs", "1", "--out", path("second")});
  launch.insert(launch.end(), train.begin(), train.end());
  const RunResult r = run(launch);
  ASSERT_TRUE(succeeded(r)) << r.describe();
  EXPECT_TRUE(fs::exists(path("second/results.json")));
  EXPECT_EQ(json::parse(slurp(path("second/results.json")))["resumes"].size(), 0u);
}

// Two processes never write one run directory: while one holds it (here this test, through the same lock), train
// into it, --overwrite or --resume, fails before touching a file, naming the holder.
TEST_F(CliTest, ARunDirectoryInUseIsRefused) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "1"}))));
  EXPECT_FALSE(fs::exists(path("run/.bertrain-lock"))) << "the lock outlived its run";
  const auto before = snapshot(path("run"));
  {
    DirectoryLock held(path("run"), "--out");
    const std::string in_use = "--out '" + path("run") + "' is in use by another bertrain process (pid " +
                               std::to_string(::getpid()) + ")";
    expect_error(run(train_args(path("run"), {"--epochs", "2", "--resume"})), in_use);
    expect_error(run(train_args(path("run"), {"--epochs", "1", "--overwrite"})), in_use);
    // Refused before RUN_DIR is read: a train that found no run yet (or one finished a moment later) took the run's
    // place when the holder's run ended; said "already holds a run" here, which a moment earlier it did not.
    expect_error(run(train_args(path("run"), {"--epochs", "1"})), in_use);
  }
  EXPECT_FALSE(fs::exists(path("run/.bertrain-lock")));
  EXPECT_EQ(snapshot(path("run")), before);
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "2", "--resume"}))));
}

// `train --resume --out RUN_DIR` alone continues the run with the settings its checkpoint recorded (said in one
// line), bit for bit as the whole command with --resume; flags given win. Before, it said "--model is required".
TEST_F(CliTest, AResumeWithOnlyOutReadsTheRunsSettings) {
  const std::vector<std::string> settings{"--lr", "2e-3", "--batch-size", "4", "--seed", "5", "--text-columns",
                                          "title", "--max-length", "16", "--shuffle"};
  std::vector<std::string> first = settings;
  first.insert(first.end(), {"--epochs", "1"});
  ASSERT_TRUE(succeeded(run(train_args(path("alone"), first))));
  ASSERT_TRUE(succeeded(run(train_args(path("whole"), first))));
  const RunResult alone = run({"train", "--resume", "--out", path("alone"), "--epochs", "2"});
  ASSERT_TRUE(succeeded(alone));
  EXPECT_NE(alone.out.find("resuming with the settings of its checkpoint: --batch-size 4 --lr 0.002 --max-length 16 "
                           "--model " + model() + " --seed 5 --shuffle --text-columns title --train-data " + data() +
                           "\n"),
            std::string::npos)
      << alone.out;
  std::vector<std::string> whole = settings;
  whole.insert(whole.end(), {"--epochs", "2", "--resume"});
  ASSERT_TRUE(succeeded(run(train_args(path("whole"), whole))));
  for (const char* file : {"last/model.safetensors", "last/optimizer.safetensors", "best/model.safetensors"}) {
    EXPECT_TRUE(slurp(path("alone/") + file) == slurp(path("whole/") + file)) << file;
  }
  json params = json::parse(slurp(path("alone/results.json")))["params"];
  json expected = json::parse(slurp(path("whole/results.json")))["params"];
  params.erase("out");
  expected.erase("out");
  EXPECT_EQ(params, expected);
  // A flag given without its value is named as such (the recorded flags go first, so it takes none of theirs).
  expect_error(testing::run_process({binary(), "train", "--resume", "--out", path("alone"), "--epochs"}),
               "train: --epochs needs a value");
  // One bound of the step checkpoints given, the recorded other does not come back (the two are refused together).
  ASSERT_TRUE(succeeded(run(train_args(path("kept"), {"--epochs", "1", "--save-steps", "2", "--keep", "2"}))));
  ASSERT_TRUE(succeeded(run({"train", "--resume", "--out", path("kept"), "--epochs", "2", "--save-total-limit", "3",
                             "--quiet"})));
  // --save-steps 0 (no step checkpoints) leaves both bounds out.
  ASSERT_TRUE(succeeded(run({"train", "--resume", "--out", path("kept"), "--epochs", "3", "--save-steps", "0",
                             "--quiet"})));
  // A recorded value a shell would split or expand is quoted in the line, so that it can be given back as shown.
  ASSERT_TRUE(succeeded(run(train_args(path("sep"), {"--epochs", "1", "--multi-label", "--label-separator", ";"}))));
  const RunResult sep = run({"train", "--resume", "--out", path("sep"), "--epochs", "2"});
  ASSERT_TRUE(succeeded(sep));
  EXPECT_NE(sep.out.find(" --label-separator ';' "), std::string::npos) << sep.out;
  // A relative --train-data is found from the folder the training ran in, wherever the resume starts.
  ASSERT_TRUE(succeeded(train_with_relative_data("there")));
  const RunResult far = run_in(dir_.string(), {"train", "--resume", "--out", "there/relrun", "--epochs", "2", "--device",
                                               "cpu"});
  ASSERT_TRUE(succeeded(far));
  EXPECT_NE(far.out.find("--train-data " + path("there/rel.csv")), std::string::npos) << far.out;
  // No checkpoint: the error says what a new run needs.
  expect_error(run({"train", "--resume", "--out", path("nothing")}),
               "--resume: " + path("nothing") + "/last/trainer_state.json not found (no run to continue in " +
                   path("nothing") + "); a new run needs --model and --train-data");
  EXPECT_FALSE(fs::exists(path("nothing")));
  ASSERT_TRUE(succeeded(run({"train", "--resume", "--out", path("nothing"), "--help"})));
}

// A train that fails on its input leaves no --out folder it made (the lock, taken before RUN_DIR is read, made it),
// and keeps one that was there.
TEST_F(CliTest, ATrainThatFailsOnItsInputLeavesNoFolder) {
  spit(path("bad.csv"), "title,description,tag\nimage,\"camera video,computer-vision\n");
  expect_error(run(train_args(path("new/run"), {"--train-data", path("bad.csv")})), "bad.csv");
  EXPECT_FALSE(fs::exists(path("new/run")));
  fs::create_directories(path("there"));
  expect_error(run(train_args(path("there"), {"--train-data", path("bad.csv")})), "bad.csv");
  EXPECT_TRUE(fs::is_directory(path("there")));
}

// `bertrain launch` of a stand-in for a job (mpirun): it writes a checkpoint into `dir` (last/), then waits; SIGTERM
// to the launcher, once the checkpoint exists, is passed on and the stand-in exits `exit_on_term` (the trap first:
// the signal is sent as soon as the checkpoint exists, and before the trap it killed the shell).
RunResult launch_signalled_after_a_checkpoint(const std::string& dir, int exit_on_term) {
  const std::string script = "trap 'exit " + std::to_string(exit_on_term) + "' TERM; mkdir -p '" + dir +
                             "/last' && echo '{}' > '" + dir +
                             "/last/trainer_state.json'; while :; do sleep 0.05; done";
  const std::vector<std::string> argv{binary(), "launch", "--restart-delay", "0", "--", "/bin/sh", "-c", script,
                                      "sh", "--out", dir};
  const auto ready = [&] { return fs::exists(dir + "/last/trainer_state.json"); };
  return testing::run_process(argv, {}, 60, {{0.0, SIGTERM, ready}});
}

// A signal to launch ends it with 75 when the run has a checkpoint to continue from, whatever status the command
// ended with: Open MPI's mpirun ends with 1 when SIGTERM stops its ranks (they exit 75 after their checkpoint),
// which a Slurm script would not requeue. Here the stand-in exits 1.
TEST_F(CliTest, LaunchStoppedBySignalWithACheckpointExits75) {
  const RunResult r = launch_signalled_after_a_checkpoint(path("job"), 1);
  EXPECT_EQ(r.exit_code, 75) << r.describe();
  EXPECT_NE(r.err.find("stopped by SIGTERM: exit status 1; not restarting (exit 75"), std::string::npos) << r.describe();
}

// A run that ended by diverging (exit 3) as the signal came is not called resumable, checkpoint or not: resumed, it
// would diverge again. The same stand-in, exiting 3.
TEST_F(CliTest, LaunchStoppedBySignalAfterADivergenceKeepsItsExit3) {
  const RunResult r = launch_signalled_after_a_checkpoint(path("job"), bertrain::kExitDiverged);
  EXPECT_EQ(r.exit_code, bertrain::kExitDiverged) << r.describe();
  EXPECT_NE(r.err.find("stopped by SIGTERM: exit status 3; not restarting\n"), std::string::npos) << r.describe();
}

// A signal to launch's whole process group (Ctrl-C in a terminal, `kill -TERM -PGID`) stops train once: one request,
// a checkpoint and exit 75. Before, train got it itself and again through launch, which passes it on, took launch's
// copy for a second signal and was killed by it between two checkpoints. (Now launch runs train in a group of its
// own, and train also takes the same signal again within a second as one request: a scheduler signals every process.)
TEST_F(CliTest, LaunchsProcessGroupSignalledStopsTrainOnce) {
  std::vector<std::string> args{"launch", "--restart-delay", "0", "--", binary()};
  for (const std::string& a : without_quiet(train_args(path("group"), {"--epochs", "300", "--device", "cpu"}))) {
    args.push_back(a);
  }
  // setsid: launch and train are a process group of their own, signalled whole once train has a checkpoint.
  const std::string script = "setsid " + shell_command(args) + " & job=$!; while [ ! -f '" + path("group") +
                             "/last/trainer_state.json' ]; do sleep 0.05; done; kill -TERM -$job; wait $job";
  const RunResult r = testing::run_process({"/bin/sh", "-c", script}, {}, 120);
  EXPECT_EQ(r.exit_code, 75) << r.describe();
  EXPECT_NE(r.err.find("stopped by SIGTERM: exit status 75"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("continue with the same command and --resume"), std::string::npos) << r.describe();
  EXPECT_EQ(r.err.find("killed by signal"), std::string::npos) << r.describe();
}

// launch killed outright (kill -9, the OOM killer): its command stops as on a stop signal, with its checkpoint, and
// lets its run directory go. Before, the training ran on alone, holding RUN_DIR's lock, and the same launch run again
// was refused ("in use by another bertrain process").
TEST_F(CliTest, LaunchKilledOutrightStopsItsCommand) {
  std::vector<std::string> args{"launch", "--restart-delay", "0", "--", binary()};
  const std::vector<std::string> train = train_args(path("orphan"), {"--epochs", "100000", "--device", "cpu"});
  args.insert(args.end(), train.begin(), train.end());
  const std::string run_dir = path("orphan");
  const std::string script = shell_command(args) + " & job=$!; while [ ! -f '" + run_dir +
                             "/last/trainer_state.json' ]; do sleep 0.05; done; kill -9 $job; wait $job; "
                             "for i in $(seq 200); do [ -e '" + run_dir + "/.bertrain-lock' ] || exit 0; sleep 0.1; "
                             "done; echo 'the training still holds its run directory' >&2; exit 1";
  const RunResult r = testing::run_process({"/bin/sh", "-c", script}, {}, 60);
  ASSERT_TRUE(succeeded(r)) << r.describe();
  EXPECT_NE(r.err.find("stopped by SIGTERM"), std::string::npos) << r.describe();  // train's, with its checkpoint
}

// A stop signal during the delay before a restart ends launch then, without the restart (before, launch slept the
// whole delay and ran the command again: the stop was lost).
TEST_F(CliTest, LaunchStoppedDuringTheRestartDelayDoesNotRestart) {
  const std::string dir = path("job");
  const std::vector<std::string> argv{binary(), "launch", "--restart-delay", "30", "--max-restarts", "2", "--",
                                      "/bin/sh", "-c", "echo attempt >&2; exit 1", "sh", "--out", dir};
  const auto started = std::chrono::steady_clock::now();
  const RunResult r = testing::run_process(argv, {}, 60, {{0.5, SIGTERM}});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.describe();
  EXPECT_NE(r.err.find("bertrain launch: stopped by SIGTERM before restart 1; not restarting\n"), std::string::npos)
      << r.describe();
  EXPECT_EQ(r.err.find("attempt\nattempt"), std::string::npos) << r.describe();
  EXPECT_LT(seconds, 10.0) << r.describe();
}

// `bertrain launch -- train ... | head -n 1`: train stops on its closed stdout (SIGPIPE: a checkpoint, exit 75),
// which launch would otherwise restart up to --max-restarts times, each attempt stopping again after one step.
// Launch says why and does not restart; launch's own stderr stays open here, the pipe's reader gone.
TEST_F(CliTest, LaunchDoesNotRestartACommandWhoseOutputIsClosed) {
  std::vector<std::string> args{"launch", "--restart-delay", "0", "--max-restarts", "3", "--", binary()};
  for (const std::string& a : without_quiet(train_args(path("piped"), {"--epochs", "300", "--device", "cpu"}))) {
    args.push_back(a);
  }
  const RunResult r = run_into_head(shell_command(args), "launch");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("launch exited 75"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("bertrain launch: exit status 75 (stopped with a checkpoint); its stdout is closed (what read "
                       "it went away), which a restart would meet again: not restarting"),
            std::string::npos)
      << r.describe();
  EXPECT_EQ(r.err.find("restart 1 of 3"), std::string::npos) << r.describe();
  EXPECT_TRUE(fs::exists(path("piped/last/trainer_state.json")));
}

// Under `nohup` SIGHUP is ignored: launch neither passes it on nor ends on it, and COMMAND inherits it ignored. Before,
// launch caught it and passed it on, and the command (here a shell that sends it) ended by it.
TEST_F(CliTest, LaunchUnderNohupLeavesSighupIgnored) {
  const std::string dir = path("job");
  const std::string script = "kill -HUP $PPID; kill -HUP $$; sleep 0.3; exit 0";
  const RunResult r = ::bertrain::testing::run_process(
      {"/bin/sh", "-c", "trap '' HUP; exec \"$@\"", "sh", binary(), "launch", "--restart-delay", "0", "--", "/bin/sh",
       "-c", script, "sh", "--out", dir},
      {}, 60);
  EXPECT_TRUE(succeeded(r)) << r.describe();
  EXPECT_EQ(r.err.find("SIGHUP"), std::string::npos) << r.describe();
}

// A resumed run says where it continues: the epoch counted from 1 and the optimizer steps done.
TEST_F(CliTest, ResumeSaysWhereItContinues) {
  // 40 rows, 10 for validation: 30 training rows, batches of 8, 4 steps an epoch; a checkpoint after step 6.
  ASSERT_EQ(run(train_args(path("run"), {"--epochs", "2", "--save-steps", "3"}), {"BERTRAIN_TEST_CRASH_AFTER_STEP=6"})
                .exit_code,
            137);
  const RunResult mid = run(without_quiet(train_args(path("run"), {"--epochs", "2", "--save-steps", "3", "--resume"})));
  ASSERT_TRUE(succeeded(mid));
  EXPECT_NE(mid.out.find("resuming from epoch 2, step 6 (" + path("run") + "/last)\n"), std::string::npos)
      << mid.out;
  const RunResult more = run(without_quiet(train_args(path("run"), {"--epochs", "3", "--resume"})));
  ASSERT_TRUE(succeeded(more));
  EXPECT_NE(more.out.find("resuming from epoch 3, step 8 (" + path("run") + "/last)\n"), std::string::npos)
      << more.out;
  EXPECT_NE(more.out.find("best: epoch "), std::string::npos) << more.out;
  EXPECT_NE(more.out.find(" of 3 (step 12), val_loss "), std::string::npos) << more.out;
}

// --resume of a finished run says how far it trained as it was asked to (steps under --max-steps), and how to train
// more only where that works: a run whose optimizer state was dropped at its end cannot be resumed.
TEST_F(CliTest, AFinishedRunSaysHowFarItTrainedAndHowToGoOn) {
  // 4 steps an epoch (30 training rows, batches of 8); evaluations after steps 2, 4, 6 and 6 is the last.
  const std::vector<std::string> steps{"--max-steps", "6", "--eval-steps", "2"};
  ASSERT_TRUE(succeeded(run(train_args(path("steps"), steps))));
  std::vector<std::string> again = steps;
  again.push_back("--resume");
  const RunResult r = run(without_quiet(train_args(path("steps"), again)));
  ASSERT_TRUE(succeeded(r));
  const json results = json::parse(slurp(path("steps/results.json")));
  EXPECT_EQ(r.out, path("steps") + " already finished 6 steps (--max-steps); nothing to do (best/: epoch " +
                       std::to_string(results.at("best_epoch").get<int>() + 1) + ", step " +
                       std::to_string(results.at("best_step").get<long>()) + ", val_loss " +
                       r.out.substr(r.out.find("val_loss ") + 9, 7) + "; raise --max-steps to train more)\n")
      << r.out;

  ASSERT_TRUE(succeeded(run(train_args(path("during"), {"--epochs", "1", "--save-optimizer", "during"}))));
  const RunResult done = run(without_quiet(train_args(path("during"), {"--epochs", "1", "--save-optimizer", "during",
                                                                       "--resume"})));
  ASSERT_TRUE(succeeded(done));
  EXPECT_NE(done.out.find(path("during") + "/last holds no optimizer state (--save-optimizer during), so it cannot be "
                          "resumed: train more in a new run with --model " + path("during") + "/last)"),
            std::string::npos)
      << done.out;
  EXPECT_EQ(done.out.find("raise --epochs"), std::string::npos) << done.out;
  // The way it names works.
  const std::vector<std::string> more{"train", "--model", path("during") + "/last", "--train-data", data(), "--out",
                                      path("more"), "--epochs", "1", "--batch-size", "8", "--quiet"};
  EXPECT_TRUE(succeeded(run(more)));
}

// A step-wise schedule is planned over the run's length: a resume that changes --epochs is refused, and the message
// does not say that epochs may change.
TEST_F(CliTest, AResumeThatWouldReplanALinearScheduleSaysWhatMayChange) {
  ASSERT_TRUE(succeeded(run(train_args(path("linear"), {"--epochs", "1", "--lr-scheduler", "linear"}))));
  const RunResult r = run(train_args(path("linear"), {"--epochs", "2", "--lr-scheduler", "linear", "--resume"}));
  expect_error(r, "the linear schedule was planned over 4 steps, now 8");
  EXPECT_NE(r.err.find("(only save, keep, log steps, threads, device and MLflow settings may change; the linear "
                       "schedule fixes epochs and max-steps)"),
            std::string::npos)
      << r.err;
  // The plateau schedule lets them change.
  ASSERT_TRUE(succeeded(run(train_args(path("plateau"), {"--epochs", "1"}))));
  const RunResult p = run(train_args(path("plateau"), {"--epochs", "2", "--lr", "3e-4", "--resume"}));
  expect_error(p, "(only epochs, max-steps, save, keep, log steps, threads, device and MLflow settings may change)");
}

// best/ is written after last/: a run killed between them resumes with best/ rewritten from last/ when last/ is the
// best epoch, so it ends with the uninterrupted run's best/, bit for bit.
TEST_F(CliTest, ABestMissedByAKillIsWrittenOnResume) {
  ASSERT_TRUE(succeeded(run(train_args(path("full"), {"--epochs", "1"}))));
  ASSERT_TRUE(succeeded(run(train_args(path("killed"), {"--epochs", "1"}))));
  // What a kill right after last/ of the first epoch leaves: last/ only.
  for (const char* name : {"best", "metrics.jsonl", "results.json"}) fs::remove_all(path("killed") + "/" + name);
  ASSERT_TRUE(succeeded(run(train_args(path("killed"), {"--epochs", "1", "--resume"}))));
  for (const char* file : {"best/model.safetensors", "best/config.json", "best/vocab.txt"}) {
    EXPECT_TRUE(fs::exists(path("killed") + "/" + file)) << file;
    EXPECT_TRUE(slurp(path("full") + "/" + file) == slurp(path("killed") + "/" + file)) << file;
  }
  const std::vector<json> a = read_jsonl(path("full") + "/metrics.jsonl"), b = read_jsonl(path("killed") + "/metrics.jsonl");
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0]["val_loss"], b[0]["val_loss"]);
  EXPECT_EQ(a[0]["train_loss"], b[0]["train_loss"]);
}

// A RUN_DIR as --model is its best/, as evaluate and predict take it.
TEST_F(CliTest, TrainFromARunDirectoryStartsFromItsBest) {
  ASSERT_TRUE(succeeded(suite_train()));
  ASSERT_TRUE(succeeded(run({"train", "--model", suite_run(), "--train-data", data(), "--out", path("from-run"),
                             "--epochs", "1", "--batch-size", "8", "--quiet", "--device", "cpu"})));
  ASSERT_TRUE(succeeded(run({"train", "--model", suite_run() + "/best", "--train-data", data(), "--out",
                             path("from-best"), "--epochs", "1", "--batch-size", "8", "--quiet", "--device", "cpu"})));
  EXPECT_TRUE(slurp(path("from-run/best/model.safetensors")) == slurp(path("from-best/best/model.safetensors")));
  const nlohmann::json results = nlohmann::json::parse(slurp(path("from-run/results.json")));
  EXPECT_EQ(results["head_init"], "loaded");  // the run's classifier, not a fresh one
  expect_error(run(train_args(path("x"), {"--model", path("no-model")})), "no-model");
}

}  // namespace
}  // namespace bertrain

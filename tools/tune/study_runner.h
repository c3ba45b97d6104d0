// The loop of `bertrain tune`: proposes trials (engine/param_search.h), runs them P at a time as `bertrain train`
// processes (tools/tune/trial_process.h), follows each trial's metrics.jsonl, lets ASHA (engine/asha_scheduler.h)
// stop the ones that fall behind, records everything in DIR/study.json (engine/study.h) after every change, and
// at the end writes DIR/best/ and DIR/results.json. tools/tune/tune_command.cpp turns the command line into
// TuneSetup.
#pragma once

#include <csignal>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/param_search.h"
#include "engine/search_space.h"

namespace bertrain {

struct TuneSetup {
  std::string out_dir;                    // DIR
  SearchSpace space;                      // parameter names spelled as train's flags
  std::vector<nlohmann::json> initial;    // --initial-params, complete points, run first
  std::string search = "tpe";
  TpeOptions tpe;
  uint64_t seed = 0;
  long trials = 10;
  int parallel = 1;
  bool asha = true;
  double grace_period = 1, reduction_factor = 4, max_t = 10;
  std::string metric = "val_loss";
  bool lower_is_better = true;
  std::string iteration = "epoch";        // "evaluation" under --eval-steps (Study::iteration)
  std::vector<std::string> train_flags;   // TRAIN FLAGS, as given after --
  std::vector<std::string> extra_flags;   // what tune adds to every trial (--metric-for-best, --threads)
  bool drop_stopped_optimizer = false;    // tune gave --save-optimizer during: a stopped trial's state goes too
  std::map<std::string, bool> switches;   // train flags that take no value (searched booleans): name -> true
  std::map<std::string, bool> integers;   // train flags whose values are integers: name -> true
  std::vector<std::string> devices;       // CUDA_VISIBLE_DEVICES per slot (round robin); empty: none set
  std::vector<std::vector<int>> cpus;     // per slot: the CPUs its trials may use; empty: no split
  std::string launcher;                   // shell words put before each trial's command; empty: none
  // How a trial is told to stop: SIGTERM, or SIGUSR1 through a launcher (Open MPI's mpirun ends its job on SIGTERM
  // but forwards SIGUSR1 to every rank; srun forwards both).
  int trial_stop_signal = SIGTERM;
  std::string bertrain;                   // this program, for the trials
  std::string mlflow_dir, experiment, run_name;  // the study's MLflow run (parent of the trials' runs)
  bool resume = false;
  bool quiet = false;
  nlohmann::json settings;                // what --resume must find unchanged
};

// The shell text a trial runs under --launcher: the launcher's words, then the trial's command as "$@".
inline std::string launcher_script(const std::string& launcher) { return "exec " + launcher + " \"$@\""; }

// The flag text of a parameter value: "--name VALUE", or "--name" alone / nothing for a switch.
std::vector<std::string> param_flags(const TuneSetup& setup, const std::string& name, const nlohmann::json& value);

// Runs the study. Returns the exit status: 0 done, 75 stopped by SIGINT / SIGTERM (resume with --resume); throws
// Error when no trial succeeded.
int run_study(const TuneSetup& setup);

}  // namespace bertrain

// The record of a `bertrain tune` study, DIR/study.json: its settings, every trial's parameters, status and
// results, the scheduler's inputs in the order it saw them (replayed by --resume), and the best trial. Plain data
// and JSON here; tools/tune runs the trials.
//
// study.json:
//   {"version": 1, "metric": "val_loss", "mode": "min", "settings": {...}, "searched": ["dropout", "lr", ...],
//    "integers": ["lr-patience"],
//    "trials": [{"id": "000", "dir": "trials/000", "params": {...}, "status": "completed", "epochs": 10,
//                "best_metric": 0.42, "best_epoch": 6, "last_metric": 0.45, "time_s": 61.2,
//                "error": "...", "mlflow_run_id": "..."}, ...],
//    "scheduler_events": [{"trial": "000", "iteration": 1, "value": 0.61}, ...],
//    "best_trial": "003", "mlflow_run_id": "...", "time_s": 402.5}
// best_epoch counts from 0, as metrics.jsonl does; best_metric, best_epoch and last_metric are null until the
// trial has an evaluation; error only for a failed trial. integers (absent when none, and in studies written before
// it): the searched parameters that are integer flags, which a trial runs with the integer part of its value.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/param_search.h"

namespace bertrain {

// What became of a trial. kCompleted: trained all its epochs (or stopped early by its own
// --early-stopping-patience); kStopped: the scheduler stopped it; kFailed: it exited with an error;
// kInterrupted: the study was stopped by a signal while it ran (--resume continues it from its checkpoint);
// kRunning: in progress (or the study was killed while it ran: --resume continues it too).
enum class TrialStatus { kRunning, kCompleted, kStopped, kFailed, kInterrupted };
const char* trial_status_name(TrialStatus status);

struct TrialRecord {
  std::string id;    // "000", "001", ...: the trial's number, zero-padded to 3 digits
  nlohmann::json params = nlohmann::json::object();  // every parameter of the space by name
  TrialStatus status = TrialStatus::kRunning;
  long epochs = 0;                 // evaluations seen (lines of its metrics.jsonl)
  double best_metric = NAN, best_epoch = NAN, last_metric = NAN;  // NaN: none yet (null in the file)
  double time_s = 0;               // wall time over all its runs (a resumed trial adds up)
  std::string error;               // kFailed: its error line
  std::string mlflow_run_id;

  std::string dir() const { return "trials/" + id; }  // relative to the study directory
  bool finished() const {
    return status == TrialStatus::kCompleted || status == TrialStatus::kStopped || status == TrialStatus::kFailed;
  }
  // Takes evaluation number `epochs + 1` with this metric value: updates epochs, best and last.
  void add_evaluation(double value, bool lower_is_better);
};

// "000" for 0, ... ("1000" past 999).
std::string trial_id(long index);

struct SchedulerEvent {
  std::string trial;
  long iteration = 0;
  double value = NAN;
};

struct Study {
  nlohmann::json settings = nlohmann::json::object();  // what --resume must find unchanged
  std::string metric = "val_loss";
  bool lower_is_better = true;
  // What a line of a trial's metrics.jsonl is, as messages and the report count them: "epoch" (an epoch's end), or
  // "evaluation" when the trials evaluate every --eval-steps steps (several an epoch).
  std::string iteration = "epoch";
  std::vector<std::string> searched;
  std::vector<std::string> integers;  // searched integer flags: a trial runs with its value's integer part
  std::vector<TrialRecord> trials;
  std::vector<SchedulerEvent> scheduler_events;
  std::string mlflow_run_id;  // the study's parent run
  double time_s = 0;

  // The searches' view: every finished trial (completed or stopped) with a metric, in trial order, its loss the
  // best metric (negated when higher is better). Failed trials are left out, as HyperOpt leaves out failed ones.
  std::vector<Observation> observations() const;
  // The index of the best finished (completed or stopped) trial by best_metric; -1 when none has one. Ties: the
  // earlier trial.
  long best_trial() const;
  // Indices of the trials in the order a table shows them (as bertrain report's): best first, then the trials
  // without a metric, then the failed ones; trial order within each.
  std::vector<std::size_t> ranking() const;

  nlohmann::json to_json() const;
  // Reads study.json (tune's --resume, bertrain report). Throws Error naming `origin` and the field's path in it
  // ("study.json: field 'trials[1].epochs' is not a count") on anything this code would not have written.
  static Study from_json(const nlohmann::json& j, const std::string& origin);
};

}  // namespace bertrain

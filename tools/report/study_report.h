// `bertrain report` of a `bertrain tune` study directory: DIR/study.json read and checked, each trial's run
// directory (DIR/trials/NNN, a `bertrain train` run) read with load_run where it has recorded epochs, and the one
// self-contained HTML page that shows the study: the trials ranked best first, their loss curves overlaid, and each
// searched parameter's value against the trials' best metric.
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/study.h"
#include "tools/report/run_report.h"

namespace bertrain::report {

// One entry of study.json's "trials", and what its run directory holds so far.
struct StudyTrial {
  std::string id;              // "000", "001", ...
  std::string dir;             // the trial's run directory: the study directory joined with the entry's "dir"
  nlohmann::json params;       // name -> number, string or boolean
  std::string status;          // completed | stopped | failed | running | interrupted (engine/study.h)
  long epochs = 0;             // evaluations recorded so far
  double best_metric = NAN;    // NaN: null (no evaluation yet)
  double best_epoch = NAN;     // counted from 0 as metrics.jsonl counts; NaN: null
  double time_s = NAN;         // NaN: the entry has none
  std::string error;           // a failed trial's
  // Its metrics.jsonl and results.json, named "trial <id>", `best` the entry's best_epoch (the epoch whose model its
  // best/ holds), where the directory has at least one recorded epoch; else empty, and `not_charted` says why.
  std::optional<RunRecord> run;
  std::string not_charted;
};

struct StudyRecord {
  Study record;                     // study.json as engine/study.h reads it
  std::string dir;                  // as given on the command line
  std::string metric;               // the metrics.jsonl key the study optimizes ("val_loss")
  bool lower_is_better = true;      // study.json's mode: "min"
  nlohmann::json settings = nlohmann::json::object();
  std::vector<std::string> searched;  // the space's varying parameters, in the file's order
  std::vector<StudyTrial> trials;     // in the file's order
  std::optional<std::size_t> best;    // index in `trials` of study.json's best_trial; empty when null
  double time_s = NAN;
  // Where the best model is: DIR/best once the study has written it, else the best trial's best/ when it exists;
  // "" when neither does.
  std::string best_model;
};

// Whether `dir` holds a tune study (a study.json), as opposed to a training run.
bool is_study_dir(const std::string& dir);

// Reads DIR/study.json (Study::from_json: errors name the file and the field, e.g. "DIR/study.json: field
// 'trials[1].epochs' is not a count"), and each trial's run directory. A trial without
// recorded epochs, or whose metrics.jsonl cannot be read, is not an error: it is listed, not charted.
StudyRecord load_study(const std::string& dir);

// Indices of the trials in the order the page lists them: best first by best metric (lowest first for mode min,
// highest for max), then the trials without a metric yet, then the failed ones; trial order within each.
std::vector<std::size_t> rank_trials(const StudyRecord& study);

// The whole page: the trials table (ranked, the best highlighted, failed trials with their error), train and
// validation loss per epoch of every trial that recorded epochs (and the study's metric per epoch, when it is
// another), a scatter chart per searched parameter of its value against the trials' best metric, and the study's
// settings. `generated` is printed in the header (the caller's clock, so that the page is otherwise deterministic).
std::string render_study_report(const StudyRecord& study, const std::string& generated);

// A few lines for the terminal: the trials by status, the best trial with its metric, epoch and parameters and where
// its model is, and the first failed trials' errors.
std::string study_summary(const StudyRecord& study);

}  // namespace bertrain::report

// `bertrain report`'s model: what a training run directory says about the run (metrics.jsonl, results.json,
// evaluation.json), and the one self-contained HTML page that shows one run, or several overlaid.
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tools/report/charts.h"

namespace bertrain::report {

// One line of metrics.jsonl; a value the trainer wrote as null (a diverged, non-finite loss) is NaN. `epoch` is
// the file's, counted from 0; the page shows epoch + 1.
struct EpochRecord {
  double epoch = 0, train_loss = 0, val_loss = 0, lr = 0, samples_per_s = 0, elapsed_s = 0;
  // Fields older runs' lines do not have: NaN when absent (or null), has_* say whether the line had them.
  // step: the optimizer step of the evaluation. The validation metrics: val_accuracy, val_f1 (weighted, Made-With-ML's
  // F1), val_f1_micro, val_f1_macro; has_validation_metrics when the line has any of the four. grad_norm: the mean
  // gradient norm of the steps since the previous evaluation.
  double step = NAN;
  double val_accuracy = NAN, val_f1 = NAN, val_f1_micro = NAN, val_f1_macro = NAN;
  double grad_norm = NAN;
  bool has_step = false, has_validation_metrics = false, has_grad_norm = false;
};

// results.json's "stopped_early": {"epoch": E, "reason": "..."}, the epoch counted from 0 as the file's other
// epoch fields are (the page shows E + 1).
struct EarlyStop {
  double epoch = 0;
  double step = NAN;   // the optimizer step, where the file gives it
  std::string reason;  // "" when the file gives none
};

struct RunRecord {
  std::string dir;   // as given on the command line
  std::string name;  // how charts and tables call the run: the directory's name (the path when two share it)
  std::vector<EpochRecord> epochs;   // one per evaluation: per epoch, or per --eval-steps steps
  // Some epoch has more than one evaluation (--eval-steps): the charts then run over the optimizer step.
  bool evaluates_within_epochs = false;
  // Index in `epochs` of the trainer's best/: the evaluation results.json (or, while the run goes, last/'s
  // trainer_state.json) names, picked by the run's --metric-for-best; without those files, the lowest val_loss.
  std::optional<std::size_t> best;
  std::string best_rule = "lowest val_loss";  // how `best` was picked, as a legend says it
  nlohmann::json results;     // results.json; null while the run is going or was stopped
  // What the page reads the run's settings from (params, total_steps): results.json, else last/trainer_state.json
  // (a run going or stopped with a checkpoint); null when neither exists.
  nlohmann::json settings;
  std::optional<EarlyStop> stopped_early;  // results.json's stopped_early, when it has one (not null)
  nlohmann::json evaluation;  // evaluation.json; null when the run has not been evaluated
};

// Reads RUN_DIR/metrics.jsonl (required: at least one epoch), and results.json and evaluation.json when
// present. Throws Error naming the file (and line or field) on anything it cannot read.
RunRecord load_run(const std::string& dir);

// The run directories to report, each once, in the order first given: "a", "a/", "./a" and a symbolic link to
// it are one run (their canonical paths are equal; a path that does not exist is compared made absolute and
// normal, and load_run reports it). Each later spelling goes into *repeats with the first one.
std::vector<std::string> distinct_run_dirs(const std::vector<std::string>& dirs,
                                           std::vector<std::pair<std::string, std::string>>* repeats);

// Names the runs for the page: each directory's base name, or the whole path where base names repeat.
void name_runs(std::vector<RunRecord>* runs);

// A few lines for the terminal: how far the run got and in how long, its best epoch and where that model is, and,
// evaluated, the headline metrics and where evaluation.json is ("RUN_DIR: ...\n  evaluated on ...\n").
std::string run_summary(const RunRecord& run);

// The whole page: a summary table (and which runs stopped early, and why), loss / learning-rate / throughput
// curves with every run overlaid (the learning rate as one line of text when no run's ever changed), for runs
// whose metrics.jsonl has them the validation accuracy and F1 per epoch (a chart and a table per run beside
// val_loss; nothing for runs without them), and for each evaluated run its overall metrics, per-class
// precision / recall / F1 bars and confusion matrix.
// `generated` is printed in the header (the caller's clock, so that the page is otherwise deterministic).
std::string render_report(const std::vector<RunRecord>& runs, const std::string& generated);

// ---- Parts a study's page (study_report.h) shares with the runs' page --------------------------------------------

// The colour of the `run`-th run of a page (Tableau's ten, then hues of their own, none repeated): its lines, points
// and table swatch.
std::string run_color(std::size_t run);
// A small box in `color`, before a run's name in tables and notes; run_swatch(r) is run_color(r)'s.
std::string color_swatch(const std::string& color);
std::string run_swatch(std::size_t run);

// A page from its start to the opening <main>: the document head with `title` and the one stylesheet every report
// page uses. The page's content follows; it ends with "</main>\n</body>\n</html>\n".
std::string page_head(const std::string& title);

// Train (solid) and validation (dashed) loss of every run, each in run_color(its index), each run's `best` ringed
// on its val_loss; `mark_legend` says what the ring is ("" for the runs' own rule: "best epoch (lowest val_loss)").
// Several runs, or `name_each_run`, name each line "<run name> train_loss" and give the legend a box per run and a
// style per loss. Per epoch, or per evaluation over the optimizer step where some run evaluates within epochs
// (--eval-steps), as every chart below.
// Its y axis is logarithmic where the losses span three decades or more (a diverged run beside converging ones, which
// a linear axis flattens onto zero).
LineChart loss_chart(const std::vector<RunRecord>& runs, bool name_each_run, const std::string& mark_legend);
// Makes `chart`'s y axis logarithmic (and says so in its title) when every drawn y is positive and the largest is at
// least 1000 times the smallest.
void log_y_when_spread(LineChart* chart);

// One quantity (`field`) of every run, a line named by the run in run_color(its index); no rings. The title is
// `title` + `per` + "epoch" (or "evaluation").
LineChart epoch_chart(const std::vector<RunRecord>& runs, const std::string& title, const std::string& y_title,
                      double EpochRecord::*field, const std::string& per = " per ");

}  // namespace bertrain::report

#include "tools/report/run_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/count_text.h"
#include "core/error.h"
#include "core/files.h"
#include "core/json_text.h"
#include "engine/metrics.h"
#include "tools/report/charts.h"
#include "tools/report/svg_text.h"

namespace bertrain::report {

using json = nlohmann::json;

// Tableau's ten colours: distinct for the usual handful of runs, and readable for common colour blindness.
const char* const kRunColors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                  "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

std::string run_color(std::size_t run) {
  if (run < std::size(kRunColors)) return kRunColors[run];
  // Past ten (a study of more trials): hues a golden angle apart, each in one of two lightnesses, so that no two runs
  // share a colour (a repeated Tableau colour gave trial 012's diverged curve trial 000's legend entry).
  const double hue = std::fmod(static_cast<double>(run) * 137.508, 360.0);
  const int lightness = (run / 10) % 2 == 0 ? 38 : 58;
  char text[48];
  std::snprintf(text, sizeof text, "hsl(%.0f,60%%,%d%%)", hue, lightness);
  return text;
}

std::string color_swatch(const std::string& color) {
  return "<span class=\"swatch\" style=\"background:" + xml_escape(color) + "\"></span>";
}

std::string run_swatch(std::size_t run) { return color_swatch(run_color(run)); }

namespace {

// A number field of a metrics line; the trainer writes a non-finite loss as null (JSON has no NaN).
double number_field(const json& object, const char* key, const std::string& where) {
  BERTRAIN_CHECK(object.contains(key), where << ": no field '" << key << "'");
  const json& value = object.at(key);
  if (value.is_null()) return NAN;
  BERTRAIN_CHECK(value.is_number(), where << ": field '" << key << "' is not a number");
  return value.get<double>();
}

// A number field older lines do not have: NaN when absent or null; *present says whether the line has it.
double optional_number_field(const json& object, const char* key, const std::string& where, bool* present) {
  *present = object.contains(key);
  return *present ? number_field(object, key, where) : NAN;
}

std::vector<EpochRecord> read_metrics(const std::string& path) {
  // A directory opens as a stream that reads nothing: it would look like a run with no epochs yet.
  BERTRAIN_CHECK(!directory_exists(path), path << " is a directory, not a training run's metrics file");
  std::ifstream in(path);
  BERTRAIN_CHECK(in, "cannot open " << path << " (is the directory a bertrain training run?)");
  std::vector<EpochRecord> epochs;
  std::string text;
  for (int line = 1; std::getline(in, text); ++line) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(line);
    const json object = parse_json_or_discarded(text);
    BERTRAIN_CHECK(object.is_object(), where << ": not a JSON object");
    EpochRecord e;
    e.epoch = number_field(object, "epoch", where);
    BERTRAIN_CHECK(std::isfinite(e.epoch), where << ": field 'epoch' is not a number");
    e.train_loss = number_field(object, "train_loss", where);
    e.val_loss = number_field(object, "val_loss", where);
    e.lr = number_field(object, "lr", where);
    e.samples_per_s = number_field(object, "samples_per_s", where);
    e.elapsed_s = number_field(object, "elapsed_s", where);
    e.step = optional_number_field(object, "step", where, &e.has_step);
    bool present[4];
    e.val_accuracy = optional_number_field(object, "val_accuracy", where, &present[0]);
    e.val_f1 = optional_number_field(object, "val_f1", where, &present[1]);
    e.val_f1_micro = optional_number_field(object, "val_f1_micro", where, &present[2]);
    e.val_f1_macro = optional_number_field(object, "val_f1_macro", where, &present[3]);
    e.has_validation_metrics = present[0] || present[1] || present[2] || present[3];
    e.grad_norm = optional_number_field(object, "grad_norm", where, &e.has_grad_norm);
    epochs.push_back(e);
  }
  BERTRAIN_CHECK(!epochs.empty(), path << " has no epochs yet (the report needs at least one finished epoch)");
  return epochs;
}

json read_optional_json(const std::string& path) { return file_exists(path) ? read_json_file(path) : json(); }

// results.json's "stopped_early" (absent or null: the run was not stopped early).
std::optional<EarlyStop> read_early_stop(const json& results, const std::string& path) {
  if (!results.is_object() || !results.contains("stopped_early") || results["stopped_early"].is_null()) return std::nullopt;
  const json& stop = results["stopped_early"];
  BERTRAIN_CHECK(stop.is_object(), path << ": stopped_early is not an object");
  BERTRAIN_CHECK(stop.contains("epoch") && stop["epoch"].is_number(), path << ": stopped_early.epoch is not a number");
  BERTRAIN_CHECK(!stop.contains("reason") || stop["reason"].is_string(), path << ": stopped_early.reason is not a string");
  BERTRAIN_CHECK(!stop.contains("step") || stop["step"].is_number(), path << ": stopped_early.step is not a number");
  return EarlyStop{stop["epoch"].get<double>(), stop.contains("step") ? stop["step"].get<double>() : NAN,
                   stop.value("reason", std::string())};
}

// A field of a run file that the page reads when present: absent (or null), or of the kind `is` tests (e.g.
// &json::is_string), else Error naming the file and the field. Rendering reads such fields with json::value, which
// throws a bare type_error (exit 1) for a field of another kind, as a hand-edited file may hold.
void check_optional_field(const json& object, const char* key, bool (json::*is)() const noexcept, const char* kind,
                          const std::string& where) {
  if (!object.is_object() || !object.contains(key) || object[key].is_null()) return;
  BERTRAIN_CHECK((object[key].*is)(), where << ": " << key << " is not " << kind);
}

// results.json or last/trainer_state.json: the fields the page reads.
void check_run_state(const json& state, const std::string& path) {
  if (!state.is_object()) return;
  check_optional_field(state, "total_steps", &json::is_number_integer, "an integer", path);
  check_optional_field(state, "steps_per_epoch", &json::is_number_integer, "an integer", path);
  check_optional_field(state, "params", &json::is_object, "an object", path);
  if (state.contains("params")) {
    check_optional_field(state["params"], "metric_for_best", &json::is_string, "a string", path + ": params");
  }
}

// evaluation.json as `bertrain evaluate` writes it; checked here so that rendering can trust its shape.
void check_evaluation(const json& e, const std::string& path) {
  BERTRAIN_CHECK(e.is_object(), path << ": not a JSON object");
  for (const char* key : {"problem_type", "data", "timestamp"}) {
    check_optional_field(e, key, &json::is_string, "a string", path);
  }
  BERTRAIN_CHECK(e.contains("per_class") && e["per_class"].is_object(), path << ": no object 'per_class'");
  for (const auto& [label, m] : e["per_class"].items()) {
    for (const char* key : {"precision", "recall", "f1", "num_samples"}) {
      BERTRAIN_CHECK(m.is_object() && m.contains(key) && (m[key].is_number() || m[key].is_null()),
                     path << ": per_class." << label << "." << key << " is not a number");
    }
  }
  BERTRAIN_CHECK(e.contains("overall") && e["overall"].is_object(), path << ": no object 'overall'");
  if (!e.contains("confusion_matrix")) return;
  const json& cm = e["confusion_matrix"];
  BERTRAIN_CHECK(cm.is_object() && cm.contains("labels") && cm["labels"].is_array() && cm.contains("matrix") &&
                     cm["matrix"].is_array(),
                 path << ": confusion_matrix needs 'labels' and 'matrix' arrays");
  for (const char* key : {"rows", "columns"}) {
    check_optional_field(cm, key, &json::is_string, "a string", path + ": confusion_matrix");
  }
  const std::size_t n = cm["labels"].size();
  for (const json& label : cm["labels"]) BERTRAIN_CHECK(label.is_string(), path << ": confusion_matrix.labels holds a non-string");
  BERTRAIN_CHECK(cm["matrix"].size() == n, path << ": confusion_matrix.matrix has " << cm["matrix"].size() << " rows for "
                                                << n << " labels");
  for (const json& row : cm["matrix"]) {
    BERTRAIN_CHECK(row.is_array() && row.size() == n, path << ": confusion_matrix.matrix is not " << n << " x " << n);
    for (const json& count : row) {
      BERTRAIN_CHECK(count.is_number_integer() && count.get<long>() >= 0,
                     path << ": confusion_matrix.matrix holds something other than a count");
    }
  }
}

double number_or_nan(const json& value) { return value.is_number() ? value.get<double>() : NAN; }

// A params value of the run's settings, null when they do not have it.
const json* setting(const RunRecord& run, const char* key) {
  if (!run.settings.is_object() || !run.settings.contains("params")) return nullptr;
  const json& params = run.settings["params"];
  return params.is_object() && params.contains(key) ? &params[key] : nullptr;
}

// A params value as the summary table shows it ("" when the settings do not have it).
std::string param(const RunRecord& run, const char* key) {
  const json* v = setting(run, key);
  if (v == nullptr) return "";
  return v->is_string() ? v->get<std::string>() : v->is_number_float() ? format_value(v->get<double>()) : v->dump();
}

// The runs' learning rates in one notation (3e-3 beside 1e-4, not 0.003), so that a column compares at a glance.
std::string lr_text(const RunRecord& run) {
  const json* lr = setting(run, "lr");
  return lr != nullptr && lr->is_number() ? format_scientific(lr->get<double>()) : param(run, "lr");
}

bool multi_label(const json& evaluation) {
  return evaluation.value("problem_type", "") == "multi_label_classification";
}

// The one F1 the summary table compares: weighted (Made-With-ML's) for single-label, micro for multi-label.
std::string headline_f1(const RunRecord& run) {
  if (run.evaluation.is_null()) return "not evaluated";
  const json& overall = run.evaluation["overall"];
  if (overall.contains("f1")) return format_fixed(number_or_nan(overall["f1"]), 3) + " (weighted)";
  if (overall.contains("micro") && overall["micro"].is_object()) {
    return format_fixed(number_or_nan(overall["micro"].value("f1", json())), 3) + " (micro)";
  }
  return "n/a";
}

// "precision 0.917, recall 0.914, f1 0.914" of one averages object of evaluation.json.
std::string prf(const json& m) {
  if (!m.is_object()) return "n/a";
  return "precision " + format_fixed(number_or_nan(m.value("precision", json())), 3) + ", recall " +
         format_fixed(number_or_nan(m.value("recall", json())), 3) + ", f1 " +
         format_fixed(number_or_nan(m.value("f1", json())), 3);
}

// The epoch as the page shows it: counted from 1 (epoch 1 is the first finished one), as the train command
// prints it, where metrics.jsonl and results.json count from 0 as Made-With-ML writes them.
double shown_epoch(const EpochRecord& e) { return e.epoch + 1; }

// Whether the curves run over the optimizer step: where some run evaluates several times an epoch (--eval-steps),
// over epochs its points would stack; every line of every run must then carry its step.
bool step_axis(const std::vector<RunRecord>& runs) {
  bool within = false, steps = true;
  for (const RunRecord& run : runs) {
    within = within || run.evaluates_within_epochs;
    for (const EpochRecord& e : run.epochs) steps = steps && e.has_step;
  }
  return within && steps;
}

// A planned or trained epoch count from results.json: the epochs its total_steps touch (a --max-steps run's
// --epochs is not its length), else params.epochs; 0 when it gives neither.
long planned_epochs(const json& results) {
  if (!results.is_object()) return 0;
  const long total = results.value("total_steps", 0L), per_epoch = results.value("steps_per_epoch", 0L);
  if (total > 0 && per_epoch > 0) return (total + per_epoch - 1) / per_epoch;
  const json params = results.value("params", json::object());
  return params.is_object() && params.contains("epochs") && params["epochs"].is_number_integer() ? params["epochs"].get<long>()
                                                                                                 : 0;
}

// The epochs the run has trained in (its last evaluation's, counted from 1).
long trained_epochs(const RunRecord& run) { return static_cast<long>(run.epochs.back().epoch) + 1; }

// "best epoch (lowest val_loss)": what a chart's ring stands for.
std::string best_legend(const std::vector<RunRecord>& runs, bool by_step) {
  bool same = true;
  for (const RunRecord& run : runs) same = same && run.best_rule == runs.front().best_rule;
  return std::string(by_step ? "best evaluation (" : "best epoch (") +
         (same && !runs.empty() ? runs.front().best_rule : "each run's --metric-for-best") + ")";
}

// The best evaluation's val_loss, after the metric that made it best when that is another (--metric-for-best f1:
// "val_f1 0.7100, val_loss 0.4000"): a column headed "best val_loss" showed a val_loss that was not the lowest.
std::string best_values(const RunRecord& run, const EpochRecord& best) {
  const std::string loss = "val_loss " + format_fixed(best.val_loss, 4);
  const bool by_f1 = run.best_rule == "highest val_f1", by_accuracy = run.best_rule == "highest val_accuracy";
  const double metric = by_f1 ? best.val_f1 : by_accuracy ? best.val_accuracy : NAN;
  if (!std::isfinite(metric)) return loss;
  return (by_f1 ? "val_f1 " : "val_accuracy ") + format_fixed(metric, 4) + ", " + loss;
}

std::string cell(const std::string& text, bool number = false) {
  return std::string(number ? "<td class=\"num\">" : "<td>") + xml_escape(text) + "</td>";
}

std::string summary_table(const std::vector<RunRecord>& runs) {
  std::string html =
      "<div class=\"scroll\">\n<table>\n<thead><tr><th>run</th><th>model</th><th>engine</th><th>ranks</th><th>batch</th><th>lr</th>"
      "<th>epochs</th><th>best epoch</th><th>at the best epoch</th><th>training time</th><th>holdout F1</th></tr></thead>\n"
      "<tbody>\n";
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const RunRecord& run = runs[r];
    const EpochRecord* best = run.best ? &run.epochs[*run.best] : nullptr;
    const long planned = planned_epochs(run.settings);
    std::string epochs = std::to_string(trained_epochs(run)) + (planned > 0 ? " of " + std::to_string(planned) : "");
    if (run.evaluates_within_epochs) epochs += " (" + count_of(static_cast<long long>(run.epochs.size()), "evaluation") + ")";
    epochs += std::string(run.results.is_null() ? " (no results.json: running or stopped)" : "") +
              (run.stopped_early ? ", stopped early" : "");
    std::string best_cell = "none";
    if (best != nullptr) {
      best_cell = format_value(shown_epoch(*best));
      if (run.evaluates_within_epochs && best->has_step) best_cell += " (step " + format_fixed(best->step, 0) + ")";
    }
    html += "<tr><td>" + run_swatch(r) +
            xml_escape(run.name) + "</td>" + cell(param(run, "model")) + cell(param(run, "engine")) +
            cell(param(run, "world_size"), true) + cell(param(run, "batch_size"), true) + cell(lr_text(run), true) +
            cell(epochs) + cell(best_cell, true) +
            cell(best ? best_values(run, *best) : "n/a", true) + cell(format_duration(run.epochs.back().elapsed_s), true) +
            cell(headline_f1(run), true) + "</tr>\n";
  }
  return html + "</tbody>\n</table>\n</div>\n";
}

// "after epoch 4: <reason>" of "stopped early after epoch 4: <reason>" (the epoch as the page counts).
// The step too where the run evaluates within epochs.
std::string early_stop_text(const RunRecord& run) {
  const EarlyStop& stop = *run.stopped_early;
  const bool step = run.evaluates_within_epochs && !std::isnan(stop.step);
  return "after epoch " + format_value(stop.epoch + 1) + (step ? ", step " + format_fixed(stop.step, 0) : "") +
         (stop.reason.empty() ? "" : ": " + stop.reason);
}

// Under the runs table, a line for each run that stopped early, with the trainer's reason.
std::string early_stop_notes(const std::vector<RunRecord>& runs) {
  std::string html;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    if (!runs[r].stopped_early) continue;
    const std::string text = early_stop_text(runs[r]);
    if (runs.size() == 1) {
      html += "<p class=\"note\">Stopped early " + xml_escape(text) + ".</p>\n";
    } else {
      html += "<p class=\"note\">" + run_swatch(r) +
              xml_escape(runs[r].name + " stopped early " + text) + ".</p>\n";
    }
  }
  return html;
}

// One quantity of one run per evaluation as a line. Its x is the shown epoch (or the optimizer step), so the
// axis, the hover text and the points' data-x all say the same number (data-x is what the chart plots, not the
// file's field).
LineSeries epoch_series(const RunRecord& run, double EpochRecord::*field, std::string name, std::string color,
                        bool by_step) {
  LineSeries s;
  s.name = std::move(name);
  s.color = std::move(color);
  for (const EpochRecord& e : run.epochs) {
    s.x.push_back(by_step ? e.step : shown_epoch(e));
    s.y.push_back(e.*field);
  }
  return s;
}

// An empty chart of the runs' quantities per epoch, or per evaluation over the optimizer step (`by_step`: the
// caller's step_axis(runs), which it also gives its series); "<title> per epoch" (`per` " per ") or "<title> after
// each epoch". Its ring (where it draws one) is the trainer's best/.
LineChart per_epoch_chart(const std::vector<RunRecord>& runs, bool by_step, const std::string& title,
                          const std::string& y_title, const std::string& per = " per ") {
  LineChart chart;
  chart.title = title + per + (by_step ? "evaluation" : "epoch");
  chart.x_title = by_step ? "optimizer step" : "epoch";
  chart.x_name = by_step ? "step" : "epoch";
  chart.y_title = y_title;
  chart.mark_legend = best_legend(runs, by_step);
  return chart;
}

}  // namespace

LineChart epoch_chart(const std::vector<RunRecord>& runs, const std::string& title, const std::string& y_title,
                      double EpochRecord::*field, const std::string& per) {
  const bool by_step = step_axis(runs);
  LineChart chart = per_epoch_chart(runs, by_step, title, y_title, per);
  for (std::size_t r = 0; r < runs.size(); ++r) {
    chart.series.push_back(epoch_series(runs[r], field, runs[r].name, run_color(r), by_step));
  }
  return chart;
}

void log_y_when_spread(LineChart* chart) {
  double lo = INFINITY, hi = 0;
  for (const LineSeries& s : chart->series) {
    for (double y : s.y) {
      if (!std::isfinite(y)) continue;
      if (y <= 0) return;  // a log axis cannot show it
      lo = std::min(lo, y), hi = std::max(hi, y);
    }
  }
  chart->log_y = spans_three_decades(lo, hi);
  if (chart->log_y) chart->y_title += " (log scale)";
}

LineChart loss_chart(const std::vector<RunRecord>& runs, bool name_each_run, const std::string& mark_legend) {
  const bool by_step = step_axis(runs);
  LineChart chart = per_epoch_chart(runs, by_step, "Loss", "loss (binary cross-entropy)");
  if (!mark_legend.empty()) chart.mark_legend = mark_legend;
  const bool named = name_each_run || runs.size() > 1;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const std::string prefix = named ? runs[r].name + " " : "";
    chart.series.push_back(epoch_series(runs[r], &EpochRecord::train_loss, prefix + "train_loss", run_color(r), by_step));
    LineSeries val = epoch_series(runs[r], &EpochRecord::val_loss, prefix + "val_loss", run_color(r), by_step);
    val.dash = Dash::kDashed;
    val.marked = runs[r].best;
    chart.series.push_back(std::move(val));
  }
  if (named) {  // a colour per run and a line style per loss: each run's name once, not once per line
    for (std::size_t r = 0; r < runs.size(); ++r) chart.legend.push_back({runs[r].name, run_color(r), Swatch::kBox});
    chart.legend.push_back({"train_loss", "#444", Swatch::kLine});
    chart.legend.push_back({"val_loss", "#444", Swatch::kLine, Dash::kDashed});
    // The ring's entry only where a ring is drawn (a study's trial has no best epoch before its first evaluation).
    if (std::any_of(runs.begin(), runs.end(), [](const RunRecord& run) { return run.best.has_value(); })) {
      chart.legend.push_back({chart.mark_legend, "#444", Swatch::kRing});
    }
  }
  log_y_when_spread(&chart);
  return chart;
}

namespace {

LineChart learning_rate_chart(const std::vector<RunRecord>& runs) {
  LineChart chart = epoch_chart(runs, "Learning rate", "learning rate", &EpochRecord::lr, " after each ");
  double lo = INFINITY, hi = 0;
  for (const RunRecord& run : runs) {
    for (const EpochRecord& e : run.epochs) {
      if (std::isfinite(e.lr) && e.lr > 0) lo = std::min(lo, e.lr), hi = std::max(hi, e.lr);
    }
  }
  // The plateau scheduler divides the rate: on a log axis each drop is the same height however late it comes. A
  // linear axis starts at zero, so that a 20 % cut looks like one, not a fall from the top of the plot to its foot.
  chart.log_y = hi >= 10 * lo;
  chart.y_from_zero = !chart.log_y;
  if (chart.log_y) chart.y_title += " (log scale)";
  return chart;
}

// Whether the plateau scheduler ever changed the run's learning rate.
bool learning_rate_changed(const RunRecord& run) {
  for (const EpochRecord& e : run.epochs) {
    if (!(e.lr == run.epochs.front().lr)) return true;
  }
  return false;
}

// Where no run's learning rate changed, a chart would be flat lines around a made-up band of ticks: one line
// of text says it instead. Where any run's did, the chart overlays them all (the constant ones for comparison).
std::string constant_learning_rate_note(const std::vector<RunRecord>& runs) {
  if (runs.size() == 1) {
    return "<p class=\"note\">Learning rate: " + xml_escape(format_value(runs[0].epochs.front().lr)) +
           " throughout (no ReduceLROnPlateau reduction).</p>\n";
  }
  std::string html = "<p class=\"note\">Learning rate constant in every run (no ReduceLROnPlateau reduction): ";
  for (std::size_t r = 0; r < runs.size(); ++r) {
    html += std::string(r == 0 ? "" : ", ") + run_swatch(r) + xml_escape(runs[r].name + " " + format_value(runs[r].epochs.front().lr));
  }
  return html + ".</p>\n";
}

bool has_grad_norm(const RunRecord& run) {
  return std::any_of(run.epochs.begin(), run.epochs.end(), [](const EpochRecord& e) { return e.has_grad_norm; });
}

bool has_validation_metrics(const RunRecord& run) {
  return std::any_of(run.epochs.begin(), run.epochs.end(), [](const EpochRecord& e) { return e.has_validation_metrics; });
}

// Accuracy and the three F1s of the validation split: a colour and a line style each (where several runs share the
// chart, each run's colour replaces the colours and the line style tells the metric).
struct ValidationQuantity {
  double EpochRecord::*field;
  const char* name;
  const char* color;
  Dash dash;
};
const ValidationQuantity kValidationQuantities[] = {
    {&EpochRecord::val_accuracy, "val_accuracy", "#4e79a7", Dash::kSolid},
    {&EpochRecord::val_f1, "val_f1 (weighted)", "#f28e2b", Dash::kDashed},
    {&EpochRecord::val_f1_micro, "val_f1_micro", "#59a14f", Dash::kDotted},
    {&EpochRecord::val_f1_macro, "val_f1_macro", "#e15759", Dash::kDashDot}};
const char kAccuracyIsMicro[] = "val_accuracy = val_f1_micro";

// Whether the run's micro F1 is its accuracy at every epoch, as it always is for single-label runs (one true and
// one predicted class a row): one line then stands for both instead of one hiding the other.
bool micro_f1_is_accuracy(const RunRecord& run) {
  return std::all_of(run.epochs.begin(), run.epochs.end(), [](const EpochRecord& e) {
    return e.val_f1_micro == e.val_accuracy || (std::isnan(e.val_f1_micro) && std::isnan(e.val_accuracy));
  });
}

// The validation metrics of every run that has them, the trainer's best/ ringed on the weighted F1.
LineChart validation_chart(const std::vector<RunRecord>& runs) {
  const bool by_step = step_axis(runs);
  LineChart chart = per_epoch_chart(runs, by_step, "Validation accuracy and F1", "score (0 to 1)");
  std::size_t shown = 0;
  for (const RunRecord& run : runs) shown += has_validation_metrics(run) ? 1 : 0;
  bool micro_lines = false, every_micro_is_accuracy = true;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    if (!has_validation_metrics(runs[r])) continue;
    const bool merged = micro_f1_is_accuracy(runs[r]);
    every_micro_is_accuracy = every_micro_is_accuracy && merged;
    const std::string prefix = runs.size() > 1 ? runs[r].name + " " : "";
    for (const ValidationQuantity& q : kValidationQuantities) {
      if (merged && q.field == &EpochRecord::val_f1_micro) continue;
      micro_lines = micro_lines || q.field == &EpochRecord::val_f1_micro;
      const std::string name = merged && q.field == &EpochRecord::val_accuracy ? kAccuracyIsMicro : q.name;
      LineSeries s = epoch_series(runs[r], q.field, prefix + name, shown > 1 ? run_color(r) : q.color, by_step);
      s.dash = q.dash;
      if (q.field == &EpochRecord::val_f1) s.marked = runs[r].best;
      chart.series.push_back(std::move(s));
    }
  }
  if (shown > 1) {  // a colour per run, a line style per metric
    for (std::size_t r = 0; r < runs.size(); ++r) {
      if (has_validation_metrics(runs[r])) chart.legend.push_back({runs[r].name, run_color(r), Swatch::kBox});
    }
    for (const ValidationQuantity& q : kValidationQuantities) {
      if (q.field == &EpochRecord::val_f1_micro && !micro_lines) continue;
      const bool merged = q.field == &EpochRecord::val_accuracy && every_micro_is_accuracy;
      chart.legend.push_back({merged ? kAccuracyIsMicro : q.name, "#444", Swatch::kLine, q.dash});
    }
    chart.legend.push_back({chart.mark_legend, "#444", Swatch::kRing});
  }
  return chart;
}

// One run's validation metrics, an epoch a row beside its val_loss (and the optimizer step, where the lines
// give it); the best epoch's row says so.
std::string validation_table(const RunRecord& run) {
  const bool steps = std::any_of(run.epochs.begin(), run.epochs.end(), [](const EpochRecord& e) { return e.has_step; });
  std::string html = "<div class=\"scroll\">\n<table>\n<thead><tr><th>epoch</th>" + std::string(steps ? "<th>step</th>" : "") +
                     "<th>val_loss</th><th>accuracy</th><th>F1 weighted</th><th>F1 micro</th><th>F1 macro</th></tr></thead>\n"
                     "<tbody>\n";
  for (std::size_t i = 0; i < run.epochs.size(); ++i) {
    const EpochRecord& e = run.epochs[i];
    html += "<tr>" + cell(format_value(shown_epoch(e)) + (run.best == i ? " (best)" : ""), true);
    if (steps) html += cell(e.has_step ? format_fixed(e.step, 0) : "", true);
    for (const double v : {e.val_loss, e.val_accuracy, e.val_f1, e.val_f1_micro, e.val_f1_macro}) {
      html += cell(format_fixed(v, 4), true);
    }
    html += "</tr>\n";
  }
  return html + "</tbody>\n</table>\n</div>\n";
}

// The per-epoch tables of the runs whose metrics.jsonl has validation metrics ("" when none has).
std::string validation_section(const std::vector<RunRecord>& runs) {
  if (!std::any_of(runs.begin(), runs.end(), has_validation_metrics)) return "";
  const std::string unit = step_axis(runs) ? "evaluation" : "epoch";
  std::string html =
      "<section>\n<h2>Validation metrics per " + unit + "</h2>\n<p class=\"meta\">On the validation split after each " + unit + ", "
      "as scikit-learn computes them: accuracy (multi-label: every label of a row right), and F1 averaged over the "
      "labels weighted by their rows (Made-With-ML's), over all predictions (micro) and as the plain mean (macro). "
      "Single-label micro F1 equals accuracy.</p>\n";
  for (std::size_t r = 0; r < runs.size(); ++r) {
    if (!has_validation_metrics(runs[r])) continue;
    if (runs.size() > 1) {
      html += "<h3>" + run_swatch(r) +
              xml_escape(runs[r].name) + "</h3>\n";
    }
    html += validation_table(runs[r]);
  }
  return html + "</section>\n";
}

std::string overall_table(const json& evaluation) {
  const bool multi = multi_label(evaluation);
  auto row = [](const std::string& name, const json& m) {
    return "<tr>" + cell(name) + cell(format_fixed(number_or_nan(m.value("precision", json())), 4), true) +
           cell(format_fixed(number_or_nan(m.value("recall", json())), 4), true) +
           cell(format_fixed(number_or_nan(m.value("f1", json())), 4), true) +
           cell(format_fixed(number_or_nan(m.value("num_samples", json())), 0), true) + "</tr>\n";
  };
  // Multi-label support counts label occurrences, not rows.
  std::string html = std::string("<div class=\"scroll\">\n<table>\n<thead><tr><th>") + (multi ? "average" : "subset") +
                     "</th><th>precision</th><th>recall</th><th>F1</th><th>" + (multi ? "support" : "rows") +
                     "</th></tr></thead>\n<tbody>\n";
  const json& overall = evaluation["overall"];
  if (overall.contains("f1")) {
    html += row("all (weighted)", overall);
  } else {
    // scikit-learn's classification_report order, then anything else the file has.
    std::vector<std::string> averages = {"micro", "macro", "weighted", "samples"};
    for (const auto& [average, m] : overall.items()) {
      if (std::find(averages.begin(), averages.end(), average) == averages.end()) averages.push_back(average);
    }
    for (const std::string& average : averages) {
      if (overall.contains(average) && overall[average].is_object()) html += row(average, overall[average]);
    }
  }
  if (evaluation.contains("slices") && evaluation["slices"].is_object()) {
    for (const auto& [slice, m] : evaluation["slices"].items()) {
      if (m.is_object()) html += row("slice " + slice, m);
    }
  }
  return html + "</tbody>\n</table>\n</div>\n";
}

BarChart per_class_chart(const json& evaluation) {
  std::vector<std::pair<std::string, json>> classes;
  for (const auto& [name, m] : evaluation["per_class"].items()) classes.emplace_back(name, m);
  // Highest F1 first, as evaluate lists them; names break ties so the order never depends on the file's.
  std::sort(classes.begin(), classes.end(), [](const auto& a, const auto& b) {
    const double fa = number_or_nan(a.second["f1"]), fb = number_or_nan(b.second["f1"]);
    if (fa != fb && !(std::isnan(fa) && std::isnan(fb))) return std::isnan(fb) || fa > fb;
    return a.first < b.first;
  });
  BarChart chart;
  chart.title = "Precision, recall and F1 per class";
  chart.value_title = "score (0 to 1)";
  chart.groups = {{"precision", "#4e79a7", {}}, {"recall", "#f28e2b", {}}, {"F1", "#59a14f", {}}};
  for (const auto& [name, m] : classes) {
    chart.categories.push_back(name);
    chart.category_notes.push_back(format_fixed(number_or_nan(m["num_samples"]), 0) + " rows");
    chart.groups[0].values.push_back(number_or_nan(m["precision"]));
    chart.groups[1].values.push_back(number_or_nan(m["recall"]));
    chart.groups[2].values.push_back(number_or_nan(m["f1"]));
  }
  return chart;
}

HeatMap confusion_heat_map(const json& evaluation) {
  const json& cm = evaluation["confusion_matrix"];
  HeatMap map;
  map.title = "Confusion matrix";
  map.row_title = cm.value("rows", "true");
  map.column_title = cm.value("columns", "predicted");
  map.labels = cm["labels"].get<std::vector<std::string>>();
  map.counts = cm["matrix"].get<std::vector<std::vector<long>>>();
  return map;
}

std::string evaluation_section(const RunRecord& run) {
  const json& e = run.evaluation;
  std::string html = "<section>\n<h2>Evaluation of " + xml_escape(run.name) + "</h2>\n<p class=\"meta\">" +
                     xml_escape(e.value("data", std::string("(data file not recorded)")));
  if (e.contains("num_rows") && e["num_rows"].is_number()) html += ", " + std::to_string(e["num_rows"].get<long>()) + " rows";
  if (e.contains("threshold") && e["threshold"].is_number()) {
    html += ", a label predicted at probability &#8805; " + xml_escape(format_value(e["threshold"].get<double>()));
  }
  if (e.contains("timestamp") && e["timestamp"].is_string()) html += ", " + xml_escape(e["timestamp"].get<std::string>());
  html += "</p>\n" + overall_table(e) + "<div class=\"charts\">\n" + render_bar_chart(per_class_chart(e));
  if (e.contains("confusion_matrix") && e["confusion_matrix"]["labels"].size() > kMaxConfusionClasses) {
    html += "<p class=\"meta\">Confusion matrix not drawn: " +
            std::to_string(e["confusion_matrix"]["labels"].size()) + " classes, more than " +
            std::to_string(kMaxConfusionClasses) + ".</p>\n";
  } else if (e.contains("confusion_matrix")) {
    const HeatMap map = confusion_heat_map(e);
    // Past ten classes the matrix takes the whole row of cards: in half of it its counts shrank to 5 px.
    html += std::string(map.labels.size() > 10 ? "<figure class=\"wide\">\n" : "<figure>\n") + render_heat_map(map) +
            "<figcaption>Numbers are rows; the shade is each cell's share of its " +
            xml_escape(map.row_title) + "'s rows.</figcaption>\n</figure>\n";
  } else if (e.contains("confusion_matrix_omitted") && e["confusion_matrix_omitted"].is_string()) {
    html += "<p class=\"meta\">Confusion matrix left out by evaluate: " +
            xml_escape(e["confusion_matrix_omitted"].get<std::string>()) + ".</p>\n";
  } else if (multi_label(e)) {
    html += "<p class=\"meta\">Multi-label: each row may have several labels, so there is no single confusion matrix.</p>\n";
  }
  return html + "</div>\n</section>\n";
}

const char kStyle[] =
    "body{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;color:#222;margin:0;background:#fafafa}"
    "main{max-width:1180px;margin:0 auto;padding:8px 20px 40px}"
    "h1{font-size:24px;margin:16px 0 4px}h2{font-size:19px;margin:28px 0 8px}h3{font-size:15px;margin:16px 0 4px}"
    ".meta{color:#666;font-size:13px;margin:4px 0 12px}"
    // A table wider than a narrow window scrolls in its own box, not off the page's edge.
    ".scroll{overflow-x:auto}table{border-collapse:collapse;font-size:13px;background:#fff;margin:8px 0 16px}"
    "th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}"
    "th{background:#f0f0f0}td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}"
    ".swatch{display:inline-block;width:10px;height:10px;margin-right:6px;border-radius:2px}"
    ".note{font-size:14px;margin:4px 0 12px}"
    // Two charts side by side from about 1100 px of window, one below the other on narrower screens.
    ".charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,540px),1fr));gap:16px;"
    "align-items:start}"
    ".charts svg{width:100%;height:auto;background:#fff;border:1px solid #e5e5e5}"
    // A chart with a caption: one card around both, the caption wrapping inside it.
    ".charts figure{margin:0;background:#fff;border:1px solid #e5e5e5}.charts figure svg{border:0;display:block}"
    ".charts .wide{grid-column:1/-1}"
    "figcaption{color:#666;font-size:12px;padding:0 12px 12px;overflow-wrap:anywhere}"
    // A study's trials table: the best trial's row tinted and badged (not by colour alone), a failed trial's error
    // under its status, wrapping rather than widening the table.
    "tr.best td{background:#fff4cc}.badge{font-size:11px;font-weight:bold;margin-left:6px;padding:0 4px;"
    "border:1px solid #b58900;border-radius:3px;color:#7a5c00}"
    ".error{color:#a1232b;font-size:12px;max-width:40em;overflow-wrap:anywhere}"
    "td.json{font-family:'DejaVu Sans Mono',monospace;font-size:12px;overflow-wrap:anywhere}"
    // On paper (print, save as PDF) a scroll box would cut its table's right columns off: tables shrink to fit
    // instead, and a chart is not split between pages.
    "@media print{.scroll{overflow:visible}table{font-size:9px}th,td{padding:2px 3px}"
    ".charts svg,.charts figure{break-inside:avoid}}";

// The evaluation the trainer kept as best/: the one whose step `state` (results.json or trainer_state.json) names,
// by the run's --metric-for-best; records without steps (older runs) by its epoch. Without such a file (or one that
// names none of the records), the trainer's default rule: the first val_loss below every earlier one.
void pick_best(RunRecord* run, const json& state) {
  const std::vector<EpochRecord>& records = run->epochs;
  if (state.is_object() && state.contains("best_step") && state["best_step"].is_number() &&
      state.contains("best_epoch") && state["best_epoch"].is_number()) {
    const double step = state["best_step"].get<double>(), epoch = state["best_epoch"].get<double>();
    for (std::size_t i = 0; i < records.size() && !run->best; ++i) {
      if (records[i].has_step ? records[i].step == step : records[i].epoch == epoch) run->best = i;
    }
    const json params = state.value("params", json::object());
    const std::string metric = params.is_object() ? params.value("metric_for_best", std::string("val_loss")) : "val_loss";
    if (run->best) {
      run->best_rule = metric == "val_loss" ? "lowest val_loss" : "highest val_" + metric;
      return;
    }
  }
  for (std::size_t i = 0; i < records.size(); ++i) {
    const double loss = records[i].val_loss;
    if (std::isfinite(loss) && (!run->best || loss < records[*run->best].val_loss)) run->best = i;
  }
}

// The training run whose best/, last/ or checkpoints/step-N the model directory `dir` is (the folder predict takes,
// given where report wants its run), or "" when `dir` is no such model.
std::string run_holding_model(const std::string& dir) {
  namespace fs = std::filesystem;
  if (path_exists(dir + "/metrics.jsonl") || !file_exists(dir + "/config.json")) return "";
  fs::path model = fs::path(dir).lexically_normal();
  if (!model.has_filename()) model = model.parent_path();  // "RUN/best/"
  fs::path run = model.parent_path();
  if (run.filename() == "checkpoints") run = run.parent_path();
  if (run.empty()) run = ".";
  return file_exists((run / "metrics.jsonl").string()) ? run.string() : "";
}

}  // namespace

RunRecord load_run(const std::string& dir) {
  BERTRAIN_CHECK(directory_exists(dir), "run directory '" << dir << "' " << (path_exists(dir) ? "is a file, not a directory" : "not found"));
  const std::string run_dir = run_holding_model(dir);
  BERTRAIN_CHECK(run_dir.empty(), dir << " is a model of the training run " << run_dir << ": report that run ("
                                      << run_dir << "), whose metrics.jsonl this folder does not have");
  RunRecord run;
  run.dir = dir;
  run.epochs = read_metrics(dir + "/metrics.jsonl");
  for (std::size_t i = 1; i < run.epochs.size(); ++i) {
    run.evaluates_within_epochs = run.evaluates_within_epochs || run.epochs[i].epoch == run.epochs[i - 1].epoch;
  }
  run.results = read_optional_json(dir + "/results.json");
  BERTRAIN_CHECK(run.results.is_null() || run.results.is_object(), dir << "/results.json: not a JSON object");
  check_run_state(run.results, dir + "/results.json");
  run.settings = run.results.is_null() ? read_optional_json(dir + "/last/trainer_state.json") : run.results;
  if (run.results.is_null()) check_run_state(run.settings, dir + "/last/trainer_state.json");
  pick_best(&run, run.settings);
  run.stopped_early = read_early_stop(run.results, dir + "/results.json");
  run.evaluation = read_optional_json(dir + "/evaluation.json");
  if (!run.evaluation.is_null()) check_evaluation(run.evaluation, dir + "/evaluation.json");
  return run;
}

std::vector<std::string> distinct_run_dirs(const std::vector<std::string>& dirs,
                                           std::vector<std::pair<std::string, std::string>>* repeats) {
  namespace fs = std::filesystem;
  std::vector<std::string> distinct;
  std::map<fs::path, std::string> first_spelling;  // canonical path -> as first given
  for (const std::string& dir : dirs) {
    std::error_code error;
    fs::path key = fs::weakly_canonical(fs::absolute(dir, error), error);
    if (error) key = fs::absolute(dir, error).lexically_normal();
    if (!key.has_filename()) key = key.parent_path();  // "a/" normalises to "a/": the same folder as "a"
    const auto [it, inserted] = first_spelling.emplace(key, dir);
    if (inserted) {
      distinct.push_back(dir);
    } else {
      repeats->emplace_back(dir, it->second);
    }
  }
  return distinct;
}

void name_runs(std::vector<RunRecord>* runs) {
  std::map<std::string, int> uses;
  for (const RunRecord& run : *runs) ++uses[folder_name(run.dir)];
  for (RunRecord& run : *runs) run.name = uses[folder_name(run.dir)] == 1 ? folder_name(run.dir) : run.dir;
}

std::string run_summary(const RunRecord& run) {
  // results.json is written at the end: without it the run is going, or was stopped.
  std::string out = run.dir + ": " + (run.results.is_null() ? "trained " : "finished ") +
                    count_of(trained_epochs(run), "epoch");
  if (run.evaluates_within_epochs) out += " (" + count_of(static_cast<long long>(run.epochs.size()), "evaluation") + ")";
  out += (run.results.is_null() ? " so far" : "") + std::string(" in ") + format_duration(run.epochs.back().elapsed_s);
  if (run.stopped_early) out += ", stopped early " + early_stop_text(run);
  if (run.best) {
    const EpochRecord& best = run.epochs[*run.best];
    out += "; best epoch " + format_value(shown_epoch(best));
    if (run.evaluates_within_epochs && best.has_step) out += ", step " + format_fixed(best.step, 0);
    out += " (val_loss " + format_fixed(best.val_loss, 4);
    if (best.has_validation_metrics) {
      out += ", val_accuracy " + format_fixed(best.val_accuracy, 3) + ", val_f1 " + format_fixed(best.val_f1, 3);
    }
    out += "), its model in " + run.dir + "/best";
  }
  out += "\n";
  if (!run.evaluation.is_null()) {
    const json& e = run.evaluation;
    const json overall = e.value("overall", json::object());
    const json data = e.value("data", json()), rows = e.value("num_rows", json());
    out += "  evaluated on " + (data.is_string() ? data.get<std::string>() : std::string("its data"));
    if (rows.is_number()) out += " (" + count_of(rows.get<long long>(), "row") + ")";
    out += ": ";
    if (multi_label(e)) {
      const json macro = overall.value("macro", json::object());
      out += "micro " + prf(overall.value("micro", json())) + "; macro f1 " +
             format_fixed(number_or_nan(macro.is_object() ? macro.value("f1", json()) : json()), 3);
    } else {
      out += prf(overall) + " (weighted)";
    }
    out += "; " + run.dir + "/evaluation.json\n";
  }
  return out;
}

std::string page_head(const std::string& title) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n<title>" +
         xml_escape(title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n<main>\n";
}

std::string render_report(const std::vector<RunRecord>& runs, const std::string& generated) {
  std::string names;
  for (const RunRecord& run : runs) names += (names.empty() ? "" : ", ") + run.name;
  std::string html = page_head("bertrain report: " + names) + "<h1>bertrain report</h1>\n<p class=\"meta\">" + std::to_string(runs.size()) +
                     (runs.size() == 1 ? " run" : " runs") + ", generated " + xml_escape(generated) +
                     ". Hover over a point, bar or cell for its exact value.</p>\n";
  html += "<section>\n<h2>Runs</h2>\n" + summary_table(runs) + early_stop_notes(runs) + "</section>\n";
  const bool any_lr_change = std::any_of(runs.begin(), runs.end(), learning_rate_changed);
  html += "<section>\n<h2>Training</h2>\n" + (any_lr_change ? "" : constant_learning_rate_note(runs)) +
          "<div class=\"charts\">\n" + render_line_chart(loss_chart(runs, false, ""));
  // Beside the loss, where any run recorded them: the validation metrics that go with val_loss.
  if (std::any_of(runs.begin(), runs.end(), has_validation_metrics)) html += render_line_chart(validation_chart(runs));
  if (any_lr_change) html += render_line_chart(learning_rate_chart(runs));
  LineChart throughput = epoch_chart(runs, "Training throughput", "samples / s", &EpochRecord::samples_per_s);
  throughput.y_from_zero = true;
  html += render_line_chart(throughput);
  // Where any run recorded it: the gradient norm before clipping, what --max-grad-norm is chosen from.
  if (std::any_of(runs.begin(), runs.end(), has_grad_norm)) {
    LineChart norm = epoch_chart(runs, "Gradient norm", "L2 norm (mean of its steps)",
                                 &EpochRecord::grad_norm);
    norm.y_from_zero = true;
    html += render_line_chart(norm);
  }
  html += "</div>\n</section>\n" + validation_section(runs);
  for (const RunRecord& run : runs) {
    if (!run.evaluation.is_null()) html += evaluation_section(run);
  }
  return html + "</main>\n</body>\n</html>\n";
}

}  // namespace bertrain::report

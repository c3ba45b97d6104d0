#include "tools/report/study_report.h"

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <set>

#include "core/count_text.h"
#include "core/error.h"
#include "core/files.h"
#include "tools/report/charts.h"
#include "tools/report/svg_text.h"

namespace bertrain::report {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// The order the page counts trials by status in.
const TrialStatus kStatusOrder[] = {TrialStatus::kCompleted, TrialStatus::kStopped, TrialStatus::kFailed,
                                    TrialStatus::kRunning, TrialStatus::kInterrupted};
// A point of a trial that has a best metric but no curves, so no colour of its own on the page.
const char kUnchartedColor[] = "#999999";

// The trial's curves, where its run directory has recorded an epoch. A trial that is starting has no metrics.jsonl,
// or an empty one; one whose file cannot be read is listed with the reason rather than failing the whole page (it
// may be a trial the study lost, while the rest of the study is worth seeing).
void load_curves(StudyTrial* t) {
  const std::string metrics = t->dir + "/metrics.jsonl";
  // "yet" only of a trial that may still record one: a failed trial will not.
  const std::string yet = t->status == "running" || t->status == "interrupted" ? " yet" : "";
  if (!file_exists(metrics)) {
    t->not_charted = "no metrics.jsonl" + yet;
    return;
  }
  try {
    if (read_file(metrics, "metrics file").find_first_not_of(" \t\r\n") == std::string::npos) {
      t->not_charted = "no epoch recorded" + yet;
      return;
    }
    RunRecord run = load_run(t->dir);
    run.name = "trial " + t->id;
    // Ring the evaluation the study counts as the trial's best (by the study's metric, as its best/ holds). The
    // study counts metrics.jsonl's lines, one an epoch (more under --eval-steps): its best_epoch is a line's index.
    run.best.reset();
    if (!std::isnan(t->best_epoch) && t->best_epoch < static_cast<double>(run.epochs.size())) {
      run.best = static_cast<std::size_t>(t->best_epoch);
    }
    t->run = std::move(run);
  } catch (const Error& e) {
    t->not_charted = e.what();
  }
}

bool is_failed(const StudyTrial& t) { return t.status == "failed"; }

// The page's colour of each trial: run_color of its place among the charted trials (the loss chart's order), so that
// a trial's swatch, lines and points agree; "" for a trial without curves.
std::vector<std::string> trial_colors(const StudyRecord& study) {
  std::vector<std::string> colors;
  std::size_t charted = 0;
  for (const StudyTrial& t : study.trials) colors.push_back(t.run ? run_color(charted++) : "");
  return colors;
}

std::vector<RunRecord> charted_runs(const StudyRecord& study) {
  std::vector<RunRecord> runs;
  for (const StudyTrial& t : study.trials) {
    if (t.run) runs.push_back(*t.run);
  }
  return runs;
}

// A parameter value as the table and the hover text show it: "1e-4", "0.5", "adamw", "true".
std::string value_text(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_number()) return format_value(value.get<double>());
  return "";
}

// A parameter's value as the trial ran with it: an integer flag's integer part (tune's table shows that too; the
// value the search drew stays in study.json and on the parameter charts), else value_text.
bool runs_as_integer(const StudyRecord& study, const std::string& name, const json& value) {
  const std::vector<std::string>& integers = study.record.integers;
  return value.is_number() && std::find(integers.begin(), integers.end(), name) != integers.end();
}
std::string run_value_text(const StudyRecord& study, const std::string& name, const json& value) {
  if (runs_as_integer(study, name, value)) return std::to_string(static_cast<long long>(std::trunc(value.get<double>())));
  return value_text(value);
}

// The searched parameters of a trial: "dropout 0.5, lr 1e-4" (every parameter when the file names none searched).
std::string params_text(const StudyRecord& study, const StudyTrial& t) {
  std::string text;
  auto add = [&](const std::string& name, const json& value) {
    text += (text.empty() ? "" : ", ") + name + " " + run_value_text(study, name, value);
  };
  if (study.searched.empty()) {
    for (const auto& [name, value] : t.params.items()) add(name, value);
  }
  for (const std::string& name : study.searched) {
    if (t.params.contains(name)) add(name, t.params[name]);
  }
  return text;
}

// "1 completed, 1 stopped, 1 failed" in kStatusOrder, statuses no trial has left out.
std::string status_counts(const StudyRecord& study) {
  std::string text;
  for (const TrialStatus s : kStatusOrder) {
    const std::string status = trial_status_name(s);
    const auto n = std::count_if(study.trials.begin(), study.trials.end(),
                                 [&](const StudyTrial& t) { return t.status == status; });
    if (n > 0) text += (text.empty() ? "" : ", ") + std::to_string(n) + " " + status;
  }
  return text;
}

std::string direction(const StudyRecord& study) { return study.lower_is_better ? "lowest" : "highest"; }

// The one line that says which trial is best: "trial 000, val_loss 0.4000 at epoch 2 (dropout 0.1, lr 1e-5)".
std::string best_text(const StudyRecord& study) {
  const StudyTrial& b = study.trials[*study.best];
  std::string text = "trial " + b.id + ", " + study.metric + " " + format_fixed(b.best_metric, 4);
  // Counted from 1, as train prints; the study's evaluations where it counts those (--eval-steps).
  if (!std::isnan(b.best_epoch)) text += " at " + study.record.iteration + " " + format_value(b.best_epoch + 1);
  const std::string params = params_text(study, b);
  return text + (params.empty() ? "" : " (" + params + ")");
}

std::string cell(const std::string& text, bool number = false) {
  return std::string(number ? "<td class=\"num\">" : "<td>") + xml_escape(text) + "</td>";
}

std::string trials_table(const StudyRecord& study, const std::vector<std::string>& colors) {
  std::string html = "<div class=\"scroll\">\n<table>\n<thead><tr><th>trial</th><th>status</th><th>" +
                     study.record.iteration + "s</th><th>best " + xml_escape(study.metric) + "</th>";
  for (const std::string& name : study.searched) html += "<th>" + xml_escape(name) + "</th>";
  html += "<th>time</th></tr></thead>\n<tbody>\n";
  // One notation down a column, as along a log axis: "1e-3" below "3e-4", not "0.001".
  std::vector<bool> scientific;
  for (const std::string& name : study.searched) {
    scientific.push_back(std::any_of(study.trials.begin(), study.trials.end(), [&](const StudyTrial& t) {
      if (!t.params.contains(name) || !t.params[name].is_number()) return false;
      const double v = std::fabs(t.params[name].get<double>());
      return v > 0 && v < 1e-3;
    }));
  }
  for (const std::size_t i : rank_trials(study)) {
    const StudyTrial& t = study.trials[i];
    const bool best = study.best == i;
    html += best ? "<tr class=\"best\">" : "<tr>";
    html += "<td>" + (colors[i].empty() ? "" : color_swatch(colors[i])) + xml_escape(t.id) +
            (best ? "<span class=\"badge\">best</span>" : "") + "</td>";
    html += "<td>" + xml_escape(t.status) +
            (is_failed(t) && !t.error.empty() ? "<div class=\"error\">" + xml_escape(t.error) + "</div>" : "") + "</td>";
    html += cell(std::to_string(t.epochs), true) + cell(format_fixed(t.best_metric, 4), true);
    for (std::size_t p = 0; p < study.searched.size(); ++p) {
      const std::string& name = study.searched[p];
      if (!t.params.contains(name)) {
        html += cell("");
        continue;
      }
      const json& value = t.params[name];
      const bool number = value.is_number();
      html += cell(number && scientific[p] && value.get<double>() != 0 && !runs_as_integer(study, name, value)
                       ? format_scientific(value.get<double>())
                       : run_value_text(study, name, value),
                   number);
    }
    html += cell(format_duration(t.time_s), true) + "</tr>\n";
  }
  return html + "</tbody>\n</table>\n</div>\n";
}

// The per-epoch field of a metrics.jsonl key; nullptr for one EpochRecord does not keep.
double EpochRecord::*metric_field(const std::string& metric) {
  if (metric == "val_loss") return &EpochRecord::val_loss;
  if (metric == "val_accuracy") return &EpochRecord::val_accuracy;
  if (metric == "val_f1") return &EpochRecord::val_f1;
  if (metric == "val_f1_micro") return &EpochRecord::val_f1_micro;
  if (metric == "val_f1_macro") return &EpochRecord::val_f1_macro;
  return nullptr;
}

std::string curves_section(const StudyRecord& study) {
  const std::vector<RunRecord> runs = charted_runs(study);
  const std::string ring = "best " + study.record.iteration + " (" + direction(study) + " " + study.metric + ")";
  std::string html = "<section>\n<h2>Training curves</h2>\n";
  if (runs.empty()) {
    html += "<p class=\"note\">No trial has recorded an epoch yet.</p>\n";
  } else {
    html += "<p class=\"meta\">Every trial that has recorded an epoch, in its colour (the table's swatch): train_loss "
            "solid, val_loss dashed; the ring is the trial's best " + study.record.iteration + " by " +
            xml_escape(study.metric) + ", the one its best/ holds.</p>\n<div class=\"charts\">\n" +
            render_line_chart(loss_chart(runs, true, ring));
    // The metric the study optimizes, where it is not the loss already drawn.
    if (double EpochRecord::*field = metric_field(study.metric); field != nullptr && study.metric != "val_loss") {
      LineChart chart = epoch_chart(runs, study.metric, study.metric, field);
      chart.mark_legend = ring;
      for (std::size_t r = 0; r < runs.size(); ++r) chart.series[r].marked = runs[r].best;
      html += render_line_chart(chart);
    }
    html += "</div>\n";
  }
  std::string missing;
  for (const StudyTrial& t : study.trials) {
    if (!t.run) missing += (missing.empty() ? "" : "; ") + ("trial " + t.id + " (" + t.not_charted + ")");
  }
  if (!missing.empty()) html += "<p class=\"note\">Not charted: " + xml_escape(missing) + ".</p>\n";
  return html + "</section>\n";
}

// Category order on an x axis: numbers by value, then false before true, then strings alphabetically.
int kind_rank(const json& v) { return v.is_number() ? 0 : v.is_boolean() ? 1 : 2; }
bool category_less(const json& a, const json& b) {
  if (kind_rank(a) != kind_rank(b)) return kind_rank(a) < kind_rank(b);
  if (a.is_number()) return a.get<double>() < b.get<double>();
  if (a.is_boolean()) return !a.get<bool>() && b.get<bool>();
  return a.get<std::string>() < b.get<std::string>();
}

// Parameter `name` of every trial with a best metric (failed trials left out: their metric is of a run that did not
// finish) against that metric: a point a trial, in its colour, the best trial ringed. Numbers on a linear axis, or
// a log one when they are positive and span more than 1.5 decades (a learning rate); strings and booleans as
// categories. Empty series when no trial has a point.
ScatterChart parameter_chart(const StudyRecord& study, const std::string& name, const std::vector<std::string>& colors) {
  std::vector<std::size_t> trials;
  for (std::size_t i = 0; i < study.trials.size(); ++i) {
    const StudyTrial& t = study.trials[i];
    if (!is_failed(t) && std::isfinite(t.best_metric) && t.params.contains(name)) trials.push_back(i);
  }
  ScatterChart chart;
  chart.title = name + " against best " + study.metric;
  chart.x_title = name;
  chart.y_title = "best " + study.metric + " of the trial";
  chart.x_name = name;
  chart.y_name = "best " + study.metric;
  const bool numeric = std::all_of(trials.begin(), trials.end(),
                                   [&](std::size_t i) { return study.trials[i].params[name].is_number(); });
  std::vector<json> categories;
  if (numeric) {
    double lo = INFINITY, hi = -INFINITY;
    for (const std::size_t i : trials) {
      const double v = study.trials[i].params[name].get<double>();
      lo = std::min(lo, v), hi = std::max(hi, v);
    }
    chart.log_x = lo > 0 && std::log10(hi / lo) > 1.5;
    if (chart.log_x) chart.x_title += " (log scale)";
  } else {
    for (const std::size_t i : trials) categories.push_back(study.trials[i].params[name]);
    std::sort(categories.begin(), categories.end(), category_less);
    categories.erase(std::unique(categories.begin(), categories.end(),
                                 [](const json& a, const json& b) { return !category_less(a, b) && !category_less(b, a); }),
                     categories.end());
    for (const json& c : categories) chart.x_categories.push_back(value_text(c));
  }
  // A diverged trial's metric beside converging ones would flatten every other point onto the axis: three decades or
  // more of positive values are drawn on a log axis.
  double y_lo = INFINITY, y_hi = 0;
  for (const std::size_t i : trials) {
    y_lo = std::min(y_lo, study.trials[i].best_metric);
    y_hi = std::max(y_hi, study.trials[i].best_metric);
  }
  chart.log_y = spans_three_decades(y_lo, y_hi);
  if (chart.log_y) chart.y_title += " (log scale)";
  if (study.best) chart.mark_legend = "best trial (" + study.trials[*study.best].id + ")";
  for (const std::size_t i : trials) {
    const StudyTrial& t = study.trials[i];
    const json& value = t.params[name];
    ScatterSeries s;
    s.name = "trial " + t.id;
    s.color = colors[i].empty() ? kUnchartedColor : colors[i];
    if (numeric) {
      s.x.push_back(value.get<double>());
    } else {
      const auto at = std::lower_bound(categories.begin(), categories.end(), value, category_less);
      s.x.push_back(static_cast<double>(at - categories.begin()));
    }
    s.y.push_back(t.best_metric);
    if (study.best == i) s.marked = 0;
    chart.series.push_back(std::move(s));
  }
  return chart;
}

std::string parameters_section(const StudyRecord& study, const std::vector<std::string>& colors) {
  if (study.searched.empty()) return "";
  const std::string metric = xml_escape(study.metric);
  std::string html = "<section>\n<h2>Searched parameters against best " + metric + "</h2>\n";
  std::string charts;
  for (const std::string& name : study.searched) {
    const ScatterChart chart = parameter_chart(study, name, colors);
    if (!chart.series.empty()) charts += render_scatter_chart(chart);
  }
  if (charts.empty()) {
    return html + "<p class=\"note\">No trial has a best " + metric + " yet (failed trials are left out).</p>\n</section>\n";
  }
  return html + "<p class=\"meta\">A point per trial with a best " + metric + " (" + xml_escape(direction(study)) +
         " is best; failed trials left out), in the trial's colour, at its value of the parameter; the ring is the "
         "study's best trial. Hover over a point for its trial.</p>\n<div class=\"charts\">\n" + charts +
         "</div>\n</section>\n";
}

// A setting's value: a string as it is, anything else as JSON (a list of train flags, the search space).
std::string setting_text(const json& value) { return value.is_string() ? value.get<std::string>() : value.dump(); }

std::string settings_section(const StudyRecord& study) {
  if (study.settings.empty()) return "";
  std::string html = "<section>\n<h2>Settings</h2>\n<div class=\"scroll\">\n<table>\n<thead><tr><th>setting</th>"
                     "<th>value</th></tr></thead>\n<tbody>\n";
  for (const auto& [key, value] : study.settings.items()) {
    html += "<tr>" + cell(key) + (value.is_structured() ? "<td class=\"json\">" : "<td>") +
            xml_escape(setting_text(value)) + "</td></tr>\n";
  }
  return html + "</tbody>\n</table>\n</div>\n</section>\n";
}

}  // namespace

bool is_study_dir(const std::string& dir) { return file_exists((fs::path(dir) / "study.json").string()); }

StudyRecord load_study(const std::string& dir) {
  BERTRAIN_CHECK(directory_exists(dir), "study directory '" << dir << "' " << (path_exists(dir) ? "is a file, not a directory" : "not found"));
  const std::string path = (fs::path(dir) / "study.json").string();
  const json j = read_json_file(path);
  StudyRecord study;
  study.dir = dir;
  study.record = Study::from_json(j, path);
  study.metric = study.record.metric;
  study.lower_is_better = study.record.lower_is_better;
  study.settings = study.record.settings;
  study.searched = study.record.searched;
  for (const TrialRecord& r : study.record.trials) {
    StudyTrial t;
    t.id = r.id;
    t.dir = (fs::path(dir) / r.dir()).string();
    t.params = r.params;
    t.status = trial_status_name(r.status);
    t.epochs = r.epochs;
    t.best_metric = r.best_metric;
    t.best_epoch = r.best_epoch;
    t.time_s = r.time_s;
    t.error = r.error;
    load_curves(&t);
    study.trials.push_back(std::move(t));
  }
  // The best trial as the file records it (from_json checked that it names one), e.g. none before any trial ended.
  if (j.contains("best_trial") && j["best_trial"].is_string()) {
    const std::string best = j["best_trial"].get<std::string>();
    for (std::size_t i = 0; i < study.trials.size(); ++i) {
      if (study.trials[i].id == best) study.best = i;
    }
  }
  study.time_s = study.record.time_s;
  const std::string study_best = (fs::path(dir) / "best").string();
  if (directory_exists(study_best)) {
    study.best_model = study_best;
  } else if (study.best && directory_exists(study.trials[*study.best].dir + "/best")) {
    study.best_model = study.trials[*study.best].dir + "/best";
  }
  return study;
}

std::vector<std::size_t> rank_trials(const StudyRecord& study) { return study.record.ranking(); }

std::string render_study_report(const StudyRecord& study, const std::string& generated) {
  const std::vector<std::string> colors = trial_colors(study);
  const std::string counts = status_counts(study);
  std::string html = page_head("bertrain tune study: " + folder_name(study.dir)) + "<h1>bertrain tune study</h1>\n" +
                     "<p class=\"meta\">" +
                     xml_escape(study.dir + ": " + count_of(static_cast<long long>(study.trials.size()), "trial") +
                                (counts.empty() ? "" : " (" + counts + ")") + ", " +
                                (study.lower_is_better ? "minimizing " : "maximizing ") + study.metric +
                                (std::isnan(study.time_s) ? "" : ", " + format_duration(study.time_s)) + "; generated " +
                                generated) +
                     ". Hover over a point for its exact value.</p>\n";
  html += "<section>\n<h2>Trials</h2>\n";
  if (study.best) {
    html += "<p class=\"note\">Best: " + xml_escape(best_text(study)) +
            (study.best_model.empty() ? "" : "; its model in " + xml_escape(study.best_model)) + ".</p>\n";
  } else {
    html += "<p class=\"note\">No best trial yet.</p>\n";
  }
  html += "<p class=\"meta\">Best first by the trial's best " + xml_escape(study.metric) + " (" +
          xml_escape(direction(study)) + " first), then the trials without one yet, then the failed ones.</p>\n" +
          trials_table(study, colors) + "</section>\n";
  html += curves_section(study) + parameters_section(study, colors) + settings_section(study);
  return html + "</main>\n</body>\n</html>\n";
}

std::string study_summary(const StudyRecord& study) {
  const std::string counts = status_counts(study);
  std::string out = study.dir + ": tune study of " + count_of(static_cast<long long>(study.trials.size()), "trial") +
                    (counts.empty() ? "" : " (" + counts + ")") + ", " +
                    (study.lower_is_better ? "minimizing " : "maximizing ") + study.metric +
                    (std::isnan(study.time_s) ? "" : ", " + format_duration(study.time_s)) + "\n";
  if (study.best) {
    out += "  best: " + best_text(study) + (study.best_model.empty() ? "" : "; its model in " + study.best_model) + "\n";
  } else {
    out += "  no best trial yet\n";
  }
  // The first few failures on the terminal; all of them are in the page's table.
  constexpr std::size_t kShownFailures = 3;
  std::size_t failed = 0;
  for (const StudyTrial& t : study.trials) {
    if (!is_failed(t)) continue;
    if (++failed <= kShownFailures) out += "  trial " + t.id + " failed" + (t.error.empty() ? "" : ": " + t.error) + "\n";
  }
  if (failed > kShownFailures) out += "  and " + count_of(static_cast<long long>(failed - kShownFailures), "more failed trial") + "\n";
  return out;
}

}  // namespace bertrain::report

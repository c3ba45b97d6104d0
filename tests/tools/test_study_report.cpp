// bertrain report of a tune study: study.json read and checked, the page's trials table, overlaid curves and
// parameter scatter charts read back from the HTML and SVG (tests/xml_check.h) and compared with the study's values,
// and the scatter chart on its own (log and category x axes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tests/temp_dir.h"
#include "tests/expect_error.h"
#include "tests/xml_check.h"
#include "tools/report/charts.h"
#include "tools/report/study_report.h"
#include "tools/report/svg_text.h"

namespace bertrain::report {
namespace {

using json = nlohmann::json;
using testing::parse_xml;
using testing::XmlElement;
namespace fs = std::filesystem;

using testing::all_text;
using testing::attr;
using testing::attr_number;
using testing::with_class;

// The chart whose title (aria-label) is `title`, or nullptr.
const XmlElement* chart_titled(const XmlElement& page, const std::string& title) {
  for (const XmlElement* svg : page.find_all("svg")) {
    if (attr(*svg, "aria-label") == title) return svg;
  }
  return nullptr;
}

// The x tick labels of a chart and their x: the centred, unturned <text>s of the first row under its plot (the
// axis title is the row below them).
std::map<std::string, double> x_tick_positions(const XmlElement& svg) {
  double lowest_point = 0;
  for (const XmlElement* p : with_class(svg, "circle", "point")) lowest_point = std::max(lowest_point, attr_number(*p, "cy"));
  std::vector<const XmlElement*> under;
  double first_row = INFINITY;
  for (const XmlElement* t : svg.find_all("text")) {
    if (attr(*t, "text-anchor") == "middle" && t->attribute("transform") == nullptr && attr_number(*t, "y") > lowest_point &&
        !t->text.empty()) {
      under.push_back(t);
      first_row = std::min(first_row, attr_number(*t, "y"));
    }
  }
  std::map<std::string, double> ticks;
  for (const XmlElement* t : under) {
    if (attr_number(*t, "y") == first_row) ticks[t->text] = attr_number(*t, "x");
  }
  return ticks;
}

// The study of the brief: four trials, one completed (the best), one stopped by the scheduler, one failed after an
// epoch with the lowest val_loss of all (failed trials rank last whatever they reached), and one running with no
// metrics.jsonl yet.
class StudyReportTest : public ::testing::Test {
 protected:
  static void write(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }

  // A trial's metrics.jsonl: a line per val_loss (and val_f1 = 1 - val_loss, for studies that maximize it).
  void write_metrics(const std::string& id, const std::vector<double>& val_losses) {
    std::string lines;
    for (std::size_t e = 0; e < val_losses.size(); ++e) {
      lines += json{{"epoch", e},
                    {"lr", 1e-4},
                    {"train_loss", 0.7 - 0.1 * static_cast<double>(e)},
                    {"val_loss", val_losses[e]},
                    {"samples_per_s", 80.0},
                    {"elapsed_s", 10.0 * static_cast<double>(e + 1)},
                    {"val_accuracy", 0.5},
                    {"val_f1", 1 - val_losses[e]}}
                   .dump() +
               "\n";
    }
    write(dir_ / "trials" / id / "metrics.jsonl", lines);
  }

  static json trial(const std::string& id, const json& params, const std::string& status, long epochs,
                    const json& best_metric, const json& best_epoch, double time_s) {
    return json{{"id", id},         {"dir", "trials/" + id},    {"params", params},
                {"status", status}, {"epochs", epochs},          {"best_metric", best_metric},
                {"best_epoch", best_epoch}, {"time_s", time_s}};
  }

  json study_json() const {
    json failed = trial("002",
                        {{"dropout", 0.3}, {"lr", 3e-4}, {"lr-patience", 3}, {"class-weights", true}, {"head-init", "normal"}},
                        "failed", 1, 0.3, 0, 12);
    failed["error"] = kError;
    return json{
        {"version", 1},
        {"metric", "val_loss"},
        {"mode", "min"},
        {"settings",
         {{"search", "tpe"}, {"scheduler", "asha"}, {"trials", 4}, {"parallel", 2}, {"seed", 7},
          {"space",
           {{"dropout", {{"type", "uniform"}, {"low", 0.1}, {"high", 0.5}}},
            {"lr", {{"type", "loguniform"}, {"low", 1e-5}, {"high", 1e-3}}},
            {"lr-patience", {{"type", "int"}, {"low", 2}, {"high", 5}}},
            {"class-weights", {{"type", "choice"}, {"values", {false, true}}}},
            {"head-init", {{"type", "choice"}, {"values", {"normal", "xavier"}}}}}},
          {"train_flags", {"--epochs", "3"}}}},
        {"searched", {"dropout", "lr", "lr-patience", "class-weights", "head-init"}},
        {"trials",
         {trial("000", {{"dropout", 0.1}, {"lr", 1e-5}, {"lr-patience", 2}, {"class-weights", false}, {"head-init", "normal"}},
                "completed", 3, 0.4, 1, 30.5),
          trial("001", {{"dropout", 0.5}, {"lr", 1e-3}, {"lr-patience", 5}, {"class-weights", true}, {"head-init", "xavier"}},
                "stopped", 1, 0.6, 0, 10),
          failed,
          trial("003", {{"dropout", 0.2}, {"lr", 1e-4}, {"lr-patience", 4}, {"class-weights", false}, {"head-init", "xavier"}},
                "running", 0, nullptr, nullptr, 2)}},
        {"best_trial", "000"},
        {"time_s", 60}};
  }

  void write_study(const json& study) {
    write(dir_ / "study.json", study.dump(2));
    write_metrics("000", {0.5, 0.4, 0.45});
    write_metrics("001", {0.6});
    write_metrics("002", {0.3});
    fs::create_directories(dir_ / "trials" / "003");  // started: its directory, no metrics yet
  }

  XmlElement page_of(const StudyRecord& study) { return parse_xml(render_study_report(study, "2026-11-23 10:00:00 UTC")); }

  static constexpr const char* kError = "CUDA out of memory <device 0> & more";
  testing::TempDir temp_{"bertrain_study_report"};
  fs::path dir_ = temp_.path() / "study";
};

// A trial that evaluates within epochs (--eval-steps, --scheduler none): the study counts metrics.jsonl's lines, so
// its best_epoch is the index of a line, and that line is ringed (not the first line of the epoch of that number).
TEST_F(StudyReportTest, TheRingOfATrialThatEvaluatesWithinEpochsIsItsBestLine) {
  write_study(study_json());
  std::string lines;
  const std::vector<std::pair<int, int>> evaluations = {{0, 2}, {0, 4}, {1, 6}};  // epoch, step
  const std::vector<double> val_losses = {0.5, 0.4, 0.45};
  for (std::size_t i = 0; i < evaluations.size(); ++i) {
    lines += json{{"epoch", evaluations[i].first}, {"step", evaluations[i].second}, {"lr", 1e-4}, {"train_loss", 0.7},
                  {"val_loss", val_losses[i]}, {"samples_per_s", 80.0}, {"elapsed_s", 10.0}}
                 .dump() +
             "\n";
  }
  write(dir_ / "trials" / "000" / "metrics.jsonl", lines);
  const StudyRecord study = load_study(dir_.string());
  ASSERT_TRUE(study.trials[0].run.has_value());
  ASSERT_TRUE(study.trials[0].run->best.has_value());
  EXPECT_EQ(*study.trials[0].run->best, 1u);  // study.json's best_epoch 1: the second line, step 4
}

TEST_F(StudyReportTest, LoadsEveryTrialAndTheCurvesOfThoseWithEpochs) {
  write_study(study_json());
  EXPECT_TRUE(is_study_dir(dir_.string()));
  EXPECT_FALSE(is_study_dir((dir_ / "trials" / "000").string()));  // a trial is a training run
  const StudyRecord study = load_study(dir_.string());
  EXPECT_EQ(study.metric, "val_loss");
  EXPECT_TRUE(study.lower_is_better);
  EXPECT_EQ(study.searched, (std::vector<std::string>{"dropout", "lr", "lr-patience", "class-weights", "head-init"}));
  ASSERT_EQ(study.trials.size(), 4u);
  ASSERT_TRUE(study.best.has_value());
  EXPECT_EQ(*study.best, 0u);
  EXPECT_EQ(study.trials[2].error, kError);
  EXPECT_TRUE(std::isnan(study.trials[3].best_metric));
  EXPECT_EQ(study.trials[0].dir, (dir_ / "trials" / "000").string());
  ASSERT_TRUE(study.trials[0].run.has_value());
  EXPECT_EQ(study.trials[0].run->name, "trial 000");
  EXPECT_EQ(study.trials[0].run->epochs.size(), 3u);
  ASSERT_TRUE(study.trials[0].run->best.has_value());
  EXPECT_EQ(*study.trials[0].run->best, 1u);  // study.json's best_epoch
  EXPECT_TRUE(study.trials[2].run.has_value());  // failed after an epoch: its curve is still drawn
  EXPECT_FALSE(study.trials[3].run.has_value());
  EXPECT_EQ(study.trials[3].not_charted, "no metrics.jsonl yet");
  EXPECT_EQ(rank_trials(study), (std::vector<std::size_t>{0, 1, 3, 2}));
  EXPECT_EQ(study.best_model, "");  // neither DIR/best nor the trial's best/ yet

  fs::create_directories(dir_ / "trials" / "000" / "best");
  EXPECT_EQ(load_study(dir_.string()).best_model, (dir_ / "trials" / "000" / "best").string());
  fs::create_directories(dir_ / "best");
  EXPECT_EQ(load_study(dir_.string()).best_model, (dir_ / "best").string());
  // A trial that failed before its first epoch will record none: no "yet" (a finished study said it).
  json failed_early = study_json();
  failed_early["trials"][3]["status"] = "failed";
  write(dir_ / "study.json", failed_early.dump());
  EXPECT_EQ(load_study(dir_.string()).trials[3].not_charted, "no metrics.jsonl");
}

TEST_F(StudyReportTest, TheTableListsTrialsBestFirstFailedLast) {
  write_study(study_json());
  const std::string html = render_study_report(load_study(dir_.string()), "now");
  ASSERT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("<script"), std::string::npos);  // self-contained, as the runs' page
  EXPECT_EQ(html.find("http"), std::string::npos);
  const XmlElement page = parse_xml(html);
  const XmlElement& table = *page.find_all("table").at(0);
  std::vector<std::string> headers;
  for (const XmlElement* th : table.find_all("th")) headers.push_back(th->text);
  EXPECT_EQ(headers, (std::vector<std::string>{"trial", "status", "epochs", "best val_loss", "dropout", "lr",
                                               "lr-patience", "class-weights", "head-init", "time"}));
  const auto rows = table.find_all("tbody").at(0)->find_all("tr");
  ASSERT_EQ(rows.size(), 4u);
  std::vector<std::string> ids, statuses, best;
  for (const XmlElement* row : rows) {
    const auto cells = row->find_all("td");
    ASSERT_EQ(cells.size(), headers.size());
    ids.push_back(cells[0]->text);
    statuses.push_back(cells[1]->text);
    best.push_back(cells[3]->text);
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"000", "001", "003", "002"}));
  EXPECT_EQ(statuses, (std::vector<std::string>{"completed", "stopped", "running", "failed"}));
  EXPECT_EQ(best, (std::vector<std::string>{"0.4000", "0.6000", "n/a", "0.3000"}));
  // The best trial's row is highlighted and badged; no other is.
  EXPECT_EQ(attr(*rows[0], "class"), "best");
  EXPECT_EQ(all_text(*with_class(*rows[0], "span", "badge").at(0)), "best");
  for (std::size_t r = 1; r < rows.size(); ++r) {
    EXPECT_EQ(attr(*rows[r], "class"), "(absent)") << ids[r];
    EXPECT_TRUE(with_class(*rows[r], "span", "badge").empty()) << ids[r];
  }
  // The failed trial shows its error (escaped, read back intact); the others none.
  const auto errors = with_class(table, "div", "error");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0]->text, kError);
  EXPECT_NE(all_text(*rows[3]->find_all("td")[1]).find(kError), std::string::npos);
  // Parameters and times as a person reads them.
  const auto first = rows[0]->find_all("td");
  EXPECT_EQ(first[2]->text, "3");
  EXPECT_EQ(first[4]->text, "0.1");
  EXPECT_EQ(first[5]->text, "1e-5");
  EXPECT_EQ(first[6]->text, "2");
  EXPECT_EQ(first[7]->text, "false");
  EXPECT_EQ(first[8]->text, "normal");
  EXPECT_EQ(first[9]->text, "30.5 s");
  // The lr column in one notation: trial 001's 1e-3 as its neighbours write theirs, not "0.001".
  EXPECT_EQ(rows[1]->find_all("td")[5]->text, "1e-3");
  EXPECT_EQ(rows[1]->find_all("td")[4]->text, "0.5");
  // Trials with curves carry their colour as a swatch; the one without has none.
  EXPECT_EQ(with_class(*rows[0], "span", "swatch").size(), 1u);
  EXPECT_TRUE(with_class(*rows[2], "span", "swatch").empty());
  const std::string text = all_text(page);
  for (const char* needle : {"Best: trial 000, val_loss 0.4000 at epoch 2 (dropout 0.1, lr 1e-5, lr-patience 2, "
                             "class-weights false, head-init normal).",
                             "4 trials (1 completed, 1 stopped, 1 failed, 1 running), minimizing val_loss", "tpe",
                             "--epochs"}) {
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
  }
}

TEST_F(StudyReportTest, CurvesOverlayEveryTrialThatHasEpochs) {
  write_study(study_json());
  const XmlElement page = page_of(load_study(dir_.string()));
  const XmlElement* loss = chart_titled(page, "Loss per epoch");
  ASSERT_NE(loss, nullptr);
  std::map<std::string, int> points;
  std::map<std::string, std::string> fill;
  for (const XmlElement* p : with_class(*loss, "circle", "point")) {
    ++points[attr(*p, "data-series")];
    fill[attr(*p, "data-series")] = attr(*p, "fill");
  }
  // Two lines per charted trial (train and validation loss), a point per epoch; the trial without metrics has none.
  EXPECT_EQ(points, (std::map<std::string, int>{{"trial 000 train_loss", 3}, {"trial 000 val_loss", 3},
                                                {"trial 001 train_loss", 1}, {"trial 001 val_loss", 1},
                                                {"trial 002 train_loss", 1}, {"trial 002 val_loss", 1}}));
  EXPECT_EQ(loss->find_all("path").size(), 6u);
  // One colour per trial, the same as its swatch in the table.
  std::set<std::string> colors{fill["trial 000 val_loss"], fill["trial 001 val_loss"], fill["trial 002 val_loss"]};
  EXPECT_EQ(colors.size(), 3u);
  EXPECT_EQ(fill["trial 000 train_loss"], fill["trial 000 val_loss"]);
  const XmlElement& best_row = *page.find_all("table").at(0)->find_all("tbody").at(0)->find_all("tr").at(0);
  EXPECT_EQ(attr(*with_class(best_row, "span", "swatch").at(0), "style"), "background:" + fill["trial 000 val_loss"]);
  // Each trial's best epoch (study.json's, shown counted from 1) ringed on its val_loss.
  std::map<std::string, double> rings;
  for (const XmlElement* m : with_class(*loss, "circle", "mark")) rings[attr(*m, "data-series")] = attr_number(*m, "data-x");
  EXPECT_EQ(rings, (std::map<std::string, double>{{"trial 000 val_loss", 2}, {"trial 001 val_loss", 1},
                                                  {"trial 002 val_loss", 1}}));
  // The legend names each trial once, and no trial that is not charted.
  std::vector<std::string> legend;
  for (const XmlElement* t : loss->find_all("g").at(0)->find_all("text")) legend.push_back(t->text);
  EXPECT_EQ(legend, (std::vector<std::string>{"trial 000", "trial 001", "trial 002", "train_loss", "val_loss",
                                              "best epoch (lowest val_loss)"}));
  // The trial without metrics is listed in a note, not charted.
  std::string notes;
  for (const XmlElement* p : with_class(page, "p", "note")) notes += all_text(*p) + "\n";
  EXPECT_NE(notes.find("Not charted: trial 003 (no metrics.jsonl yet)."), std::string::npos) << notes;
  // The study minimizes val_loss, already charted: no second per-epoch chart.
  EXPECT_EQ(chart_titled(page, "val_f1 per epoch"), nullptr);
}

TEST_F(StudyReportTest, EachSearchedParameterIsChartedAgainstTheTrialsBestMetric) {
  write_study(study_json());
  const StudyRecord study = load_study(dir_.string());
  const XmlElement page = page_of(study);
  for (const std::string& name : study.searched) {
    const XmlElement* chart = chart_titled(page, name + " against best val_loss");
    ASSERT_NE(chart, nullptr) << name;
    // No lines: points only, one per trial with a best metric that did not fail (000 and 001).
    EXPECT_TRUE(chart->find_all("path").empty()) << name;
    std::map<std::string, const XmlElement*> by_trial;
    for (const XmlElement* p : with_class(*chart, "circle", "point")) by_trial[attr(*p, "data-series")] = p;
    ASSERT_EQ(by_trial.size(), 2u) << name;
    for (const std::size_t t : {0u, 1u}) {
      const StudyTrial& trial = study.trials[t];
      const XmlElement* p = by_trial.at("trial " + trial.id);
      EXPECT_EQ(attr_number(*p, "data-y"), trial.best_metric) << name;
      const json& value = trial.params[name];
      if (value.is_number()) {
        EXPECT_EQ(attr_number(*p, "data-x"), value.get<double>()) << name;
      } else {
        const std::string text = value.is_boolean() ? (value.get<bool>() ? "true" : "false") : value.get<std::string>();
        EXPECT_EQ(attr(*p, "data-category"), text) << name;
      }
      EXPECT_EQ(p->children.at(0).name, "title");
    }
    // The best trial ringed, on its point.
    const auto marks = with_class(*chart, "circle", "mark");
    ASSERT_EQ(marks.size(), 1u) << name;
    EXPECT_EQ(attr(*marks[0], "data-series"), "trial 000");
    EXPECT_EQ(attr(*marks[0], "cx"), attr(*by_trial.at("trial 000"), "cx"));
    // Higher metric higher up.
    EXPECT_LT(attr_number(*by_trial.at("trial 001"), "cy"), attr_number(*by_trial.at("trial 000"), "cy")) << name;
  }
  EXPECT_NE(all_text(*with_class(*chart_titled(page, "lr against best val_loss"), "circle", "point").at(0)).find(
                "trial 000: lr 1e-5, best val_loss 0.4"),
            std::string::npos);

  // lr spans two decades: a log axis, 1e-4 halfway between 1e-5 and 1e-3.
  const XmlElement& lr = *chart_titled(page, "lr against best val_loss");
  EXPECT_NE(all_text(lr).find("lr (log scale)"), std::string::npos);
  const auto lr_ticks = x_tick_positions(lr);
  ASSERT_EQ(lr_ticks.count("1e-4"), 1u) << all_text(lr);
  double x_lo = 0, x_hi = 0;
  for (const XmlElement* p : with_class(lr, "circle", "point")) {
    (attr_number(*p, "data-x") == 1e-5 ? x_lo : x_hi) = attr_number(*p, "cx");
  }
  EXPECT_NEAR(lr_ticks.at("1e-4"), (x_lo + x_hi) / 2, 0.02);
  // dropout spans 0.1 to 0.5, under a decade: linear, 0.3 halfway.
  const XmlElement& dropout = *chart_titled(page, "dropout against best val_loss");
  EXPECT_EQ(all_text(dropout).find("log scale"), std::string::npos);
  const auto dropout_ticks = x_tick_positions(dropout);
  std::map<double, double> dropout_x;
  for (const XmlElement* p : with_class(dropout, "circle", "point")) dropout_x[attr_number(*p, "data-x")] = attr_number(*p, "cx");
  ASSERT_EQ(dropout_ticks.count("0.3"), 1u) << all_text(dropout);
  EXPECT_NEAR(dropout_ticks.at("0.3"), (dropout_x.at(0.1) + dropout_x.at(0.5)) / 2, 0.02);
  // An integer parameter gets whole-number ticks.
  for (const auto& [label, x] : x_tick_positions(*chart_titled(page, "lr-patience against best val_loss"))) {
    EXPECT_EQ(label.find('.'), std::string::npos) << label;
  }
  // Booleans and strings: a category each, in order, the point at its category's tick.
  for (const auto& [name, categories] : std::map<std::string, std::vector<std::string>>{
           {"class-weights", {"false", "true"}}, {"head-init", {"normal", "xavier"}}}) {
    const XmlElement& chart = *chart_titled(page, name + " against best val_loss");
    const auto ticks = x_tick_positions(chart);
    ASSERT_EQ(ticks.size(), categories.size()) << name;
    EXPECT_LT(ticks.at(categories[0]), ticks.at(categories[1])) << name;
    for (const XmlElement* p : with_class(chart, "circle", "point")) {
      const std::string category = attr(*p, "data-category");
      EXPECT_EQ(attr_number(*p, "data-x"), category == categories[0] ? 0 : 1) << name;
      EXPECT_NEAR(attr_number(*p, "cx"), ticks.at(category), 0.011) << name;
    }
  }
}

TEST_F(StudyReportTest, AStudyThatMaximizesRanksHighestFirstAndChartsItsMetric) {
  json j = study_json();
  j["metric"] = "val_f1";
  j["mode"] = "max";
  j["trials"][0]["best_metric"] = 0.6;  // metrics.jsonl's val_f1 = 1 - val_loss
  j["trials"][1]["best_metric"] = 0.4;
  j["best_trial"] = "000";
  write_study(j);
  j["trials"][1]["best_metric"] = 0.9;  // now 001 leads
  j["best_trial"] = "001";
  write(dir_ / "study.json", j.dump());
  const StudyRecord study = load_study(dir_.string());
  EXPECT_FALSE(study.lower_is_better);
  EXPECT_EQ(rank_trials(study), (std::vector<std::size_t>{1, 0, 3, 2}));
  const XmlElement page = page_of(study);
  const XmlElement* f1 = chart_titled(page, "val_f1 per epoch");
  ASSERT_NE(f1, nullptr);
  std::set<std::string> series;
  for (const XmlElement* p : with_class(*f1, "circle", "point")) series.insert(attr(*p, "data-series"));
  EXPECT_EQ(series, (std::set<std::string>{"trial 000", "trial 001", "trial 002"}));
  EXPECT_NE(all_text(*f1).find("best epoch (highest val_f1)"), std::string::npos);
  EXPECT_NE(chart_titled(page, "lr against best val_f1"), nullptr);
  EXPECT_EQ(page.find_all("table").at(0)->find_all("th").at(3)->text, "best val_f1");
}

TEST_F(StudyReportTest, TheSummarySaysWhatTheStudyReachedAndWhereTheModelIs) {
  write_study(study_json());
  fs::create_directories(dir_ / "best");
  const std::string dir = dir_.string();
  EXPECT_EQ(study_summary(load_study(dir)),
            dir + ": tune study of 4 trials (1 completed, 1 stopped, 1 failed, 1 running), minimizing val_loss, 60.0 s\n"
                  "  best: trial 000, val_loss 0.4000 at epoch 2 (dropout 0.1, lr 1e-5, lr-patience 2, class-weights "
                  "false, head-init normal); its model in " +
                dir + "/best\n  trial 002 failed: " + kError + "\n");
  json j = study_json();
  j["best_trial"] = nullptr;
  write(dir_ / "study.json", j.dump());
  EXPECT_NE(study_summary(load_study(dir)).find("\n  no best trial yet\n"), std::string::npos);
}

// An integer flag's value is shown as the trial ran with it, its integer part (tune's table does the same); the
// parameter's chart keeps the value the search drew.
TEST_F(StudyReportTest, IntegerFlagsAreShownAsTheTrialsRanWithThem) {
  json j = study_json();
  j["integers"] = {"lr-patience"};
  j["settings"]["space"]["lr-patience"] = {{"type", "uniform"}, {"low", 1}, {"high", 10}};  // as Made-With-ML's
  j["trials"][0]["params"]["lr-patience"] = 2.708;
  write_study(j);
  const StudyRecord study = load_study(dir_.string());
  EXPECT_NE(study_summary(study).find("(dropout 0.1, lr 1e-5, lr-patience 2, class-weights false"), std::string::npos)
      << study_summary(study);
  const XmlElement page = parse_xml(render_study_report(study, "now"));
  const auto first = page.find_all("table").at(0)->find_all("tbody").at(0)->find_all("tr").at(0)->find_all("td");
  EXPECT_EQ(first.at(0)->text.substr(first.at(0)->text.size() - 3), "000");
  EXPECT_EQ(first.at(6)->text, "2");
  bool drawn = false;  // the chart's point of trial 000 at the drawn 2.708 (its tooltip says the value)
  for (const XmlElement* title : chart_titled(page, "lr-patience against best val_loss")->find_all("title")) {
    drawn = drawn || title->text.find("2.708") != std::string::npos;
  }
  EXPECT_TRUE(drawn);
  // Only a searched parameter can be one.
  j["integers"] = {"epochs"};
  write_study(j);
  testing::expect_error([&] { load_study(dir_.string()); },
                        "field 'integers[0]' names 'epochs', which 'searched' does not");
}

TEST_F(StudyReportTest, AStudyWithoutEpochsYetIsAPageOfItsTrials) {
  json j = study_json();
  for (json& t : j["trials"]) {
    t["status"] = "running";
    t["epochs"] = 0;
    t["best_metric"] = nullptr;
    t["best_epoch"] = nullptr;
    t.erase("error");
  }
  j["best_trial"] = nullptr;
  write(dir_ / "study.json", j.dump());
  write(dir_ / "trials" / "001" / "metrics.jsonl", "");  // started, no evaluation yet
  write(dir_ / "trials" / "002" / "metrics.jsonl", "{\"epoch\": 0, \"lr\"\n");  // cut short mid-line
  const StudyRecord study = load_study(dir_.string());
  EXPECT_EQ(study.trials[1].not_charted, "no epoch recorded yet");
  EXPECT_NE(study.trials[2].not_charted.find("metrics.jsonl:1: not a JSON object"), std::string::npos)
      << study.trials[2].not_charted;
  const XmlElement page = page_of(study);
  EXPECT_TRUE(page.find_all("svg").empty());
  EXPECT_EQ(page.find_all("table").at(0)->find_all("tbody").at(0)->find_all("tr").size(), 4u);
  const std::string text = all_text(page);
  for (const char* needle : {"No best trial yet.", "No trial has recorded an epoch yet.", "No trial has a best val_loss yet",
                             "trial 001 (no epoch recorded yet)"}) {
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
  }
}

void expect_study_error(const fs::path& dir, const std::string& needle) {
  SCOPED_TRACE(dir.string());
  testing::expect_error([&] { load_study(dir.string()); }, needle);
}

TEST_F(StudyReportTest, ABadStudyJsonIsAnErrorNamingTheFileAndField) {
  expect_study_error(temp_.path() / "missing", "study directory '" + (temp_.path() / "missing").string() + "' not found");
  fs::create_directories(dir_);
  const std::string file = (dir_ / "study.json").string();
  expect_study_error(dir_, file);  // no study.json
  write(dir_ / "study.json", "{\"version\": 1,");
  expect_study_error(dir_, file + ": invalid JSON");

  // Each case: one change to a good study.json, and what the error must say.
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& j) { j.erase("metric"); }, ": no field 'metric'"},
      {[](json& j) { j["metric"] = 3; }, ": field 'metric' is not a string"},
      {[](json& j) { j["mode"] = "lowest"; }, ": field 'mode' is 'lowest', not min or max"},
      {[](json& j) { j["version"] = 2; }, ": field 'version' is 2"},
      {[](json& j) { j.erase("trials"); }, ": no field 'trials'"},
      {[](json& j) { j["trials"] = json::object(); }, ": field 'trials' is not an array"},
      {[](json& j) { j["searched"][1] = 7; }, ": field 'searched[1]' is not a string"},
      {[](json& j) { j["trials"][1].erase("status"); }, ": no field 'trials[1].status'"},
      {[](json& j) { j["trials"][1]["epochs"] = "3"; }, ": field 'trials[1].epochs' is not a count"},
      {[](json& j) { j["trials"][2]["epochs"] = -1; }, ": field 'trials[2].epochs' is not a count"},
      {[](json& j) { j["trials"][0]["status"] = "done"; }, ": field 'trials[0].status' is 'done', not completed"},
      {[](json& j) { j["trials"][0]["params"]["lr"] = nullptr; },
       ": field 'trials[0].params.lr' is not a number, string or boolean"},
      {[](json& j) { j["trials"][3]["best_metric"] = "low"; }, ": field 'trials[3].best_metric' is not a number or null"},
      {[](json& j) { j["trials"][0]["best_epoch"] = 1.5; }, ": field 'trials[0].best_epoch' is not an epoch"},
      {[](json& j) { j["trials"][2]["error"] = 1; }, ": field 'trials[2].error' is not a string"},
      {[](json& j) { j["trials"][1]["id"] = "000"; }, ": field 'trials[1].id' is '000', not '001' (trials are numbered in order)"},
      {[](json& j) { j["best_trial"] = "009"; }, ": field 'best_trial' is '009', which no trial is"},
      {[](json& j) { j["settings"] = "tpe"; }, ": field 'settings' is not an object"},
      {[](json& j) { j["trials"][1]["params"]["lr-patience"] = "5"; },
       ": field 'trials[1].params': \"lr-patience\": \"5\" is not one of its values"},
      {[](json& j) { j["trials"][3]["params"]["dropout"] = 0.9; },
       ": field 'trials[3].params': \"dropout\": 0.9 is not a number in [0.1, 0.5]"},
      {[](json& j) { j["trials"][1]["best_epoch"] = 1; }, ": field 'trials[1].best_epoch' is 1, not below the trial's epochs (1;"},
  };
  for (const auto& [change, needle] : cases) {
    json j = study_json();
    change(j);
    write(dir_ / "study.json", j.dump());
    expect_study_error(dir_, file + needle);
  }
  // The good one loads (so each case above failed for its change alone).
  write(dir_ / "study.json", study_json().dump());
  EXPECT_EQ(load_study(dir_.string()).trials.size(), 4u);
}

// ---- The scatter chart on its own -------------------------------------------------------------------------------

TEST(ReportScatterChart, ALogAxisMapsDecadesToEqualWidths) {
  ScatterChart chart;
  chart.title = "lr against best val_loss";
  chart.x_title = "lr (log scale)";
  chart.y_title = "best val_loss";
  chart.x_name = "lr";
  chart.y_name = "best val_loss";
  chart.log_x = true;
  chart.mark_legend = "best trial (b)";
  chart.series.push_back({"a", "#4e79a7", {1e-6, 1e-5, 1e-4, 0, -1}, {0.5, 0.4, 0.45, 0.3, 0.3}, std::nullopt});
  chart.series.push_back({"b", "#f28e2b", {1e-3, NAN}, {0.35, 0.2}, 0});
  const XmlElement svg = parse_xml(render_scatter_chart(chart));
  const auto points = with_class(svg, "circle", "point");
  ASSERT_EQ(points.size(), 4u);  // x <= 0 has no place on a log axis, nor a NaN anywhere
  std::vector<std::pair<double, double>> log_x_to_px;
  for (const XmlElement* p : points) log_x_to_px.emplace_back(std::log10(attr_number(*p, "data-x")), attr_number(*p, "cx"));
  std::sort(log_x_to_px.begin(), log_x_to_px.end());
  const double step = log_x_to_px[1].second - log_x_to_px[0].second;
  EXPECT_GT(step, 0);
  for (std::size_t i = 1; i < log_x_to_px.size(); ++i) {
    EXPECT_NEAR(log_x_to_px[i].second - log_x_to_px[i - 1].second, step, 0.02) << "decade " << log_x_to_px[i].first;
  }
  // Points clear of the y axis: the lowest x is inside the plot, not on its left edge.
  const auto ticks = x_tick_positions(svg);
  ASSERT_EQ(ticks.count("1e-6"), 1u);
  EXPECT_NEAR(ticks.at("1e-6"), log_x_to_px[0].second, 0.011);
  double y_axis_x = INFINITY;
  for (const XmlElement* l : svg.find_all("line")) {
    if (attr(*l, "x1") == attr(*l, "x2")) y_axis_x = std::min(y_axis_x, attr_number(*l, "x1"));
  }
  EXPECT_GT(log_x_to_px[0].second, y_axis_x + 5);
  const auto marks = with_class(svg, "circle", "mark");
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_EQ(attr_number(*marks[0], "data-x"), 1e-3);
  EXPECT_NE(all_text(svg).find("best trial (b): b: lr 0.001, best val_loss 0.35"), std::string::npos);
  EXPECT_TRUE(svg.find_all("path").empty());
  // The legend: only the ring (the series are one point each; the page's table names them).
  std::vector<std::string> legend;
  for (const XmlElement* t : svg.find_all("g").at(0)->find_all("text")) legend.push_back(t->text);
  EXPECT_EQ(legend, (std::vector<std::string>{"best trial (b)"}));
}

// A diverged trial's metric on a log y axis: the others' decades get equal heights instead of one line at zero.
TEST(ReportScatterChart, ALogYAxisGivesDecadesEqualHeights) {
  ScatterChart chart;
  chart.title = "lr against best val_loss";
  chart.log_y = true;
  chart.series.push_back({"a", "#4e79a7", {1, 2, 3, 4}, {0.01, 0.1, 1, -1}, std::nullopt});
  const XmlElement svg = parse_xml(render_scatter_chart(chart));
  const auto points = with_class(svg, "circle", "point");
  ASSERT_EQ(points.size(), 3u);  // y <= 0 has no place on a log axis
  EXPECT_NEAR(attr_number(*points[0], "cy") - attr_number(*points[1], "cy"),
              attr_number(*points[1], "cy") - attr_number(*points[2], "cy"), 0.02);
  EXPECT_GT(attr_number(*points[0], "cy"), attr_number(*points[2], "cy"));  // the larger value higher up
}

TEST(ReportScatterChart, CategoriesAreBandsWithTheirPointsAtTheTick) {
  ScatterChart chart;
  chart.title = "head-init against best val_loss";
  chart.x_title = "head-init";
  chart.y_title = "best val_loss";
  chart.x_name = "head-init";
  chart.y_name = "best val_loss";
  chart.x_categories = {"normal", "xavier & <co>", "an-initialisation-name-much-too-long-for-its-band"};
  chart.series.push_back({"a", "#4e79a7", {0, 1, 2, 3}, {0.5, 0.4, 0.45, 0.1}, std::nullopt});
  const XmlElement svg = parse_xml(render_scatter_chart(chart));
  const auto points = with_class(svg, "circle", "point");
  ASSERT_EQ(points.size(), 3u);  // index 3 names no category
  EXPECT_EQ(attr(*points[1], "data-category"), "xavier & <co>");
  EXPECT_NE(all_text(*points[1]).find("a: head-init xavier & <co>, best val_loss 0.4"), std::string::npos);
  const double band = attr_number(*points[1], "cx") - attr_number(*points[0], "cx");
  EXPECT_GT(band, 0);
  EXPECT_NEAR(attr_number(*points[2], "cx") - attr_number(*points[1], "cx"), band, 0.02);
  // The long name is cut to its band, whole in its hover title.
  const std::string text = all_text(svg);
  EXPECT_NE(text.find("an-initialisation-name-much-too-long-for-its-band"), std::string::npos);
  bool cut = false;
  for (const XmlElement* t : svg.find_all("text")) {
    if (!t->children.empty() && t->children[0].text == chart.x_categories[2]) {
      cut = true;
      EXPECT_NE(t->text, chart.x_categories[2]);
      EXPECT_LE(text_width(t->text, 12), band);
    }
  }
  EXPECT_TRUE(cut);
}

}  // namespace
}  // namespace bertrain::report

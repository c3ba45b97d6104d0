// bertrain report as a user runs it: the command line, its output and exit codes, and the page it writes,
// on a run the real train command made (tests/tools/cli_test.h). The page's charts and layout are
// test_report.cpp's.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "tests/tools/cli_test.h"
#include "tests/xml_check.h"

namespace bertrain {
namespace {

using namespace cli_test;

// The runs table's body rows.
std::size_t run_rows(const testing::XmlElement& page) {
  return page.find_all("table").at(0)->find_all("tbody").at(0)->find_all("tr").size();
}

TEST_F(CliTest, ReportCountsARunDirectoryNamedTwiceOnce) {
  ASSERT_TRUE(succeeded(suite_train()));
  fs::copy(suite_run(), path("run"), fs::copy_options::recursive);
  fs::create_directory_symlink(path("run"), path("link"));
  // From inside the folder, as a person types it: the same run four ways.
  const RunResult r = ::bertrain::testing::run_process(
      {"/bin/sh", "-c", "cd '" + dir_.string() + "' && exec '" + binary() + "' report run run/ ./run link"});
  ASSERT_TRUE(succeeded(r));
  EXPECT_EQ(lines_of(r.out).back(), "report: 1 run -> run/report.html");
  EXPECT_EQ(r.out.rfind("run: finished 3 epochs", 0), 0u) << r.out;  // one summary: one run
  EXPECT_EQ(r.err,
            "report: 'run/' is the run directory 'run' again; reported once\n"
            "report: './run' is the run directory 'run' again; reported once\n"
            "report: 'link' is the run directory 'run' again; reported once\n");
  const testing::XmlElement page = testing::parse_xml(slurp(path("run/report.html")));
  EXPECT_EQ(run_rows(page), 1u);
  EXPECT_NE(page.find_all("title").at(0)->text.find("bertrain report: run"), std::string::npos);
  // One run's lines, named as one run's are (no run-name prefix, no path to tell two "run"s apart).
  std::size_t train_lines = 0;
  for (const testing::XmlElement* p : page.find_all("svg").at(0)->find_all("circle")) {
    const std::string* series = p->attribute("data-series");
    if (series != nullptr && *series == "train_loss" && *p->attribute("class") == "point") ++train_lines;
  }
  EXPECT_EQ(train_lines, 3u);  // the suite run's 3 epochs, once

  // Absolute paths, with --out: still one run, and two distinct runs stay two.
  ASSERT_TRUE(succeeded(run(train_args(path("run2")))));
  const RunResult two = run({"report", path("run"), path("run2"), path("run") + "/.", "--out", path("two.html")});
  ASSERT_TRUE(succeeded(two));
  EXPECT_EQ(lines_of(two.out).back(), "report: 2 runs -> " + path("two.html"));
  EXPECT_EQ(run_rows(testing::parse_xml(slurp(path("two.html")))), 2u);

  // A missing directory named twice is one error line, exit 2, with no note before it.
  expect_error(run({"report", path("gone"), path("gone") + "/"}), "gone' not found");
}

// A run whose trainer recorded validation metrics (and the step of each evaluation) and stopped early: the page
// charts and tables the metrics, and the summary says when and why the run stopped.
// report --out naming a file the report reads (the run's metrics.jsonl) is refused: the run's record stays.
TEST_F(CliTest, ReportNeverWritesOverWhatItReads) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "1"}))));
  const std::string metrics = slurp(path("run/metrics.jsonl"));
  expect_error(run({"report", path("run"), "--out", path("run/metrics.jsonl")}), "is the input");
  EXPECT_EQ(slurp(path("run/metrics.jsonl")), metrics);
  // Nor the run's model or checkpoint files, which it does not read (best/model.safetensors became HTML, exit 0).
  const std::string weights = slurp(path("run/best/model.safetensors"));
  for (const char* file : {"best/model.safetensors", "best/config.json", "last/optimizer.safetensors"}) {
    expect_error(run({"report", path("run"), "--out", path("run/") + file}), "is the input", 2);
  }
  EXPECT_TRUE(slurp(path("run/best/model.safetensors")) == weights);
  // An empty --out (a script's unset variable) is refused rather than taken as the default.
  expect_error(run({"report", path("run"), "--out", ""}), "report: --out is empty");
  EXPECT_FALSE(fs::exists(path("run/report.html")));
}

// A run's best/, last/ or step checkpoint given for the run (it is what predict takes) names the run to report; a
// model directory of no run (and a base model given to predict) says what it is.
TEST_F(CliTest, ReportGivenAModelOfARunNamesTheRun) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "1", "--save-steps", "1", "--keep", "1"}))));
  std::vector<std::string> models{"run/best", "run/last/"};
  for (const auto& step : fs::directory_iterator(path("run/checkpoints"))) {
    models.push_back("run/checkpoints/" + step.path().filename().string());
  }
  ASSERT_EQ(models.size(), 3u);
  for (const std::string& model : models) {
    ASSERT_TRUE(fs::exists(path(model) + "/config.json")) << model;
    expect_error(run({"report", path(model), "--out", path("r.html")}),
                 path(model) + " is a model of the training run " + path("run") + ": report that run");
  }
  EXPECT_FALSE(fs::exists(path("r.html")));
  expect_error(run({"report", model()}),
               "cannot open " + model() + "/metrics.jsonl (is the directory a bertrain training run?)");
  // A base model: config.json without labels.
  make_model_dir(path("base"));
  json config = json::parse(slurp(path("base/config.json")));
  config.erase("id2label");
  config.erase("label2id");
  spit(path("base/config.json"), config.dump());
  expect_error(run({"predict", "--model", path("base"), "--text", "image"}),
               "config.json: no id2label, so the classifier's labels are unknown (a base model, without a classifier? "
               "fine-tune it first: bertrain train --model " + path("base") + " ...)");
}

// A metrics.jsonl that is a directory is named as one, not read as a run with no epochs yet.
TEST_F(CliTest, ReportNamesAMetricsFileThatIsADirectory) {
  fs::create_directories(dir_ / "odd" / "metrics.jsonl");
  expect_error(run({"report", path("odd")}), "metrics.jsonl is a directory");
}

// A field of a run file that the page reads, of another type (a hand-edited file), is named with its file (exit 2);
// it was a bare library type error, exit 1.
TEST_F(CliTest, ReportNamesARunFileFieldOfAnotherType) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "1"}))));
  ASSERT_TRUE(succeeded(run({"evaluate", "--model", path("run"), "--data", data(), "--out", path("run/evaluation.json")})));
  const std::string results = slurp(path("run/results.json")), evaluation = slurp(path("run/evaluation.json"));
  const auto damaged = [](const std::string& text, const std::function<void(json&)>& damage) {
    json j = json::parse(text);
    damage(j);
    return j.dump();
  };
  spit(path("run/results.json"), damaged(results, [](json& j) { j["steps_per_epoch"] = "2"; }));
  expect_error(run({"report", path("run")}), path("run/results.json") + ": steps_per_epoch is not an integer");
  spit(path("run/results.json"), damaged(results, [](json& j) { j["params"]["metric_for_best"] = 1; }));
  expect_error(run({"report", path("run")}), path("run/results.json") + ": params: metric_for_best is not a string");
  spit(path("run/results.json"), results);
  spit(path("run/evaluation.json"), damaged(evaluation, [](json& j) { j["data"] = 5; }));
  expect_error(run({"report", path("run")}), path("run/evaluation.json") + ": data is not a string");
  spit(path("run/evaluation.json"), damaged(evaluation, [](json& j) { j["confusion_matrix"]["columns"] = 3; }));
  expect_error(run({"report", path("run")}), path("run/evaluation.json") + ": confusion_matrix: columns is not a string");
  spit(path("run/evaluation.json"), evaluation);
  ASSERT_TRUE(succeeded(run({"report", path("run")})));
}

TEST_F(CliTest, ReportShowsValidationMetricsAndAnEarlyStop) {
  const fs::path run_dir = dir_ / "metrics-run";
  fs::create_directories(run_dir);
  std::string lines;
  for (int e = 0; e < 3; ++e) {
    lines += json{{"epoch", e},           {"lr", 1e-4},          {"train_loss", 0.6 - 0.1 * e},
                  {"val_loss", 0.5 + 0.05 * (e == 2) - 0.1 * (e == 1)}, {"samples_per_s", 90.0},
                  {"elapsed_s", 10.0 * (e + 1)}, {"step", 12 * (e + 1)}, {"val_accuracy", 0.7 + 0.05 * e},
                  {"val_f1", 0.69 + 0.05 * e},   {"val_f1_micro", 0.7 + 0.05 * e}, {"val_f1_macro", 0.6 + 0.05 * e}}
                 .dump() +
             "\n";
  }
  spit(run_dir / "metrics.jsonl", lines);
  spit(run_dir / "results.json",
       json{{"params", {{"epochs", 10}}}, {"stopped_early", {{"epoch", 2}, {"reason", "no val_loss improvement"}}}}.dump());
  const RunResult r = run({"report", run_dir.string()});
  ASSERT_TRUE(succeeded(r));
  EXPECT_EQ(lines_of(r.out).at(0), run_dir.string() + ": finished 3 epochs in 30.0 s, stopped early after epoch 3: no "
                                                       "val_loss improvement; best epoch 2 (val_loss 0.4000, "
                                                       "val_accuracy 0.750, val_f1 0.740), its model in " +
                                       run_dir.string() + "/best");
  const testing::XmlElement page = testing::parse_xml(slurp(run_dir / "report.html"));
  bool chart = false;
  for (const testing::XmlElement* svg : page.find_all("svg")) {
    chart = chart || *svg->attribute("aria-label") == "Validation accuracy and F1 per epoch";
  }
  EXPECT_TRUE(chart);
  EXPECT_EQ(page.find_all("table").size(), 2u);  // the runs, the validation metrics per epoch
  const std::string html = slurp(run_dir / "report.html");
  EXPECT_NE(html.find("Stopped early after epoch 3: no val_loss improvement."), std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">2 (best)</td><td class=\"num\">24</td>"), std::string::npos);
}

}  // namespace
}  // namespace bertrain

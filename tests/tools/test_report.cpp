// bertrain report: number formats, axes, the three charts and the whole page. Every chart is parsed as XML
// (tests/xml_check.h) and its data read back from the data-* attributes and compared with what went in,
// and pixel positions are checked to be the axis' linear map of the values.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tests/temp_dir.h"
#include "tests/expect_error.h"
#include "tests/xml_check.h"
#include "tools/report/axis.h"
#include "tools/report/charts.h"
#include "engine/metrics.h"
#include "tools/report/run_report.h"
#include "tools/report/svg_text.h"

namespace bertrain::report {
namespace {

using testing::parse_xml;
using testing::XmlElement;
namespace fs = std::filesystem;

using testing::all_text;
using testing::attr;
using testing::attr_number;
using testing::with_class;

// Points of `series` in document order as (value, pixel) pairs of one coordinate.
std::vector<std::pair<double, double>> points_of(const XmlElement& svg, const std::string& series, const char* data,
                                                 const char* pixel) {
  std::vector<std::pair<double, double>> out;
  for (const XmlElement* p : with_class(svg, "circle", "point")) {
    if (attr(*p, "data-series") == series) out.emplace_back(attr_number(*p, data), attr_number(*p, pixel));
  }
  return out;
}

// The pixels are one affine function of the values (an axis, drawn to 0.01 px): fitted on the first and last
// point, every point lies on it; returns the slope.
double expect_affine(const std::vector<std::pair<double, double>>& points) {
  EXPECT_GE(points.size(), 2u);
  if (points.size() < 2) return 0;
  const auto [v0, p0] = points.front();
  const auto [v1, p1] = points.back();
  const double slope = (p1 - p0) / (v1 - v0);
  for (const auto& [v, p] : points) EXPECT_NEAR(p, p0 + slope * (v - v0), 0.011) << "value " << v;
  return slope;
}

TEST(ReportText, EscapesEveryXmlSpecialCharacter) {
  EXPECT_EQ(xml_escape("a&b <c> \"d\" 'e'"), "a&amp;b &lt;c&gt; &quot;d&quot; &apos;e&apos;");
  EXPECT_EQ(xml_escape("naïve"), "naïve");
}

TEST(ReportText, TextIsMeasuredInDejaVuSans) {
  // Advance widths from DejaVuSans.ttf's hmtx table (2048 units an em): digits 1303, '.' 651, 'm' 1995, 'l' 569.
  EXPECT_DOUBLE_EQ(text_width("0123456789", 12), 10 * 1303 / 2048.0 * 12);
  EXPECT_DOUBLE_EQ(text_width("1.5", 10), (1303 + 651 + 1303) / 2048.0 * 10);
  EXPECT_DOUBLE_EQ(text_width("mlops", 12), (1995 + 569 + 1253 + 1300 + 1067) / 2048.0 * 12);
  EXPECT_DOUBLE_EQ(text_width("", 12), 0);
  // Beyond ASCII: an em a character, whatever its UTF-8 length.
  EXPECT_DOUBLE_EQ(text_width("\u00ef\u2026", 12), 24);
}

TEST(ReportText, TickLabelsShowJustTheDigitsTheStepNeeds) {
  EXPECT_EQ(format_tick(0.30000000000000004, 0.1), "0.3");
  EXPECT_EQ(format_tick(0.25, 0.05), "0.25");
  EXPECT_EQ(format_tick(40, 20), "40");
  EXPECT_EQ(format_tick(1e-17, 0.1), "0.0");  // as its neighbours "0.1", "0.2"; never "-0.0"
  EXPECT_EQ(format_tick(-1e-17, 0.1), "0.0");
  EXPECT_EQ(format_tick(5e-5, 1e-5), "5e-5");
  EXPECT_EQ(format_tick(1.05e-4, 5e-6), "1.05e-4");
}

TEST(ReportText, ValuesAreShortAndReadable) {
  EXPECT_EQ(format_value(0.20254327356815338), "0.2025");
  EXPECT_EQ(format_value(85.69150219013397), "85.69");
  EXPECT_EQ(format_value(12345.6), "12346");
  EXPECT_EQ(format_value(1e-4), "1e-4");
  EXPECT_EQ(format_value(8.5e-5), "8.5e-5");
  EXPECT_EQ(format_scientific(0.001), "1e-3");
  EXPECT_EQ(format_fixed(0.9605, 3), "0.961");
  EXPECT_EQ(format_fixed(INFINITY, 3), "n/a");
  EXPECT_EQ(format_scientific(2.5e-5), "2.5e-5");
  EXPECT_EQ(format_value(0), "0");
  EXPECT_EQ(format_value(NAN), "n/a");
  EXPECT_EQ(format_px(12.5), "12.5");
  EXPECT_EQ(format_px(3.0), "3");
  EXPECT_EQ(format_px(-0.001), "0");
  EXPECT_EQ(std::stod(format_exact(0.1 + 0.2)), 0.1 + 0.2);
}

TEST(ReportAxis, LinearTicksAreRoundAndCoverTheData) {
  const Axis a = linear_axis(0.037, 0.587, 5, false, false);
  EXPECT_EQ(a.labels, (std::vector<std::string>{"0.0", "0.2", "0.4", "0.6"}));  // 0.1 apart would be 6 intervals
  EXPECT_LE(a.lo, 0.037);
  EXPECT_GE(a.hi, 0.587);
  EXPECT_DOUBLE_EQ(a.to_pixel(a.lo, 100, 0), 100);
  EXPECT_DOUBLE_EQ(a.to_pixel(a.hi, 100, 0), 0);
  EXPECT_DOUBLE_EQ(a.to_pixel(0.3, 100, 0), 50);

  const Axis zero = linear_axis(74.4, 94.8, 5, true, false);
  EXPECT_EQ(zero.ticks.front(), 0);
  EXPECT_EQ(zero.labels.back(), "100");

  const Axis epochs = linear_axis(0, 3, 10, false, true);  // never a half epoch
  EXPECT_EQ(epochs.labels, (std::vector<std::string>{"0", "1", "2", "3"}));

  const Axis one = linear_axis(1e-4, 1e-4, 5, false, false);  // a constant: a band around it
  EXPECT_LT(one.lo, 1e-4);
  EXPECT_GT(one.hi, 1e-4);
}

TEST(ReportAxis, LogTicksArePowersOfTen) {
  const Axis a = log_axis(1e-7, 1e-4);
  EXPECT_TRUE(a.log);
  EXPECT_EQ(a.labels, (std::vector<std::string>{"1e-7", "1e-6", "1e-5", "1e-4"}));
  EXPECT_NEAR(a.to_pixel(1e-5, 0, 300), 200, 1e-9);
  EXPECT_EQ(log_axis(1e-4, 5e-3).labels, (std::vector<std::string>{"1e-4", "1e-3", "1e-2"}));
  EXPECT_EQ(log_axis(0.02, 3).labels, (std::vector<std::string>{"0.01", "0.1", "1", "10"}));
  const Axis one_decade = log_axis(1e-5, 1e-4);  // 2 and 5 × 10^k fill in
  EXPECT_EQ(one_decade.labels, (std::vector<std::string>{"1e-5", "2e-5", "5e-5", "1e-4"}));
}

LineChart two_series_chart() {
  LineChart chart;
  chart.title = "Loss per epoch";
  chart.x_title = "epoch";
  chart.y_title = "loss (binary cross-entropy)";
  chart.mark_legend = "best epoch (lowest val_loss)";
  chart.series.push_back({"train_loss", "#4e79a7", Dash::kSolid, {0, 1, 2, 3}, {0.59, 0.43, 0.30, 0.21}, std::nullopt});
  chart.series.push_back({"val_loss", "#4e79a7", Dash::kDashed, {0, 1, 2, 3}, {0.50, 0.37, 0.31, 0.26}, 3});
  return chart;
}

TEST(ReportLineChart, IsWellFormedAndCarriesEveryPoint) {
  const XmlElement svg = parse_xml(render_line_chart(two_series_chart()));
  EXPECT_EQ(svg.name, "svg");
  ASSERT_NE(svg.attribute("viewBox"), nullptr);
  const auto train = points_of(svg, "train_loss", "data-y", "cy");
  const auto val = points_of(svg, "val_loss", "data-y", "cy");
  ASSERT_EQ(train.size(), 4u);
  ASSERT_EQ(val.size(), 4u);
  EXPECT_EQ(train[1].first, 0.43);
  EXPECT_EQ(val[3].first, 0.26);
  // One y axis for both series, higher loss higher up (smaller y in SVG).
  auto both = train;
  both.insert(both.end(), val.begin(), val.end());
  std::sort(both.begin(), both.end());
  EXPECT_LT(expect_affine(both), 0);
  EXPECT_GT(expect_affine(points_of(svg, "val_loss", "data-x", "cx")), 0);
  // Every point has a hover title with its value.
  for (const XmlElement* p : with_class(svg, "circle", "point")) {
    ASSERT_EQ(p->children.size(), 1u);
    EXPECT_EQ(p->children[0].name, "title");
  }
  EXPECT_NE(all_text(svg).find("val_loss, epoch 2: 0.31"), std::string::npos);
  // The best epoch is ringed, on its point.
  const auto marks = with_class(svg, "circle", "mark");
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_EQ(attr_number(*marks[0], "data-x"), 3);
  EXPECT_EQ(attr(*marks[0], "cy"), attr(*with_class(svg, "circle", "point").back(), "cy"));
  // Title, axis titles and a legend entry per series and for the ring.
  const std::string text = all_text(svg);
  for (const char* needle : {"Loss per epoch", "loss (binary cross-entropy)", "epoch", "train_loss", "val_loss",
                             "best epoch (lowest val_loss)", "0.2", "0.6"}) {
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
  }
  // Two lines, the validation one dashed.
  const auto paths = svg.find_all("path");
  ASSERT_EQ(paths.size(), 2u);
  EXPECT_EQ(paths[0]->attribute("stroke-dasharray"), nullptr);
  EXPECT_NE(paths[1]->attribute("stroke-dasharray"), nullptr);
}

TEST(ReportLineChart, ANonFiniteValueLeavesAGap) {
  LineChart chart = two_series_chart();
  chart.series[1].y[1] = NAN;  // a diverged epoch, written as null in metrics.jsonl
  const XmlElement svg = parse_xml(render_line_chart(chart));
  EXPECT_EQ(points_of(svg, "val_loss", "data-y", "cy").size(), 3u);
  const std::string d = attr(*svg.find_all("path")[1], "d");
  EXPECT_EQ(std::count(d.begin(), d.end(), 'M'), 2) << d;  // the pen lifts over the gap
}

// Past Tableau's ten, no two runs share a colour (a study of 14 trials gave trials 012 and 000 one blue).
TEST(ReportColors, NoTwoRunsOfAPageShareAColour) {
  std::set<std::string> colors;
  for (std::size_t r = 0; r < 60; ++r) colors.insert(run_color(r));
  EXPECT_EQ(colors.size(), 60u);
  EXPECT_EQ(run_color(0), "#4e79a7");
  EXPECT_EQ(run_color(9), "#bab0ac");
}

// A legend label longer than the chart is cut in its middle, so that names differing only at their ends (as run
// names of a sweep do) stay told apart, and stays whole on hover; it was clipped at the chart's edge.
TEST(ReportLineChart, LongLegendLabelsAreCutInTheMiddle) {
  const std::string stem = "bert_base_uncased_experiment_with_a_very_long_descriptive_name_and_then_some_more";
  LineChart chart;
  chart.title = "Loss per epoch";
  for (const char* end : {"_lr1e-4_bs64", "_lr3e-3_bs64"}) {
    chart.series.push_back({stem + end, "#4e79a7", Dash::kSolid, {0, 1}, {0.5, 0.4}, std::nullopt});
  }
  const XmlElement svg = parse_xml(render_line_chart(chart));
  std::vector<const XmlElement*> labels;
  for (const XmlElement* t : svg.find_all("g").at(0)->find_all("text")) labels.push_back(t);
  ASSERT_EQ(labels.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const std::string shown = labels[i]->text, full = stem + (i == 0 ? "_lr1e-4_bs64" : "_lr3e-3_bs64");
    EXPECT_NE(shown.find("\u2026"), std::string::npos) << shown;
    EXPECT_EQ(shown.rfind("bert_base", 0), 0u) << shown;
    EXPECT_EQ(shown.substr(shown.size() - 12), full.substr(full.size() - 12)) << shown;
    EXPECT_LE(attr_number(*labels[i], "x") + text_width(shown, 12), 560) << shown;  // inside the chart (560 px)
    EXPECT_NE(all_text(*labels[i]).find(full), std::string::npos) << "the whole name on hover";
  }
}

TEST(ReportLineChart, LogAxisMapsDecadesToEqualHeights) {
  LineChart chart;
  chart.title = "Learning rate";
  chart.log_y = true;
  chart.series.push_back({"lr", "#000000", Dash::kSolid, {0, 1, 2, 3}, {1e-4, 1e-4, 1e-5, 1e-6}, std::nullopt});
  const XmlElement svg = parse_xml(render_line_chart(chart));
  const auto points = points_of(svg, "lr", "data-y", "cy");
  ASSERT_EQ(points.size(), 4u);
  EXPECT_NEAR(points[0].second - points[2].second, points[2].second - points[3].second, 0.02);
  EXPECT_LT(points[0].second, points[2].second);  // the larger rate higher up
}

// The widest a tick label of 12 px glyphs can be: 0.64 em a character bounds DejaVu Sans' digits (0.636 em) and
// 'e' (0.615 em), 0.37 em its '.' and '-' (0.318 and 0.361 em); Helvetica and Arial are narrower.
double tick_label_width_bound(const std::string& label) {
  double ems = 0;
  for (const char c : label) ems += c == '.' || c == '-' ? 0.37 : 0.64;
  return ems * 12;
}

// The line chart's y axis title (the <text> turned upright) ends left of every y tick label (the end-anchored
// <text>s beside the axis), by at least 2 px: its baseline's x plus its descenders against each label's
// widest extent. Returns how many tick labels it checked.
int expect_y_title_clear_of_ticks(const XmlElement& svg) {
  const XmlElement* title = nullptr;
  std::vector<const XmlElement*> ticks;
  for (const XmlElement* t : svg.find_all("text")) {
    if (attr(*t, "transform").rfind("rotate(-90", 0) == 0) title = t;
    if (attr(*t, "text-anchor") == "end" && attr(*t, "dy") == "0.35em") ticks.push_back(t);
  }
  EXPECT_NE(title, nullptr) << "no upright y axis title";
  if (title == nullptr) return 0;
  const double title_right = attr_number(*title, "x") + 0.3 * 12;  // descenders of the turned text
  for (const XmlElement* t : ticks) {
    const double label_left = attr_number(*t, "x") - tick_label_width_bound(t->text);
    EXPECT_LE(title_right + 2, label_left) << "'" << title->text << "' overlaps tick label '" << t->text << "'";
  }
  return static_cast<int>(ticks.size());
}

TEST(ReportLineChart, TheYAxisTitleClearsTheWidestTickLabel) {
  // Long tick labels: a learning rate that fell a little (1.000e-4 ... 9.80e-5), and a large value.
  for (const std::vector<double>& ys : {std::vector<double>{1e-4, 1e-4, 9.8e-5, 9.8e-5},
                                        std::vector<double>{1000000.2, 1000000.4, 1000000.6, 1000000.9},
                                        std::vector<double>{0.59, 0.43, 0.30, 0.21}}) {
    LineChart chart;
    chart.title = "Learning rate after each epoch";
    chart.x_title = "epoch";
    chart.y_title = "learning rate";
    chart.series.push_back({"lr", "#000000", Dash::kSolid, {1, 2, 3, 4}, ys, std::nullopt});
    const XmlElement svg = parse_xml(render_line_chart(chart));
    EXPECT_GE(expect_y_title_clear_of_ticks(svg), 3) << "y = " << ys[0];
    // The plot moved right, not off the chart: every point is inside the drawing.
    for (const XmlElement* p : with_class(svg, "circle", "point")) {
      EXPECT_GT(attr_number(*p, "cx"), 0);
      EXPECT_LT(attr_number(*p, "cx"), attr_number(svg, "width"));
    }
  }
}

TEST(ReportLineChart, EscapesNamesAndOverridesTheLegend) {
  LineChart chart = two_series_chart();
  chart.series[0].name = "run <a> & \"b\"";
  chart.legend = {{"run one", "#4e79a7", Swatch::kBox}, {"train_loss", "#444", Swatch::kLine}};
  const XmlElement svg = parse_xml(render_line_chart(chart));
  EXPECT_EQ(points_of(svg, "run <a> & \"b\"", "data-y", "cy").size(), 4u);
  const auto legend = svg.find_all("g");
  ASSERT_EQ(legend.size(), 1u);
  EXPECT_EQ(legend[0]->find_all("text").size(), 2u);
  EXPECT_EQ(legend[0]->find_all("rect").size(), 1u);
}

TEST(ReportBarChart, BarsAreAsLongAsTheirValues) {
  BarChart chart;
  chart.title = "Precision, recall and F1 per class";
  chart.value_title = "score (0 to 1)";
  chart.categories = {"natural-language-processing", "a & <b>"};
  chart.category_notes = {"78 rows", "3 rows"};
  chart.groups = {{"precision", "#4e79a7", {0.961, 0.5}}, {"recall", "#f28e2b", {0.949, 0.0}},
                  {"F1", "#59a14f", {0.955, NAN}}};
  const XmlElement svg = parse_xml(render_bar_chart(chart));
  const auto bars = with_class(svg, "rect", "bar");
  ASSERT_EQ(bars.size(), 5u);  // an undefined F1 draws no bar (and reads n/a)
  std::vector<std::pair<double, double>> widths;
  std::map<std::string, double> by_key;
  for (const XmlElement* b : bars) {
    widths.emplace_back(attr_number(*b, "data-value"), attr_number(*b, "width"));
    by_key[attr(*b, "data-category") + "/" + attr(*b, "data-series")] = attr_number(*b, "data-value");
  }
  std::sort(widths.begin(), widths.end());
  EXPECT_NEAR(widths.front().second, 0, 1e-9);  // the bar of 0 has no length: widths are value × scale
  EXPECT_GT(expect_affine(widths), 0);
  EXPECT_EQ(by_key.at("natural-language-processing/recall"), 0.949);
  EXPECT_EQ(by_key.at("a & <b>/precision"), 0.5);
  const std::string text = all_text(svg);
  for (const char* needle : {"78 rows", "score (0 to 1)", "precision", "recall", "F1", "0.961", "n/a"}) {
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
  }
}

TEST(ReportHeatMap, EveryCellCarriesItsCountAndShadeByRowShare) {
  HeatMap map;
  map.title = "Confusion matrix";
  map.row_title = "true tag";
  map.column_title = "predicted tag";
  map.labels = {"cv", "mlops", "nlp"};
  map.counts = {{68, 0, 3}, {4, 10, 2}, {0, 0, 0}};
  const XmlElement svg = parse_xml(render_heat_map(map));
  const auto cells = with_class(svg, "rect", "cell");
  ASSERT_EQ(cells.size(), 9u);
  std::map<std::pair<std::string, std::string>, const XmlElement*> at;
  for (const XmlElement* c : cells) at[{attr(*c, "data-row"), attr(*c, "data-column")}] = c;
  EXPECT_EQ(attr_number(*at.at({"cv", "cv"}), "data-count"), 68);
  EXPECT_EQ(attr_number(*at.at({"mlops", "nlp"}), "data-count"), 2);
  // Shade by share of the row: 68/71 dark, 0 the lightest; an empty row is all lightest, not NaN.
  EXPECT_EQ(attr(*at.at({"cv", "mlops"}), "fill"), "#f7fbff");
  EXPECT_NE(attr(*at.at({"cv", "cv"}), "fill"), attr(*at.at({"mlops", "mlops"}), "fill"));
  EXPECT_EQ(attr(*at.at({"nlp", "nlp"}), "fill"), "#f7fbff");
  // Cells are laid out row by row, column by column.
  EXPECT_LT(attr_number(*at.at({"cv", "cv"}), "x"), attr_number(*at.at({"cv", "nlp"}), "x"));
  EXPECT_LT(attr_number(*at.at({"cv", "cv"}), "y"), attr_number(*at.at({"nlp", "cv"}), "y"));
  const std::string text = all_text(svg);
  for (const char* needle : {"68", "10", "true tag", "predicted tag", "mlops", "share of row", "100 %",
                             "true tag mlops, predicted tag cv: 4 (25.0 % of the row)"}) {
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
  }
}

TEST(ReportHeatMap, TurnedColumnLabelsStayInsideTheChartAndBelowTheColumnTitle) {
  // Twelve classes with long names, the longest in the last column (its label reaches furthest right).
  HeatMap map;
  map.title = "Confusion matrix";
  map.row_title = "true tag";
  map.column_title = "predicted tag";
  for (int i = 0; i < 11; ++i) map.labels.push_back("class-" + std::to_string(i));
  map.labels.push_back("natural-language-processing-and-understanding");
  map.counts.assign(12, std::vector<long>(12, 1));
  const XmlElement svg = parse_xml(render_heat_map(map));
  const double width = attr_number(svg, "width");
  const double turn = 40 * std::acos(-1.0) / 180, sin40 = std::sin(turn), cos40 = std::cos(turn);
  const double ascent = 0.93 * 12, descent = 0.24 * 12;  // DejaVu Sans at 12 px
  double column_title_bottom = 0;
  int turned = 0;
  for (const XmlElement* t : svg.find_all("text")) {
    if (t->text == "predicted tag") column_title_bottom = attr_number(*t, "y") + descent;
  }
  ASSERT_GT(column_title_bottom, 0);
  for (const XmlElement* t : svg.find_all("text")) {
    if (attr(*t, "transform").rfind("rotate(-40", 0) != 0) continue;
    ++turned;
    // The label runs up and to the right from (x, y): its far end, and its glyphs' tops above that.
    const double x = attr_number(*t, "x"), y = attr_number(*t, "y"), w = text_width(t->text, 12);
    EXPECT_LE(x + cos40 * w + sin40 * descent, width - 4) << t->text << " runs off the chart's right edge";
    EXPECT_GE(y - sin40 * w - cos40 * ascent, column_title_bottom + 2) << t->text << " runs into the column title";
  }
  EXPECT_EQ(turned, 12);
  // What the shades mean is the page's caption (HTML wraps it to the card), not a line of SVG text.
  EXPECT_EQ(all_text(svg).find("Numbers are rows"), std::string::npos);
}

// A run directory as train and evaluate leave it.
class ReportRunTest : public ::testing::Test {
 protected:
  static void write(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }
  static nlohmann::json metrics_line(int epoch, double train, double val, double lr) {
    return {{"epoch", epoch}, {"lr", lr}, {"train_loss", train}, {"val_loss", val}, {"samples_per_s", 80.0 + epoch},
            {"elapsed_s", 8.5 * (epoch + 1)}};
  }
  fs::path make_run(const std::string& name, const std::vector<double>& val_losses, bool evaluated) {
    const fs::path dir = temp_.path() / name;
    std::string lines;
    for (std::size_t e = 0; e < val_losses.size(); ++e) {
      lines += metrics_line(static_cast<int>(e), 0.6 / (e + 1), val_losses[e], e < 2 ? 1e-4 : 1e-5).dump() + "\n";
    }
    write(dir / "metrics.jsonl", lines);
    write(dir / "results.json",
          nlohmann::json{{"params", {{"model", "models/tiny"}, {"engine", "cpu (2 threads, fp32)"}, {"world_size", 2},
                                     {"batch_size", 32}, {"lr", 1e-4}, {"epochs", val_losses.size()}}}}
              .dump());
    if (evaluated) write(dir / "evaluation.json", kSingleLabelEvaluation);
    return dir;
  }

  static constexpr const char* kSingleLabelEvaluation = R"({
    "data": "holdout.csv", "problem_type": "single_label_classification", "num_rows": 14,
    "overall": {"precision": 0.8, "recall": 0.75, "f1": 0.76, "num_samples": 14.0},
    "per_class": {"cv": {"precision": 1.0, "recall": 0.5, "f1": 0.6666, "num_samples": 4.0},
                  "nlp & <text>": {"precision": 0.7, "recall": 0.875, "f1": 0.7777, "num_samples": 8.0},
                  "other": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "num_samples": 2.0}},
    "slices": {"short_text": {"precision": 1.0, "recall": 1.0, "f1": 1.0, "num_samples": 2.0}},
    "confusion_matrix": {"labels": ["cv", "nlp & <text>", "other"], "rows": "true tag", "columns": "predicted tag",
                         "matrix": [[2, 2, 0], [1, 7, 0], [0, 2, 0]]}})";

  testing::TempDir temp_{"bertrain_report"};
};

TEST_F(ReportRunTest, APageWithEveryChartOfAnEvaluatedRun) {
  const fs::path dir = make_run("run-a", {0.5, 0.4, 0.35, 0.38}, true);
  std::vector<RunRecord> runs{load_run(dir.string() + "/")};
  name_runs(&runs);
  EXPECT_EQ(runs[0].name, "run-a");  // not "" for the trailing slash
  ASSERT_TRUE(runs[0].best.has_value());
  EXPECT_EQ(*runs[0].best, 2u);
  const std::string html = render_report(runs, "2026-11-23 10:00:00 UTC");
  ASSERT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  // Self-contained: nothing a browser would run or fetch.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  const XmlElement page = parse_xml(html);
  EXPECT_EQ(page.name, "html");
  const auto charts = page.find_all("svg");
  ASSERT_EQ(charts.size(), 5u);  // loss, learning rate, throughput, per-class bars, confusion matrix
  const XmlElement& loss = *charts[0];
  EXPECT_EQ(points_of(loss, "train_loss", "data-y", "cy").size(), 4u);
  EXPECT_EQ(points_of(loss, "val_loss", "data-y", "cy")[2].first, 0.35);
  const auto marks = with_class(loss, "circle", "mark");
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_EQ(attr_number(*marks[0], "data-x"), 3);  // the file's epoch 2, shown as epoch 3
  // The rate falls tenfold: a log axis.
  EXPECT_NE(all_text(*charts[1]).find("(log scale)"), std::string::npos);
  EXPECT_EQ(points_of(*charts[2], "run-a", "data-y", "cy")[3].first, 83);
  // Bars sorted by F1, highest first; the escaped class name read back intact.
  const auto bars = with_class(*charts[3], "rect", "bar");
  ASSERT_EQ(bars.size(), 9u);
  EXPECT_EQ(attr(*bars[0], "data-category"), "nlp & <text>");
  EXPECT_EQ(attr(*bars.back(), "data-category"), "other");
  const auto cells = with_class(*charts[4], "rect", "cell");
  ASSERT_EQ(cells.size(), 9u);
  EXPECT_EQ(attr(*cells[4], "data-count"), "7");
  // The confusion matrix and its caption share one card: a <figure> (a grid item, bordered) holding both; the
  // caption is HTML text, so it wraps inside the card at any window width.
  const auto figures = page.find_all("figure");
  ASSERT_EQ(figures.size(), 1u);
  const auto figure_charts = figures[0]->find_all("svg");
  ASSERT_EQ(figure_charts.size(), 1u);
  EXPECT_EQ(attr(*figure_charts[0], "aria-label"), "Confusion matrix");
  const auto captions = figures[0]->find_all("figcaption");
  ASSERT_EQ(captions.size(), 1u);
  EXPECT_EQ(captions[0]->text, "Numbers are rows; the shade is each cell's share of its true tag's rows.");
  const std::string text = all_text(page);
  for (const char* needle : {"run-a", "models/tiny", "cpu (2 threads, fp32)", "0.3500", "34.0 s", "0.760 (weighted)",
                             "slice short_text", "holdout.csv", "2026-11-23 10:00:00 UTC"}) {
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
  }
}

// The first <table>'s cell in column `header` of body row `row`.
std::string table_cell(const XmlElement& page, const std::string& header, std::size_t row) {
  const XmlElement& table = *page.find_all("table").at(0);
  const auto headers = table.find_all("th");
  std::size_t column = 0;
  while (column < headers.size() && headers[column]->text != header) ++column;
  if (column == headers.size()) throw std::runtime_error("no column '" + header + "'");
  const auto rows = table.find_all("tbody").at(0)->find_all("tr");
  return rows.at(row)->find_all("td").at(column)->text;
}

// The x axis' tick labels of a line chart: the centred numbers under the plot.
std::vector<std::string> x_tick_labels(const XmlElement& svg) {
  std::vector<std::string> labels;
  for (const XmlElement* t : svg.find_all("text")) {
    if (attr(*t, "text-anchor") == "middle" && t->attribute("transform") == nullptr && !t->text.empty() &&
        t->text.find_first_not_of("0123456789") == std::string::npos) {
      labels.push_back(t->text);
    }
  }
  return labels;
}

TEST_F(ReportRunTest, EveryEpochAPersonReadsCountsFromOne) {
  // metrics.jsonl counts epochs 0..3 (Made-With-ML's numbering); the lowest val_loss is the file's epoch 2.
  const fs::path dir = make_run("run-a", {0.5, 0.4, 0.35, 0.38}, false);
  std::vector<RunRecord> runs{load_run(dir.string())};
  name_runs(&runs);
  EXPECT_EQ(runs[0].epochs[2].epoch, 2);  // the record keeps the file's value
  const XmlElement page = parse_xml(render_report(runs, "now"));
  EXPECT_EQ(table_cell(page, "best epoch", 0), "3");
  EXPECT_EQ(table_cell(page, "epochs", 0), "4 of 4");
  int line_charts = 0;
  for (const XmlElement* svg : page.find_all("svg")) {
    const auto points = with_class(*svg, "circle", "point");
    if (points.empty()) continue;
    ++line_charts;
    // The axis runs from epoch 1; the points sit at 1..4 and say so on hover.
    const auto ticks = x_tick_labels(*svg);
    ASSERT_FALSE(ticks.empty()) << attr(*svg, "aria-label");
    EXPECT_EQ(ticks.front(), "1") << attr(*svg, "aria-label");
    EXPECT_EQ(ticks.back(), "4") << attr(*svg, "aria-label");
    std::set<double> xs;
    for (const XmlElement* p : points) {
      xs.insert(attr_number(*p, "data-x"));
      EXPECT_NE(p->children.at(0).text.find(", epoch " + format_value(attr_number(*p, "data-x")) + ": "),
                std::string::npos)
          << p->children.at(0).text;
    }
    EXPECT_EQ(xs, (std::set<double>{1, 2, 3, 4})) << attr(*svg, "aria-label");
  }
  EXPECT_GE(line_charts, 2);  // loss and throughput at least
  const auto marks = with_class(*page.find_all("svg")[0], "circle", "mark");
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_EQ(attr_number(*marks[0], "data-x"), 3);
  EXPECT_NE(all_text(*marks[0]).find("best epoch (lowest val_loss): val_loss, epoch 3: 0.35"), std::string::npos);
  EXPECT_EQ(all_text(page).find("epoch 0"), std::string::npos);

  // 20 epochs: ticks 2 apart, and still no epoch 0 where the axis starts; the first epoch sits on the y axis.
  std::vector<RunRecord> long_run{load_run(make_run("long", std::vector<double>(20, 0.5), false).string())};
  name_runs(&long_run);
  const XmlElement long_page = parse_xml(render_report(long_run, "now"));
  for (const XmlElement* svg : long_page.find_all("svg")) {
    const auto points = with_class(*svg, "circle", "point");
    ASSERT_FALSE(points.empty());
    const auto ticks = x_tick_labels(*svg);
    ASSERT_FALSE(ticks.empty());
    EXPECT_EQ(ticks.front(), "2") << attr(*svg, "aria-label");
    EXPECT_EQ(ticks.back(), "20") << attr(*svg, "aria-label");
    const XmlElement* y_axis = nullptr;  // the longest vertical line: the plot's left edge (not a tick mark)
    for (const XmlElement* l : svg->find_all("line")) {
      if (attr(*l, "x1") != attr(*l, "x2")) continue;
      const double length = std::fabs(attr_number(*l, "y2") - attr_number(*l, "y1"));
      if (y_axis == nullptr || length > std::fabs(attr_number(*y_axis, "y2") - attr_number(*y_axis, "y1"))) y_axis = l;
    }
    ASSERT_NE(y_axis, nullptr);
    EXPECT_EQ(attr_number(*points[0], "data-x"), 1);
    EXPECT_NEAR(attr_number(*points[0], "cx"), attr_number(*y_axis, "x1"), 0.01) << attr(*svg, "aria-label");
  }
}

// The chart whose title (aria-label) is `title`, or nullptr.
const XmlElement* chart_titled(const XmlElement& page, const std::string& title) {
  for (const XmlElement* svg : page.find_all("svg")) {
    if (attr(*svg, "aria-label") == title) return svg;
  }
  return nullptr;
}

// The text of the page's <p class="note">s.
std::string notes(const XmlElement& page) {
  std::string text;
  for (const XmlElement* p : with_class(page, "p", "note")) text += all_text(*p) + "\n";
  return text;
}

TEST_F(ReportRunTest, AConstantLearningRateIsOneLineOfText) {
  const std::string kChart = "Learning rate after each epoch";
  // One run whose rate never changed: a sentence, no flat chart.
  const fs::path a = make_run("a", {0.5, 0.4}, false);
  std::vector<RunRecord> one{load_run(a.string())};
  name_runs(&one);
  const XmlElement page = parse_xml(render_report(one, "now"));
  EXPECT_EQ(chart_titled(page, kChart), nullptr);
  EXPECT_NE(chart_titled(page, "Loss per epoch"), nullptr);
  EXPECT_EQ(notes(page), "Learning rate: 1e-4 throughout (no ReduceLROnPlateau reduction).\n");

  // Several runs, none changed: one sentence naming each run's rate.
  const fs::path b = temp_.path() / "b";
  write(b / "metrics.jsonl", metrics_line(0, 0.7, 0.6, 3e-4).dump() + "\n" + metrics_line(1, 0.5, 0.5, 3e-4).dump() + "\n");
  std::vector<RunRecord> two{load_run(a.string()), load_run(b.string())};
  name_runs(&two);
  const XmlElement both = parse_xml(render_report(two, "now"));
  EXPECT_EQ(chart_titled(both, kChart), nullptr);
  const std::string note = notes(both);  // the <p>'s own text, then its swatches' (empty) text
  EXPECT_EQ(note.rfind("Learning rate constant in every run (no ReduceLROnPlateau reduction): a 1e-4, b 3e-4.", 0), 0u)
      << note;

  // One run's rate dropped: the chart, with every run on it (the constant one for comparison), and no sentence.
  const fs::path c = make_run("c", {0.5, 0.4, 0.45}, false);  // 1e-4, 1e-4, then 1e-5
  std::vector<RunRecord> three{load_run(a.string()), load_run(b.string()), load_run(c.string())};
  name_runs(&three);
  const XmlElement changed = parse_xml(render_report(three, "now"));
  const XmlElement* chart = chart_titled(changed, kChart);
  ASSERT_NE(chart, nullptr);
  EXPECT_EQ(points_of(*chart, "a", "data-y", "cy").size(), 2u);
  EXPECT_EQ(points_of(*chart, "b", "data-y", "cy").size(), 2u);
  EXPECT_EQ(points_of(*chart, "c", "data-y", "cy").back().first, 1e-5);
  EXPECT_EQ(notes(changed), "");
}

TEST_F(ReportRunTest, ARateThatFellALittleGetsReadableTicks) {
  // 1e-4 to 9.8e-5: a linear axis from 0 (a 2 % cut drawn as 2 % of the height: an axis over the data alone drew it
  // as a fall from the plot's top to its foot), its tick labels (2e-5 ... 1.0e-4) clear of 'learning rate'.
  const fs::path dir = temp_.path() / "small-drop";
  write(dir / "metrics.jsonl", metrics_line(0, 0.7, 0.6, 1e-4).dump() + "\n" + metrics_line(1, 0.5, 0.5, 9.8e-5).dump() + "\n");
  std::vector<RunRecord> runs{load_run(dir.string())};
  name_runs(&runs);
  const XmlElement page = parse_xml(render_report(runs, "now"));
  const XmlElement* chart = chart_titled(page, "Learning rate after each epoch");
  ASSERT_NE(chart, nullptr);
  EXPECT_EQ(all_text(*chart).find("log scale"), std::string::npos);
  const auto rates = points_of(*chart, runs[0].name, "data-y", "cy");
  ASSERT_EQ(rates.size(), 2u);
  double bottom = -INFINITY, top = INFINITY;  // the plot's extent: its horizontal grid lines
  for (const XmlElement* l : chart->find_all("line")) {
    if (attr(*l, "y1") == attr(*l, "y2")) bottom = std::max(bottom, attr_number(*l, "y1")), top = std::min(top, attr_number(*l, "y1"));
  }
  EXPECT_LT(rates[1].second - rates[0].second, 0.05 * (bottom - top)) << "a 2 % cut drawn as more than 5 % of the plot";
  int ticks = 0;
  for (const XmlElement* svg : page.find_all("svg")) {
    if (!with_class(*svg, "circle", "point").empty()) ticks += expect_y_title_clear_of_ticks(*svg);
  }
  EXPECT_GE(ticks, 9);  // three charts' y axes
}

TEST_F(ReportRunTest, TablesScrollInTheirOwnBoxOnANarrowWindow) {
  // The runs table is about 1100 px wide: on a 700 px window its last columns went off the page's edge.
  std::vector<RunRecord> runs{load_run(make_run("run-a", {0.5, 0.4}, true).string())};
  name_runs(&runs);
  const XmlElement page = parse_xml(render_report(runs, "now"));
  const auto tables = page.find_all("table");
  ASSERT_EQ(tables.size(), 2u);  // the runs, the overall metrics
  std::size_t wrapped = 0;
  for (const XmlElement* box : with_class(page, "div", "scroll")) {
    EXPECT_EQ(box->children.size(), 1u);
    wrapped += box->find_all("table").size();
  }
  EXPECT_EQ(wrapped, tables.size());
  EXPECT_NE(page.find_all("style").at(0)->text.find(".scroll{overflow-x:auto}"), std::string::npos);
}

TEST_F(ReportRunTest, SeveralRunsOverlayTheirCurves) {
  const fs::path a = make_run("a/run", {0.5, 0.4}, false), b = make_run("b/run", {0.6, 0.45, 0.44}, true);
  std::vector<RunRecord> runs{load_run(a.string()), load_run(b.string())};
  name_runs(&runs);  // the same base name twice: the paths tell them apart
  EXPECT_EQ(runs[0].name, a.string());
  EXPECT_EQ(runs[1].name, b.string());
  const XmlElement page = parse_xml(render_report(runs, "now"));
  const auto charts = page.find_all("svg");
  ASSERT_EQ(charts.size(), 5u);  // three overlaid curves, and the one evaluated run's two charts
  EXPECT_EQ(points_of(*charts[0], a.string() + " val_loss", "data-y", "cy").size(), 2u);
  EXPECT_EQ(points_of(*charts[0], b.string() + " val_loss", "data-y", "cy").size(), 3u);
  EXPECT_EQ(with_class(*charts[0], "circle", "mark").size(), 2u);
  EXPECT_EQ(points_of(*charts[2], a.string(), "data-y", "cy").size(), 2u);
  EXPECT_EQ(points_of(*charts[2], b.string(), "data-y", "cy").size(), 3u);
  const std::string text = all_text(page);
  EXPECT_NE(text.find("not evaluated"), std::string::npos);
}

// A run of one epoch: its points in the middle of the plot over the one tick "1" (on an axis to an epoch 2 that
// never was, they sat on the y axis and the charts looked empty).
TEST_F(ReportRunTest, AOneEpochRunIsDrawnInTheMiddle) {
  std::vector<RunRecord> runs{load_run(make_run("one", {0.5}, false).string())};
  name_runs(&runs);
  const XmlElement page = parse_xml(render_report(runs, "now"));
  const XmlElement* loss = chart_titled(page, "Loss per epoch");
  ASSERT_NE(loss, nullptr);
  EXPECT_EQ(x_tick_labels(*loss), std::vector<std::string>{"1"});
  const auto points = points_of(*loss, "val_loss", "data-y", "cy");
  ASSERT_EQ(points.size(), 1u);
  double y_axis_x = INFINITY;
  for (const XmlElement* l : loss->find_all("line")) {
    if (attr(*l, "x1") == attr(*l, "x2")) y_axis_x = std::min(y_axis_x, attr_number(*l, "x1"));
  }
  const auto circles = with_class(*loss, "circle", "point");
  ASSERT_FALSE(circles.empty());
  EXPECT_GT(attr_number(*circles[0], "cx"), y_axis_x + 150) << "the point sits by the y axis";
}

// A diverged run beside a converging one: the loss axis turns logarithmic, so the converging run's curve is not
// flattened onto zero; alone, the converging run keeps a linear axis.
TEST_F(ReportRunTest, ADivergedRunPutsTheLossOnALogAxis) {
  const fs::path fine = make_run("fine", {0.5, 0.4, 0.35}, false), wild = make_run("wild", {0.6, 3e4, 3e7}, false);
  std::vector<RunRecord> both{load_run(fine.string()), load_run(wild.string())};
  name_runs(&both);
  const XmlElement page = parse_xml(render_report(both, "now"));
  const XmlElement* loss = chart_titled(page, "Loss per epoch");
  ASSERT_NE(loss, nullptr);
  EXPECT_NE(all_text(*loss).find("(log scale)"), std::string::npos);
  const auto fine_points = points_of(*loss, "fine val_loss", "data-y", "cy");
  ASSERT_EQ(fine_points.size(), 3u);
  // (On the linear axis to 3e7 of before, 0.5 and 0.35 lay 1e-6 px apart.)
  EXPECT_GT(fine_points[2].second - fine_points[0].second, 3) << "0.5 and 0.35 drawn at one height";
  std::vector<RunRecord> one{load_run(fine.string())};
  name_runs(&one);
  EXPECT_EQ(all_text(*chart_titled(parse_xml(render_report(one, "now")), "Loss per epoch")).find("(log scale)"),
            std::string::npos);
}

TEST_F(ReportRunTest, AMultiLabelEvaluationHasNoConfusionMatrix) {
  const fs::path dir = make_run("papers", {0.3}, false);
  write(dir / "evaluation.json", R"({"problem_type": "multi_label_classification", "threshold": 0.5,
    "overall": {"micro": {"precision": 0.9, "recall": 0.95, "f1": 0.924, "num_samples": 120.0},
                "macro": {"precision": 0.8, "recall": 0.9, "f1": 0.85, "num_samples": 120.0}},
    "per_class": {"robotics": {"precision": 1.0, "recall": 0.9, "f1": 0.947, "num_samples": 30.0}}})");
  std::vector<RunRecord> runs{load_run(dir.string())};
  name_runs(&runs);
  const XmlElement page = parse_xml(render_report(runs, "now"));
  EXPECT_EQ(page.find_all("svg").size(), 3u);  // loss, throughput (one epoch: its rate in a sentence), bars
  const std::string text = all_text(page);
  for (const char* needle : {"0.924 (micro)", "support", "no single confusion matrix", "robotics"}) {
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
  }
  EXPECT_LT(text.find("micro"), text.find("macro"));  // classification_report's order, not the alphabet
}

// Of many classes no heat map is drawn (10,000 classes: a page that could not be rendered in 14 GB), whether
// evaluate left the matrix out (above 200 classes) or a file holds one that big.
TEST_F(ReportRunTest, AConfusionMatrixOfManyClassesIsNotDrawn) {
  const fs::path dir = make_run("many", {0.3}, false);
  write(dir / "evaluation.json", R"({"problem_type": "single_label_classification", "num_rows": 3,
    "overall": {"precision": 0.5, "recall": 0.5, "f1": 0.5, "num_samples": 3.0},
    "per_class": {"a": {"precision": 1.0, "recall": 0.5, "f1": 0.667, "num_samples": 2.0}},
    "confusion_matrix_omitted": "250 classes, more than 200"})");
  std::vector<RunRecord> runs{load_run(dir.string())};
  name_runs(&runs);
  XmlElement page = parse_xml(render_report(runs, "now"));
  EXPECT_EQ(page.find_all("svg").size(), 3u);  // loss, throughput, bars
  EXPECT_NE(all_text(page).find("Confusion matrix left out by evaluate: 250 classes, more than 200."), std::string::npos);
  nlohmann::json big = nlohmann::json::parse(kSingleLabelEvaluation);
  big["confusion_matrix"]["labels"] = nlohmann::json::array();
  big["confusion_matrix"]["matrix"] = nlohmann::json::array();
  for (int i = 0; i < kMaxConfusionClasses + 1; ++i) {
    big["confusion_matrix"]["labels"].push_back("c" + std::to_string(i));
    big["confusion_matrix"]["matrix"].push_back(std::vector<long>(kMaxConfusionClasses + 1, 0));
  }
  write(dir / "evaluation.json", big.dump());
  runs = {load_run(dir.string())};
  name_runs(&runs);
  page = parse_xml(render_report(runs, "now"));
  EXPECT_EQ(page.find_all("svg").size(), 3u);
  EXPECT_NE(all_text(page).find("Confusion matrix not drawn: 201 classes, more than 200."), std::string::npos);
  // Eleven classes and more: the matrix's card takes the whole row (in half of it 24 classes' counts were 5 px).
  for (const int classes : {3, 11}) {
    big["confusion_matrix"]["labels"] = nlohmann::json::array();
    big["confusion_matrix"]["matrix"] = nlohmann::json::array();
    for (int i = 0; i < classes; ++i) {
      big["confusion_matrix"]["labels"].push_back("c" + std::to_string(i));
      big["confusion_matrix"]["matrix"].push_back(std::vector<long>(static_cast<std::size_t>(classes), 1));
    }
    write(dir / "evaluation.json", big.dump());
    runs = {load_run(dir.string())};
    name_runs(&runs);
    page = parse_xml(render_report(runs, "now"));
    const auto figures = page.find_all("figure");
    ASSERT_EQ(figures.size(), 1u) << classes;
    EXPECT_EQ(attr(*figures[0], "class"), classes > 10 ? "wide" : "(absent)") << classes;
  }
}

TEST_F(ReportRunTest, ARunWithoutResultsOrWithADivergedEpochIsStillReported) {
  const fs::path dir = temp_.path() / "going";
  write(dir / "metrics.jsonl", metrics_line(0, 0.7, 0.6, 1e-4).dump() + "\n" +
                                   R"({"epoch":1,"lr":0.0001,"train_loss":null,"val_loss":null,"samples_per_s":80,"elapsed_s":17})" +
                                   "\n");
  std::vector<RunRecord> runs{load_run(dir.string())};
  name_runs(&runs);
  EXPECT_TRUE(std::isnan(runs[0].epochs[1].val_loss));
  EXPECT_EQ(*runs[0].best, 0u);
  const XmlElement page = parse_xml(render_report(runs, "now"));
  EXPECT_EQ(points_of(*page.find_all("svg")[0], "val_loss", "data-y", "cy").size(), 1u);
  EXPECT_NE(all_text(page).find("no results.json"), std::string::npos);
}

// The lines report prints on the terminal (the main job ends with them): progress, best epoch and its model,
// and the evaluation's headline metrics with the file they come from.
TEST_F(ReportRunTest, TheTerminalSummarySaysWhatARunReachedAndWhereItIs) {
  const fs::path done = make_run("done", {0.5, 0.3, 0.4}, true);
  EXPECT_EQ(run_summary(load_run(done.string())),
            done.string() + ": finished 3 epochs in 25.5 s; best epoch 2 (val_loss 0.3000), its model in " +
                done.string() + "/best\n  evaluated on holdout.csv (14 rows): precision 0.800, recall 0.750, f1 0.760 "
                "(weighted); " + done.string() + "/evaluation.json\n");
  const fs::path papers = make_run("papers", {0.3}, false);
  write(papers / "evaluation.json", R"({"problem_type": "multi_label_classification", "num_rows": 1,
    "overall": {"micro": {"precision": 0.9, "recall": 0.95, "f1": 0.924, "num_samples": 120.0},
                "macro": {"precision": 0.8, "recall": 0.9, "f1": 0.85, "num_samples": 120.0}},
    "per_class": {}})");
  EXPECT_EQ(run_summary(load_run(papers.string())),
            papers.string() + ": finished 1 epoch in 8.5 s; best epoch 1 (val_loss 0.3000), its model in " +
                papers.string() + "/best\n  evaluated on its data (1 row): micro precision 0.900, recall 0.950, "
                "f1 0.924; macro f1 0.850; " + papers.string() + "/evaluation.json\n");
  const fs::path going = temp_.path() / "going";
  write(going / "metrics.jsonl", metrics_line(0, 0.7, 0.6, 1e-4).dump() + "\n" + metrics_line(1, 0.6, 0.5, 1e-4).dump() +
                                     "\n");
  EXPECT_EQ(run_summary(load_run(going.string())),
            going.string() + ": trained 2 epochs so far in 17.0 s; best epoch 2 (val_loss 0.5000), its model in " +
                going.string() + "/best\n");
}

TEST_F(ReportRunTest, TheBestEpochIsTheFirstWithTheLowestValidationLoss) {
  // As the trainer keeps best/: a later epoch that only ties does not replace it.
  EXPECT_EQ(*load_run(make_run("tie", {0.5, 0.35, 0.35, 0.38}, false).string()).best, 1u);
  EXPECT_EQ(*load_run(make_run("late", {0.5, 0.45, 0.4, 0.38}, false).string()).best, 3u);
}

TEST_F(ReportRunTest, ARunDirectoryNamedTwiceIsOneRun) {
  const std::string a = make_run("a", {0.5}, false).string(), b = make_run("b", {0.5}, false).string();
  fs::create_directory_symlink(a, temp_.path() / "link");
  std::vector<std::pair<std::string, std::string>> repeats;
  const std::vector<std::string> dirs = distinct_run_dirs(
      {a, a + "/", a + "/.", (temp_.path() / "b" / ".." / "a").string(), (temp_.path() / "link").string(), b, a + "//",
       b + "/"},
      &repeats);
  EXPECT_EQ(dirs, (std::vector<std::string>{a, b}));  // the first spelling of each, in the order given
  ASSERT_EQ(repeats.size(), 6u);
  EXPECT_EQ(repeats[0], std::make_pair(a + "/", a));
  EXPECT_EQ(repeats[3], std::make_pair((temp_.path() / "link").string(), a));
  EXPECT_EQ(repeats[5], std::make_pair(b + "/", b));
  // A directory that does not exist is compared as written (made absolute and normal); load_run reports it.
  repeats.clear();
  const std::string missing = (temp_.path() / "missing").string();
  EXPECT_EQ(distinct_run_dirs({missing, missing + "/", missing + "/../missing"}, &repeats),
            std::vector<std::string>{missing});
  EXPECT_EQ(repeats.size(), 2u);
  // Two runs that only share a base name stay two.
  repeats.clear();
  const std::string other = make_run("elsewhere/a", {0.5}, false).string();
  EXPECT_EQ(distinct_run_dirs({a, other}, &repeats), (std::vector<std::string>{a, other}));
  EXPECT_TRUE(repeats.empty());
}

// metrics.jsonl lines as a trainer with validation metrics writes them: single-label (micro F1 = accuracy) unless
// `multi_label`, each line with the optimizer step of its evaluation.
std::string validation_lines(const std::vector<double>& val_losses, bool multi_label) {
  std::string lines;
  for (std::size_t e = 0; e < val_losses.size(); ++e) {
    const double accuracy = 0.6 + 0.1 * static_cast<double>(e);
    nlohmann::json line = {{"epoch", e},          {"lr", 1e-4},
                           {"train_loss", 0.5},   {"val_loss", val_losses[e]},
                           {"samples_per_s", 80}, {"elapsed_s", 8.5 * static_cast<double>(e + 1)},
                           {"step", 25 * (e + 1)}, {"val_accuracy", accuracy},
                           {"val_f1", accuracy + 0.01}, {"val_f1_micro", multi_label ? accuracy + 0.2 : accuracy},
                           {"val_f1_macro", accuracy - 0.05}};
    lines += line.dump() + "\n";
  }
  return lines;
}

// The <tr>s of the table under the <h2> whose text is `heading`, each as its cells' texts.
std::vector<std::vector<std::string>> table_after(const XmlElement& page, const std::string& heading) {
  for (const XmlElement* section : page.find_all("section")) {
    const auto h2 = section->find_all("h2");
    if (h2.empty() || h2[0]->text != heading) continue;
    std::vector<std::vector<std::string>> rows;
    for (const XmlElement* tr : section->find_all("tr")) {
      std::vector<std::string> cells;
      for (const XmlElement& c : tr->children) cells.push_back(all_text(c));
      rows.push_back(cells);
    }
    return rows;
  }
  return {};
}

TEST_F(ReportRunTest, ValidationMetricsAreChartedAndTabledBesideValLoss) {
  const fs::path dir = make_run("with-metrics", {0.5, 0.4, 0.45}, false);
  write(dir / "metrics.jsonl", validation_lines({0.5, 0.4, 0.45}, false));
  std::vector<RunRecord> runs{load_run(dir.string())};
  name_runs(&runs);
  EXPECT_TRUE(runs[0].epochs[0].has_validation_metrics);
  EXPECT_EQ(runs[0].epochs[2].step, 75);
  const XmlElement page = parse_xml(render_report(runs, "now"));
  // Beside the loss chart, in the training charts.
  const auto charts = page.find_all("svg");
  ASSERT_GE(charts.size(), 3u);
  EXPECT_EQ(attr(*charts[1], "aria-label"), "Validation accuracy and F1 per epoch");
  const XmlElement& chart = *charts[1];
  // Single-label: micro F1 is the accuracy, one line for both; weighted and macro F1 their own lines.
  const auto accuracy = points_of(chart, "val_accuracy = val_f1_micro", "data-y", "cy");
  ASSERT_EQ(accuracy.size(), 3u);
  EXPECT_EQ(accuracy[2].first, 0.6 + 0.1 * 2);
  EXPECT_EQ(points_of(chart, "val_f1 (weighted)", "data-y", "cy").size(), 3u);
  EXPECT_EQ(points_of(chart, "val_f1_macro", "data-y", "cy").back().first, 0.6 + 0.1 * 2 - 0.05);
  EXPECT_TRUE(points_of(chart, "val_f1_micro", "data-y", "cy").empty());
  const auto paths = chart.find_all("path");
  ASSERT_EQ(paths.size(), 3u);  // one line style each: solid, dashed, dash-dot
  EXPECT_EQ(attr(*paths[0], "stroke-dasharray"), "(absent)");
  EXPECT_EQ(attr(*paths[1], "stroke-dasharray"), "6 4");
  EXPECT_EQ(attr(*paths[2], "stroke-dasharray"), "8 3 2 3");
  // The best epoch (lowest val_loss: epoch 2) ringed on the weighted F1.
  const auto marks = with_class(chart, "circle", "mark");
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_EQ(attr_number(*marks[0], "data-x"), 2);
  EXPECT_EQ(attr(*marks[0], "data-series"), "val_f1 (weighted)");

  // The table: an epoch a row, the step, val_loss and the four metrics; the best epoch says so.
  const auto rows = table_after(page, "Validation metrics per epoch");
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"epoch", "step", "val_loss", "accuracy", "F1 weighted", "F1 micro",
                                               "F1 macro"}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{"1", "25", "0.5000", "0.6000", "0.6100", "0.6000", "0.5500"}));
  EXPECT_EQ(rows[2][0], "2 (best)");
  EXPECT_EQ(rows[3][1], "75");

  // Picked by F1, the table says so beside the epoch's val_loss (which is not the lowest then).
  nlohmann::json by_f1 = nlohmann::json::parse(std::ifstream(runs[0].dir + "/results.json"));
  by_f1["params"]["metric_for_best"] = "f1";
  by_f1["best_epoch"] = 2;
  by_f1["best_step"] = 75;
  write(fs::path(runs[0].dir) / "results.json", by_f1.dump());
  const XmlElement f1_page = parse_xml(render_report({load_run(runs[0].dir)}, "now"));
  EXPECT_EQ(table_cell(f1_page, "at the best epoch", 0).rfind("val_f1 0.", 0), 0u) << table_cell(f1_page, "at the best epoch", 0);
  EXPECT_NE(table_cell(f1_page, "at the best epoch", 0).find(", val_loss 0."), std::string::npos);

  // The terminal summary adds the best epoch's accuracy and weighted F1.
  EXPECT_NE(run_summary(runs[0]).find("best epoch 2 (val_loss 0.4000, val_accuracy 0.700, val_f1 0.710)"),
            std::string::npos)
      << run_summary(runs[0]);
}

TEST_F(ReportRunTest, RunsWithoutValidationMetricsShowNone) {
  std::vector<RunRecord> runs{load_run(make_run("old", {0.5, 0.4}, true).string())};
  name_runs(&runs);
  EXPECT_FALSE(runs[0].epochs[0].has_validation_metrics);
  EXPECT_FALSE(runs[0].epochs[0].has_step);
  const std::string html = render_report(runs, "now");
  const XmlElement page = parse_xml(html);
  EXPECT_EQ(chart_titled(page, "Validation accuracy and F1 per epoch"), nullptr);
  EXPECT_TRUE(table_after(page, "Validation metrics per epoch").empty());
  EXPECT_EQ(html.find("val_accuracy"), std::string::npos);
  EXPECT_EQ(html.find("stopped early"), std::string::npos);
  EXPECT_EQ(run_summary(runs[0]).find("val_accuracy"), std::string::npos);
}

// metrics.jsonl's grad_norm (runs since --max-grad-norm) is charted per epoch from zero; runs without it have no
// such chart, and one run without it beside one with it leaves its series empty.
TEST_F(ReportRunTest, TheGradientNormIsChartedWhereRecorded) {
  const fs::path with = make_run("with-norm", {0.5, 0.4, 0.45}, false);
  std::string lines;
  for (int e = 0; e < 3; ++e) {
    nlohmann::json line = metrics_line(e, 0.6, 0.5, 1e-4);
    line["grad_norm"] = 2.5 - 0.5 * e;
    lines += line.dump() + "\n";
  }
  write(with / "metrics.jsonl", lines);
  std::vector<RunRecord> runs{load_run(with.string()), load_run(make_run("without-norm", {0.5, 0.4}, false).string())};
  name_runs(&runs);
  EXPECT_TRUE(runs[0].epochs[2].has_grad_norm);
  EXPECT_EQ(runs[0].epochs[2].grad_norm, 1.5);
  EXPECT_FALSE(runs[1].epochs[0].has_grad_norm);
  const XmlElement page = parse_xml(render_report(runs, "now"));
  const XmlElement* chart = chart_titled(page, "Gradient norm per epoch");
  ASSERT_NE(chart, nullptr);
  const auto points = points_of(*chart, "with-norm", "data-y", "cy");
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points[0].first, 2.5);
  EXPECT_EQ(points[2].first, 1.5);
  EXPECT_TRUE(points_of(*chart, "without-norm", "data-y", "cy").empty());

  std::vector<RunRecord> old{load_run(make_run("old", {0.5, 0.4}, false).string())};
  name_runs(&old);
  EXPECT_EQ(chart_titled(parse_xml(render_report(old, "now")), "Gradient norm per epoch"), nullptr);
}

TEST_F(ReportRunTest, SeveralRunsWithValidationMetricsTakeAColourEachAndALineStylePerMetric) {
  const fs::path single = make_run("single", {0.5, 0.4}, false), multi = make_run("multi", {0.6, 0.5, 0.3}, false),
                 old = make_run("old", {0.7}, false);
  write(single / "metrics.jsonl", validation_lines({0.5, 0.4}, false));
  write(multi / "metrics.jsonl", validation_lines({0.6, 0.5, 0.3}, true));
  std::vector<RunRecord> runs{load_run(single.string()), load_run(old.string()), load_run(multi.string())};
  name_runs(&runs);
  const XmlElement page = parse_xml(render_report(runs, "now"));
  const XmlElement* chart = chart_titled(page, "Validation accuracy and F1 per epoch");
  ASSERT_NE(chart, nullptr);
  // The multi-label run's micro F1 is not its accuracy: its own line; the single-label run's is one line.
  EXPECT_EQ(points_of(*chart, "multi val_f1_micro", "data-y", "cy").size(), 3u);
  EXPECT_EQ(points_of(*chart, "multi val_accuracy", "data-y", "cy").size(), 3u);
  EXPECT_EQ(points_of(*chart, "single val_accuracy = val_f1_micro", "data-y", "cy").size(), 2u);
  EXPECT_EQ(chart->find_all("path").size(), 7u);  // the run without metrics draws nothing here
  for (const XmlElement* p : with_class(*chart, "circle", "point")) {
    EXPECT_EQ(attr(*p, "data-series").rfind("old", 0), std::string::npos);
    // Each run in its colour (the runs table's): "single" first, "multi" third.
    EXPECT_EQ(attr(*p, "fill"), attr(*p, "data-series").rfind("single", 0) == 0 ? "#4e79a7" : "#e15759");
  }
  // The legend: a box per run with metrics, a line style per metric, the ring.
  const auto legend = chart->find_all("g");
  ASSERT_EQ(legend.size(), 1u);
  std::vector<std::string> labels;
  for (const XmlElement* t : legend[0]->find_all("text")) labels.push_back(t->text);
  EXPECT_EQ(labels, (std::vector<std::string>{"single", "multi", "val_accuracy", "val_f1 (weighted)", "val_f1_micro",
                                              "val_f1_macro", "best epoch (lowest val_loss)"}));
  EXPECT_EQ(legend[0]->find_all("rect").size(), 2u);
  // A table per run with metrics, under the run's name.
  std::vector<std::string> headings;
  for (const XmlElement* h : page.find_all("h3")) headings.push_back(all_text(*h));
  EXPECT_EQ(headings, (std::vector<std::string>{"single ", "multi "}));  // then each run's (empty) swatch
  EXPECT_EQ(table_after(page, "Validation metrics per epoch").size(), 2u + 3u + 2u);  // two headers, five epochs
}

TEST_F(ReportRunTest, EpochsWithoutValidationMetricsLeaveGapsAndNa) {
  // A run resumed with a newer bertrain: its first epoch's line has no validation metrics.
  const fs::path dir = make_run("resumed", {0.5, 0.4}, false);
  write(dir / "metrics.jsonl", metrics_line(0, 0.6, 0.5, 1e-4).dump() + "\n" +
                                   validation_lines({0.5, 0.4}, false).substr(validation_lines({0.5}, false).size()));
  std::vector<RunRecord> runs{load_run(dir.string())};
  name_runs(&runs);
  const XmlElement page = parse_xml(render_report(runs, "now"));
  const XmlElement* chart = chart_titled(page, "Validation accuracy and F1 per epoch");
  ASSERT_NE(chart, nullptr);
  const auto points = points_of(*chart, "val_accuracy = val_f1_micro", "data-x", "cx");
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].first, 2);
  const auto rows = table_after(page, "Validation metrics per epoch");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1], (std::vector<std::string>{"1", "", "0.5000", "n/a", "n/a", "n/a", "n/a"}));
}

TEST_F(ReportRunTest, ARunThatStoppedEarlySaysWhenAndWhy) {
  const fs::path dir = make_run("patient", {0.5, 0.4, 0.41, 0.42}, false);
  std::ifstream written(dir / "results.json");
  nlohmann::json results = nlohmann::json::parse(written);
  results["params"]["epochs"] = 10;
  results["stopped_early"] = {{"epoch", 3}, {"reason", "val_loss did not improve for 2 epochs"}};
  write(dir / "results.json", results.dump());
  std::vector<RunRecord> runs{load_run(dir.string())};
  name_runs(&runs);
  ASSERT_TRUE(runs[0].stopped_early.has_value());
  EXPECT_EQ(runs[0].stopped_early->epoch, 3);
  const XmlElement page = parse_xml(render_report(runs, "now"));
  EXPECT_EQ(notes(page), "Stopped early after epoch 4: val_loss did not improve for 2 epochs.\n");
  EXPECT_NE(all_text(page).find("4 of 10, stopped early"), std::string::npos);
  EXPECT_EQ(run_summary(runs[0]).rfind(dir.string() + ": finished 4 epochs in 34.0 s, stopped early after epoch 4: "
                                                      "val_loss did not improve for 2 epochs; best epoch 2",
                                       0),
            0u)
      << run_summary(runs[0]);

  // Several runs: the note names the run; no reason given, none shown; null is not stopped.
  const fs::path other = make_run("other", {0.5}, false);
  results["stopped_early"] = {{"epoch", 0}};
  write(other / "results.json", results.dump());
  const fs::path not_stopped = make_run("not-stopped", {0.5}, false);
  results["stopped_early"] = nullptr;
  write(not_stopped / "results.json", results.dump());
  std::vector<RunRecord> three{load_run(dir.string()), load_run(other.string()), load_run(not_stopped.string())};
  name_runs(&three);
  EXPECT_FALSE(three[2].stopped_early.has_value());
  const std::string text = notes(parse_xml(render_report(three, "now")));
  EXPECT_NE(text.find("patient stopped early after epoch 4: val_loss did not improve for 2 epochs."), std::string::npos)
      << text;
  EXPECT_NE(text.find("other stopped early after epoch 1."), std::string::npos) << text;
  EXPECT_EQ(text.find("not-stopped"), std::string::npos) << text;
}

// --eval-steps (with --max-steps): several evaluations an epoch. The page counts epochs, not evaluations, plans by the
// steps the run was given (not --epochs' default), and charts over the optimizer step so that no two points of an
// epoch stack on one x.
TEST_F(ReportRunTest, ARunThatEvaluatesWithinEpochsIsChartedOverSteps) {
  const fs::path dir = temp_.path() / "steps";
  const std::vector<std::pair<int, int>> evaluations = {{0, 4}, {0, 8}, {1, 12}, {1, 16}, {2, 18}};  // epoch, step
  const std::vector<double> val_losses = {0.6, 0.5, 0.45, 0.47, 0.46};
  std::string lines;
  for (std::size_t i = 0; i < evaluations.size(); ++i) {
    nlohmann::json line = metrics_line(evaluations[i].first, 0.7, val_losses[i], 1e-4);
    line["step"] = evaluations[i].second;
    lines += line.dump() + "\n";
  }
  write(dir / "metrics.jsonl", lines);
  write(dir / "results.json",
        nlohmann::json{{"params", {{"epochs", 10}, {"eval_steps", 4}, {"max_steps", 18}}},
                       {"steps_per_epoch", 8},
                       {"total_steps", 18},
                       {"best_epoch", 1},
                       {"best_step", 12},
                       {"stopped_early", {{"epoch", 2}, {"step", 18}, {"reason", "no better"}}}}
            .dump());
  std::vector<RunRecord> runs{load_run(dir.string())};
  name_runs(&runs);
  EXPECT_TRUE(runs[0].evaluates_within_epochs);
  const XmlElement page = parse_xml(render_report(runs, "now"));
  EXPECT_EQ(table_cell(page, "epochs", 0), "3 of 3 (5 evaluations), stopped early");
  EXPECT_EQ(table_cell(page, "best epoch", 0), "2 (step 12)");
  EXPECT_EQ(notes(page), "Stopped early after epoch 3, step 18: no better.\n"
                         "Learning rate: 1e-4 throughout (no ReduceLROnPlateau reduction).\n");
  for (const char* title : {"Loss per evaluation", "Training throughput per evaluation"}) {
    const XmlElement* chart = chart_titled(page, title);
    ASSERT_NE(chart, nullptr) << title;
    std::set<double> xs;
    for (const XmlElement* p : with_class(*chart, "circle", "point")) {
      xs.insert(attr_number(*p, "data-x"));
      EXPECT_NE(p->children.at(0).text.find(", step " + format_value(attr_number(*p, "data-x")) + ": "), std::string::npos)
          << p->children.at(0).text;
    }
    EXPECT_EQ(xs, (std::set<double>{4, 8, 12, 16, 18})) << title;
    EXPECT_NE(all_text(*chart).find("optimizer step"), std::string::npos) << title;
  }
  const auto marks = with_class(*chart_titled(page, "Loss per evaluation"), "circle", "mark");
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_EQ(attr_number(*marks[0], "data-x"), 12);
  EXPECT_NE(all_text(*marks[0]).find("best evaluation (lowest val_loss): val_loss, step 12: 0.45"), std::string::npos)
      << all_text(*marks[0]);
  EXPECT_EQ(run_summary(runs[0]), dir.string() + ": finished 3 epochs (5 evaluations) in 25.5 s, stopped early after epoch "
                                                 "3, step 18: no better; best epoch 2, step 12 (val_loss 0.4500), its "
                                                 "model in " + dir.string() + "/best\n");
  // Beside a run that evaluates per epoch, both run over the step.
  const fs::path per_epoch = make_run("per-epoch", {0.5, 0.4}, false);
  std::string stepped;
  for (int e = 0; e < 2; ++e) {
    nlohmann::json line = metrics_line(e, 0.6, 0.5 - 0.1 * e, 1e-4);
    line["step"] = 8 * (e + 1);
    stepped += line.dump() + "\n";
  }
  write(per_epoch / "metrics.jsonl", stepped);
  std::vector<RunRecord> both{load_run(dir.string()), load_run(per_epoch.string())};
  name_runs(&both);
  const XmlElement overlay = parse_xml(render_report(both, "now"));
  EXPECT_EQ(table_cell(overlay, "epochs", 1), "2 of 2");
  EXPECT_EQ(table_cell(overlay, "best epoch", 1), "2");
  const XmlElement* loss = chart_titled(overlay, "Loss per evaluation");
  ASSERT_NE(loss, nullptr);
  std::set<double> xs;
  for (const auto& [x, pixel] : points_of(*loss, "per-epoch val_loss", "data-x", "cx")) xs.insert(x);
  EXPECT_EQ(xs, (std::set<double>{8, 16}));
}

// best/ is what the trainer kept by the run's --metric-for-best (results.json, or last/trainer_state.json while the
// run goes), which need not be the lowest val_loss; the ring's legend says which rule.
TEST_F(ReportRunTest, TheBestIsTheEvaluationTheTrainerKept) {
  const fs::path dir = make_run("by-f1", {0.5, 0.4, 0.35}, false);
  nlohmann::json results = nlohmann::json::parse(std::ifstream(dir / "results.json"));
  results["params"]["metric_for_best"] = "f1";
  results["best_epoch"] = 0;
  results["best_step"] = 5;
  write(dir / "results.json", results.dump());
  std::vector<RunRecord> runs{load_run(dir.string())};
  name_runs(&runs);
  ASSERT_TRUE(runs[0].best.has_value());
  EXPECT_EQ(*runs[0].best, 0u);
  const XmlElement page = parse_xml(render_report(runs, "now"));
  EXPECT_EQ(table_cell(page, "best epoch", 0), "1");
  EXPECT_EQ(table_cell(page, "at the best epoch", 0), "val_loss 0.5000");  // its lines carry no val_f1
  const auto marks = with_class(*chart_titled(page, "Loss per epoch"), "circle", "mark");
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_NE(all_text(*marks[0]).find("best epoch (highest val_f1): val_loss, epoch 1: 0.5"), std::string::npos)
      << all_text(*marks[0]);

  const fs::path going = temp_.path() / "going";
  write(going / "metrics.jsonl", metrics_line(0, 0.7, 0.6, 1e-4).dump() + "\n" + metrics_line(1, 0.6, 0.5, 1e-4).dump() + "\n");
  write(going / "last" / "trainer_state.json",
        nlohmann::json{{"params", {{"metric_for_best", "accuracy"}}}, {"best_epoch", 0}, {"best_step", 4}}.dump());
  const RunRecord run = load_run(going.string());
  EXPECT_EQ(*run.best, 0u);
  EXPECT_EQ(run.best_rule, "highest val_accuracy");
  // Two runs that pick best/ differently: the legend does not pretend one rule.
  std::vector<RunRecord> two{load_run(dir.string()), load_run(make_run("by-loss", {0.5, 0.4}, false).string())};
  name_runs(&two);
  EXPECT_NE(all_text(parse_xml(render_report(two, "now"))).find("best epoch (each run's --metric-for-best)"),
            std::string::npos);
}

// A run stopped (or still going) has no results.json yet: its settings come from last/trainer_state.json, so the
// runs table names its model, batch and planned epochs (they were blank).
TEST_F(ReportRunTest, AStoppedRunsSettingsComeFromItsCheckpoint) {
  const fs::path stopped = temp_.path() / "stopped";
  write(stopped / "metrics.jsonl", metrics_line(0, 0.7, 0.6, 1e-4).dump() + "\n" + metrics_line(1, 0.6, 0.5, 1e-4).dump() + "\n");
  write(stopped / "last" / "trainer_state.json",
        nlohmann::json{{"params", {{"model", "models/tiny"}, {"batch_size", 32}, {"lr", 0.003}, {"epochs", 200}}},
                       {"best_epoch", 1}, {"best_step", 8}}
            .dump());
  std::vector<RunRecord> runs{load_run(stopped.string())};
  name_runs(&runs);
  const XmlElement page = parse_xml(render_report(runs, "now"));
  EXPECT_EQ(table_cell(page, "model", 0), "models/tiny");
  EXPECT_EQ(table_cell(page, "batch", 0), "32");
  EXPECT_EQ(table_cell(page, "lr", 0), "3e-3");  // every run's rate in one notation (it was 0.003 beside 1e-4)
  EXPECT_EQ(table_cell(page, "epochs", 0).rfind("2 of 200 (no results.json", 0), 0u) << table_cell(page, "epochs", 0);
}

void expect_load_error(const fs::path& dir, const std::string& needle) {
  SCOPED_TRACE(dir.string());
  testing::expect_error([&] { load_run(dir.string()); }, needle);
}

TEST_F(ReportRunTest, UnreadableRunsAreErrorsNamingTheFileAndField) {
  expect_load_error(temp_.path() / "missing", "run directory '" + (temp_.path() / "missing").string() + "' not found");
  const fs::path dir = temp_.path() / "bad";
  fs::create_directories(dir);
  expect_load_error(dir, "cannot open " + (dir / "metrics.jsonl").string());
  write(dir / "metrics.jsonl", "\n");
  expect_load_error(dir, "has no epochs yet");
  write(dir / "metrics.jsonl", metrics_line(0, 0.7, 0.6, 1e-4).dump() + "\n{\"epoch\": 1,\n");
  expect_load_error(dir, (dir / "metrics.jsonl").string() + ":2: not a JSON object");
  write(dir / "metrics.jsonl", R"({"epoch":0,"lr":0.0001,"train_loss":0.5,"samples_per_s":80,"elapsed_s":17})");
  expect_load_error(dir, ":1: no field 'val_loss'");
  write(dir / "metrics.jsonl", R"({"epoch":0,"lr":"fast","train_loss":0.5,"val_loss":0.5,"samples_per_s":80,"elapsed_s":1})");
  expect_load_error(dir, ":1: field 'lr' is not a number");
  write(dir / "metrics.jsonl",
        R"({"epoch":0,"lr":1,"train_loss":0.5,"val_loss":0.5,"samples_per_s":80,"elapsed_s":1,"val_f1":"high"})");
  expect_load_error(dir, ":1: field 'val_f1' is not a number");
  write(dir / "metrics.jsonl",
        R"({"epoch":0,"lr":1,"train_loss":0.5,"val_loss":0.5,"samples_per_s":80,"elapsed_s":1,"step":[3]})");
  expect_load_error(dir, ":1: field 'step' is not a number");

  write(dir / "metrics.jsonl", metrics_line(0, 0.7, 0.6, 1e-4).dump() + "\n");
  write(dir / "results.json", "[1, 2]");
  expect_load_error(dir, "results.json: not a JSON object");
  write(dir / "results.json", R"({"stopped_early": "yes"})");
  expect_load_error(dir, "results.json: stopped_early is not an object");
  write(dir / "results.json", R"({"stopped_early": {"reason": "patience"}})");
  expect_load_error(dir, "results.json: stopped_early.epoch is not a number");
  write(dir / "results.json", R"({"stopped_early": {"epoch": 2, "reason": 7}})");
  expect_load_error(dir, "results.json: stopped_early.reason is not a string");
  fs::remove(dir / "results.json");
  write(dir / "evaluation.json", "{\"overall\": {}, \"per_class\"");
  expect_load_error(dir, "evaluation.json");
  write(dir / "evaluation.json", R"({"overall": {}, "per_class": {"cv": {"precision": 1, "recall": 1, "f1": "x",
    "num_samples": 1}}})");
  expect_load_error(dir, "per_class.cv.f1 is not a number");
  write(dir / "evaluation.json", R"({"overall": {}, "per_class": {},
    "confusion_matrix": {"labels": ["a", "b"], "matrix": [[1, 2], [3]]}})");
  expect_load_error(dir, "confusion_matrix.matrix is not 2 x 2");
  write(dir / "evaluation.json", R"({"overall": {}, "per_class": {},
    "confusion_matrix": {"labels": ["a"], "matrix": [[-1]]}})");
  expect_load_error(dir, "something other than a count");
}

}  // namespace
}  // namespace bertrain::report

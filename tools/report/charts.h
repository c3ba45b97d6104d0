// The report's three kinds of chart, each rendered as one self-contained <svg> element (no scripts, no
// ids, no external references) that a browser draws inline in HTML: a line chart (loss, learning rate,
// throughput per epoch), horizontal grouped bars (per-class precision / recall / F1) and a heat map with
// counts (the confusion matrix). Every chart has a title, axis titles with units, tick labels and a legend.
//
// Each drawn data point is a <circle class="point"> carrying its data exactly (data-series, data-x,
// data-y; bars and cells likewise), and a <title> a browser shows on hover: tests read the data back
// from the SVG, and a person can read exact values.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace bertrain::report {

// How a line is drawn: solid or one of three dash patterns (a line style per quantity where colours stand for runs).
enum class Dash { kSolid, kDashed, kDotted, kDashDot };

struct LineSeries {
  std::string name;   // legend text, and data-series of its points
  std::string color;  // CSS colour
  Dash dash = Dash::kSolid;
  std::vector<double> x, y;  // same length; a non-finite y leaves a gap in the line
  std::optional<std::size_t> marked;  // index of a point drawn with a ring (the best epoch)
};

// A legend entry: a short line (drawn as `dash`), a ring, or a filled box in `color`, then `label`.
enum class Swatch { kLine, kRing, kBox };
struct LegendEntry {
  std::string label, color;
  Swatch swatch = Swatch::kLine;
  Dash dash = Dash::kSolid;  // a kLine's pattern
};

struct LineChart {
  std::string title, x_title, y_title;  // axis titles carry units, e.g. "samples / s"
  std::string x_name = "epoch";         // in each point's hover text: "<series>, epoch 3: 0.2622"
  bool log_y = false;                   // log10 y axis (every finite y must be > 0)
  bool y_from_zero = false;             // include 0 in the y range (throughput)
  std::string mark_legend;              // legend text of the ring, e.g. "best epoch (lowest val_loss)"
  std::vector<LineSeries> series;
  // Empty: one entry per series (and the ring). Else these instead, e.g. a colour per run and a line
  // style per quantity when several runs each draw two lines.
  std::vector<LegendEntry> legend;
};

struct BarGroup {
  std::string name, color;     // legend entry: "precision"
  std::vector<double> values;  // one per category, in [0, value_max]
};

// Horizontal bars: one band per category (a class), one bar per group (precision, recall, F1) in it.
struct BarChart {
  std::string title, value_title;           // value_title: the x axis' title
  double value_max = 1;                     // the axis runs from 0 to value_max
  std::vector<std::string> categories;      // band labels (class names)
  std::vector<std::string> category_notes;  // printed under each label ("78 rows"); empty or one per category
  std::vector<BarGroup> groups;
};

// A square matrix of counts, each cell shaded by its share of its row (for a confusion matrix: the share
// of the true class's rows predicted as the column's class) and labelled with the count. Its caption (what
// the numbers and shades mean) is the page's: prose in HTML wraps to its card at any width, an SVG line does not.
struct HeatMap {
  std::string title, row_title, column_title;  // "true tag", "predicted tag"
  std::vector<std::string> labels;             // row i and column i
  std::vector<std::vector<long>> counts;       // [row][column]
};

std::string render_line_chart(const LineChart& chart);
std::string render_bar_chart(const BarChart& chart);
std::string render_heat_map(const HeatMap& map);

}  // namespace bertrain::report

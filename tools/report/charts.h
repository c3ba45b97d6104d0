// The report's four kinds of chart, each rendered as one self-contained <svg> element (no scripts, no
// ids, no external references) that a browser draws inline in HTML: a line chart (loss, learning rate,
// throughput per epoch), a scatter chart (a tuning study's parameter against each trial's best metric),
// horizontal grouped bars (per-class precision / recall / F1) and a heat map with counts (the confusion
// matrix). Every chart has a title, axis titles with units, tick labels and a legend.
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

struct ScatterSeries {
  std::string name;   // data-series of its points, and its points' hover text
  std::string color;  // CSS colour
  // Same length. With ScatterChart::x_categories, an x is the index of its category. A point that cannot be drawn
  // (a coordinate not finite, an x <= 0 on a log axis, an index out of range) is left out.
  std::vector<double> x, y;
  std::optional<std::size_t> marked;  // index of a point drawn with a ring (the best trial)
};

// Points without lines: x a parameter's value (numbers, on a linear or log axis, or categories), y a result. Points
// are drawn in the order of the series, later ones on top.
struct ScatterChart {
  std::string title, x_title, y_title;  // axis titles carry units; add " (log scale)" to x_title with log_x
  // In each point's hover text: "<series>: <x_name> <x>, <y_name> <y>" ("trial 003: lr 1e-4, best val_loss 0.4213").
  std::string x_name, y_name;
  bool log_x = false;  // log10 x axis (every x must be > 0)
  bool log_y = false;  // log10 y axis (points with y <= 0 are left out)
  // Non-empty: the x axis is these categories, in this order, one band each (a string or boolean parameter); each
  // point's x is its category's index, and the point carries the category's text as data-category too.
  std::vector<std::string> x_categories;
  std::string mark_legend;  // legend text of the ring, e.g. "best trial (003)"
  std::vector<ScatterSeries> series;
  // The legend's entries (the ring's follows when a point is ringed). A scatter often has one series a point, so its
  // series are not listed by themselves: none by default.
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

// Whether positive values from `lo` to `hi` span three decades or more, so that a linear axis would flatten the
// smaller ones onto zero (one diverged run beside converging ones): such an axis is drawn logarithmic.
inline bool spans_three_decades(double lo, double hi) { return lo > 0 && hi >= 1000 * lo; }

std::string render_line_chart(const LineChart& chart);
std::string render_scatter_chart(const ScatterChart& chart);
std::string render_bar_chart(const BarChart& chart);
std::string render_heat_map(const HeatMap& map);

}  // namespace bertrain::report

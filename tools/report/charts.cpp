#include "tools/report/charts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tools/report/axis.h"
#include "tools/report/svg_text.h"

namespace bertrain::report {

namespace {

constexpr double kWidth = 560;        // every chart's drawing width; the page sets two side by side at 1280 px
constexpr double kTitleBaseline = 22;
const char kAxisColor[] = "#444", kGridColor[] = "#e3e3e3", kMutedText[] = "#666";

// The text cut to `max_px` wide with an ellipsis (the full text stays in the element's hover title).
std::string fit_text(const std::string& text, double font_px, double max_px) {
  if (text_width(text, font_px) <= max_px) return text;
  const std::string ellipsis = "\u2026";
  double width = text_width(ellipsis, font_px);
  std::size_t end = 0;
  while (end < text.size()) {
    std::size_t next = end + 1;
    while (next < text.size() && (static_cast<unsigned char>(text[next]) & 0xC0) == 0x80) ++next;  // one character
    width += text_width(std::string_view(text).substr(end, next - end), font_px);
    if (end > 0 && width > max_px) break;
    end = next;
  }
  return text.substr(0, end) + ellipsis;
}

// The text cut in its middle to `max_px` wide: its start, an ellipsis, its end (run names that differ only at their
// ends, "..._lr1e-4_bs64" and "..._lr3e-3_bs64", stay told apart).
std::string fit_text_middle(const std::string& text, double font_px, double max_px) {
  if (text_width(text, font_px) <= max_px) return text;
  std::vector<std::size_t> starts;  // of each UTF-8 character
  for (std::size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) starts.push_back(i);
  }
  starts.push_back(text.size());
  const auto piece = [&](std::size_t first, std::size_t last) {  // characters [first, last)
    return text.substr(starts[first], starts[last] - starts[first]);
  };
  const std::size_t n = starts.size() - 1;
  std::size_t head = 0, tail = 0;  // characters kept at each end, taken in turn while they fit
  for (bool grow_head = true; head + tail < n; grow_head = !grow_head) {
    const std::size_t h = head + (grow_head ? 1 : 0), t = tail + (grow_head ? 0 : 1);
    if (text_width(piece(0, h) + "\u2026" + piece(n - t, n), font_px) > max_px) break;
    head = h, tail = t;
  }
  return piece(0, head) + "\u2026" + piece(n - tail, n);
}

std::string svg_open(double width, double height, const std::string& title) {
  return "<svg class=\"chart\" viewBox=\"0 0 " + format_px(width) + " " + format_px(height) + "\" width=\"" +
         format_px(width) + "\" height=\"" + format_px(height) + "\" role=\"img\" aria-label=\"" +
         xml_escape(title) + "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n" +
         "<text x=\"12\" y=\"" + format_px(kTitleBaseline) + "\" font-size=\"15\" font-weight=\"bold\">" +
         xml_escape(title) + "</text>\n";
}

// <text> at (x, y); `extra` holds further attributes (already escaped).
std::string text_at(double x, double y, const std::string& text, const std::string& extra = "") {
  return "<text x=\"" + format_px(x) + "\" y=\"" + format_px(y) + "\"" + (extra.empty() ? "" : " " + extra) + ">" +
         xml_escape(text) + "</text>\n";
}

std::string line(double x1, double y1, double x2, double y2, const std::string& stroke, double width = 1) {
  return "<line x1=\"" + format_px(x1) + "\" y1=\"" + format_px(y1) + "\" x2=\"" + format_px(x2) + "\" y2=\"" +
         format_px(y2) + "\" stroke=\"" + stroke + "\" stroke-width=\"" + format_px(width) + "\"/>\n";
}

// The stroke-dasharray attribute of a line drawn as `dash` ("" for a solid one).
std::string dash_attribute(Dash dash) {
  switch (dash) {
    case Dash::kSolid:
      return "";
    case Dash::kDashed:
      return " stroke-dasharray=\"6 4\"";
    case Dash::kDotted:
      return " stroke-dasharray=\"2 3\"";
    case Dash::kDashDot:
      return " stroke-dasharray=\"8 3 2 3\"";
  }
  return "";
}

// A <title> child: the text a browser shows when the pointer rests on the element.
std::string hover(const std::string& text) { return "<title>" + xml_escape(text) + "</title>"; }

// The ring around a marked point (a best epoch, the best trial), `radius` px, carrying the point's data attributes.
std::string mark_ring(double x, double y, const char* radius, const std::string& color, const std::string& data,
                      const std::string& title) {
  return "<circle class=\"mark\" cx=\"" + format_px(x) + "\" cy=\"" + format_px(y) + "\" r=\"" + radius +
         "\" fill=\"none\" stroke=\"" + color + "\" stroke-width=\"2.5\" " + data + ">" + hover(title) + "</circle>\n";
}

// Legend entries left to right from (x, y), wrapping at `max_x`; returns the SVG and sets *rows.
std::string render_legend(const std::vector<LegendEntry>& entries, double x0, double y0, double max_x, int* rows) {
  constexpr double kRow = 18, kSwatch = 26;
  std::string svg = "<g class=\"legend\">\n";
  double x = x0, y = y0;
  *rows = entries.empty() ? 0 : 1;
  for (const LegendEntry& e : entries) {
    // A label longer than a row is cut in its middle (its whole text on hover).
    const std::string label = fit_text_middle(e.label, 12, max_x - x0 - kSwatch - 6 - 18);
    const double width = kSwatch + 6 + text_width(label, 12) + 18;
    if (x > x0 && x + width > max_x) {
      x = x0;
      y += kRow;
      ++*rows;
    }
    const double mid = y - 4;
    switch (e.swatch) {
      case Swatch::kLine:
        svg += "<line x1=\"" + format_px(x) + "\" y1=\"" + format_px(mid) + "\" x2=\"" + format_px(x + kSwatch) +
               "\" y2=\"" + format_px(mid) + "\" stroke=\"" + e.color + "\" stroke-width=\"2.5\"" +
               dash_attribute(e.dash) + "/>\n";
        break;
      case Swatch::kRing:
        svg += "<circle cx=\"" + format_px(x + kSwatch / 2) + "\" cy=\"" + format_px(mid) +
               "\" r=\"6\" fill=\"none\" stroke=\"" + e.color + "\" stroke-width=\"2\"/>\n";
        break;
      case Swatch::kBox:
        svg += "<rect x=\"" + format_px(x + 6) + "\" y=\"" + format_px(mid - 6) + "\" width=\"14\" height=\"12\" fill=\"" +
               e.color + "\"/>\n";
        break;
    }
    svg += label == e.label ? text_at(x + kSwatch + 6, y, label)
                            : "<text x=\"" + format_px(x + kSwatch + 6) + "\" y=\"" + format_px(y) + "\">" + hover(e.label) +
                                  xml_escape(label) + "</text>\n";
    x += width;
  }
  return svg + "</g>\n";
}

// Colour of a share in [0, 1]: white through mid blue to dark blue (ColorBrewer's Blues end points).
std::string shade(double share) {
  static const double stops[3][3] = {{247, 251, 255}, {107, 174, 214}, {8, 48, 107}};
  share = std::clamp(share, 0.0, 1.0);
  const int i = share < 0.5 ? 0 : 1;
  const double t = (share - 0.5 * i) / 0.5;
  std::string colour = "#";
  for (int channel = 0; channel < 3; ++channel) {
    char hex[4];
    std::snprintf(hex, sizeof hex, "%02x",
                  static_cast<int>(std::lround(stops[i][channel] + t * (stops[i + 1][channel] - stops[i][channel]))));
    colour += hex;
  }
  return colour;
}

// The plot area of the line and scatter charts: the full drawing width less the y axis' room at the left.
constexpr double kPlotRight = kWidth - 18, kPlotTop = 40, kPlotBottom = kPlotTop + 230;
// The y axis' title, turned upright, stands at the card's left edge; its tick labels end kTickGap left of the axis.
constexpr double kYTitleX = 18, kYTitleDescent = 4, kTitleGap = 8, kTickGap = 7;

// Where the plot starts: right of the widest y tick label and the y title beside it ("1.000e-4" needs more room
// than "0.2").
double plot_left(const Axis& y_axis) {
  double widest_tick = 0;
  for (const std::string& label : y_axis.labels) widest_tick = std::max(widest_tick, text_width(label, 12));
  return std::max(72.0, kYTitleX + kYTitleDescent + kTitleGap + widest_tick + kTickGap);
}

// The y axis' grid lines across the plot and their tick labels; `py` maps a value to its pixel row.
template <typename ToPixel>
std::string y_grid(const Axis& y_axis, double left, ToPixel py) {
  std::string svg;
  for (std::size_t t = 0; t < y_axis.ticks.size(); ++t) {
    const double y = py(y_axis.ticks[t]);
    svg += line(left, y, kPlotRight, y, kGridColor);
    svg += text_at(left - kTickGap, y, y_axis.labels[t], "text-anchor=\"end\" dy=\"0.35em\"");
  }
  return svg;
}

// A tick mark and a centred label under the plot at each of `xs`. A label wider than `max_label_px` is cut with an
// ellipsis and keeps its whole text as hover (a long category name).
std::string x_ticks(const std::vector<double>& xs, const std::vector<std::string>& labels, double max_label_px) {
  std::string svg;
  for (std::size_t t = 0; t < xs.size(); ++t) {
    svg += line(xs[t], kPlotBottom, xs[t], kPlotBottom + 5, kAxisColor);
    if (labels[t].empty()) continue;
    const std::string shown = fit_text(labels[t], 12, max_label_px);
    if (shown == labels[t]) {
      svg += text_at(xs[t], kPlotBottom + 19, labels[t], "text-anchor=\"middle\"");
    } else {
      svg += "<text x=\"" + format_px(xs[t]) + "\" y=\"" + format_px(kPlotBottom + 19) + "\" text-anchor=\"middle\">" +
             hover(labels[t]) + xml_escape(shown) + "</text>\n";
    }
  }
  return svg;
}

// The plot's two axis lines and the axis titles.
std::string plot_frame(double left, const std::string& x_title, const std::string& y_title) {
  std::string svg = line(left, kPlotTop, left, kPlotBottom, kAxisColor) +
                    line(left, kPlotBottom, kPlotRight, kPlotBottom, kAxisColor);
  svg += text_at((left + kPlotRight) / 2, kPlotBottom + 40, x_title, "text-anchor=\"middle\"");
  const double y_mid = (kPlotTop + kPlotBottom) / 2;
  svg += text_at(kYTitleX, y_mid, y_title,
                 "text-anchor=\"middle\" transform=\"rotate(-90 " + format_px(kYTitleX) + " " + format_px(y_mid) + ")\"");
  return svg;
}

// The legend under the plot and the chart's height with it.
std::string legend_below_plot(const std::vector<LegendEntry>& legend, double left, double* height) {
  int rows = 0;
  const std::string svg = render_legend(legend, left, kPlotBottom + 64, kPlotRight, &rows);
  *height = kPlotBottom + 64 + 18 * std::max(0, rows - 1) + 10;
  return svg;
}

}  // namespace

std::string render_line_chart(const LineChart& chart) {
  // A diverged epoch (loss NaN), or a value a log axis cannot show, is not drawn: a gap in its line.
  auto drawable = [&](double y) { return std::isfinite(y) && (!chart.log_y || y > 0); };
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const LineSeries& s : chart.series) {
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!drawable(s.y[i])) continue;
      x_lo = std::min(x_lo, s.x[i]), x_hi = std::max(x_hi, s.x[i]);
      y_lo = std::min(y_lo, s.y[i]), y_hi = std::max(y_hi, s.y[i]);
    }
  }
  if (!(x_hi >= x_lo)) x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;  // nothing to draw: empty axes
  Axis x_axis = linear_axis(x_lo, std::max(x_hi, x_lo + 1), 10, false, true);
  if (x_hi == x_lo) {
    // One epoch: its points in the middle of the plot, its one tick under them (on an axis to an epoch 2 that never
    // was, they sat on the y axis and looked like no data).
    x_axis.lo = x_lo - 1;
    x_axis.hi = x_lo + 1;
    x_axis.ticks = {x_lo};
    x_axis.labels = {x_axis.labels.front()};
  } else {
    // The x axis starts at the first epoch, not at the round number before it: a 20-epoch run's ticks 2 apart
    // would begin at an epoch 0 that never was.
    while (!x_axis.ticks.empty() && x_axis.ticks.front() < x_lo) {
      x_axis.ticks.erase(x_axis.ticks.begin());
      x_axis.labels.erase(x_axis.labels.begin());
    }
    x_axis.lo = std::max(x_axis.lo, x_lo);
  }
  const Axis y_axis = chart.log_y ? log_axis(y_lo, y_hi) : linear_axis(y_lo, y_hi, 5, chart.y_from_zero, false);
  const double left = plot_left(y_axis);
  auto px = [&](double x) { return x_axis.to_pixel(x, left, kPlotRight); };
  auto py = [&](double y) { return y_axis.to_pixel(y, kPlotBottom, kPlotTop); };

  std::string body = y_grid(y_axis, left, py);
  std::vector<double> tick_xs;
  for (const double tick : x_axis.ticks) tick_xs.push_back(px(tick));
  body += x_ticks(tick_xs, x_axis.labels, INFINITY);  // epoch numbers: never cut
  body += plot_frame(left, chart.x_title, chart.y_title);

  std::vector<LegendEntry> legend;
  std::string marks;
  for (const LineSeries& s : chart.series) {
    const std::string series = xml_escape(s.name);
    std::string path, points;
    bool pen_down = false;
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!drawable(s.y[i])) {
        pen_down = false;  // a gap, not a line through it
        continue;
      }
      const double x = px(s.x[i]), y = py(s.y[i]);
      path += (pen_down ? " L" : (path.empty() ? "M" : " M")) + format_px(x) + " " + format_px(y);
      pen_down = true;
      const std::string data = "data-series=\"" + series + "\" data-x=\"" + format_exact(s.x[i]) + "\" data-y=\"" +
                               format_exact(s.y[i]) + "\"";
      const std::string label = s.name + ", " + chart.x_name + " " + format_value(s.x[i]) + ": " + format_value(s.y[i]);
      points += "<circle class=\"point\" cx=\"" + format_px(x) + "\" cy=\"" + format_px(y) + "\" r=\"3\" fill=\"" +
                s.color + "\" " + data + ">" + hover(label) + "</circle>\n";
      if (s.marked && *s.marked == i) {
        marks += mark_ring(x, y, "8", s.color, data, chart.mark_legend + ": " + label);
      }
    }
    if (!path.empty()) {
      body += "<path d=\"" + path + "\" fill=\"none\" stroke=\"" + s.color + "\" stroke-width=\"2\"" +
              dash_attribute(s.dash) + "/>\n";
    }
    body += points;
    legend.push_back({s.name, s.color, Swatch::kLine, s.dash});
  }
  body += marks;
  if (!marks.empty()) legend.push_back({chart.mark_legend, kAxisColor, Swatch::kRing});
  if (!chart.legend.empty()) legend = chart.legend;

  double height = 0;
  const std::string legend_svg = legend_below_plot(legend, left, &height);
  return svg_open(kWidth, height, chart.title) + body + legend_svg + "</svg>\n";
}

std::string render_scatter_chart(const ScatterChart& chart) {
  const bool categorical = !chart.x_categories.empty();
  const double categories = static_cast<double>(chart.x_categories.size());
  auto drawable = [&](double x, double y) {
    return std::isfinite(x) && std::isfinite(y) && (!chart.log_x || x > 0) && (!chart.log_y || y > 0) &&
           (!categorical || (x >= 0 && x < categories));
  };
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  bool whole_xs = true;  // integer parameters (a patience) get integer ticks
  for (const ScatterSeries& s : chart.series) {
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!drawable(s.x[i], s.y[i])) continue;
      x_lo = std::min(x_lo, s.x[i]), x_hi = std::max(x_hi, s.x[i]);
      y_lo = std::min(y_lo, s.y[i]), y_hi = std::max(y_hi, s.y[i]);
      whole_xs = whole_xs && s.x[i] == std::floor(s.x[i]);
    }
  }
  if (!(x_hi >= x_lo)) x_lo = 1, x_hi = 10, y_lo = 0, y_hi = 1;  // nothing to draw: empty axes
  Axis x_axis;
  if (categorical) {  // one band per category, its point in the middle
    x_axis.lo = -0.5;
    x_axis.hi = categories - 0.5;
    for (std::size_t c = 0; c < chart.x_categories.size(); ++c) {
      x_axis.ticks.push_back(static_cast<double>(c));
      x_axis.labels.push_back(chart.x_categories[c]);
    }
  } else if (chart.log_x) {
    x_axis = log_axis(x_lo, x_hi);
  } else {
    x_axis = linear_axis(x_lo, x_hi, 6, false, whole_xs);
  }
  const Axis y_axis = chart.log_y ? log_axis(y_lo, y_hi) : linear_axis(y_lo, y_hi, 5, false, false);
  const double left = plot_left(y_axis);
  // A point on a round value at either end of a numeric axis would sit on the y axis or the plot's edge: those
  // axes keep kInset px clear inside each end (a category's band already has room around its point).
  constexpr double kInset = 12;
  const double inset = categorical ? 0 : kInset;
  auto px = [&](double x) { return x_axis.to_pixel(x, left + inset, kPlotRight - inset); };
  auto py = [&](double y) { return y_axis.to_pixel(y, kPlotBottom, kPlotTop); };

  std::string body = y_grid(y_axis, left, py);
  std::vector<double> tick_xs;
  for (const double tick : x_axis.ticks) tick_xs.push_back(px(tick));
  std::vector<std::string> labels = x_axis.labels;
  double max_label = INFINITY;
  if (categorical) {
    max_label = (kPlotRight - left) / categories - 6;  // a category's label stays inside its band
  } else {
    // Many decades on a log axis: a label on every k-th tick only, so that neighbours never touch.
    double widest = 0;
    for (const std::string& label : labels) widest = std::max(widest, text_width(label, 12));
    const double spacing = tick_xs.size() > 1 ? (tick_xs.back() - tick_xs.front()) / (tick_xs.size() - 1) : INFINITY;
    const std::size_t every = static_cast<std::size_t>(std::ceil((widest + 8) / spacing));
    for (std::size_t t = 0; every > 1 && t < labels.size(); ++t) {
      if (t % every != 0) labels[t].clear();
    }
  }
  body += x_ticks(tick_xs, labels, max_label);
  body += plot_frame(left, chart.x_title, chart.y_title);

  std::string points, marks;
  for (const ScatterSeries& s : chart.series) {
    const std::string series = xml_escape(s.name);
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!drawable(s.x[i], s.y[i])) continue;
      const double x = px(s.x[i]), y = py(s.y[i]);
      std::string data = "data-series=\"" + series + "\" data-x=\"" + format_exact(s.x[i]) + "\" data-y=\"" +
                         format_exact(s.y[i]) + "\"";
      const std::string x_text =
          categorical ? chart.x_categories[static_cast<std::size_t>(s.x[i])] : format_value(s.x[i]);
      if (categorical) data += " data-category=\"" + xml_escape(x_text) + "\"";
      const std::string label = s.name + ": " + chart.x_name + " " + x_text + ", " + chart.y_name + " " + format_value(s.y[i]);
      // A white edge keeps points that overlap (two trials with one value) apart.
      points += "<circle class=\"point\" cx=\"" + format_px(x) + "\" cy=\"" + format_px(y) + "\" r=\"4.5\" fill=\"" +
                s.color + "\" stroke=\"#ffffff\" stroke-width=\"1\" " + data + ">" + hover(label) + "</circle>\n";
      if (s.marked && *s.marked == i) {
        marks += mark_ring(x, y, "9", s.color, data, chart.mark_legend + ": " + label);
      }
    }
  }
  body += points + marks;
  std::vector<LegendEntry> legend = chart.legend;
  if (!marks.empty()) legend.push_back({chart.mark_legend, kAxisColor, Swatch::kRing});
  double height = 0;
  const std::string legend_svg = legend_below_plot(legend, left, &height);
  return svg_open(kWidth, height, chart.title) + body + legend_svg + "</svg>\n";
}

std::string render_bar_chart(const BarChart& chart) {
  constexpr double kTop = 62, kBar = 12, kGap = 2, kBandPad = 14, kValueRoom = 44;
  double label_width = 60;
  for (const std::string& c : chart.categories) label_width = std::max(label_width, text_width(c, 12));
  label_width = std::min(label_width, 200.0);
  const double left = 12 + label_width + 10, plot_right = kWidth - kValueRoom;
  const double band = chart.groups.size() * (kBar + kGap) + kBandPad;
  const double plot_bottom = kTop + band * chart.categories.size();
  const Axis axis = linear_axis(0, chart.value_max, 5, true, false);
  auto px = [&](double v) { return axis.to_pixel(v, left, plot_right); };

  int legend_rows = 0;
  std::vector<LegendEntry> legend;
  for (const BarGroup& g : chart.groups) legend.push_back({g.name, g.color, Swatch::kBox});
  std::string body = render_legend(legend, left, 44, plot_right, &legend_rows);
  for (std::size_t t = 0; t < axis.ticks.size(); ++t) {
    const double x = px(axis.ticks[t]);
    body += line(x, kTop - 4, x, plot_bottom, kGridColor);
    body += text_at(x, plot_bottom + 18, axis.labels[t], "text-anchor=\"middle\"");
  }
  body += line(left, kTop - 4, left, plot_bottom, kAxisColor) + line(left, plot_bottom, plot_right, plot_bottom, kAxisColor);
  body += text_at((left + plot_right) / 2, plot_bottom + 38, chart.value_title, "text-anchor=\"middle\"");

  for (std::size_t c = 0; c < chart.categories.size(); ++c) {
    const std::string& name = chart.categories[c];
    const double top = kTop + band * c + kBandPad / 2, mid = top + (band - kBandPad) / 2;
    const bool noted = c < chart.category_notes.size() && !chart.category_notes[c].empty();
    body += "<text x=\"" + format_px(left - 8) + "\" y=\"" + format_px(noted ? mid - 2 : mid) +
            "\" text-anchor=\"end\" dy=\"0.35em\">" + hover(name) + xml_escape(fit_text(name, 12, label_width)) + "</text>\n";
    if (noted) {
      body += text_at(left - 8, mid + 13, chart.category_notes[c],
                      "text-anchor=\"end\" font-size=\"10\" fill=\"" + std::string(kMutedText) + "\"");
    }
    for (std::size_t g = 0; g < chart.groups.size(); ++g) {
      const BarGroup& group = chart.groups[g];
      const double value = group.values.at(c), y = top + g * (kBar + kGap);
      const std::string label = name + ", " + group.name + ": " + format_value(value);
      if (std::isfinite(value)) {
        body += "<rect class=\"bar\" x=\"" + format_px(left) + "\" y=\"" + format_px(y) + "\" width=\"" +
                format_px(std::max(0.0, px(value) - left)) + "\" height=\"" + format_px(kBar) + "\" fill=\"" +
                group.color + "\" data-category=\"" + xml_escape(name) + "\" data-series=\"" + xml_escape(group.name) +
                "\" data-value=\"" + format_exact(value) + "\">" + hover(label) + "</rect>\n";
      }
      body += text_at((std::isfinite(value) ? px(value) : left) + 4, y + kBar / 2, format_fixed(value, 3),
                      "dy=\"0.35em\" font-size=\"10\"");
    }
  }
  return svg_open(kWidth, plot_bottom + 50, chart.title) + body + "</svg>\n";
}

std::string render_heat_map(const HeatMap& map) {
  const std::size_t n = map.labels.size();
  const double cell = std::clamp(340.0 / std::max<std::size_t>(n, 1), 26.0, 70.0);
  double row_label = 40, column_label = 40;
  for (const std::string& l : map.labels) {
    row_label = std::max(row_label, std::min(text_width(l, 12), 220.0));
    column_label = std::max(column_label, std::min(text_width(l, 12), 220.0));
  }
  // Column labels are turned 40 degrees, so they rise sin(40°) of their length above the grid (clear of the
  // column title above them) and reach cos(40°) of it to the right of their column (inside the chart).
  const double left = 34 + row_label + 10, top = kTitleBaseline + 30 + column_label * 0.643 + 22;
  const double grid = cell * n, key_x = left + grid + 28;
  double labels_right = 0;
  for (std::size_t i = 0; i < n; ++i) {
    labels_right = std::max(labels_right, left + cell * (i + 0.5) + 0.766 * text_width(fit_text(map.labels[i], 12, 220), 12));
  }
  const double width = std::max({kWidth, key_x + 80, labels_right + 12}), height = top + grid + 20;

  std::string body = text_at(left + grid / 2, kTitleBaseline + 24, map.column_title, "text-anchor=\"middle\" font-weight=\"bold\"");
  const double row_mid = top + grid / 2;
  body += text_at(16, row_mid, map.row_title,
                  "text-anchor=\"middle\" font-weight=\"bold\" transform=\"rotate(-90 16 " + format_px(row_mid) + ")\"");
  for (std::size_t i = 0; i < n; ++i) {
    const double x = left + cell * (i + 0.5), y = top - 8;
    body += "<text x=\"" + format_px(x) + "\" y=\"" + format_px(y) + "\" transform=\"rotate(-40 " + format_px(x) + " " +
            format_px(y) + ")\">" + hover(map.labels[i]) + xml_escape(fit_text(map.labels[i], 12, 220)) + "</text>\n";
    body += "<text x=\"" + format_px(left - 8) + "\" y=\"" + format_px(top + cell * (i + 0.5)) +
            "\" text-anchor=\"end\" dy=\"0.35em\">" + hover(map.labels[i]) + xml_escape(fit_text(map.labels[i], 12, 220)) +
            "</text>\n";
  }
  const double font = std::min(14.0, cell * 0.38);
  for (std::size_t r = 0; r < n; ++r) {
    long row_total = 0;
    for (const long count : map.counts.at(r)) row_total += count;
    for (std::size_t c = 0; c < n; ++c) {
      const long count = map.counts[r].at(c);
      const double share = row_total > 0 ? static_cast<double>(count) / row_total : 0;
      const double x = left + cell * c, y = top + cell * r;
      const std::string label = map.row_title + " " + map.labels[r] + ", " + map.column_title + " " + map.labels[c] +
                                ": " + std::to_string(count) + " (" + format_fixed(100 * share, 1) + " % of the row)";
      body += "<rect class=\"cell\" x=\"" + format_px(x) + "\" y=\"" + format_px(y) + "\" width=\"" + format_px(cell) +
              "\" height=\"" + format_px(cell) + "\" fill=\"" + shade(share) + "\" stroke=\"#ffffff\" data-row=\"" +
              xml_escape(map.labels[r]) + "\" data-column=\"" + xml_escape(map.labels[c]) + "\" data-count=\"" +
              std::to_string(count) + "\">" + hover(label) + "</rect>\n";
      body += text_at(x + cell / 2, y + cell / 2, std::to_string(count),
                      "text-anchor=\"middle\" dy=\"0.35em\" font-size=\"" + format_px(font) + "\" fill=\"" +
                          (share > 0.5 ? "#ffffff" : "#222222") + "\"");
    }
  }
  // The key: five shades and the shares they stand for.
  body += text_at(key_x, top - 8, "share of row", "font-size=\"11\"");
  for (int k = 0; k <= 4; ++k) {
    const double y = top + k * 20;
    body += "<rect x=\"" + format_px(key_x) + "\" y=\"" + format_px(y) + "\" width=\"16\" height=\"16\" fill=\"" +
            shade(k / 4.0) + "\" stroke=\"#999999\" stroke-width=\"0.5\"/>\n";
    body += text_at(key_x + 22, y + 8, std::to_string(25 * k) + " %", "dy=\"0.35em\" font-size=\"11\"");
  }
  return svg_open(width, height, map.title) + body + "</svg>\n";
}

}  // namespace bertrain::report

#include "tools/report/axis.h"

#include <algorithm>
#include <cmath>

#include "tools/report/svg_text.h"

namespace bertrain::report {

double Axis::to_pixel(double value, double from, double to) const {
  const double a = log ? std::log10(lo) : lo, b = log ? std::log10(hi) : hi;
  const double v = log ? std::log10(value) : value;
  return from + (v - a) / (b - a) * (to - from);
}

Axis linear_axis(double lo, double hi, int target_ticks, bool include_zero, bool integers) {
  if (include_zero) {
    lo = std::min(lo, 0.0);
    hi = std::max(hi, 0.0);
  }
  if (!(hi > lo)) {  // one value (a constant learning rate, a single epoch): a band around it
    const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo = include_zero && lo >= 0 ? lo : lo - pad;
    hi += pad;
  }
  // The smallest step of 1, 2 or 5 × 10^k that covers the range in at most target_ticks intervals.
  const double rough = (hi - lo) / std::max(1, target_ticks);
  const double decade = std::pow(10.0, std::floor(std::log10(rough)));
  double step = decade * 10;
  for (const double m : {1.0, 2.0, 5.0}) {
    if (m * decade >= rough * (1 - 1e-9)) {
      step = m * decade;
      break;
    }
  }
  if (integers) step = std::max(step, 1.0);
  Axis axis;
  axis.lo = std::floor(lo / step + 1e-9) * step;
  axis.hi = std::ceil(hi / step - 1e-9) * step;
  // Ticks as integer multiples of the step (no summed rounding error).
  const long first = std::lround(axis.lo / step), last = std::lround(axis.hi / step);
  for (long k = first; k <= last; ++k) {
    axis.ticks.push_back(k * step);
    axis.labels.push_back(format_tick(k * step, step));
  }
  return axis;
}

Axis log_axis(double lo, double hi) {
  Axis axis;
  axis.log = true;
  const int first = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
  int last = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
  if (last == first) ++last;
  axis.lo = std::pow(10.0, first);
  axis.hi = std::pow(10.0, last);
  const bool few_decades = last - first < 2;
  for (int e = first; e <= last; ++e) {
    for (const double m : {1.0, 2.0, 5.0}) {
      if (m != 1.0 && (!few_decades || e == last)) continue;
      const double value = m * std::pow(10.0, e);
      axis.ticks.push_back(value);
      // One notation along the axis: "1e-3" beside "1e-4", not "0.001".
      axis.labels.push_back(axis.lo < 1e-3 ? format_scientific(value) : format_value(value));
    }
  }
  return axis;
}

}  // namespace bertrain::report

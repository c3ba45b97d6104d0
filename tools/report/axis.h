// A chart axis: the data range widened to round tick values, and the map from values to pixels.
#pragma once

#include <string>
#include <vector>

namespace bertrain::report {

struct Axis {
  double lo = 0, hi = 1;        // the axis' ends, in data units (ticks at both ends for linear axes)
  bool log = false;             // log10 scale (lo > 0)
  std::vector<double> ticks;    // values that get a grid line and a label
  std::vector<std::string> labels;  // one per tick

  // Where `value` lies between pixel `from` (at lo) and pixel `to` (at hi); values outside are not clamped.
  double to_pixel(double value, double from, double to) const;
};

// Ticks 1, 2 or 5 × 10^k apart, about `target_ticks` of them, covering [lo, hi] (and 0 with include_zero).
// A range of one value is widened around it. With `integers` the step is at least 1 (epochs).
Axis linear_axis(double lo, double hi, int target_ticks, bool include_zero, bool integers);

// A log10 axis over [lo, hi] (both > 0) from the decade below lo to the decade above hi: ticks at the
// powers of ten, and at 2 and 5 × 10^k when that gives fewer than three ticks.
Axis log_axis(double lo, double hi);

}  // namespace bertrain::report

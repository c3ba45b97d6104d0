// Tolerance comparisons shared by the test suites: |got - ref| <= atol + rtol·|ref| element-wise, with the
// worst element, its index and both values in the failure message.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>

namespace bertrain::testing {

struct Comparison {
  double max_abs = 0;     // largest |got - ref|
  double max_rel = 0;     // largest |got - ref| / |ref| over elements with ref != 0
  double worst_excess = -1;  // largest |got - ref| / (atol + rtol·|ref|); > 1 fails
  std::size_t worst_index = 0;
  double worst_got = 0, worst_ref = 0;
};

template <typename A, typename B>
Comparison compare(const A* got, const B* ref, std::size_t n, double atol, double rtol) {
  Comparison c;
  for (std::size_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got[i]), r = static_cast<double>(ref[i]);
    const double err = std::abs(g - r);
    if (!(err <= c.max_abs)) c.max_abs = err;  // also catches NaN
    if (r != 0) c.max_rel = std::max(c.max_rel, err / std::abs(r));
    const double excess = std::isnan(err) ? 1e300 : err / (atol + rtol * std::abs(r));
    if (excess > c.worst_excess) {
      c.worst_excess = excess;
      c.worst_index = i;
      c.worst_got = g;
      c.worst_ref = r;
    }
  }
  return c;
}

inline std::string describe(const std::string& what, const Comparison& c, double atol, double rtol) {
  std::ostringstream os;
  os.precision(9);
  os << what << ": max-abs " << c.max_abs << ", max-rel " << c.max_rel << "; worst element " << c.worst_index
     << " got " << c.worst_got << " expected " << c.worst_ref << " (tolerance " << atol << " + " << rtol << "·|ref|)";
  return os.str();
}

// gtest check: every element within atol + rtol·|ref|.
template <typename A, typename B>
::testing::AssertionResult all_close(const std::string& what, const A* got, const B* ref, std::size_t n, double atol,
                                     double rtol) {
  const Comparison c = compare(got, ref, n, atol, rtol);
  if (c.worst_excess <= 1.0) {
    return ::testing::AssertionSuccess() << describe(what, c, atol, rtol) << "; " << c.worst_excess << " of tolerance";
  }
  return ::testing::AssertionFailure() << describe(what, c, atol, rtol);
}

}  // namespace bertrain::testing

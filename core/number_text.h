// Numbers as text that reads back as the very same double, as short as that allows.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace bertrain {

// The shortest %g text that strtod reads back as `value` ("0.0001", not "0.00010000000000000000479"); finite values.
// A whole number below 1e15 is written out ("10", not %g's "1e+01", which reads back too but not to a person).
inline std::string shortest_double(double value) {
  char text[32];
  if (std::fabs(value) < 1e15 && value == std::trunc(value)) {
    std::snprintf(text, sizeof text, "%.0f", value);
    return text;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof text, "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  return text;
}

}  // namespace bertrain

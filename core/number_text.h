// Numbers as text that reads back as the very same double, as short as that allows.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace bertrain {

// The shortest %g text that strtod reads back as `value` ("0.0001", not "0.00010000000000000000479"); finite values.
inline std::string shortest_double(double value) {
  char text[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof text, "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  return text;
}

}  // namespace bertrain

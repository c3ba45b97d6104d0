#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/number_text.h"

namespace bertrain {
namespace {

TEST(NumberText, ShortestTextThatReadsBack) {
  EXPECT_EQ(shortest_double(1e-4), "0.0001");
  EXPECT_EQ(shortest_double(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(shortest_double(0.5666), "0.5666");
  EXPECT_EQ(shortest_double(1.5e20), "1.5e+20");
  // Whole numbers are written out: an epoch budget of 10 is "10", not %g's "1e+01".
  EXPECT_EQ(shortest_double(10), "10");
  EXPECT_EQ(shortest_double(40), "40");
  EXPECT_EQ(shortest_double(-300), "-300");
  EXPECT_EQ(shortest_double(0), "0");
  for (const double v : {10.0, 1e-4, 0.30000000000000004, 123456789012345.0, 1e15, 2.5e-300}) {
    EXPECT_EQ(std::strtod(shortest_double(v).c_str(), nullptr), v) << shortest_double(v);
  }
}

}  // namespace
}  // namespace bertrain

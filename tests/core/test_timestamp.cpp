#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <regex>
#include <string>

#include "core/timestamp.h"

namespace bertrain {
namespace {

// Sets TZ for one test (POSIX TZ strings need no time-zone database) and restores it after.
class ScopedTimeZone {
 public:
  explicit ScopedTimeZone(const char* tz) {
    const char* old = std::getenv("TZ");
    had_ = old != nullptr;
    if (had_) old_ = old;
    ::setenv("TZ", tz, 1);
    ::tzset();
  }
  ~ScopedTimeZone() {
    if (had_) ::setenv("TZ", old_.c_str(), 1);
    else ::unsetenv("TZ");
    ::tzset();
  }

 private:
  bool had_ = false;
  std::string old_;
};

TEST(Timestamp, IsoLocalTimeWithItsOffset) {
  {
    const ScopedTimeZone utc("UTC0");
    EXPECT_EQ(iso_timestamp(0), "1970-01-01T00:00:00+00:00");
    EXPECT_EQ(iso_timestamp(1795000000), "2026-11-18T11:06:40+00:00");
  }
  {
    const ScopedTimeZone india("IST-5:30");  // POSIX: 5 h 30 min east of UTC
    EXPECT_EQ(iso_timestamp(0), "1970-01-01T05:30:00+05:30");
  }
  {
    const ScopedTimeZone west("PST8");
    EXPECT_EQ(iso_timestamp(0), "1969-12-31T16:00:00-08:00");
  }
  EXPECT_TRUE(std::regex_match(iso_timestamp_now(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d)")))
      << iso_timestamp_now();
}

}  // namespace
}  // namespace bertrain

#include "core/timestamp.h"

namespace bertrain {

std::string iso_timestamp(std::time_t t) {
  std::tm local{};
  ::localtime_r(&t, &local);
  char text[40];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S%z", &local);  // offset as +hhmm
  std::string out = text;
  // ISO 8601's extended format writes the offset +hh:mm, as the date and time have their separators.
  if (out.size() >= 5) out.insert(out.size() - 2, ":");
  return out;
}

std::string iso_timestamp_now() { return iso_timestamp(std::time(nullptr)); }

}  // namespace bertrain

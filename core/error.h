// The one exception type of bertrain and the always-on precondition checks.
// Every failure carries what went wrong and where (file:line); main() prints it on one line.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace bertrain {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Builds "message [file:line]" and throws Error. Out of line so the macros stay small.
[[noreturn]] void throw_error(const char* file, int line, const std::string& message);

}  // namespace bertrain

// BERTRAIN_CHECK(cond, a << b << c): throws bertrain::Error with the streamed message when cond is false.
// Always on (never compiled out): these guard user input and shapes, not just programming errors.
#define BERTRAIN_CHECK(cond, message)                                   \
  do {                                                                  \
    if (!(cond)) {                                                      \
      std::ostringstream bertrain_check_os_;                            \
      bertrain_check_os_ << message;                                    \
      ::bertrain::throw_error(__FILE__, __LINE__, bertrain_check_os_.str()); \
    }                                                                   \
  } while (0)

#define BERTRAIN_FAIL(message) BERTRAIN_CHECK(false, message)

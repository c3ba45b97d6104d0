// expect_error(f, {fragments}): f must throw bertrain::Error whose message is one line (main() prints it as
// one) holding every fragment (the flag, field or value the user has to fix). Shared by the suites whose
// errors are checked by fragment.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <string>

#include "core/error.h"

namespace bertrain::testing {

inline void expect_error(const std::function<void()>& f, std::initializer_list<const char*> fragments) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing '" << *fragments.begin() << "'";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
    for (const char* fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos) << "'" << fragment << "' not in: " << message;
    }
  }
}

// The same with one fragment.
inline void expect_error(const std::function<void()>& f, const std::string& fragment) {
  expect_error(f, {fragment.c_str()});
}

}  // namespace bertrain::testing

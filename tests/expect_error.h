// Test helper: a call that must fail with bertrain::Error, its message naming what was wrong.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/error.h"

namespace bertrain::testing {

// Runs `f`; a failure unless it throws Error whose message contains `fragment`.
inline void expect_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

}  // namespace bertrain::testing

// Shared by the CUDA model suites: comparisons of a whole model's outputs and gradients against the CPU.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

#include "core/param_store.h"
#include "tests/tolerance.h"

namespace bertrain::testing {

inline double max_abs(const float* v, std::size_t n) {
  double m = 0;
  for (std::size_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(std::abs(v[i])));
  return m;
}

// Every gradient tensor of `got` against `ref` (both in `layout`): |got − ref| ≤ scaled_atol·max|ref of the
// tensor| + 1e-9 + rtol·|ref|. The key bias's gradient is zero in exact arithmetic (softmax ignores a constant
// added to a row of scores), so only rounding noise: it is scaled by the key weight's gradient, as in
// test_golden.
inline void expect_gradients_match(const ParamLayout& layout, const float* got, const float* ref, double scaled_atol,
                                   double rtol) {
  const std::string key_bias = ".attention.self.key.bias";
  for (const ParamEntry& e : layout.entries()) {
    const bool is_key_bias = e.name.size() > key_bias.size() &&
                             e.name.compare(e.name.size() - key_bias.size(), key_bias.size(), key_bias) == 0;
    const ParamEntry& scale = is_key_bias ? layout.at(e.name.substr(0, e.name.size() - 4) + "weight") : e;
    const double atol = scaled_atol * max_abs(ref + scale.offset, scale.numel) + 1e-9;
    EXPECT_TRUE(all_close("grad." + e.name, got + e.offset, ref + e.offset, e.numel, atol, rtol));
  }
}

}  // namespace bertrain::testing

// Counts as people write them in messages: "1 row", "2 rows", "0 epochs".
#pragma once

#include <string>

namespace bertrain {

// `n` and `noun`, with an "s" unless n is 1 (the nouns bertrain counts take a plain "s").
inline std::string count_of(long long n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

}  // namespace bertrain

// Shared helpers for the libFuzzer targets: a per-process scratch file for parsers that only read paths, and
// the test of what the dataset readers accept as text.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "data/utf8.h"

namespace bertrain_fuzz {

inline bool valid_utf8(const std::string& s) {
  for (std::size_t i = 0; i < s.size();) {
    bool valid = true;
    i += bertrain::utf8_sequence(s.data() + i, s.size() - i, &valid);
    if (!valid) return false;
  }
  return true;
}

// What the dataset readers accept (data/chunked_input.h): valid UTF-8 without a NUL byte.
inline bool is_text(const std::string& s) { return s.find('\0') == std::string::npos && valid_utf8(s); }

// Writes `data` to this process's scratch file (in $TMPDIR or /tmp) and returns its path. The file is
// rewritten for every input, so parallel fuzzing jobs (distinct pids) never share one.
inline const std::string& write_scratch(const char* stem, const uint8_t* data, std::size_t size) {
  static const std::string path = [stem] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/bertrain_" + stem + "_" + std::to_string(getpid());
  }();
  static const bool registered = [] { return std::atexit([] { std::remove(path.c_str()); }) == 0; }();
  (void)registered;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();  // the harness itself is broken: not a parser finding
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace bertrain_fuzz

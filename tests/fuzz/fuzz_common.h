// Shared helpers for the libFuzzer targets: a per-process scratch file for parsers that only read paths.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace bertrain_fuzz {

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

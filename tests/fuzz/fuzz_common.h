// Shared helpers for the libFuzzer targets: a per-process scratch file for parsers that only read paths, and
// the test of what the dataset readers accept as text.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/utf8.h"
#include "data/tokenizer.h"

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

// This process's scratch path for `stem`, in $TMPDIR or /tmp: parallel fuzzing jobs (distinct pids) never share one.
inline std::string scratch_path(const char* stem) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/bertrain_" + stem + "_" + std::to_string(getpid());
}

// Writes `data` to this process's scratch file and returns its path. The file is rewritten for every input.
inline const std::string& write_scratch(const char* stem, const uint8_t* data, std::size_t size) {
  static const std::string path = scratch_path(stem);
  static const bool registered = [] { return std::atexit([] { std::remove(path.c_str()); }) == 0; }();
  (void)registered;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();  // the harness itself is broken: not a parser finding
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

// What every encoding must be (__builtin_trap otherwise): 2 to max_length ids, all in [0, vocab_size), the first
// the template's cls_id and the last its sep_id.
inline void check_framed(const bertrain::Tokenizer& tokenizer, const bertrain::Encoding& e, int max_length) {
  if (e.ids.size() < 2 || e.ids.size() > static_cast<std::size_t>(max_length)) __builtin_trap();
  if (e.ids.front() != tokenizer.cls_id() || e.ids.back() != tokenizer.sep_id()) __builtin_trap();
  for (int32_t id : e.ids) {
    if (id < 0 || id >= tokenizer.vocab_size()) __builtin_trap();
  }
}

}  // namespace bertrain_fuzz

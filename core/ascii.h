// ASCII-only text helpers for protocols and identifiers (URI schemes, HTTP header names, file formats), where case
// and digits are ASCII's whatever the locale.
#pragma once

#include <string>

namespace bertrain {

// `s` with 'A'..'Z' turned to 'a'..'z' and every other byte kept.
inline std::string ascii_lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

// The value of hexadecimal digit `c` (either case), -1 for any other byte.
inline int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace bertrain

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

// `s` without the bytes of `spaces` at either end; by default ASCII's white space (space, \t, \n, \v, \f, \r).
inline std::string ascii_trim(const std::string& s, const char* spaces = " \t\n\v\f\r") {
  const std::size_t begin = s.find_first_not_of(spaces);
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(spaces) - begin + 1);
}

// The value of hexadecimal digit `c` (either case), -1 for any other byte.
inline int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace bertrain

// UTF-8 sequences and escaping (see utf8.h).
#include "core/utf8.h"

#include <cstdio>

namespace bertrain {

namespace {

bool in_range(unsigned char b, unsigned char lo, unsigned char hi) { return b >= lo && b <= hi; }

// Allowed range of the first continuation byte after lead byte `lead`, and the number of continuation
// bytes; the narrower first ranges exclude overlong forms, surrogates and code points above U+10FFFF
// (Unicode Table 3-7). Returns false for bytes that can never start a sequence.
bool utf8_lead(unsigned char lead, int* continuations, unsigned char* lo, unsigned char* hi) {
  *lo = 0x80, *hi = 0xBF;
  if (in_range(lead, 0xC2, 0xDF)) {
    *continuations = 1;
  } else if (in_range(lead, 0xE0, 0xEF)) {
    *continuations = 2;
    if (lead == 0xE0) *lo = 0xA0;
    if (lead == 0xED) *hi = 0x9F;
  } else if (in_range(lead, 0xF0, 0xF4)) {
    *continuations = 3;
    if (lead == 0xF0) *lo = 0x90;
    if (lead == 0xF4) *hi = 0x8F;
  } else {
    return false;
  }
  return true;
}

}  // namespace

// A maximal subpart is the longest prefix of a well-formed sequence (Python's errors="replace" and the WHATWG
// decoder emit one U+FFFD for each).
std::size_t utf8_sequence(const char* p, std::size_t n, bool* valid) {
  const auto lead = static_cast<unsigned char>(p[0]);
  *valid = true;
  if (lead < 0x80) return 1;
  int continuations = 0;
  unsigned char lo = 0, hi = 0;
  if (!utf8_lead(lead, &continuations, &lo, &hi)) {
    *valid = false;
    return 1;
  }
  std::size_t length = 1;
  for (int k = 0; k < continuations; ++k) {
    if (length >= n || !in_range(static_cast<unsigned char>(p[length]), lo, hi)) {
      *valid = false;
      return length;
    }
    ++length;
    lo = 0x80, hi = 0xBF;  // only the first continuation has a narrowed range
  }
  return length;
}

bool is_valid_utf8(const std::string& text) {
  for (std::size_t i = 0; i < text.size();) {
    bool valid = false;
    i += utf8_sequence(text.data() + i, text.size() - i, &valid);
    if (!valid) return false;
  }
  return true;
}

std::string escape_for_message(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  auto escape = [&out](const char* p, std::size_t n) {
    char hex[5];
    for (std::size_t k = 0; k < n; ++k) {
      std::snprintf(hex, sizeof hex, "\\x%02X", static_cast<unsigned char>(p[k]));
      out += hex;
    }
  };
  for (std::size_t i = 0; i < text.size();) {
    bool valid = true;
    const std::size_t length = utf8_sequence(text.data() + i, text.size() - i, &valid);
    const auto lead = static_cast<unsigned char>(text[i]);
    const bool control = lead < 0x20 || lead == 0x7F ||
                         (lead == 0xC2 && length == 2 && static_cast<unsigned char>(text[i + 1]) < 0xA0);
    if (valid && !control) {
      out.append(text, i, length);
    } else {
      escape(text.data() + i, length);
    }
    i += length;
  }
  return out;
}

}  // namespace bertrain

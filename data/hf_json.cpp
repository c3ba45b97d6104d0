// tokenizer.json's numbers as the Rust tokenizers package reads them (see hf_json.h).
#include "data/hf_json.h"

#include <cstdint>
#include <cstdlib>
#include <limits>

namespace bertrain {
namespace hf {

namespace {

// 1e0 .. 1e308, each correctly rounded (serde_json's POW10 table).
const double* powers_of_ten() {
  static const double* table = [] {
    static double p[309];
    for (int k = 0; k <= 308; ++k) p[k] = std::strtod(("1e" + std::to_string(k)).c_str(), nullptr);
    return p;
  }();
  return table;
}

// Whether significand * 10 + digit passes 2^64 - 1.
bool overflows(uint64_t significand, unsigned digit) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  return significand >= kMax / 10 && (significand > kMax / 10 || digit > kMax % 10);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// serde_json's f64_from_parts: significand · 10^exponent, by one multiplication or division where the power is in
// the table, dividing by 1e308 first while it is not.
double from_parts(bool negative, uint64_t significand, long exponent) {
  const double* pow10 = powers_of_ten();
  double f = static_cast<double>(significand);  // rounds to nearest, ties to even, as Rust's `as`
  for (;;) {
    const long magnitude = exponent < 0 ? -exponent : exponent;
    if (magnitude <= 308) {
      if (exponent >= 0) {
        f *= pow10[magnitude];
      } else {
        f /= pow10[magnitude];
      }
      break;
    }
    if (f == 0.0) break;
    if (exponent >= 0) {
      f = std::numeric_limits<double>::infinity();
      break;
    }
    f /= 1e308;
    exponent += 308;
  }
  return negative ? -f : f;
}

}  // namespace

double read_json_number_as_tokenizers(const std::string& text) {
  std::size_t i = 0;
  const bool negative = i < text.size() && text[i] == '-';
  if (negative) ++i;
  uint64_t significand = 0;
  long exponent = 0;
  // Integer digits; past 64 bits each further one only raises the exponent.
  for (; i < text.size() && is_digit(text[i]); ++i) {
    const unsigned digit = static_cast<unsigned>(text[i] - '0');
    if (overflows(significand, digit)) {
      for (; i < text.size() && is_digit(text[i]); ++i) ++exponent;
      break;
    }
    significand = significand * 10 + digit;
  }
  // Fraction digits; past 64 bits the rest are dropped.
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && is_digit(text[i]); ++i) {
      const unsigned digit = static_cast<unsigned>(text[i] - '0');
      if (overflows(significand, digit)) {
        for (; i < text.size() && is_digit(text[i]); ++i) {
        }
        break;
      }
      significand = significand * 10 + digit;
      --exponent;
    }
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool negative_exponent = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) negative_exponent = text[i++] == '-';
    long e = 0;
    constexpr long kMax = std::numeric_limits<int32_t>::max();
    for (; i < text.size() && is_digit(text[i]); ++i) {
      const long digit = text[i] - '0';
      // An exponent past 32 bits: zero, or out of range (serde_json: 0.0, or an error; here ±infinity).
      if (e >= kMax / 10 && (e > kMax / 10 || digit > kMax % 10)) {
        const double far = negative_exponent || significand == 0 ? 0.0 : std::numeric_limits<double>::infinity();
        return negative ? -far : far;
      }
      e = e * 10 + digit;
    }
    exponent += negative_exponent ? -e : e;
  }
  return from_parts(negative, significand, exponent);
}

}  // namespace hf
}  // namespace bertrain

#include "tools/report/svg_text.h"

#include <cmath>
#include <cstdio>
#include <algorithm>

namespace bertrain::report {

namespace {

// printf's "%.*e" writes "5e-05"; a reader expects "5e-5".
std::string strip_exponent_zeros(std::string text) {
  const auto e = text.find('e');
  if (e == std::string::npos) return text;
  std::string mantissa = text.substr(0, e), exponent = text.substr(e + 1);
  const bool negative = !exponent.empty() && exponent[0] == '-';
  if (!exponent.empty() && (exponent[0] == '-' || exponent[0] == '+')) exponent.erase(0, 1);
  while (exponent.size() > 1 && exponent[0] == '0') exponent.erase(0, 1);
  return mantissa + "e" + (negative ? "-" : "") + exponent;
}

std::string printf_double(const char* format, int precision, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, precision, value);
  return text;
}

// Advance widths of ASCII ' ' to '~' in DejaVu Sans, in 1/2048 em (the font's hmtx table).
constexpr unsigned short kDejaVuWidths[95] = {
    651,  821,  942,  1716, 1303, 1946, 1597, 563,  799,  799,  1024, 1716, 651,  739,  651,  690,  1303, 1303, 1303,
    1303, 1303, 1303, 1303, 1303, 1303, 1303, 690,  690,  1716, 1716, 1716, 1087, 2048, 1401, 1405, 1430, 1577, 1294,
    1178, 1587, 1540, 604,  604,  1343, 1141, 1767, 1532, 1612, 1235, 1612, 1423, 1300, 1251, 1499, 1401, 2025, 1403,
    1251, 1403, 799,  690,  799,  1716, 1024, 1024, 1255, 1300, 1126, 1300, 1260, 721,  1300, 1298, 569,  569,  1186,
    569,  1995, 1298, 1253, 1300, 1300, 842,  1067, 803,  1298, 1212, 1675, 1212, 1212, 1075, 1303, 690,  1303, 1716};

}  // namespace

double text_width(std::string_view text, double font_px) {
  double ems = 0;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c & 0xC0) == 0x80) continue;  // a UTF-8 continuation byte: no glyph of its own
    ems += c >= ' ' && c <= '~' ? kDejaVuWidths[c - ' '] / 2048.0 : 1.0;
  }
  return ems * font_px;
}

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string format_tick(double value, double step) {
  if (std::fabs(value) < step * 1e-9) value = 0;  // -0 and 1e-17 from summed steps print as 0
  if (value != 0 && std::fabs(value) < 1e-3) {
    // Enough significant digits to separate ticks `step` apart: 1 plus the decades between value and step.
    const int digits = std::max(0, static_cast<int>(std::floor(std::log10(std::fabs(value)))) -
                                       static_cast<int>(std::floor(std::log10(step) + 1e-9)));
    return strip_exponent_zeros(printf_double("%.*e", digits, value));
  }
  const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
  return printf_double("%.*f", decimals, value);
}

std::string format_value(double value) {
  if (!std::isfinite(value)) return "n/a";
  if (std::fabs(value) >= 1000) return printf_double("%.*f", 0, value);  // 12346, not 1.235e+04
  if (value == 0 || std::fabs(value) >= 1e-3) return printf_double("%.*g", 4, value);
  return format_scientific(value);
}

std::string format_scientific(double value) {
  std::string text = printf_double("%.*e", 3, value);
  const auto e = text.find('e');
  std::string mantissa = text.substr(0, e);
  while (mantissa.back() == '0') mantissa.pop_back();
  if (mantissa.back() == '.') mantissa.pop_back();
  return strip_exponent_zeros(mantissa + text.substr(e));
}

std::string format_fixed(double value, int decimals) {
  return std::isfinite(value) ? printf_double("%.*f", decimals, value) : "n/a";
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds)) return "n/a";
  if (seconds < 120) return format_fixed(seconds, 1) + " s";
  if (seconds < 7200) return format_fixed(seconds / 60, 1) + " min";
  return format_fixed(seconds / 3600, 2) + " h";
}

std::string format_px(double pixels) {
  std::string text = printf_double("%.*f", 2, pixels);
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return text == "-0" ? "0" : text;
}

std::string format_exact(double value) { return printf_double("%.*g", 17, value); }

}  // namespace bertrain::report

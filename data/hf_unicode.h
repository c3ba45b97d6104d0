// Character classes and UTF-8 helpers with the meanings Hugging Face tokenizers (Rust) gives them, over
// utf8proc's Unicode data, for the tokenizer.json components (data/hf_*.h). Rust's tables can be of another
// Unicode version than utf8proc's: code points assigned in between classify differently (documented where it
// matters, in data/hf_tokenizer.h).
#pragma once

#include <utf8proc.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace bertrain {
namespace hf {

// Decodes the code point at s[0, n) (n >= 1, valid UTF-8: encode() sanitizes its input) into *len bytes.
inline int32_t decode_utf8(const char* s, std::size_t n, std::size_t* len) {
  const unsigned char b = static_cast<unsigned char>(s[0]);
  if (b < 0x80) {
    *len = 1;
    return b;
  }
  utf8proc_int32_t c = 0;
  const utf8proc_ssize_t l =
      utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s), static_cast<utf8proc_ssize_t>(n), &c);
  if (l <= 0) {
    *len = 1;
    return 0xFFFD;
  }
  *len = static_cast<std::size_t>(l);
  return c;
}

inline void append_utf8(int32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
    return;
  }
  utf8proc_uint8_t buf[4];
  const utf8proc_ssize_t len = utf8proc_encode_char(c, buf);
  out->append(reinterpret_cast<const char*>(buf), static_cast<std::size_t>(len));
}

inline utf8proc_category_t category(int32_t c) { return utf8proc_category(c); }

// Rust's char::is_whitespace: the White_Space property (also regex \s).
inline bool is_whitespace(int32_t c) {
  if (c < 0x80) return c == ' ' || (c >= '\t' && c <= '\r');
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

inline bool is_letter(int32_t c) {  // \p{L}
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  const utf8proc_category_t k = category(c);
  return k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO;
}

inline bool is_number(int32_t c) {  // \p{N}, Rust's char::is_numeric
  if (c < 0x80) return c >= '0' && c <= '9';
  const utf8proc_category_t k = category(c);
  return k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO;
}

inline bool is_mark(int32_t c) {  // M*: unicode-normalization's is_combining_mark
  if (c < 0x300) return false;
  const utf8proc_category_t k = category(c);
  return k >= UTF8PROC_CATEGORY_MN && k <= UTF8PROC_CATEGORY_ME;
}

inline bool is_ascii_punct(int32_t c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
}

// ASCII punctuation or P*: BertPreTokenizer's and Punctuation's test.
inline bool is_punctuation(int32_t c) {
  if (c < 0x80) return is_ascii_punct(c);
  const utf8proc_category_t k = category(c);
  return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

// BertNormalizer's control test (besides \t \n \r): Rust's unicode_categories is_other, which is Cc, Cf, Cs and
// Co only: its tables list no Cn, so unassigned code points are kept (the slow Python BertTokenizer drops them).
inline bool is_other(int32_t c) {
  const utf8proc_category_t k = category(c);
  return k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CS ||
         k == UTF8PROC_CATEGORY_CO;
}

// Regex \w (Unicode): Alphabetic (letters, Nl and Other_Alphabetic), marks, Nd, Pc, Join_Control. The
// Other_Alphabetic characters outside the letters and marks are the circled and squared Latin letters (So), listed
// here since utf8proc has no such property.
inline bool is_word_char(int32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  if (c == 0x200C || c == 0x200D) return true;
  if ((c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) || (c >= 0x1F150 && c <= 0x1F169) ||
      (c >= 0x1F170 && c <= 0x1F189)) {
    return true;  // Ⓐ..ⓩ, 🄰..🅉, 🅐..🅩, 🅰..🆉
  }
  const utf8proc_category_t k = category(c);
  return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) || (k >= UTF8PROC_CATEGORY_MN && k <= UTF8PROC_CATEGORY_ME) ||
         k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_PC;
}

inline bool all_ascii(const char* s, std::size_t n) {
  unsigned char acc = 0;
  for (std::size_t i = 0; i < n; ++i) acc |= static_cast<unsigned char>(s[i]);
  return acc < 0x80;
}

}  // namespace hf
}  // namespace bertrain

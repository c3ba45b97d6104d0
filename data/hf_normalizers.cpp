// Rust semantics kept here, per component (tokenizers/src/normalizers/):
//  - BertNormalizer: clean_text drops U+0000, U+FFFD and C* (but \t \n \r) and maps White_Space to ' ';
//    handle_chinese_chars puts ' ' around the CJK blocks (the fourth supplementary block from U+2B920, as
//    Rust); strip_accents (default: lowercase) is NFD then dropping Mn; lowercase is per character (full
//    mapping, so U+0130 -> "i\u0307"; no final-sigma rule). Order: clean, CJK, strip accents, lowercase.
//  - StripAccents drops every M* character (Mn, Mc, Me), unlike BertNormalizer's Mn.
//  - Strip trims White_Space; Prepend prepends only to a non-empty string.
//  - Replace: a String pattern, or a Regex one that is a literal or one character repeated (ReplaceRun below).
//  - Precompiled: see PrecompiledNormalizer below.
#include "data/hf_normalizers.h"

#include <utf8proc.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <utility>

#include "core/scratch.h"
#include "data/base64.h"
#include "data/hf_unicode.h"

namespace bertrain {
namespace hf {

namespace {

bool is_cjk(int32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// Rust's char::to_lowercase: the simple mapping but for U+0130, whose full lowercase is two characters.
void append_lower(int32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c));
  } else if (c == 0x130) {
    out->append("i\xCC\x87");
  } else {
    append_utf8(utf8proc_tolower(c), out);
  }
}

// *s lowercased character by character (append_lower), through *tmp.
void lowercase(std::string* s, std::string* tmp) {
  tmp->clear();
  for (std::size_t i = 0; i < s->size();) {
    std::size_t len = 0;
    append_lower(decode_utf8(s->data() + i, s->size() - i, &len), tmp);
    i += len;
  }
  std::swap(*s, *tmp);
}

struct UnicodeScratch {
  std::vector<utf8proc_int32_t> cps;
};

UnicodeScratch& unicode_scratch() {
  thread_local UnicodeScratch s;
  return s;
}

// Unicode normalization of `in` (valid UTF-8) into *out with utf8proc options (DECOMPOSE / COMPOSE / COMPAT).
void unicode_normalize(const std::string& in, int options, std::string* out) {
  out->clear();
  std::vector<utf8proc_int32_t>& cps = unicode_scratch().cps;
  const auto flags = static_cast<utf8proc_option_t>(options | UTF8PROC_STABLE);
  // Each character decomposed alone: utf8proc_decompose would also put the marks in canonical order, but by
  // swapping neighbours, which takes quadratic time in a run of marks (a 160 KB run took 14 s; a request body can
  // hold that). The order is made below instead, by a stable sort of each run.
  cps.clear();
  utf8proc_int32_t one[32];  // the longest decomposition (U+FDFA, compatibility) is 18 code points
  int boundclass = UTF8PROC_BOUNDCLASS_START;
  for (std::size_t i = 0; i < in.size();) {
    std::size_t len = 0;
    const int32_t c = decode_utf8(in.data() + i, in.size() - i, &len);
    i += len;
    const utf8proc_ssize_t n = utf8proc_decompose_char(c, one, 32, flags, &boundclass);
    if (n < 0 || n > 32) {  // cannot happen on valid UTF-8; keep the text as it is
      *out = in;
      return;
    }
    cps.insert(cps.end(), one, one + n);
  }
  // Canonical ordering (Unicode 3.11): the marks of each run of non-starters sorted by combining class, those of
  // one class kept in their order.
  const auto combining_class = [](utf8proc_int32_t c) { return utf8proc_get_property(c)->combining_class; };
  for (std::size_t i = 0; i < cps.size();) {
    if (combining_class(cps[i]) == 0) {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < cps.size() && combining_class(cps[end]) != 0) ++end;
    std::stable_sort(cps.begin() + static_cast<long>(i), cps.begin() + static_cast<long>(end),
                     [&](utf8proc_int32_t a, utf8proc_int32_t b) { return combining_class(a) < combining_class(b); });
    i = end;
  }
  auto n = static_cast<utf8proc_ssize_t>(cps.size());
  if (options & UTF8PROC_COMPOSE) n = utf8proc_normalize_utf32(cps.data(), n, flags);
  for (utf8proc_ssize_t i = 0; i < n; ++i) append_utf8(cps[static_cast<std::size_t>(i)], out);
  release_if_large(cps);
}

class BertNormalizer : public Normalizer {
 public:
  BertNormalizer(bool clean, bool cjk, bool strip, bool lower) : clean_(clean), cjk_(cjk), strip_(strip), lower_(lower) {}
  void normalize(std::string* s, std::string* tmp) const override {
    if (all_ascii(s->data(), s->size())) {
      // ASCII: no CJK, no accents; controls vanish, \t \n \r become ' '.
      tmp->clear();
      for (const char ch : *s) {
        unsigned char b = static_cast<unsigned char>(ch);
        if (clean_) {
          // \v \f are Cc: removed before the whitespace mapping sees them, as in Rust.
          if (b == '\t' || b == '\n' || b == '\r') b = ' ';
          else if (b < 0x20 || b == 0x7F) continue;
        }
        if (lower_ && b >= 'A' && b <= 'Z') b = static_cast<unsigned char>(b + ('a' - 'A'));
        tmp->push_back(static_cast<char>(b));
      }
      std::swap(*s, *tmp);
      return;
    }
    tmp->clear();
    for (std::size_t i = 0; i < s->size();) {
      std::size_t len = 0;
      const int32_t c = decode_utf8(s->data() + i, s->size() - i, &len);
      i += len;
      int32_t d = c;
      if (clean_) {
        if (c == 0 || c == 0xFFFD) continue;
        // Removal first (U+0085 is Cc and White_Space: removed), then the whitespace mapping.
        if (c != '\t' && c != '\n' && c != '\r' && is_other(c)) continue;
        if (c == '\t' || c == '\n' || c == '\r' || is_whitespace(c)) d = ' ';
      }
      if (cjk_ && is_cjk(d)) {
        tmp->push_back(' ');
        append_utf8(d, tmp);
        tmp->push_back(' ');
      } else {
        append_utf8(d, tmp);
      }
    }
    std::swap(*s, *tmp);
    if (strip_) {
      unicode_normalize(*s, UTF8PROC_DECOMPOSE, tmp);
      s->clear();
      for (std::size_t i = 0; i < tmp->size();) {
        std::size_t len = 0;
        const int32_t c = decode_utf8(tmp->data() + i, tmp->size() - i, &len);
        if (c < 0x300 || category(c) != UTF8PROC_CATEGORY_MN) s->append(*tmp, i, len);
        i += len;
      }
    }
    if (lower_) lowercase(s, tmp);
  }

 private:
  bool clean_, cjk_, strip_, lower_;
};

class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(int options) : options_(options) {}
  void normalize(std::string* s, std::string* tmp) const override {
    if (all_ascii(s->data(), s->size())) return;  // ASCII is in every normal form
    unicode_normalize(*s, options_, tmp);
    std::swap(*s, *tmp);
  }

 private:
  int options_;
};

class Lowercase : public Normalizer {
 public:
  void normalize(std::string* s, std::string* tmp) const override { lowercase(s, tmp); }
};

class StripAccents : public Normalizer {
 public:
  void normalize(std::string* s, std::string* tmp) const override {
    if (all_ascii(s->data(), s->size())) return;
    tmp->clear();
    for (std::size_t i = 0; i < s->size();) {
      std::size_t len = 0;
      const int32_t c = decode_utf8(s->data() + i, s->size() - i, &len);
      if (!is_mark(c)) tmp->append(*s, i, len);
      i += len;
    }
    std::swap(*s, *tmp);
  }
};

class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string* s, std::string*) const override {
    std::size_t begin = 0, end = s->size();
    if (left_) {
      while (begin < end) {
        std::size_t len = 0;
        if (!is_whitespace(decode_utf8(s->data() + begin, end - begin, &len))) break;
        begin += len;
      }
    }
    if (right_) {
      while (end > begin) {
        std::size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>((*s)[start]) & 0xC0) == 0x80) --start;
        std::size_t len = 0;
        if (!is_whitespace(decode_utf8(s->data() + start, end - start, &len))) break;
        end = start;
      }
    }
    s->erase(end);
    s->erase(0, begin);
  }

 private:
  bool left_, right_;
};

class Replace : public Normalizer {
 public:
  Replace(std::string pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string* s, std::string* tmp) const override {
    if (pattern_.empty() || s->find(pattern_) == std::string::npos) return;
    tmp->clear();
    std::size_t from = 0;
    for (std::size_t pos = s->find(pattern_); pos != std::string::npos; pos = s->find(pattern_, from)) {
      tmp->append(*s, from, pos - from);
      tmp->append(content_);
      from = pos + pattern_.size();
    }
    tmp->append(*s, from, std::string::npos);
    std::swap(*s, *tmp);
  }

 private:
  std::string pattern_, content_;
};

// A Regex pattern of one character repeated, as transformers' SentencePiece converters write (" {2,}": runs of
// two spaces or more): leftmost-longest runs of `unit` of min..max repeats (max 0: unbounded) become `content`.
// A run of more than max repeats is matched max at a time; a shorter rest than min stays as it is.
class ReplaceRun : public Normalizer {
 public:
  ReplaceRun(std::string unit, std::size_t min, std::size_t max, std::string content)
      : unit_(std::move(unit)), min_(min), max_(max), content_(std::move(content)) {}
  void normalize(std::string* s, std::string* tmp) const override {
    std::size_t pos = s->find(unit_);
    if (pos == std::string::npos) return;
    tmp->clear();
    std::size_t from = 0;
    for (; pos != std::string::npos; pos = s->find(unit_, from)) {
      std::size_t repeats = 1;
      while (s->compare(pos + repeats * unit_.size(), unit_.size(), unit_) == 0) ++repeats;
      tmp->append(*s, from, pos - from);
      from = pos;
      for (std::size_t left = repeats; left >= min_ && left > 0;) {
        const std::size_t take = max_ == 0 ? left : std::min(left, max_);
        tmp->append(content_);
        from += take * unit_.size();
        left -= take;
      }
      tmp->append(*s, from, pos + repeats * unit_.size() - from);  // a rest shorter than min
      from = pos + repeats * unit_.size();
    }
    tmp->append(*s, from, std::string::npos);
    std::swap(*s, *tmp);
  }

 private:
  std::string unit_;
  std::size_t min_, max_;
  std::string content_;
};

// The Replace normalizer of a {"Regex": ...} pattern: a literal string (no metacharacter) or ReplaceRun's "X+",
// "X{n}", "X{n,}", "X{n,m}" (X one character, or a backslash and a punctuation character, n >= 1); else an Error
// at `pattern`: anything more needs a regex engine.
std::unique_ptr<Normalizer> make_regex_replace(const std::string& regex, const std::string& content,
                                               const JsonAt& pattern) {
  const char* kMeta = "\\^$.|?*+()[]{}";
  if (regex.find_first_of(kMeta) == std::string::npos) return std::make_unique<Replace>(regex, content);
  const auto refuse = [&] {
    pattern.fail("unsupported Replace normalizer pattern: Regex " + json_quote(regex) +
                 " (String patterns, and one character repeated: X+, X{n}, X{n,}, X{n,m})");
  };
  std::size_t i = 0;
  std::string unit;
  if (regex[0] == '\\') {
    if (regex.size() < 2 || !std::ispunct(static_cast<unsigned char>(regex[1]))) refuse();
    unit = regex.substr(1, 1);
    i = 2;
  } else {
    std::size_t length = 1;
    decode_utf8(regex.data(), regex.size(), &length);  // JSON strings are valid UTF-8 (the parser checks)
    unit = regex.substr(0, length);
    if (unit.find_first_of(kMeta) != std::string::npos) refuse();
    i = length;
  }
  const std::string quantifier = regex.substr(std::min(i, regex.size()));
  std::size_t min = 0, max = 0;
  if (quantifier == "+") {
    min = 1;
  } else if (quantifier.size() >= 3 && quantifier.front() == '{' && quantifier.back() == '}') {
    const std::string bounds = quantifier.substr(1, quantifier.size() - 2);
    const std::size_t comma = bounds.find(',');
    const auto number = [&](const std::string& digits) {
      if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos) refuse();
      return static_cast<std::size_t>(std::stoul(digits));
    };
    min = number(bounds.substr(0, comma));
    if (comma == std::string::npos) max = min;
    else if (comma + 1 < bounds.size()) max = number(bounds.substr(comma + 1));
    if (max != 0 && max < min) refuse();
  }
  if (min == 0) refuse();  // no quantifier or another one, or a pattern that matches empty text
  return std::make_unique<ReplaceRun>(unit, min, max, content);
}

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string* s, std::string*) const override {
    if (!s->empty()) s->insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class Sequence : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(std::string* s, std::string* tmp) const override {
    for (const auto& n : parts_) n->normalize(s, tmp);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

// SentencePiece's precompiled_charsmap (spm_precompiled crate): a little-endian u32 byte size of the trie, the
// trie (Darts double array of u32 units), then a pool of NUL-terminated replacement strings the trie's values
// index. Rust's use of it (normalizers/precompiled.rs), kept as is because the models were trained so: per
// extended grapheme cluster, a cluster under 6 bytes is replaced whole when the trie has a key that is a
// prefix of it (the SHORTEST such key's replacement replaces the whole cluster); otherwise each character is
// replaced the same way, or kept.
class PrecompiledNormalizer : public Normalizer {
 public:
  PrecompiledNormalizer(const std::string& blob, const JsonAt& at) {
    if (blob.size() < 4) at.fail("precompiled_charsmap: shorter than its 4-byte header");
    uint32_t trie_bytes = 0;
    for (int i = 3; i >= 0; --i) trie_bytes = (trie_bytes << 8) | static_cast<unsigned char>(blob[static_cast<std::size_t>(i)]);
    if (trie_bytes > blob.size() - 4) at.fail("precompiled_charsmap: trie size " + std::to_string(trie_bytes) + " is past the data");
    units_.resize(trie_bytes / 4);
    for (std::size_t k = 0; k < units_.size(); ++k) {
      uint32_t u = 0;
      for (int i = 3; i >= 0; --i) u = (u << 8) | static_cast<unsigned char>(blob[4 + 4 * k + static_cast<std::size_t>(i)]);
      units_[k] = u;
    }
    pool_ = blob.substr(4 + (trie_bytes / 4) * 4);
    if (units_.empty()) at.fail("precompiled_charsmap: empty trie");
    // Which ASCII bytes start a key: text made only of the others is left as it is without decoding.
    for (int b = 1; b < 128; ++b) {
      const char ch = static_cast<char>(b);
      std::size_t len = 0;
      ascii_mapped_[b] = lookup(&ch, 1, &len) != nullptr || starts_key(static_cast<unsigned char>(b));
    }
    ascii_mapped_[0] = true;
  }

  void normalize(std::string* s, std::string* tmp) const override {
    bool plain = true;
    for (const char ch : *s) {
      const unsigned char b = static_cast<unsigned char>(ch);
      if (b >= 0x80 || ascii_mapped_[b] || b == '\r') {
        plain = false;
        break;
      }
    }
    if (plain) return;
    tmp->clear();
    const std::size_t n = s->size();
    std::size_t i = 0;
    int32_t state = 0;
    std::size_t len = 0;
    int32_t c = n > 0 ? decode_utf8(s->data(), n, &len) : 0;
    while (i < n) {
      // One extended grapheme cluster: [i, j).
      std::size_t j = i + len;
      int32_t next = 0;
      std::size_t next_len = 0;
      int32_t prev = c;
      while (j < n) {
        next = decode_utf8(s->data() + j, n - j, &next_len);
        if (utf8proc_grapheme_break_stateful(prev, next, &state)) break;
        prev = next;
        j += next_len;
      }
      const char* g = s->data() + i;
      const std::size_t glen = j - i;
      std::size_t key_len = 0;
      const char* rep = glen < 6 ? lookup(g, glen, &key_len) : nullptr;
      if (rep != nullptr) {
        tmp->append(rep);
      } else {
        for (std::size_t k = 0; k < glen;) {
          std::size_t cl = 0;
          decode_utf8(g + k, glen - k, &cl);
          const char* r = lookup(g + k, cl, &key_len);
          if (r != nullptr) tmp->append(r);
          else tmp->append(g + k, cl);
          k += cl;
        }
      }
      i = j;
      if (i < n) {  // the state carries on: it was updated by the (prev, next) break decision
        c = next;
        len = next_len;
      }
    }
    std::swap(*s, *tmp);
  }

 private:
  static bool has_leaf(uint32_t u) { return ((u >> 8) & 1) == 1; }
  static uint32_t value(uint32_t u) { return u & ((1u << 31) - 1); }
  static uint32_t label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
  static uint32_t offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

  bool starts_key(unsigned char b) const {
    std::size_t pos = offset(units_[0]) ^ b;
    return pos < units_.size() && label(units_[pos]) == b;
  }

  // The replacement (NUL-terminated in pool_) of the shortest key that is a prefix of s[0, n), or nullptr.
  // Out-of-range positions (a corrupt map) read as "no key".
  const char* lookup(const char* s, std::size_t n, std::size_t* key_len) const {
    std::size_t pos = offset(units_[0]);
    for (std::size_t i = 0; i < n; ++i) {
      const unsigned char c = static_cast<unsigned char>(s[i]);
      if (c == 0) break;
      pos ^= c;
      if (pos >= units_.size()) return nullptr;
      const uint32_t u = units_[pos];
      if (label(u) != c) return nullptr;
      pos ^= offset(u);
      if (pos >= units_.size()) return nullptr;
      if (has_leaf(u)) {
        const uint32_t v = value(units_[pos]);
        if (v >= pool_.size()) return nullptr;
        *key_len = i + 1;
        return pool_.c_str() + v;
      }
    }
    return nullptr;
  }

  std::vector<uint32_t> units_;
  std::string pool_;  // replacement strings, each ended by NUL (c_str() ends the last)
  bool ascii_mapped_[128] = {};
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const JsonAt& at) {
  if (at.json().is_null()) return nullptr;
  const std::string type = at.type();
  if (type == "BertNormalizer") {
    const bool lower = at.get_bool("lowercase", true);
    const bool strip = at.has("strip_accents") ? at.at("strip_accents").boolean() : lower;
    return std::make_unique<BertNormalizer>(at.get_bool("clean_text", true), at.get_bool("handle_chinese_chars", true),
                                            strip, lower);
  }
  if (type == "Sequence") {
    const JsonAt list = at.at("normalizers");
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (std::size_t i = 0; i < list.size(); ++i) {
      auto n = make_normalizer(list.at(i));
      if (n) parts.push_back(std::move(n));
    }
    return std::make_unique<Sequence>(std::move(parts));
  }
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(UTF8PROC_DECOMPOSE);
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(UTF8PROC_COMPOSE);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Strip") return std::make_unique<Strip>(at.get_bool("strip_left", true), at.get_bool("strip_right", true));
  if (type == "Prepend") return std::make_unique<Prepend>(at.at("prepend").str());
  if (type == "Replace") {
    const JsonAt pattern = at.at("pattern");
    if (pattern.has("String")) return std::make_unique<Replace>(pattern.at("String").str(), at.at("content").str());
    if (pattern.has("Regex")) return make_regex_replace(pattern.at("Regex").str(), at.at("content").str(), pattern);
    pattern.fail("Replace pattern: expected {\"String\": ...} or {\"Regex\": ...}");
  }
  if (type == "Precompiled") {
    const JsonAt map = at.at("precompiled_charsmap");
    if (map.json().is_null()) return nullptr;  // tokenizers writes null for an empty map: no normalization
    std::string blob;
    if (!decode_base64(map.str(), &blob)) map.fail("precompiled_charsmap: invalid base64");
    return std::make_unique<PrecompiledNormalizer>(blob, map);
  }
  at.fail("unsupported normalizer type " + json_quote(type) +
          " (supported: BertNormalizer, Sequence, NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, Strip, Replace, "
          "Prepend, Precompiled)");
}

}  // namespace hf
}  // namespace bertrain

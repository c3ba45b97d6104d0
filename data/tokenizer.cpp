// BERT tokenization with the semantics of Hugging Face's slow (pure Python) BertTokenizer, uncased:
// transformers' BertTokenizerLegacy(do_lower_case=True, tokenize_chinese_chars=True, strip_accents=None).
//
// Order of operations, as in the Python original (tokenization_bert_legacy.py):
//  0. the special tokens [CLS] [SEP] [PAD] [UNK] [MASK] are cut out of the text first, by exact match,
//     and map to their ids (PreTrainedTokenizer.tokenize's added-token trie); the pieces in between are
//     tokenized separately;
//  1. _clean_text: drop U+0000, U+FFFD and every category C* character except \t \n \r (C* includes Cn,
//     unassigned, and Co, private use); \t \n \r ' ' and category Zs become ' ';
//  2. _tokenize_chinese_chars: ' ' around every code point of the CJK blocks listed in is_cjk();
//  3. NFC of the whole text: skipped here. It cannot change the result: the only later steps that see it
//     are lower() (which maps canonically equivalent strings to canonically equivalent strings, final
//     sigma included, since cased / case-ignorable status survives composition) and NFD, which undoes
//     it. The per-code-point sweep (tests/reference/make_token_fixtures.py --sweep) and the combining-
//     mark, Hangul and kana fixtures check this;
//  4. whitespace_tokenize: str.split(), i.e. Python whitespace; after step 1 only ' ', U+2028 and U+2029
//     are left of it;
//  5. per token: str.lower() (full lowercase: U+0130 -> "i" U+0307; Σ -> ς in final-sigma context),
//     then NFD (full canonical decomposition and canonical ordering) and drop category Mn;
//  6. _run_split_on_punc: every punctuation character (ASCII 33-47, 58-64, 91-96, 123-126, category P*)
//     is a token of its own; empty tokens vanish;
//  7. WordPiece: a token longer than 100 code points is [UNK]; otherwise greedy longest match from the
//     left, the first piece from the whole vocabulary, later pieces from the "##" tokens; a position where
//     nothing matches makes the whole token one [UNK].
// Where the fast (Rust) tokenizer differs from the slow one, this follows the slow one: tokenizers'
// BertNormalizer lowercases character by character (no final sigma), keeps unassigned code points, and
// its CJK list starts the fourth supplementary block at U+2B920 instead of U+2B820.
//
// Unicode data: utf8proc (its Unicode version, 15.0 for 2.8, can be newer than the reference Python's:
// code points assigned in between are kept here and dropped as unassigned there). utf8proc has no
// Cased / Case_Ignorable / Word_Break properties, which only the final-sigma rule needs; see below.
//
// Speed: text is processed in place through reusable thread-local buffers, an all-ASCII piece takes a
// byte-level path without decoding, and WordPiece walks two byte tries (whole vocabulary, "##" tokens)
// instead of hashing every candidate substring, so the longest match costs one pass over the token.
#include "data/tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/error.h"
#include "core/files.h"
#include "core/scratch.h"

namespace bertrain {

namespace {

constexpr int kMaxInputCharsPerWord = 100;
constexpr const char* kSpecialTokens[] = {"[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"};

bool is_ascii_punct(unsigned c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
}

bool is_cjk(int32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool is_category_c(utf8proc_category_t cat) {
  return cat == UTF8PROC_CATEGORY_CN || cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF ||
         cat == UTF8PROC_CATEGORY_CS || cat == UTF8PROC_CATEGORY_CO;
}

bool is_punct(int32_t c) {
  if (c < 0x80) return is_ascii_punct(static_cast<unsigned>(c));
  const utf8proc_category_t cat = utf8proc_category(c);
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

// Python's str.isspace(): category Zs or bidirectional class WS, B or S.
bool is_python_space(int32_t c) {
  if (c < 0x80) return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
  const utf8proc_property_t* p = utf8proc_get_property(c);
  return p->category == UTF8PROC_CATEGORY_ZS || p->bidi_class == UTF8PROC_BIDI_CLASS_WS ||
         p->bidi_class == UTF8PROC_BIDI_CLASS_B || p->bidi_class == UTF8PROC_BIDI_CLASS_S;
}

// Final sigma (Python's handle_capital_sigma): Σ lowercases to ς when preceded by a cased character
// (case-ignorable ones skipped) and not followed by one (case-ignorable ones skipped).
// Case_Ignorable (DerivedCoreProperties.txt) = Mn | Me | Cf | Lm | Sk | Word_Break in {MidLetter,
// MidNumLet, Single_Quote}; utf8proc has no Word_Break property, so those 17 code points are listed.
bool is_case_ignorable(int32_t c) {
  switch (c) {
    case 0x0027:                                                        // Single_Quote
    case 0x002E: case 0x2018: case 0x2019: case 0x2024: case 0xFE52:    // MidNumLet
    case 0xFF07: case 0xFF0E:
    case 0x003A: case 0x00B7: case 0x0387: case 0x055F: case 0x05F4:    // MidLetter
    case 0x2027: case 0xFE13: case 0xFE55: case 0xFF1A:
      return true;
    default:
      break;
  }
  const utf8proc_category_t cat = utf8proc_category(c);
  return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_ME || cat == UTF8PROC_CATEGORY_CF ||
         cat == UTF8PROC_CATEGORY_LM || cat == UTF8PROC_CATEGORY_SK;
}

// Cased = Lu | Ll | Lt | Other_Uppercase | Other_Lowercase. utf8proc has the categories and the case
// mappings; Other_* characters that are neither case-ignorable (checked first by the rule) nor have a
// case mapping are listed (PropList.txt): ª º and the squared / negative circled / negative squared
// Latin capitals.
bool is_cased(int32_t c) {
  const utf8proc_category_t cat = utf8proc_category(c);
  if (cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT) return true;
  if (utf8proc_tolower(c) != c || utf8proc_toupper(c) != c || utf8proc_totitle(c) != c) return true;
  return c == 0xAA || c == 0xBA || (c >= 0x1F130 && c <= 0x1F149) || (c >= 0x1F150 && c <= 0x1F169) ||
         (c >= 0x1F170 && c <= 0x1F189);
}

bool final_sigma(const int32_t* cps, std::size_t n, std::size_t i) {
  std::size_t j = i;
  while (j > 0 && is_case_ignorable(cps[j - 1])) --j;
  if (j == 0 || !is_cased(cps[j - 1])) return false;
  j = i + 1;
  while (j < n && is_case_ignorable(cps[j])) ++j;
  return j == n || !is_cased(cps[j]);
}

void append_utf8(int32_t c, std::string* out) {
  utf8proc_uint8_t buf[4];
  const utf8proc_ssize_t len = utf8proc_encode_char(c, buf);
  out->append(reinterpret_cast<const char*>(buf), static_cast<std::size_t>(len));
}

// Decodes one code point at s[i]; an invalid sequence yields U+FFFD for one byte (the tokenizer drops
// U+FFFD, so the count Python's decoder would produce does not matter).
int32_t decode_at(const std::string& s, std::size_t end, std::size_t* i) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data()) + *i;
  utf8proc_int32_t c = 0;
  const utf8proc_ssize_t len = utf8proc_iterate(p, static_cast<utf8proc_ssize_t>(end - *i), &c);
  if (len <= 0) {
    ++*i;
    return 0xFFFD;
  }
  *i += static_cast<std::size_t>(len);
  return c;
}

bool all_ascii(const char* s, std::size_t n) {
  unsigned char acc = 0;
  for (std::size_t i = 0; i < n; ++i) acc |= static_cast<unsigned char>(s[i]);
  return acc < 0x80;
}

// Per-thread scratch space, so that encode() allocates nothing but its result once warm.
struct Scratch {
  std::string word;            // UTF-8 bytes of the current basic token
  std::vector<int32_t> chunk;  // code points of one whitespace-delimited token (general path)
  std::vector<int32_t> norm;   // the same token lowercased and NFD-decomposed
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// What a long word grew is let go after the call (core/scratch.h): serve encodes on hundreds of threads.
void release_large(Scratch& s) {
  release_if_large(s.word);
  release_if_large(s.chunk);
  release_if_large(s.norm);
}

// Calls emit(word, chars) for every basic token of text[begin, end): `word` is the UTF-8 token and
// `chars` its length in code points. emit returns false to stop early. Returns false when stopped.
template <class Emit>
bool basic_tokens(const std::string& text, std::size_t begin, std::size_t end, Scratch& sc, Emit&& emit) {
  std::string& word = sc.word;
  word.clear();
  if (all_ascii(text.data() + begin, end - begin)) {
    // Byte path: controls (0x00-0x1F but \t \n \r, and 0x7F) vanish without splitting, \t \n \r ' '
    // split, ASCII punctuation is a token of its own, letters are lowercased.
    for (std::size_t i = begin; i < end; ++i) {
      const unsigned char b = static_cast<unsigned char>(text[i]);
      if (b == ' ' || b == '\t' || b == '\n' || b == '\r') {
        if (!word.empty() && !emit(word, word.size())) return false;
        word.clear();
      } else if (b < 0x20 || b == 0x7F) {
        continue;
      } else if (is_ascii_punct(b)) {
        if (!word.empty() && !emit(word, word.size())) return false;
        word.assign(1, static_cast<char>(b));
        if (!emit(word, 1)) return false;
        word.clear();
      } else {
        word.push_back(static_cast<char>(b >= 'A' && b <= 'Z' ? b + ('a' - 'A') : b));
      }
    }
    return word.empty() || emit(word, word.size());
  }

  // General path: steps 1-2 while decoding, collecting one whitespace-delimited token at a time in
  // `chunk`, then steps 5-6 on it.
  std::vector<int32_t>& chunk = sc.chunk;
  std::vector<int32_t>& norm = sc.norm;
  auto flush_chunk = [&]() -> bool {
    if (chunk.empty()) return true;
    // Step 5: lowercase, NFD, canonical ordering, drop Mn.
    norm.clear();
    const std::size_t n = chunk.size();
    for (std::size_t i = 0; i < n; ++i) {
      int32_t c = chunk[i];
      if (c < 0x80) {
        norm.push_back(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
        continue;
      }
      if (c == 0x130) {  // SpecialCasing.txt: İ -> i + COMBINING DOT ABOVE (then dropped as Mn)
        norm.push_back('i');
        continue;
      }
      c = c == 0x3A3 ? (final_sigma(chunk.data(), n, i) ? 0x3C2 : 0x3C3) : utf8proc_tolower(c);
      utf8proc_int32_t dec[8];
      int boundclass = 0;
      const utf8proc_ssize_t len = utf8proc_decompose_char(c, dec, 8, UTF8PROC_DECOMPOSE, &boundclass);
      if (len < 1 || len > 8) {
        norm.push_back(c);  // never happens for a valid code point (canonical decompositions are <= 4 long)
        continue;
      }
      norm.insert(norm.end(), dec, dec + len);
    }
    // Canonical ordering: stable sort of each run of non-starters by combining class. Only non-Mn
    // non-starters (a few Mc) survive the next step, but their order is part of NFD.
    for (std::size_t i = 0; i < norm.size();) {
      if (norm[i] < 0x300 || utf8proc_get_property(norm[i])->combining_class == 0) {
        ++i;
        continue;
      }
      std::size_t j = i + 1;
      while (j < norm.size() && norm[j] >= 0x300 && utf8proc_get_property(norm[j])->combining_class != 0) ++j;
      if (j - i > 1) {
        std::stable_sort(norm.begin() + static_cast<std::ptrdiff_t>(i), norm.begin() + static_cast<std::ptrdiff_t>(j),
                         [](int32_t a, int32_t b) {
                           return utf8proc_get_property(a)->combining_class < utf8proc_get_property(b)->combining_class;
                         });
      }
      i = j;
    }
    // Step 6 (and dropping Mn): punctuation splits.
    word.clear();
    std::size_t chars = 0;
    for (const int32_t c : norm) {
      if (c >= 0x80 && utf8proc_category(c) == UTF8PROC_CATEGORY_MN) continue;
      if (is_punct(c)) {
        if (chars > 0 && !emit(word, chars)) return false;
        word.clear();
        append_utf8(c, &word);
        if (!emit(word, 1)) return false;
        word.clear();
        chars = 0;
      } else {
        append_utf8(c, &word);
        ++chars;
      }
    }
    if (chars > 0 && !emit(word, chars)) return false;
    word.clear();
    chunk.clear();
    return true;
  };

  chunk.clear();
  for (std::size_t i = begin; i < end;) {
    const int32_t c = static_cast<unsigned char>(text[i]) < 0x80 ? static_cast<unsigned char>(text[i++])
                                                                 : decode_at(text, end, &i);
    // Step 1: whitespace first for \t \n \r (which are Cc), then removal, then Zs.
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (!flush_chunk()) return false;
      continue;
    }
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7F) continue;
      chunk.push_back(c);
      continue;
    }
    if (c == 0xFFFD) continue;
    const utf8proc_category_t cat = utf8proc_category(c);
    if (is_category_c(cat)) continue;
    // Zs, and (step 4) U+2028 / U+2029, the other Python whitespace that survives step 1.
    if (cat == UTF8PROC_CATEGORY_ZS || is_python_space(c)) {
      if (!flush_chunk()) return false;
      continue;
    }
    if (is_cjk(c)) {  // step 2: a token of its own
      if (!flush_chunk()) return false;
      chunk.push_back(c);
      if (!flush_chunk()) return false;
      continue;
    }
    chunk.push_back(c);
  }
  return flush_chunk();
}

}  // namespace

// ---- Vocab ------------------------------------------------------------------------------------

Vocab Vocab::load(const std::string& path) {
  require_readable_file(path, "vocabulary file");
  std::ifstream in(path, std::ios::binary);
  BERTRAIN_CHECK(in, "cannot open vocabulary file '" << path << "': " << std::strerror(errno));
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BERTRAIN_CHECK(!in.bad(), "cannot read vocabulary file '" << path << "'");
  BERTRAIN_CHECK(!data.empty(), "vocabulary file '" << path << "' is empty");
  // transformers reads the mark as part of the first token (its [PAD], usually), so neither would find that token.
  BERTRAIN_CHECK(data.compare(0, 3, "\xEF\xBB\xBF") != 0,
                 path << ":1: starts with a UTF-8 byte-order mark, which would be read as part of the first token "
                         "(transformers reads it so too); remove it, e.g. sed -i '1s/^\\xEF\\xBB\\xBF//' "
                      << path);
  std::vector<std::string> tokens;
  std::size_t start = 0;
  while (start < data.size()) {
    std::size_t nl = data.find('\n', start);
    const bool last = nl == std::string::npos;
    if (last) nl = data.size();
    std::size_t stop = nl;
    if (!last && stop > start && data[stop - 1] == '\r') --stop;
    tokens.emplace_back(data, start, stop - start);
    // Python's open(..., encoding="utf-8") would refuse the file.
    const std::string& t = tokens.back();
    for (std::size_t i = 0; i < t.size();) {
      utf8proc_int32_t c = 0;
      const utf8proc_ssize_t len = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(t.data()) + i,
                                                    static_cast<utf8proc_ssize_t>(t.size() - i), &c);
      BERTRAIN_CHECK(len > 0, path << ":" << tokens.size() << ": invalid UTF-8 in vocabulary token (byte "
                                   << i + 1 << ")");
      i += static_cast<std::size_t>(len);
    }
    start = nl + 1;
  }
  Vocab vocab = from_tokens(std::move(tokens));
  vocab.source_ = path;
  return vocab;
}

Vocab Vocab::from_tokens(std::vector<std::string> tokens) {
  Vocab vocab;
  vocab.source_ = "in-memory vocabulary";
  vocab.tokens_ = std::move(tokens);
  vocab.ids_.reserve(vocab.tokens_.size());
  // transformers' load_vocab fills an OrderedDict token -> line index: a repeated token keeps the id
  // of its LAST line (every line still has its id, so token(id) works for both).
  for (std::size_t i = 0; i < vocab.tokens_.size(); ++i) vocab.ids_[vocab.tokens_[i]] = static_cast<int>(i);
  return vocab;
}

int Vocab::find(const std::string& token) const {
  const auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

int Vocab::require(const std::string& token) const {
  const int id = find(token);
  BERTRAIN_CHECK(id >= 0, source_ << ": the vocabulary has no '" << token << "' token (" << size() << " tokens)");
  return id;
}

// ---- BertTokenizer ----------------------------------------------------------------------------

BertTokenizer::BertTokenizer(Vocab vocab) : vocab_(std::move(vocab)) {
  cls_ = vocab_.require("[CLS]");
  sep_ = vocab_.require("[SEP]");
  pad_ = vocab_.require("[PAD]");
  unk_ = vocab_.require("[UNK]");
  std::vector<std::pair<std::string, int32_t>> all, continuation;
  all.reserve(static_cast<std::size_t>(vocab_.size()));
  for (int id = 0; id < vocab_.size(); ++id) {
    const std::string& t = vocab_.token(id);
    if (t.empty()) continue;  // an empty piece never matches (WordPiece needs end > start)
    all.emplace_back(t, id);
    if (t.size() > 2 && t[0] == '#' && t[1] == '#') continuation.emplace_back(t.substr(2), id);
  }
  whole_.build(all);
  continuation_.build(continuation);
  for (const char* s : kSpecialTokens) {
    const int id = vocab_.find(s);
    specials_.push_back({s, id >= 0 ? id : unk_});  // a special token missing from the vocab reads as [UNK]
  }
}

std::vector<std::string> BertTokenizer::basic_tokenize(const std::string& text) const {
  std::vector<std::string> words;
  basic_tokens(text, 0, text.size(), scratch(), [&](const std::string& w, std::size_t) {
    words.push_back(w);
    return true;
  });
  release_large(scratch());
  return words;
}

void BertTokenizer::wordpiece_bytes(const char* word, std::size_t size, std::size_t chars,
                                    std::vector<int32_t>* out) const {
  if (chars > static_cast<std::size_t>(kMaxInputCharsPerWord)) {
    out->push_back(unk_);
    return;
  }
  append_wordpieces(whole_, continuation_, word, size, unk_, out);
}

void BertTokenizer::wordpiece(const std::string& word, std::vector<int32_t>* out) const {
  std::size_t chars = 0;
  for (const char ch : word) chars += (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
  if (word.empty()) return;
  wordpiece_bytes(word.data(), word.size(), chars, out);
}

void BertTokenizer::encode(const std::string& text, int max_length, Encoding* out) const {
  BERTRAIN_CHECK(max_length >= 2, "encode: max_length must be >= 2 to hold [CLS] and [SEP], got " << max_length);
  out->ids.clear();
  out->truncated = false;
  out->ids.push_back(cls_);
  // Wordpieces beyond `limit` are not needed: one more than fits is enough to know the text was cut.
  const std::size_t limit = static_cast<std::size_t>(max_length) - 1;
  Scratch& sc = scratch();
  auto emit = [&](const std::string& w, std::size_t chars) {
    wordpiece_bytes(w.data(), w.size(), chars, &out->ids);
    return out->ids.size() <= limit;
  };
  // Step 0: special tokens split the text (only possible where a '[' occurs).
  std::size_t begin = 0;
  const std::size_t n = text.size();
  bool go = true;
  for (std::size_t pos = text.find('[', 0); go && pos != std::string::npos; pos = text.find('[', pos + 1)) {
    for (const Special& s : specials_) {
      if (text.compare(pos, s.text.size(), s.text) != 0) continue;
      go = basic_tokens(text, begin, pos, sc, emit);
      if (go) {
        out->ids.push_back(s.id);
        go = out->ids.size() <= limit;
      }
      begin = pos + s.text.size();
      pos = begin - 1;
      break;
    }
  }
  if (go) basic_tokens(text, begin, n, sc, emit);
  if (out->ids.size() > limit) {
    out->truncated = true;
    out->ids.resize(limit);
  }
  out->ids.push_back(sep_);
  release_large(sc);
}

std::string BertTokenizer::describe() const {
  return "WordPiece (vocab.txt, BERT uncased rules) from " + vocab_.source();
}

}  // namespace bertrain

// Made-With-ML's clean_text (see text_clean.h) as one pass over the lowercased code points.
//
// How each regex step of the Python original maps onto the pass:
//  1. text.lower(): Python's full lowercase. utf8proc_tolower is the simple mapping; the only
//     unconditional multi-character lowercase in SpecialCasing.txt is U+0130 (İ -> "i" U+0307), handled
//     here. Python's other context rule, final sigma (Σ -> ς), is not: σ and ς are both non-ASCII word
//     characters, so the choice changes neither a \b decision nor the output. Lowercasing itself matters:
//     U+212A KELVIN SIGN lowercases to ASCII 'k' and İ to ASCII 'i', which survive step 4, and İ's U+0307
//     is not a word character, so "İthe" loses its "the" (and its "i").
//  2. \b(w1|w2|...)\b\s* -> " ": Python's \b is Unicode-aware: a word character is '_' or any character
//     for which str.isalnum() holds, i.e. general category L* or N* (checked exhaustively against Python
//     for Unicode 14). The alternation is tried in list order at each position, so "it's" matches "it"
//     (then "'s" leaves "s", itself a stopword). Matches are found left to right without overlap.
//  3. spaces around ASCII punctuation, 4. every run outside [A-Za-z0-9] -> " ", 5. " +" -> " " and
//     strip: together, the text becomes its maximal [a-z0-9] runs ("tokens") joined by single spaces.
//     Step 3 only adds separators next to characters that step 4 turns into separators anyway.
//  6. http\S+ -> "": after step 5, \S+ cannot cross a space, so in each token the part from the first
//     "http" to the token's end goes when at least one character follows that "http". Tokens emptied this
//     way keep their separating spaces ("a https b" -> "a  b"), exactly as the regex leaves them.
// The \s* after a stopword only decides which whitespace is replaced by the " " of step 2; any whitespace
// becomes a separator in step 4 and no match can start on whitespace, so it never changes the output. It
// is matched anyway (Python's \s: category Zs or bidirectional class WS, B or S).
// Unicode data comes from utf8proc (its Unicode version, 15.0 for utf8proc 2.8, may be newer than the
// Python that produced a reference: characters assigned in between are word characters here and not
// there).
#include "data/text_clean.h"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include "core/scratch.h"

namespace bertrain {

namespace {

// NLTK's English stopword list as Made-With-ML joins it (madewithml/config.py STOPWORDS).
constexpr const char* kStopwords[] = {
    "i", "me", "my", "myself", "we", "our", "ours", "ourselves", "you", "you're", "you've", "you'll", "you'd",
    "your", "yours", "yourself", "yourselves", "he", "him", "his", "himself", "she", "she's", "her", "hers",
    "herself", "it", "it's", "its", "itself", "they", "them", "their", "theirs", "themselves", "what", "which",
    "who", "whom", "this", "that", "that'll", "these", "those", "am", "is", "are", "was", "were", "be", "been",
    "being", "have", "has", "had", "having", "do", "does", "did", "doing", "a", "an", "the", "and", "but", "if",
    "or", "because", "as", "until", "while", "of", "at", "by", "for", "with", "about", "against", "between",
    "into", "through", "during", "before", "after", "above", "below", "to", "from", "up", "down", "in", "out",
    "on", "off", "over", "under", "again", "further", "then", "once", "here", "there", "when", "where", "why",
    "how", "all", "any", "both", "each", "few", "more", "most", "other", "some", "such", "no", "nor", "not",
    "only", "own", "same", "so", "than", "too", "very", "s", "t", "can", "will", "just", "don", "don't",
    "should", "should've", "now", "d", "ll", "m", "o", "re", "ve", "y", "ain", "aren", "aren't", "couldn",
    "couldn't", "didn", "didn't", "doesn", "doesn't", "hadn", "hadn't", "hasn", "hasn't", "haven", "haven't",
    "isn", "isn't", "ma", "mightn", "mightn't", "mustn", "mustn't", "needn", "needn't", "shan", "shan't",
    "shouldn", "shouldn't", "wasn", "wasn't", "weren", "weren't", "won", "won't", "wouldn", "wouldn't",
};
constexpr std::size_t kStopwordCount = sizeof(kStopwords) / sizeof(kStopwords[0]);
static_assert(kStopwordCount == 179, "NLTK's English list has 179 words");

// Stopwords grouped by first letter, list order kept inside each group: only words sharing the first
// character can match at one position, so trying a group in order is trying the alternation in order.
struct StopwordIndex {
  struct Word {
    const char* text;
    std::size_t size;
  };
  std::array<std::vector<Word>, 26> by_first;
  StopwordIndex() {
    for (const char* w : kStopwords) by_first[static_cast<std::size_t>(w[0] - 'a')].push_back({w, std::strlen(w)});
  }
};

const StopwordIndex& stopword_index() {
  static const StopwordIndex index;
  return index;
}

bool is_ascii_alnum(int32_t c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z'); }

// Python re's \w for str patterns: str.isalnum() (categories L*, N*) or '_'.
bool is_word_char(int32_t c) {
  if (c < 0x80) return is_ascii_alnum(c) || c == '_';
  const utf8proc_category_t cat = utf8proc_category(c);
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

// Python re's \s for str patterns: str.isspace(), i.e. category Zs or bidirectional class WS, B, S.
bool is_space_char(int32_t c) {
  if (c < 0x80) return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
  const utf8proc_property_t* p = utf8proc_get_property(c);
  return p->category == UTF8PROC_CATEGORY_ZS || p->bidi_class == UTF8PROC_BIDI_CLASS_WS ||
         p->bidi_class == UTF8PROC_BIDI_CLASS_B || p->bidi_class == UTF8PROC_BIDI_CLASS_S;
}

// Decodes UTF-8 and applies Python's str.lower() (minus final sigma, see above). An invalid byte becomes
// U+FFFD: a non-word character like any other, so how many replacement characters Python's decoder
// would produce does not matter.
void decode_lower(const char* text, std::size_t n, std::vector<int32_t>* out) {
  out->clear();
  const auto* s = reinterpret_cast<const utf8proc_uint8_t*>(text);
  for (std::size_t i = 0; i < n;) {
    const unsigned char b = s[i];
    if (b < 0x80) {
      out->push_back(b >= 'A' && b <= 'Z' ? b + ('a' - 'A') : b);
      ++i;
      continue;
    }
    utf8proc_int32_t c = 0;
    const utf8proc_ssize_t len = utf8proc_iterate(s + i, static_cast<utf8proc_ssize_t>(n - i), &c);
    if (len <= 0) {
      out->push_back(0xFFFD);
      ++i;
      continue;
    }
    i += static_cast<std::size_t>(len);
    if (c == 0x130) {  // SpecialCasing.txt: U+0130 -> U+0069 U+0307
      out->push_back('i');
      out->push_back(0x307);
    } else {
      out->push_back(utf8proc_tolower(c));
    }
  }
}

// Builds the step-5 text token by token and applies step 6 to each token as it closes.
class TokenWriter {
 public:
  explicit TokenWriter(std::string* out) : out_(out) {}
  void put(char c) {
    if (!open_) {
      if (tokens_ > 0) out_->push_back(' ');
      start_ = out_->size();
      open_ = true;
      ++tokens_;
    }
    out_->push_back(c);
  }
  // Closed tokens with something left after step 6 (a link's token may leave nothing): the result's words.
  std::size_t words() const { return words_; }
  void close() {
    if (!open_) return;
    open_ = false;
    const std::size_t http = out_->find("http", start_);
    if (http != std::string::npos && http + 4 < out_->size()) out_->resize(http);
    if (out_->size() > start_) ++words_;
  }

 private:
  std::string* out_;
  std::size_t start_ = 0, tokens_ = 0, words_ = 0;
  bool open_ = false;
};

// Lowercased code points (a piece of the text, see clean_text_in_pieces) through steps 2-6, into `writer`.
void clean_code_points(const std::vector<int32_t>& cps, TokenWriter* writer) {
  const StopwordIndex& index = stopword_index();
  const std::size_t n = cps.size();
  bool prev_word = false;  // is_word_char(cps[p - 1]); false before the start (\b at the text's start)
  for (std::size_t p = 0; p < n;) {
    const int32_t c = cps[p];
    // A stopword starts with a letter, so \b before it means: previous character is not a word character.
    if (c >= 'a' && c <= 'z' && !prev_word) {
      std::size_t matched = 0;
      for (const StopwordIndex::Word& w : index.by_first[static_cast<std::size_t>(c - 'a')]) {
        if (p + w.size > n) continue;
        std::size_t k = 1;
        while (k < w.size && cps[p + k] == static_cast<unsigned char>(w.text[k])) ++k;
        // \b after it: every stopword ends with a letter, so the next character must not be a word character.
        if (k == w.size && (p + k == n || !is_word_char(cps[p + k]))) {
          matched = w.size;
          break;
        }
      }
      if (matched > 0) {
        writer->close();  // the replacement " " separates
        p += matched;
        prev_word = true;
        while (p < n && is_space_char(cps[p])) {
          prev_word = false;
          ++p;
        }
        continue;
      }
    }
    const bool word = is_word_char(c);
    if (c < 0x80 && is_ascii_alnum(c)) {
      writer->put(static_cast<char>(c));
    } else {
      writer->close();
    }
    prev_word = word;
    ++p;
  }
}

}  // namespace

const std::vector<std::string>& nltk_english_stopwords() {
  static const std::vector<std::string> words(std::begin(kStopwords), std::end(kStopwords));
  return words;
}

std::string clean_text_in_pieces(const std::string& text, std::size_t enough_words, std::size_t piece_bytes) {
  thread_local std::vector<int32_t> cps;  // reused: cleaning allocates only its result
  std::string out;
  out.reserve(std::min(text.size(), 2 * piece_bytes));
  TokenWriter writer(&out);
  for (std::size_t begin = 0; begin < text.size();) {
    // The piece ends before an ASCII character that is neither a word character nor an apostrophe (a space, a
    // comma, ...): no UTF-8 sequence, \b or stopword is cut there (the apostrophe keeps "don't" whole, though the
    // list's order has "don" match first anyway), that character closes the token before it and starts the next
    // piece as no word character, so cleaning the pieces in turn with one writer gives the text's own result.
    std::size_t end = begin + std::min(piece_bytes, text.size() - begin);
    while (end < text.size()) {
      const unsigned char b = static_cast<unsigned char>(text[end]);
      if (b < 0x80 && !is_ascii_alnum(b) && b != '_' && b != '\'') break;
      ++end;
    }
    decode_lower(text.data() + begin, end - begin, &cps);
    clean_code_points(cps, &writer);
    begin = end;
    if (writer.words() > enough_words) break;  // (a token still open ends where the piece does: whole)
  }
  writer.close();
  release_if_large(cps);
  return out;
}

std::string clean_text(const std::string& text, std::size_t enough_words) {
  return clean_text_in_pieces(text, enough_words, kCleanPieceBytes);
}

}  // namespace bertrain

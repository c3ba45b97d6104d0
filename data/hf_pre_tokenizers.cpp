// Splitting as tokenizers' NormalizedString::split does: a pattern yields alternating (piece, is_match) events
// over the text, and the behavior folds them: Removed drops matches, Isolated keeps every piece, Contiguous
// joins runs of matches, MergedWithPrevious / MergedWithNext glue a match to the piece before / after it
// (a second match in a row stays alone, as in Rust). Empty pieces vanish.
#include "data/hf_pre_tokenizers.h"

#include <algorithm>
#include <utility>

#include "core/scratch.h"
#include "data/hf_unicode.h"

namespace bertrain {
namespace hf {

namespace {

enum class Behavior { kRemoved, kIsolated, kContiguous, kMergedWithPrevious, kMergedWithNext };

struct Event {
  uint32_t begin, end;
  bool match;
};

std::vector<Event>& event_scratch() {
  thread_local std::vector<Event> e;
  return e;
}

void push_span(std::vector<Span>* out, uint32_t begin, uint32_t end, const Span& parent) {
  if (end > begin) out->push_back({begin, end, parent.first && begin == parent.begin});
}

// Folds the events [first, last) of one parent span into pieces, in the order the iterators walk them (reverse
// iterators walk back to front): an event for which joins(event, previous event was a match) extends the current
// piece, on whichever side it lies; any other starts a new one.
template <class It, class Joins>
void fold_pieces(It first, It last, const Span& parent, std::vector<Span>* out, Joins&& joins) {
  bool prev = false, any = false;
  uint32_t b = 0, en = 0;
  for (; first != last; ++first) {
    const Event& e = *first;
    if (any && joins(e, prev)) {
      b = std::min(b, e.begin);
      en = std::max(en, e.end);
    } else {
      if (any) push_span(out, b, en, parent);
      b = e.begin;
      en = e.end;
      any = true;
    }
    prev = e.match;
  }
  if (any) push_span(out, b, en, parent);
}

// Folds the events of one parent span into *out.
void fold(const std::vector<Event>& ev, Behavior behavior, const Span& parent, std::vector<Span>* out) {
  switch (behavior) {
    case Behavior::kRemoved:
      for (const Event& e : ev) {
        if (!e.match) push_span(out, e.begin, e.end, parent);
      }
      return;
    case Behavior::kIsolated:
      for (const Event& e : ev) push_span(out, e.begin, e.end, parent);
      return;
    case Behavior::kContiguous:  // a run of matches, or of non-matches, is one piece
      fold_pieces(ev.begin(), ev.end(), parent, out, [](const Event& e, bool prev) { return e.match == prev; });
      return;
    case Behavior::kMergedWithPrevious:  // a match after a non-match joins it
      fold_pieces(ev.begin(), ev.end(), parent, out, [](const Event& e, bool prev) { return e.match && !prev; });
      return;
    case Behavior::kMergedWithNext: {
      // Back to front: a match whose next event is not a match joins the piece after it. The pieces come out
      // back to front and are put in text order.
      const std::size_t mark = out->size();
      fold_pieces(ev.rbegin(), ev.rend(), parent, out, [](const Event& e, bool prev) { return e.match && !prev; });
      std::reverse(out->begin() + static_cast<std::ptrdiff_t>(mark), out->end());
      return;
    }
  }
}

// Events of a per-character predicate over text[span): every matching character is a match of its own.
template <class Pred>
void char_events(const std::string& text, const Span& s, Pred&& pred, std::vector<Event>* ev) {
  ev->clear();
  uint32_t last = s.begin;
  for (uint32_t i = s.begin; i < s.end;) {
    std::size_t len = 0;
    const int32_t c = decode_utf8(text.data() + i, s.end - i, &len);
    const uint32_t next = i + static_cast<uint32_t>(len);
    if (pred(c)) {
      if (last < i) ev->push_back({last, i, false});
      ev->push_back({i, next, true});
      last = next;
    }
    i = next;
  }
  if (last < s.end) ev->push_back({last, s.end, false});
}

template <class Pred>
void split_chars(Pieces* p, Pieces* tmp, Behavior behavior, Pred&& pred) {
  std::vector<Event>& ev = event_scratch();
  tmp->spans.clear();
  for (const Span& s : p->spans) {
    char_events(p->text, s, pred, &ev);
    fold(ev, behavior, s, &tmp->spans);
  }
  std::swap(p->spans, tmp->spans);
  release_if_large(ev);
}

Behavior parse_behavior(const JsonAt& at) {
  const std::string b = at.str();
  if (b == "Removed" || b == "removed") return Behavior::kRemoved;
  if (b == "Isolated" || b == "isolated") return Behavior::kIsolated;
  if (b == "Contiguous" || b == "contiguous") return Behavior::kContiguous;
  if (b == "MergedWithPrevious" || b == "merged_with_previous") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext" || b == "merged_with_next") return Behavior::kMergedWithNext;
  at.fail("unsupported split behavior " + json_quote(b));
}

class BertPre : public PreTokenizer {
 public:
  void apply(Pieces* p, Pieces* tmp) const override {
    // Whitespace removed, then punctuation isolated: one pass gives the same pieces.
    tmp->spans.clear();
    for (const Span& s : p->spans) {
      uint32_t start = s.begin;
      for (uint32_t i = s.begin; i < s.end;) {
        std::size_t len = 0;
        const int32_t c = decode_utf8(p->text.data() + i, s.end - i, &len);
        const uint32_t next = i + static_cast<uint32_t>(len);
        if (is_whitespace(c)) {
          push_span(&tmp->spans, start, i, s);
          start = next;
        } else if (is_punctuation(c)) {
          push_span(&tmp->spans, start, i, s);
          push_span(&tmp->spans, i, next, s);
          start = next;
        }
        i = next;
      }
      push_span(&tmp->spans, start, s.end, s);
    }
    std::swap(p->spans, tmp->spans);
  }
};

class WhitespaceSplit : public PreTokenizer {
 public:
  void apply(Pieces* p, Pieces* tmp) const override { split_chars(p, tmp, Behavior::kRemoved, is_whitespace); }
};

// Regex \w+|[^\w\s]+, keeping the matches only.
class WhitespacePre : public PreTokenizer {
 public:
  void apply(Pieces* p, Pieces* tmp) const override {
    tmp->spans.clear();
    for (const Span& s : p->spans) {
      int kind = 0;  // 0 none, 1 word run, 2 other run
      uint32_t start = s.begin;
      for (uint32_t i = s.begin; i < s.end;) {
        std::size_t len = 0;
        const int32_t c = decode_utf8(p->text.data() + i, s.end - i, &len);
        const int k = is_word_char(c) ? 1 : is_whitespace(c) ? 0 : 2;
        if (k != kind) {
          if (kind != 0) push_span(&tmp->spans, start, i, s);
          start = i;
          kind = k;
        }
        i += static_cast<uint32_t>(len);
      }
      if (kind != 0) push_span(&tmp->spans, start, s.end, s);
    }
    std::swap(p->spans, tmp->spans);
  }
};

class PunctuationPre : public PreTokenizer {
 public:
  explicit PunctuationPre(Behavior b) : behavior_(b) {}
  void apply(Pieces* p, Pieces* tmp) const override { split_chars(p, tmp, behavior_, is_punctuation); }

 private:
  Behavior behavior_;
};

class DigitsPre : public PreTokenizer {
 public:
  explicit DigitsPre(bool individual) : individual_(individual) {}
  void apply(Pieces* p, Pieces* tmp) const override {
    split_chars(p, tmp, individual_ ? Behavior::kIsolated : Behavior::kContiguous, is_number);
  }

 private:
  bool individual_;
};

class SequencePre : public PreTokenizer {
 public:
  explicit SequencePre(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void apply(Pieces* p, Pieces* tmp) const override {
    for (const auto& part : parts_) part->apply(p, tmp);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

struct ByteLevelTable {
  std::string chars[256];
  ByteLevelTable() {
    // Printable Latin-1 bytes stand for themselves; the others take 256, 257, ... in byte order.
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      append_utf8(keep ? b : 256 + n++, &chars[b]);
    }
  }
};

const ByteLevelTable& byte_level_table() {
  static const ByteLevelTable t;
  return t;
}

class ByteLevelPre : public PreTokenizer {
 public:
  ByteLevelPre(bool prefix_space, bool use_regex) : prefix_space_(prefix_space), use_regex_(use_regex) {}

  void apply(Pieces* p, Pieces* tmp) const override {
    const ByteLevelTable& table = byte_level_table();
    std::string& src = scratch();
    tmp->text.clear();
    tmp->spans.clear();
    for (const Span& s : p->spans) {
      // The piece, with the prefix space when asked for.
      src.clear();
      if (prefix_space_ && (s.end == s.begin || p->text[s.begin] != ' ')) src.push_back(' ');
      src.append(p->text, s.begin, s.end - s.begin);
      auto emit = [&](std::size_t b, std::size_t e) {
        const auto begin = static_cast<uint32_t>(tmp->text.size());
        for (std::size_t i = b; i < e; ++i) tmp->text += table.chars[static_cast<unsigned char>(src[i])];
        const auto end = static_cast<uint32_t>(tmp->text.size());
        if (end > begin) tmp->spans.push_back({begin, end, s.first && b == 0});
      };
      if (!use_regex_) {
        emit(0, src.size());
        continue;
      }
      gpt2_split(src, emit);
    }
    std::swap(*p, *tmp);
    release_if_large(src);
  }

 private:
  static std::string& scratch() {
    thread_local std::string s;
    return s;
  }

  // The GPT-2 pattern 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ as
  // leftmost-first alternatives at each position; every character belongs to some match.
  template <class Emit>
  static void gpt2_split(const std::string& s, Emit&& emit) {
    const std::size_t n = s.size();
    auto at = [&](std::size_t i, std::size_t* len) { return decode_utf8(s.data() + i, n - i, len); };
    auto kind = [](int32_t c) { return is_letter(c) ? 1 : is_number(c) ? 2 : is_whitespace(c) ? 3 : 4; };
    // End of the run of characters of kind k starting at i.
    auto run = [&](std::size_t i, int k) {
      while (i < n) {
        std::size_t len = 0;
        if (kind(at(i, &len)) != k) break;
        i += len;
      }
      return i;
    };
    std::size_t i = 0;
    while (i < n) {
      std::size_t len = 0;
      const int32_t c = at(i, &len);
      if (c == '\'' && i + 1 < n) {
        const char a = s[i + 1];
        const char b = i + 2 < n ? s[i + 2] : '\0';
        std::size_t m = 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') m = 2;
        else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) m = 3;
        if (m > 0) {
          emit(i, i + m);
          i += m;
          continue;
        }
      }
      if (c == ' ' && i + 1 < n) {
        std::size_t nl = 0;
        const int k = kind(at(i + 1, &nl));
        if (k != 3) {
          const std::size_t e = run(i + 1, k);
          emit(i, e);
          i = e;
          continue;
        }
      }
      const int k = kind(c);
      if (k != 3) {
        const std::size_t e = run(i, k);
        emit(i, e);
        i = e;
        continue;
      }
      // Whitespace: the run, less its last character when a non-space follows (and the run is longer than one).
      const std::size_t e = run(i, 3);
      if (e == n) {
        emit(i, e);
        i = e;
        continue;
      }
      std::size_t last = e - 1;
      while ((static_cast<unsigned char>(s[last]) & 0xC0) == 0x80) --last;
      const std::size_t cut = last > i ? last : e;
      emit(i, cut);
      i = cut;
    }
  }

  bool prefix_space_, use_regex_;
};

class MetaspacePre : public PreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  MetaspacePre(std::string replacement, Prepend prepend, bool split)
      : rep_(std::move(replacement)), prepend_(prepend), split_(split) {}

  void apply(Pieces* p, Pieces* tmp) const override {
    tmp->text.clear();
    tmp->spans.clear();
    std::vector<Event>& ev = event_scratch();
    for (const Span& s : p->spans) {
      const auto begin = static_cast<uint32_t>(tmp->text.size());
      const bool starts_with_rep = p->text.compare(s.begin, rep_.size(), rep_) == 0 && s.end - s.begin >= rep_.size();
      const bool starts_with_space = s.end > s.begin && p->text[s.begin] == ' ';
      if (!starts_with_rep && !starts_with_space &&
          (prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && s.first))) {
        tmp->text += rep_;
      }
      for (uint32_t i = s.begin; i < s.end; ++i) {
        if (p->text[i] == ' ') tmp->text += rep_;
        else tmp->text.push_back(p->text[i]);
      }
      const Span whole{begin, static_cast<uint32_t>(tmp->text.size()), s.first};
      if (!split_) {
        push_span(&tmp->spans, whole.begin, whole.end, whole);
        continue;
      }
      // Events of the replacement string as the delimiter, merged with the next piece.
      ev.clear();
      uint32_t last = whole.begin;
      for (std::size_t pos = tmp->text.find(rep_, whole.begin); pos != std::string::npos && pos < whole.end;
           pos = tmp->text.find(rep_, pos + rep_.size())) {
        const auto b = static_cast<uint32_t>(pos);
        if (last < b) ev.push_back({last, b, false});
        ev.push_back({b, b + static_cast<uint32_t>(rep_.size()), true});
        last = b + static_cast<uint32_t>(rep_.size());
      }
      if (last < whole.end) ev.push_back({last, whole.end, false});
      fold(ev, Behavior::kMergedWithNext, whole, &tmp->spans);
    }
    std::swap(*p, *tmp);
  }

 private:
  std::string rep_;
  Prepend prepend_;
  bool split_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const JsonAt& at) {
  if (at.json().is_null()) return nullptr;
  const std::string type = at.type();
  if (type == "BertPreTokenizer") return std::make_unique<BertPre>();
  if (type == "Whitespace") return std::make_unique<WhitespacePre>();
  if (type == "WhitespaceSplit") return std::make_unique<WhitespaceSplit>();
  if (type == "Punctuation") {
    return std::make_unique<PunctuationPre>(at.has("behavior") ? parse_behavior(at.at("behavior")) : Behavior::kIsolated);
  }
  if (type == "Digits") return std::make_unique<DigitsPre>(at.get_bool("individual_digits", false));
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPre>(at.get_bool("add_prefix_space", true), at.get_bool("use_regex", true));
  }
  if (type == "Metaspace") {
    const std::string rep = at.at("replacement").str();
    std::size_t len = 0;
    if (rep.empty() || (decode_utf8(rep.data(), rep.size(), &len), len != rep.size())) {
      at.at("replacement").fail("Metaspace replacement must be one character, got " + json_quote(rep));
    }
    MetaspacePre::Prepend prepend = MetaspacePre::Prepend::kAlways;
    if (at.has("prepend_scheme")) {
      const JsonAt scheme = at.at("prepend_scheme");
      const std::string v = scheme.str();
      if (v == "always") prepend = MetaspacePre::Prepend::kAlways;
      else if (v == "first") prepend = MetaspacePre::Prepend::kFirst;
      else if (v == "never") prepend = MetaspacePre::Prepend::kNever;
      else scheme.fail("unsupported Metaspace prepend_scheme " + json_quote(v));
    }
    if (at.has("add_prefix_space") && !at.at("add_prefix_space").boolean()) {
      if (at.has("prepend_scheme") && prepend != MetaspacePre::Prepend::kNever) {
        at.fail("Metaspace add_prefix_space false does not match prepend_scheme");
      }
      prepend = MetaspacePre::Prepend::kNever;
    }
    return std::make_unique<MetaspacePre>(rep, prepend, at.get_bool("split", true));
  }
  if (type == "Sequence") {
    const JsonAt list = at.at("pretokenizers");
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (std::size_t i = 0; i < list.size(); ++i) {
      auto p = make_pre_tokenizer(list.at(i));
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<SequencePre>(std::move(parts));
  }
  at.fail("unsupported pre-tokenizer type " + json_quote(type) +
          " (supported: BertPreTokenizer, ByteLevel, Metaspace, Whitespace, WhitespaceSplit, Punctuation, Digits, "
          "Sequence)");
}

}  // namespace hf
}  // namespace bertrain

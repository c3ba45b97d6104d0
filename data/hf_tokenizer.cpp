#include "data/hf_tokenizer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/files.h"
#include "core/json_text.h"
#include "core/scratch.h"
#include "core/utf8.h"
#include "data/byte_trie.h"
#include "data/hf_json.h"
#include "data/hf_models.h"
#include "data/hf_normalizers.h"
#include "data/hf_pre_tokenizers.h"
#include "data/hf_unicode.h"

namespace bertrain {

namespace {

struct AddedToken {
  std::string content;
  int32_t id;
  bool single_word, lstrip, rstrip, normalized;
};

// Added tokens of one kind (matched on raw or on normalized text): pattern -> index in tokens.
struct AddedMatcher {
  ByteTrie trie;
  std::vector<AddedToken> tokens;
};

struct Scratch {
  std::string text;  // the input with invalid UTF-8 replaced (rarely used)
  std::string norm, tmp;
  hf::Pieces pieces, pieces_tmp;
  std::vector<int32_t> ids;
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

int32_t last_char(const std::string& s, std::size_t end) {
  std::size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  std::size_t len = 0;
  return hf::decode_utf8(s.data() + start, end - start, &len);
}

// Calls f(begin, end, id) over s: the added tokens' matches (id >= 0) and the text between them (id -1), as
// tokenizers' AddedVocabulary::find_matches. f returns false to stop; returns false when stopped.
template <class F>
bool split_added(const AddedMatcher& m, const std::string& s, F&& f) {
  const std::size_t n = s.size();
  if (n == 0) return true;
  if (m.trie.empty()) return f(std::size_t{0}, n, -1);
  std::size_t start_offset = 0;
  std::size_t pos = 0;
  while (pos < n) {
    int32_t idx = -1;
    std::size_t mlen = 0, i = pos;
    for (; i < n; ++i) {
      if (m.trie.root_child(static_cast<unsigned char>(s[i])) < 0) continue;
      idx = m.trie.longest(s.data() + i, n - i, &mlen);
      if (idx >= 0) break;
    }
    if (idx < 0) break;
    std::size_t start = i, stop = i + mlen;
    pos = stop;  // matching goes on after the match, kept or not
    const AddedToken& tok = m.tokens[static_cast<std::size_t>(idx)];
    if (tok.single_word) {
      std::size_t len = 0;
      const bool start_space = start == 0 || !hf::is_word_char(last_char(s, start));
      const bool stop_space = stop == n || !hf::is_word_char(hf::decode_utf8(s.data() + stop, n - stop, &len));
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) {
      std::size_t b = start;
      while (b > 0 && hf::is_whitespace(last_char(s, b))) {
        std::size_t k = b - 1;
        while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
        b = k;
      }
      start = std::max(b, start_offset);
    }
    if (tok.rstrip) {
      while (stop < n) {
        std::size_t len = 0;
        if (!hf::is_whitespace(hf::decode_utf8(s.data() + stop, n - stop, &len))) break;
        stop += len;
      }
    }
    if (start_offset < start && !f(start_offset, start, -1)) return false;
    if (!f(start, stop, tok.id)) return false;
    start_offset = stop;
  }
  if (start_offset < n) return f(start_offset, n, -1);
  return true;
}

// The single-sequence framing of a post-processor: ids before and after the text's.
struct Framing {
  std::vector<int32_t> prefix, suffix;
};

int32_t special_id(const hf::JsonAt& pair) {
  // ["<s>", 0]
  if (!pair.json().is_array() || pair.json().size() != 2) pair.fail("expected [token, id]");
  pair.at(std::size_t{0}).str();
  const int64_t id = pair.at(1).integer();
  if (id < 0 || id >= 0x7FFFFFFE) pair.fail("id out of range");
  return static_cast<int32_t>(id);
}

void apply_post_processor(const hf::JsonAt& at, Framing* f) {
  if (at.json().is_null()) return;
  const std::string type = at.type();
  if (type == "ByteLevel") return;  // offsets only
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    f->prefix.insert(f->prefix.begin(), special_id(at.at("cls")));
    f->suffix.push_back(special_id(at.at("sep")));
    return;
  }
  if (type == "Sequence") {
    const hf::JsonAt list = at.at("processors");
    for (std::size_t i = 0; i < list.size(); ++i) apply_post_processor(list.at(i), f);
    return;
  }
  if (type == "TemplateProcessing") {
    const hf::JsonAt single = at.at("single");
    const hf::JsonAt specials = at.at("special_tokens");
    std::vector<int32_t> before, after;
    int sequences = 0;
    for (std::size_t i = 0; i < single.size(); ++i) {
      const hf::JsonAt piece = single.at(i);
      if (piece.has("Sequence")) {
        const std::string id = piece.at("Sequence").at("id").str();
        if (id != "A") piece.fail("the single template uses sequence " + hf::json_quote(id) + " (only A)");
        ++sequences;
      } else if (piece.has("SpecialToken")) {
        const std::string name = piece.at("SpecialToken").at("id").str();
        if (!specials.json().is_object() || !specials.json().contains(name)) {
          piece.fail("special token " + hf::json_quote(name) + " is not in post_processor.special_tokens");
        }
        const hf::JsonAt ids = specials.at(name.c_str()).at("ids");
        for (std::size_t k = 0; k < ids.size(); ++k) {
          const int64_t v = ids.at(k).integer();
          if (v < 0 || v >= 0x7FFFFFFE) ids.at(k).fail("id out of range");
          (sequences == 0 ? before : after).push_back(static_cast<int32_t>(v));
        }
      } else {
        piece.fail("a template piece is {\"Sequence\": ...} or {\"SpecialToken\": ...}");
      }
    }
    if (sequences != 1) single.fail("the single template must hold $A exactly once");
    f->prefix.insert(f->prefix.begin(), before.begin(), before.end());
    f->suffix.insert(f->suffix.end(), after.begin(), after.end());
    return;
  }
  at.fail("unsupported post-processor type " + hf::json_quote(type) +
          " (supported: TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel, Sequence)");
}

}  // namespace

struct HfTokenizer::Impl {
  std::string source;
  std::unique_ptr<hf::Normalizer> normalizer;
  std::unique_ptr<hf::PreTokenizer> pre_tokenizer;
  std::unique_ptr<hf::Model> model;
  AddedMatcher raw, normalized;
  Framing framing;
  int32_t pad = -1, vocab_size = 0;

  // Appends the model's ids for one piece of raw text (between added tokens); false once past `limit` ids.
  bool encode_piece(const std::string& text, std::size_t b, std::size_t e, std::size_t limit, Scratch& sc) const {
    sc.norm.assign(text, b, e - b);
    if (normalizer) normalizer->normalize(&sc.norm, &sc.tmp);
    const std::string& norm = sc.norm;
    return split_added(normalized, norm, [&](std::size_t nb, std::size_t ne, int32_t id) {
      if (id >= 0) {
        sc.ids.push_back(id);
        return sc.ids.size() <= limit;
      }
      hf::Pieces& p = sc.pieces;
      p.text.assign(norm, nb, ne - nb);
      p.spans.assign(1, hf::Span{0, static_cast<uint32_t>(ne - nb), b == 0 && nb == 0});
      if (pre_tokenizer) pre_tokenizer->apply(&p, &sc.pieces_tmp);
      for (const hf::Span& s : p.spans) {
        model->tokenize(p.text.data() + s.begin, s.end - s.begin, &sc.ids);
        if (sc.ids.size() > limit) return false;
      }
      return true;
    });
  }
};

HfTokenizer::HfTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HfTokenizer::HfTokenizer(HfTokenizer&&) noexcept = default;
HfTokenizer& HfTokenizer::operator=(HfTokenizer&&) noexcept = default;
HfTokenizer::~HfTokenizer() = default;

HfTokenizer HfTokenizer::load(const std::string& path) {
  require_readable_file(path, "tokenizer file");
  std::ifstream in(path, std::ios::binary);
  BERTRAIN_CHECK(in, "cannot open tokenizer file '" << path << "': " << std::strerror(errno));
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BERTRAIN_CHECK(!in.bad(), "cannot read tokenizer file '" << path << "'");
  nlohmann::json json;
  bool too_deep = false;
  try {
    // Numbers as the tokenizers library reads them: a Unigram model's scores decide its ties.
    json = parse_json_bounded(data, &too_deep, &hf::read_json_number_as_tokenizers);
  } catch (const nlohmann::json::exception& e) {
    BERTRAIN_FAIL(path << ": not valid JSON: " << e.what());
  }
  BERTRAIN_CHECK(!too_deep, path << ": JSON nested deeper than " << kMaxJsonDepth << " levels");
  return from_json(json, path);
}

HfTokenizer HfTokenizer::from_json(const nlohmann::json& json, const std::string& source) {
  auto impl = std::make_unique<Impl>();
  impl->source = source;
  const hf::JsonAt top{&impl->source, "", &json};
  if (!json.is_object()) top.fail("expected a JSON object (a tokenizer.json file)");
  try {
    impl->normalizer = top.has("normalizer") ? hf::make_normalizer(top.at("normalizer")) : nullptr;
    impl->pre_tokenizer = top.has("pre_tokenizer") ? hf::make_pre_tokenizer(top.at("pre_tokenizer")) : nullptr;
    impl->model = hf::make_model(top.at("model"));
    if (top.has("post_processor")) apply_post_processor(top.at("post_processor"), &impl->framing);
  } catch (const nlohmann::json::exception& e) {  // a type the accessors did not check first
    top.fail(std::string("unexpected JSON: ") + e.what());
  }
  if (impl->framing.prefix.empty() || impl->framing.suffix.empty()) {
    top.fail("post_processor: the single-sequence template must put special tokens before and after the text "
             "(bertrain's classifier reads the first one, [CLS] or <s>)");
  }

  // Added tokens, in file order, with ids as tokenizers' add_tokens gives them: the id of an earlier added
  // token with the same content, else the model's, else the next free id.
  int32_t next_id = impl->model->size();
  std::vector<std::pair<std::string, int32_t>> raw_keys, norm_keys;
  if (top.has("added_tokens")) {
    const hf::JsonAt list = top.at("added_tokens");
    std::vector<std::pair<std::string, int32_t>> seen;
    int32_t max_added = -1;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const hf::JsonAt t = list.at(i);
      AddedToken tok;
      tok.content = t.at("content").str();
      const bool special = t.get_bool("special", false);
      tok.single_word = t.get_bool("single_word", false);
      tok.lstrip = t.get_bool("lstrip", false);
      tok.rstrip = t.get_bool("rstrip", false);
      tok.normalized = t.get_bool("normalized", !special);
      if (tok.content.empty()) continue;
      int32_t id = -1;
      for (const auto& [c, k] : seen) {
        if (c == tok.content) id = k;
      }
      if (id < 0) id = impl->model->token_id(tok.content);
      if (id < 0) {
        if (max_added >= 0) next_id = std::max(next_id, max_added + 1);
        id = next_id++;
      }
      if (id >= 0x7FFFFFFE) t.fail("added token id out of range");
      tok.id = id;
      max_added = std::max(max_added, id);
      seen.emplace_back(tok.content, id);
      if (tok.normalized) {
        std::string pattern = tok.content, tmp;
        if (impl->normalizer) impl->normalizer->normalize(&pattern, &tmp);
        norm_keys.emplace_back(pattern, static_cast<int32_t>(impl->normalized.tokens.size()));
        impl->normalized.tokens.push_back(std::move(tok));
      } else {
        raw_keys.emplace_back(tok.content, static_cast<int32_t>(impl->raw.tokens.size()));
        impl->raw.tokens.push_back(std::move(tok));
      }
    }
  }
  impl->raw.trie.build(raw_keys);
  impl->normalized.trie.build(norm_keys);

  int32_t size = impl->model->size();
  for (const AddedMatcher* m : {&impl->raw, &impl->normalized}) {
    for (const AddedToken& t : m->tokens) size = std::max(size, t.id + 1);
  }
  for (const std::vector<int32_t>* v : {&impl->framing.prefix, &impl->framing.suffix}) {
    for (const int32_t id : *v) size = std::max(size, id + 1);
  }
  impl->vocab_size = size;

  // The padding token: the file's padding.pad_id when it sets one, else the usual names.
  if (top.has("padding") && top.at("padding").has("pad_id")) {
    impl->pad = static_cast<int32_t>(top.at("padding").at("pad_id").integer());
  } else {
    for (const char* name : {"[PAD]", "<pad>", "<PAD>"}) {
      int32_t id = -1;
      for (const AddedMatcher* m : {&impl->raw, &impl->normalized}) {
        for (const AddedToken& t : m->tokens) {
          if (t.content == name) id = t.id;
        }
      }
      if (id < 0) id = impl->model->token_id(name);
      if (id >= 0) {
        impl->pad = id;
        break;
      }
    }
  }
  return HfTokenizer(std::move(impl));
}

void HfTokenizer::encode(const std::string& text, int max_length, Encoding* out) const {
  const Impl& im = *impl_;
  const std::size_t specials = im.framing.prefix.size() + im.framing.suffix.size();
  BERTRAIN_CHECK(max_length >= 0 && static_cast<std::size_t>(max_length) >= specials,
                 "encode: max_length must be >= " << specials << " to hold the special tokens, got " << max_length);
  const std::size_t limit = static_cast<std::size_t>(max_length) - specials;
  Scratch& sc = scratch();
  // Rust takes only valid UTF-8: anything else is read as U+FFFD per invalid sequence.
  const std::string* input = &text;
  if (!hf::all_ascii(text.data(), text.size())) {
    if (!is_valid_utf8(text)) {
      sc.text.clear();
      for (std::size_t i = 0; i < text.size();) {
        bool valid = true;
        const std::size_t len = utf8_sequence(text.data() + i, text.size() - i, &valid);
        if (valid) sc.text.append(text, i, len);
        else sc.text.append("\xEF\xBF\xBD");
        i += len;
      }
      input = &sc.text;
    }
  }
  sc.ids.clear();
  split_added(im.raw, *input, [&](std::size_t b, std::size_t e, int32_t id) {
    if (id >= 0) {
      sc.ids.push_back(id);
      return sc.ids.size() <= limit;
    }
    return im.encode_piece(*input, b, e, limit, sc);
  });
  out->truncated = sc.ids.size() > limit;
  const std::size_t keep = std::min(sc.ids.size(), limit);
  out->ids.clear();
  out->ids.insert(out->ids.end(), im.framing.prefix.begin(), im.framing.prefix.end());
  out->ids.insert(out->ids.end(), sc.ids.begin(), sc.ids.begin() + static_cast<std::ptrdiff_t>(keep));
  out->ids.insert(out->ids.end(), im.framing.suffix.begin(), im.framing.suffix.end());
  for (std::string* buffer : {&sc.text, &sc.norm, &sc.tmp, &sc.pieces.text, &sc.pieces_tmp.text}) release_if_large(*buffer);
  release_if_large(sc.pieces.spans);
  release_if_large(sc.pieces_tmp.spans);
  release_if_large(sc.ids);
}

int HfTokenizer::cls_id() const { return impl_->framing.prefix.front(); }
int HfTokenizer::sep_id() const { return impl_->framing.suffix.back(); }
int HfTokenizer::prefix_specials() const { return static_cast<int>(impl_->framing.prefix.size()); }
int HfTokenizer::suffix_specials() const { return static_cast<int>(impl_->framing.suffix.size()); }
int HfTokenizer::pad_id() const { return impl_->pad; }
int HfTokenizer::unk_id() const { return impl_->model->unk_id(); }
int HfTokenizer::vocab_size() const { return impl_->vocab_size; }
std::string HfTokenizer::describe() const {
  return impl_->model->name() + " tokenizer from " + impl_->source;
}

}  // namespace bertrain

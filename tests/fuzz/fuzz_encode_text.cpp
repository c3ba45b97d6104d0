// libFuzzer target: bytes -> a text, as predict, serve and the dataset readers hand one to the tokenizers (any
// bytes: invalid UTF-8 and NUL included, since serve's JSON strings can carry \u0000). The text goes through
// Made-With-ML's clean_text and through every kind of tokenizer bertrain runs, each built once from the
// committed fixtures: BertTokenizer (vocab.txt rules, with MiniLM's 30,522-token uncased vocabulary) and
// HfTokenizer for WordPiece uncased (MiniLM) and cased, byte-level BPE (RoBERTa's kind) and Unigram with a
// Precompiled normalizer (XLM-R's kind). Each text is encoded raw and cleaned, at max_length 512 and 8.
//
// A finding is a crash, a sanitizer report, any exception (encode throws only for a max_length too short for
// the specials, and 8 never is), or a broken invariant (__builtin_trap):
//   - clean_text's result holds only [a-z0-9 ];
//   - ids lie in [0, vocab_size), the first is cls_id and the last sep_id, at most max_length of them;
//   - `truncated` is set exactly when the text had more tokens than fit;
//   - the short encoding is the long one cut from the right (the specials kept), so truncation never changes a
//     token before the cut;
//   - encoding into an Encoding that holds another text's ids gives the same ids as into a fresh one.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/hf_tokenizer.h"
#include "data/text_clean.h"
#include "data/tokenizer.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

std::string fixture(const std::string& name) {
  return std::string(BERTRAIN_FIXTURES_DIR) + "/tokenizers/" + name + "/tokenizer.json";
}

// BertTokenizer over the WordPiece vocabulary of MiniLM's tokenizer.json, ordered by id (what its vocab.txt holds).
std::unique_ptr<bertrain::Tokenizer> bert_tokenizer_from(const std::string& tokenizer_json) {
  std::ifstream in(tokenizer_json);
  const nlohmann::json json = nlohmann::json::parse(in);
  const auto& vocab = json.at("model").at("vocab");
  std::vector<std::string> tokens(vocab.size());
  for (const auto& [token, id] : vocab.items()) tokens.at(id.get<std::size_t>()) = token;
  return std::make_unique<bertrain::BertTokenizer>(bertrain::Vocab::from_tokens(std::move(tokens)));
}

const std::vector<std::unique_ptr<bertrain::Tokenizer>>& tokenizers() {
  static const auto all = [] {
    std::vector<std::unique_ptr<bertrain::Tokenizer>> t;
    t.push_back(bert_tokenizer_from(fixture("minilm")));
    for (const char* name : {"minilm", "wordpiece_cased", "bpe_bytelevel", "unigram_xlmr"}) {
      t.push_back(std::make_unique<bertrain::HfTokenizer>(bertrain::HfTokenizer::load(fixture(name))));
    }
    return t;
  }();
  return all;
}

// Spaces may still double or lead: the original removes "http\S+" after collapsing and stripping them.
void check_cleaned(const std::string& cleaned) {
  for (char c : cleaned) {
    const bool allowed = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == ' ';
    if (!allowed) __builtin_trap();
  }
}

void check_text(const bertrain::Tokenizer& tokenizer, const std::string& text, bertrain::Encoding* reused) {
  constexpr int kLong = 512, kShort = 8;
  const bertrain::Encoding whole = tokenizer.encode(text, kLong);
  bertrain_fuzz::check_framed(tokenizer, whole, kLong);
  tokenizer.encode(text, kShort, reused);  // `reused` holds the previous text's ids
  const bertrain::Encoding& cut = *reused;
  bertrain_fuzz::check_framed(tokenizer, cut, kShort);
  const bool fits = !whole.truncated && whole.ids.size() <= static_cast<std::size_t>(kShort);
  if (fits) {
    if (cut.truncated || cut.ids != whole.ids) __builtin_trap();
  } else {
    if (!cut.truncated || cut.ids.size() != static_cast<std::size_t>(kShort)) __builtin_trap();
    // Every id but the closing special is the long encoding's.
    for (std::size_t i = 0; i + 1 < cut.ids.size(); ++i) {
      if (cut.ids[i] != whole.ids[i]) __builtin_trap();
    }
  }
  if (tokenizer.encode(text, kShort).ids != cut.ids) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string cleaned = bertrain::clean_text(text);
  check_cleaned(cleaned);
  static bertrain::Encoding reused;
  for (const auto& tokenizer : tokenizers()) {
    check_text(*tokenizer, text, &reused);
    check_text(*tokenizer, cleaned, &reused);
  }
  return 0;
}

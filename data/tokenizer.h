// The Tokenizer interface every user of token ids sees (dataset readers, predictor, serve, tools), and its
// vocab.txt implementation. HfTokenizer (data/hf_tokenizer.h) reads tokenizer.json; load_tokenizer
// (data/tokenizer_loader.h) picks one for a model directory.
//
// BertTokenizer: BERT tokenization with Hugging Face BertTokenizer (uncased) semantics: BasicTokenizer (clean control
// characters, split on Unicode whitespace, isolate CJK ideographs, lowercase, NFD + drop combining
// marks, split punctuation) then WordPiece (greedy longest match, "##" continuations, words over 100
// characters and unmatched words become [UNK]), framed as [CLS] ... [SEP]. Unicode data: utf8proc.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "data/byte_trie.h"

namespace bertrain {

class Vocab {
 public:
  // One token per line, id = line index; empty lines count; only '\n' separates (SciBERT's tokens
  // contain other control characters), and a '\r' before it (CRLF files) is dropped. A token repeated
  // on several lines maps to its LAST line (transformers' load_vocab builds an OrderedDict). Errors
  // (unreadable, empty, invalid UTF-8) name the file.
  static Vocab load(const std::string& path);
  static Vocab from_tokens(std::vector<std::string> tokens);

  int size() const { return static_cast<int>(tokens_.size()); }
  // Id of `token`, or -1.
  int find(const std::string& token) const;
  const std::string& token(int id) const { return tokens_.at(static_cast<std::size_t>(id)); }
  // Id of a special token; throws Error naming the vocabulary file when absent.
  int require(const std::string& token) const;
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int> ids_;
};

struct Encoding {
  std::vector<int32_t> ids;  // the template's special tokens around the text's: [CLS] tokens [SEP], <s> tokens </s>
  bool truncated = false;    // the text had more tokens than fit in max_length
};

// A tokenizer as the classifier needs it: text -> ids framed by the model's special tokens, cut to a length.
// Implementations are immutable once built: encode is const and may be called from several threads at once.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // The special tokens of the single-sequence template around the text's tokens. When the text has more tokens
  // than fit in max_length, the text's are cut from the right so that the specials stay (transformers'
  // truncation=True, max_length=N for one sequence) and out->truncated is set. Throws Error when max_length
  // cannot hold the specials. Reuses out's capacity.
  virtual void encode(const std::string& text, int max_length, Encoding* out) const = 0;
  Encoding encode(const std::string& text, int max_length) const {
    Encoding enc;
    encode(text, max_length, &enc);
    return enc;
  }
  virtual int cls_id() const = 0;  // the template's first special token ([CLS], <s>)
  virtual int sep_id() const = 0;  // its last ([SEP], </s>)
  virtual int pad_id() const = 0;  // the padding token; -1 when the tokenizer names none
  // How many of the template's special tokens come before the text's tokens and how many after ([CLS] ... [SEP]: 1
  // and 1), whatever the text.
  virtual int prefix_specials() const = 0;
  virtual int suffix_specials() const = 0;
  virtual int unk_id() const = 0;  // the model's unknown token; -1 when it has none
  virtual int vocab_size() const = 0;  // one more than the largest id encode can produce
  virtual std::string describe() const = 0;  // one line for logs: kind and source file
};

class BertTokenizer : public Tokenizer {
 public:
  explicit BertTokenizer(Vocab vocab);

  // BasicTokenizer: the list of words (UTF-8) after cleaning, lowercasing, accent stripping, splitting.
  std::vector<std::string> basic_tokenize(const std::string& text) const;
  // WordPiece ids of one basic token (appended to `out`).
  void wordpiece(const std::string& word, std::vector<int32_t>* out) const;
  // [CLS] wordpieces [SEP]; when longer than max_length, wordpieces are cut so [SEP] stays last.
  // max_length >= 2. Special tokens written in the text ("[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]",
  // exact case) become their ids, as in transformers. Thread-safe (scratch buffers are per thread).
  using Tokenizer::encode;
  void encode(const std::string& text, int max_length, Encoding* out) const override;

  const Vocab& vocab() const { return vocab_; }
  int cls_id() const override { return cls_; }
  int sep_id() const override { return sep_; }
  int pad_id() const override { return pad_; }
  int prefix_specials() const override { return 1; }
  int suffix_specials() const override { return 1; }
  int unk_id() const override { return unk_; }
  int vocab_size() const override { return vocab_.size(); }
  std::string describe() const override;

 private:
  struct Special {
    std::string text;
    int32_t id;
  };

  void wordpiece_bytes(const char* word, std::size_t size, std::size_t chars, std::vector<int32_t>* out) const;

  Vocab vocab_;
  int cls_, sep_, pad_, unk_;
  ByteTrie whole_;         // every token: the first piece of a word
  ByteTrie continuation_;  // "##" tokens without the "##": the later pieces
  std::vector<Special> specials_;
};

}  // namespace bertrain

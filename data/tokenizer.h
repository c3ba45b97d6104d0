// BERT tokenization with Hugging Face BertTokenizer (uncased) semantics: BasicTokenizer (clean control
// characters, split on Unicode whitespace, isolate CJK ideographs, lowercase, NFD + drop combining
// marks, split punctuation) then WordPiece (greedy longest match, "##" continuations, words over 100
// characters and unmatched words become [UNK]), framed as [CLS] ... [SEP]. Unicode data: utf8proc.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

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

 private:
  std::string source_;
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int> ids_;
};

struct Encoding {
  std::vector<int32_t> ids;  // [CLS] tokens [SEP]
  bool truncated = false;    // the text had more tokens than fit in max_length
};

class BertTokenizer {
 public:
  explicit BertTokenizer(Vocab vocab);

  // BasicTokenizer: the list of words (UTF-8) after cleaning, lowercasing, accent stripping, splitting.
  std::vector<std::string> basic_tokenize(const std::string& text) const;
  // WordPiece ids of one basic token (appended to `out`).
  void wordpiece(const std::string& word, std::vector<int32_t>* out) const;
  // [CLS] wordpieces [SEP]; when longer than max_length, wordpieces are cut so [SEP] stays last.
  // max_length >= 2. Special tokens written in the text ("[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]",
  // exact case) become their ids, as in transformers. Thread-safe (scratch buffers are per thread).
  Encoding encode(const std::string& text, int max_length) const;
  // The same into `out`, reusing its capacity.
  void encode(const std::string& text, int max_length, Encoding* out) const;

  const Vocab& vocab() const { return vocab_; }
  int cls_id() const { return cls_; }
  int sep_id() const { return sep_; }
  int pad_id() const { return pad_; }
  int unk_id() const { return unk_; }

 private:
  // Byte trie over vocabulary strings; the root's edges are a direct table, other nodes' edges sorted.
  class Trie {
   public:
    void build(const std::vector<std::pair<std::string, int32_t>>& keys);
    // Id of the longest key that is a prefix of s[0, n) (its byte length in *length), or -1.
    int32_t longest(const char* s, std::size_t n, std::size_t* length) const;

   private:
    struct Node {
      int32_t value = -1;
      uint32_t begin = 0, count = 0;  // edges: labels_/targets_[begin, begin + count)
    };
    std::vector<Node> nodes_;
    std::vector<unsigned char> labels_;
    std::vector<int32_t> targets_;
    std::array<int32_t, 256> root_{};
  };
  struct Special {
    std::string text;
    int32_t id;
  };

  void wordpiece_bytes(const char* word, std::size_t size, std::size_t chars, std::vector<int32_t>* out) const;

  Vocab vocab_;
  int cls_, sep_, pad_, unk_;
  Trie whole_;         // every token: the first piece of a word
  Trie continuation_;  // "##" tokens without the "##": the later pieces
  std::vector<Special> specials_;
};

}  // namespace bertrain

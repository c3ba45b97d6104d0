// A byte trie over UTF-8 strings with an int32 value per key, laid out flat for lookups on the hot path of
// tokenization: WordPiece's longest match (BertTokenizer, HfTokenizer's WordPiece), the Unigram model's
// common-prefix search, added-token matching. The root's edges are a direct 256-entry table (the first byte
// decides most misses); other nodes' edges are sorted byte arrays, searched linearly when short.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace bertrain {

class ByteTrie {
 public:
  // Keys may repeat: the last value given for a key wins (every tokenizer file format here maps a repeated
  // token to its last id). Empty keys are ignored.
  void build(const std::vector<std::pair<std::string, int32_t>>& keys);
  bool empty() const { return nodes_.size() <= 1; }

  // Node reached from the root by byte b, or -1.
  int32_t root_child(unsigned char b) const { return root_[b]; }
  // Node reached from `node` by byte b, or -1.
  int32_t child(int32_t node, unsigned char b) const {
    const Node& nd = nodes_[static_cast<std::size_t>(node)];
    const unsigned char* first = labels_.data() + nd.begin;
    const unsigned char* last = first + nd.count;
    const unsigned char* it = nd.count <= 8 ? std::find(first, last, b) : std::lower_bound(first, last, b);
    return (it != last && *it == b) ? targets_[static_cast<std::size_t>(it - labels_.data())] : -1;
  }
  // Value of the key ending at `node`, or -1.
  int32_t value(int32_t node) const { return nodes_[static_cast<std::size_t>(node)].value; }

  // Value of the longest key that is a prefix of s[0, n) (its byte length in *length), or -1.
  int32_t longest(const char* s, std::size_t n, std::size_t* length) const {
    int32_t best = -1;
    *length = 0;
    if (n == 0) return best;
    int32_t node = root_[static_cast<unsigned char>(s[0])];
    for (std::size_t i = 1; node >= 0; ++i) {
      const Node& nd = nodes_[static_cast<std::size_t>(node)];
      if (nd.value >= 0) {
        best = nd.value;
        *length = i;
      }
      if (i == n || nd.count == 0) break;
      node = child(node, static_cast<unsigned char>(s[i]));
    }
    return best;
  }

  // Calls f(length, value) for every key that is a prefix of s[0, n), shortest first.
  template <class F>
  void prefixes(const char* s, std::size_t n, F&& f) const {
    if (n == 0) return;
    int32_t node = root_[static_cast<unsigned char>(s[0])];
    for (std::size_t i = 1; node >= 0; ++i) {
      const Node& nd = nodes_[static_cast<std::size_t>(node)];
      if (nd.value >= 0) f(i, nd.value);
      if (i == n || nd.count == 0) break;
      node = child(node, static_cast<unsigned char>(s[i]));
    }
  }

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

// WordPiece's greedy longest match of one word (both vocab.txt's and tokenizer.json's WordPiece): the longest token
// of `whole` at the word's start, then again and again the longest of `continuation` (the "##" tokens without their
// prefix) where the last match ended. Appends the ids, or only `unk` when some position matches nothing.
void append_wordpieces(const ByteTrie& whole, const ByteTrie& continuation, const char* word, std::size_t n,
                       int32_t unk, std::vector<int32_t>* out);

}  // namespace bertrain

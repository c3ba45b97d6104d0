#include "data/byte_trie.h"

#include <map>

namespace bertrain {

void ByteTrie::build(const std::vector<std::pair<std::string, int32_t>>& keys) {
  // Build with sorted maps, then lay out every node's edges contiguously, sorted by byte.
  struct Building {
    std::map<unsigned char, int32_t> next;
    int32_t value = -1;
  };
  std::vector<Building> tmp(1);
  for (const auto& [key, value] : keys) {
    if (key.empty()) continue;
    std::size_t node = 0;
    for (const char ch : key) {
      const unsigned char b = static_cast<unsigned char>(ch);
      const auto it = tmp[node].next.find(b);
      if (it == tmp[node].next.end()) {
        tmp.emplace_back();
        const auto child = static_cast<int32_t>(tmp.size() - 1);
        tmp[node].next.emplace(b, child);
        node = static_cast<std::size_t>(child);
      } else {
        node = static_cast<std::size_t>(it->second);
      }
    }
    tmp[node].value = value;
  }
  nodes_.assign(tmp.size(), Node{});
  labels_.clear();
  targets_.clear();
  for (std::size_t i = 0; i < tmp.size(); ++i) {
    nodes_[i].value = tmp[i].value;
    nodes_[i].begin = static_cast<uint32_t>(labels_.size());
    nodes_[i].count = static_cast<uint32_t>(tmp[i].next.size());
    for (const auto& [b, child] : tmp[i].next) {
      labels_.push_back(b);
      targets_.push_back(child);
    }
  }
  root_.fill(-1);
  for (const auto& [b, child] : tmp[0].next) root_[b] = child;
}

void append_wordpieces(const ByteTrie& whole, const ByteTrie& continuation, const char* word, std::size_t n,
                       int32_t unk, std::vector<int32_t>* out) {
  const std::size_t mark = out->size();
  std::size_t length = 0;
  int32_t id = whole.longest(word, n, &length);
  for (std::size_t start = 0;;) {
    if (id < 0) {
      out->resize(mark);
      out->push_back(unk);
      return;
    }
    out->push_back(id);
    start += length;
    if (start == n) return;
    id = continuation.longest(word + start, n - start, &length);
  }
}

}  // namespace bertrain

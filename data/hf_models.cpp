// Rust semantics kept here (tokenizers/src/models/):
//  - WordPiece: a word of more than max_input_chars_per_word characters is the unknown token; otherwise the
//    longest vocabulary match from the left, later pieces with continuing_subword_prefix; a position where
//    nothing matches makes the whole word the unknown token.
//  - BPE: per character a symbol (prefix on all but the first, suffix on the last); a character missing from
//    the vocabulary becomes its <0xHH> byte tokens (byte_fallback, when all exist), else the unknown token
//    (consecutive ones fused with fuse_unk), else it is dropped (no unk_token). Merges are applied as Rust's
//    Word::merge_all does: a heap of (rank, position), a popped merge applied only while its pair still
//    yields the same new token. With ignore_merges a word that is a token is that token. Results are cached
//    per thread (Rust caches words too), words under 256 bytes, up to 10000 entries per tokenizer.
//  - Unigram: Rust's encode_optimized: best path over the byte positions, each vocabulary prefix scored by
//    its piece score, a character no one-character piece covers scored min_score - 10 as the unknown piece;
//    ties keep the first candidate; consecutive unknown pieces fused; unknown pieces become <0xHH> tokens with
//    byte_fallback when all exist.
#include "data/hf_models.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <limits>
#include <queue>
#include <unordered_map>
#include <utility>

#include "core/scratch.h"
#include "data/byte_trie.h"
#include "data/hf_unicode.h"

namespace bertrain {
namespace hf {

namespace {

std::string byte_token(unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", b);
  return buf;
}

// The "vocab" object {token: id} of WordPiece and BPE.
std::unordered_map<std::string, int32_t> read_vocab(const JsonAt& at) {
  if (!at.json().is_object()) at.fail("expected an object {token: id}");
  std::unordered_map<std::string, int32_t> vocab;
  vocab.reserve(at.json().size());
  for (auto it = at.json().begin(); it != at.json().end(); ++it) {
    if (!it.value().is_number_unsigned() || it.value().get<uint64_t>() >= 0x7FFFFFFE) {
      at.fail("token " + json_quote(it.key()) + ": id must be a non-negative integer");
    }
    vocab[it.key()] = static_cast<int32_t>(it.value().get<uint64_t>());
  }
  return vocab;
}

int32_t max_id_plus_one(const std::unordered_map<std::string, int32_t>& vocab) {
  int32_t m = 0;
  for (const auto& kv : vocab) m = std::max(m, kv.second + 1);
  return m;
}

// WordPiece and BPE: the model's "vocab" {token: id}, the ids it spans and the unknown token's id (-1: none).
class VocabModel : public Model {
 public:
  int32_t token_id(const std::string& t) const override {
    const auto it = vocab_.find(t);
    return it == vocab_.end() ? -1 : it->second;
  }
  int32_t unk_id() const override { return unk_; }
  int32_t size() const override { return size_; }

 protected:
  // Reads the "vocab" of the model at `at`.
  void load_vocab(const JsonAt& at) {
    vocab_ = read_vocab(at.at("vocab"));
    size_ = max_id_plus_one(vocab_);
  }
  // The unknown token is `unk` (the model's unk_token), which must be in the vocabulary.
  void set_unk(const JsonAt& at, const std::string& unk) {
    unk_ = token_id(unk);
    if (unk_ < 0) at.at("unk_token").fail("unk_token " + json_quote(unk) + " is not in the vocabulary");
  }

  std::unordered_map<std::string, int32_t> vocab_;
  int32_t unk_ = -1, size_ = 0;
};

class WordPieceModel final : public VocabModel {
 public:
  explicit WordPieceModel(const JsonAt& at) {
    load_vocab(at);
    set_unk(at, at.get_str("unk_token", "[UNK]"));
    prefix_ = at.get_str("continuing_subword_prefix", "##");
    max_chars_ = at.has("max_input_chars_per_word") ? at.at("max_input_chars_per_word").integer() : 100;
    if (max_chars_ < 0) at.at("max_input_chars_per_word").fail("must not be negative (a count of characters)");
    std::vector<std::pair<std::string, int32_t>> all, cont;
    std::vector<std::pair<std::string, int32_t>> sorted(vocab_.begin(), vocab_.end());
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    for (const auto& [t, id] : sorted) {
      all.emplace_back(t, id);
      if (t.size() > prefix_.size() && t.compare(0, prefix_.size(), prefix_) == 0) cont.emplace_back(t.substr(prefix_.size()), id);
    }
    whole_.build(all);
    continuation_.build(cont);
  }

  void tokenize(const char* w, std::size_t n, std::vector<int32_t>* out) const override {
    std::size_t chars = 0;
    for (std::size_t i = 0; i < n; ++i) chars += (static_cast<unsigned char>(w[i]) & 0xC0) != 0x80;
    if (static_cast<int64_t>(chars) > max_chars_) {
      out->push_back(unk_);
      return;
    }
    append_wordpieces(whole_, continuation_, w, n, unk_, out);
  }
  std::string name() const override { return "WordPiece"; }

 private:
  std::string prefix_;
  int64_t max_chars_ = 100;
  ByteTrie whole_, continuation_;
};

class BpeModel final : public VocabModel {
 public:
  explicit BpeModel(const JsonAt& at) : instance_(next_instance()) {
    if (at.has("dropout")) {
      const double d = at.at("dropout").number();
      if (d > 0) at.at("dropout").fail("unsupported BPE dropout " + std::to_string(d) + " (random; only null or 0)");
    }
    load_vocab(at);
    prefix_ = at.get_str("continuing_subword_prefix", "");
    suffix_ = at.get_str("end_of_word_suffix", "");
    fuse_unk_ = at.get_bool("fuse_unk", false);
    byte_fallback_ = at.get_bool("byte_fallback", false);
    ignore_merges_ = at.get_bool("ignore_merges", false);
    if (at.has("unk_token")) set_unk(at, at.at("unk_token").str());
    if (byte_fallback_) {
      for (int b = 0; b < 256; ++b) {
        const auto it = vocab_.find(byte_token(static_cast<unsigned char>(b)));
        byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
      }
    }
    const JsonAt merges = at.at("merges");
    const std::size_t n = merges.size();
    merges_.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      const JsonAt m = merges.at(i);
      std::string a, b;
      if (m.json().is_string()) {
        const std::string line = m.str();
        const std::size_t sp = line.find(' ');
        if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos) {
          m.fail("merge " + json_quote(line) + " is not two tokens separated by one space");
        }
        a = line.substr(0, sp);
        b = line.substr(sp + 1);
      } else if (m.json().is_array() && m.json().size() == 2) {
        a = m.at(std::size_t{0}).str();
        b = m.at(1).str();
      } else {
        m.fail("a merge is \"a b\" or [\"a\", \"b\"]");
      }
      const auto ia = vocab_.find(a), ib = vocab_.find(b);
      if (ia == vocab_.end()) m.fail("merge token " + json_quote(a) + " is not in the vocabulary");
      if (ib == vocab_.end()) m.fail("merge token " + json_quote(b) + " is not in the vocabulary");
      // The merged token drops b's continuing-subword prefix (Rust: a + b[prefix_len..]).
      const std::size_t cut = (!prefix_.empty() && b.compare(0, prefix_.size(), prefix_) == 0) ? prefix_.size() : 0;
      const std::string merged = a + b.substr(std::min(cut, b.size()));
      const auto im = vocab_.find(merged);
      if (im == vocab_.end()) m.fail("merged token " + json_quote(merged) + " is not in the vocabulary");
      merges_[pair_key(ia->second, ib->second)] = {static_cast<int32_t>(i), im->second};
    }
  }

  void tokenize(const char* w, std::size_t n, std::vector<int32_t>* out) const override {
    if (ignore_merges_) {
      const int32_t id = lookup(w, n);
      if (id >= 0) {
        out->push_back(id);
        return;
      }
    }
    Scratch& sc = scratch();
    const bool cacheable = n < kMaxCachedBytes;
    if (cacheable) {
      Cache& cache = sc.cache[instance_];
      sc.key.assign(w, n);
      const auto it = cache.find(sc.key);
      if (it != cache.end()) {
        out->insert(out->end(), it->second.begin(), it->second.end());
        return;
      }
      const std::size_t mark = out->size();
      merge_word(w, n, sc, out);
      if (cache.size() < kCacheCapacity) {
        cache.emplace(sc.key, std::vector<int32_t>(out->begin() + static_cast<std::ptrdiff_t>(mark), out->end()));
      }
      return;
    }
    merge_word(w, n, sc, out);
    release_if_large(sc.symbols);  // a long word's (core/scratch.h)
    release_if_large(sc.heap);
    release_if_large(sc.piece);
  }
  std::string name() const override { return "BPE"; }

 private:
  static constexpr std::size_t kMaxCachedBytes = 256;
  static constexpr std::size_t kCacheCapacity = 10000;
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    uint32_t len;  // bytes of the word it covers; 0 once merged into its left neighbour
  };
  struct Merge {
    int32_t rank, pos, new_id;
    bool operator<(const Merge& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }  // min-heap
  };
  using Cache = std::unordered_map<std::string, std::vector<int32_t>>;
  struct Scratch {
    std::vector<Symbol> symbols;
    std::vector<Merge> heap;
    std::string piece, key;
    std::unordered_map<uint64_t, Cache> cache;  // by model instance
  };
  static Scratch& scratch() {
    thread_local Scratch s;
    return s;
  }
  static uint64_t next_instance() {
    static std::atomic<uint64_t> counter{0};
    return ++counter;
  }
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  int32_t lookup(const char* s, std::size_t n) const {
    thread_local std::string key;
    key.assign(s, n);
    const int32_t id = token_id(key);
    release_if_large(key);
    return id;
  }

  void merge_word(const char* w, std::size_t n, Scratch& sc, std::vector<int32_t>* out) const {
    std::vector<Symbol>& sym = sc.symbols;
    sym.clear();
    int32_t pending_unk = -1;
    uint32_t pending_len = 0;
    auto add = [&](int32_t id, uint32_t len) {
      const auto k = static_cast<int32_t>(sym.size());
      sym.push_back({id, k - 1, -1, len});
      if (k > 0) sym[static_cast<std::size_t>(k - 1)].next = k;
    };
    for (std::size_t i = 0; i < n;) {
      std::size_t len = 0;
      decode_utf8(w + i, n - i, &len);
      const bool first = i == 0, last = i + len == n;
      sc.piece.clear();
      if (!first) sc.piece += prefix_;
      sc.piece.append(w + i, len);
      if (last) sc.piece += suffix_;
      const auto it = vocab_.find(sc.piece);
      if (it != vocab_.end()) {
        if (pending_unk >= 0) {
          add(pending_unk, pending_len);
          pending_unk = -1;
        }
        add(it->second, static_cast<uint32_t>(len));
      } else {
        bool done = false;
        if (byte_fallback_) {
          // Rust looks up the bytes of the symbol string (prefix / suffix included).
          bool all = true;
          for (const char ch : sc.piece) all = all && byte_ids_[static_cast<unsigned char>(ch)] >= 0;
          if (all) {
            // Rust adds the byte tokens without first flushing a pending unknown token.
            for (const char ch : sc.piece) add(byte_ids_[static_cast<unsigned char>(ch)], 1);
            done = true;
          }
        }
        if (!done && unk_ >= 0) {
          if (pending_unk >= 0 && fuse_unk_) {
            pending_len += static_cast<uint32_t>(len);
          } else {
            if (pending_unk >= 0) add(pending_unk, pending_len);
            pending_unk = unk_;
            pending_len = static_cast<uint32_t>(len);
          }
        }
      }
      i += len;
    }
    if (pending_unk >= 0) add(pending_unk, pending_len);

    std::vector<Merge>& heap = sc.heap;
    heap.clear();
    for (std::size_t k = 0; k + 1 < sym.size(); ++k) {
      const auto m = merges_.find(pair_key(sym[k].id, sym[k + 1].id));
      if (m != merges_.end()) heap.push_back({m->second.first, static_cast<int32_t>(k), m->second.second});
    }
    std::make_heap(heap.begin(), heap.end());
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end());
      const Merge top = heap.back();
      heap.pop_back();
      Symbol& cur = sym[static_cast<std::size_t>(top.pos)];
      if (cur.len == 0 || cur.next == -1) continue;
      const auto next_pos = static_cast<std::size_t>(cur.next);
      const Symbol right = sym[next_pos];
      const auto m = merges_.find(pair_key(cur.id, right.id));
      if (m == merges_.end() || m->second.second != top.new_id) continue;
      cur.id = top.new_id;
      cur.len += right.len;
      cur.next = right.next;
      sym[next_pos].len = 0;
      if (right.next >= 0) sym[static_cast<std::size_t>(right.next)].prev = top.pos;
      if (cur.prev >= 0) {
        const auto pm = merges_.find(pair_key(sym[static_cast<std::size_t>(cur.prev)].id, cur.id));
        if (pm != merges_.end()) {
          heap.push_back({pm->second.first, cur.prev, pm->second.second});
          std::push_heap(heap.begin(), heap.end());
        }
      }
      if (cur.next >= 0) {
        const auto nm = merges_.find(pair_key(cur.id, sym[static_cast<std::size_t>(cur.next)].id));
        if (nm != merges_.end()) {
          heap.push_back({nm->second.first, top.pos, nm->second.second});
          std::push_heap(heap.begin(), heap.end());
        }
      }
    }
    for (const Symbol& s : sym) {
      if (s.len > 0) out->push_back(s.id);
    }
  }

  uint64_t instance_;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  // (a, b) -> (rank, merged id)
  std::string prefix_, suffix_;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  int32_t byte_ids_[256] = {};
};

class UnigramModel : public Model {
 public:
  explicit UnigramModel(const JsonAt& at) : source_(*at.source) {
    const JsonAt vocab = at.at("vocab");
    const std::size_t n = vocab.size();
    if (n == 0) vocab.fail("empty Unigram vocabulary");
    pieces_.reserve(n);
    scores_.reserve(n);
    std::vector<std::pair<std::string, int32_t>> keys;
    keys.reserve(n);
    min_score_ = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < n; ++i) {
      const JsonAt entry = vocab.at(i);
      if (!entry.json().is_array() || entry.json().size() != 2) entry.fail("expected [piece, score]");
      pieces_.push_back(entry.at(std::size_t{0}).str());
      scores_.push_back(entry.at(1).number());
      min_score_ = std::min(min_score_, scores_.back());
      keys.emplace_back(pieces_.back(), static_cast<int32_t>(i));
      ids_[pieces_.back()] = static_cast<int32_t>(i);  // a repeated piece: its last id, as Rust's map
    }
    trie_.build(keys);
    if (at.has("unk_id")) {
      const int64_t u = at.at("unk_id").integer();
      if (u < 0 || static_cast<std::size_t>(u) >= n) at.at("unk_id").fail("unk_id " + std::to_string(u) + " is not in the vocabulary");
      unk_ = static_cast<int32_t>(u);
    }
    byte_fallback_ = at.get_bool("byte_fallback", false);
    if (byte_fallback_) {
      for (int b = 0; b < 256; ++b) {
        const auto it = ids_.find(byte_token(static_cast<unsigned char>(b)));
        byte_ids_[b] = it == ids_.end() ? -1 : it->second;
      }
    }
  }

  void tokenize(const char* w, std::size_t n, std::vector<int32_t>* out) const override {
    Scratch& sc = scratch();
    sc.nodes.assign(n + 1, Node{});
    const double unk_score = min_score_ - 10.0;
    for (std::size_t start = 0; start < n;) {
      const double here = sc.nodes[start].score;
      std::size_t mblen = 0;
      decode_utf8(w + start, n - start, &mblen);
      bool single = false;
      trie_.prefixes(w + start, n - start, [&](std::size_t len, int32_t id) {
        Node& t = sc.nodes[start + len];
        const double cand = scores_[static_cast<std::size_t>(id)] + here;
        if (t.start < 0 || cand > t.score) {
          t.score = cand;
          t.start = static_cast<int64_t>(start);
          t.id = id;
        }
        if (len == mblen) single = true;
      });
      if (!single) {
        Node& t = sc.nodes[start + mblen];
        const double cand = unk_score + here;
        if (t.start < 0 || cand > t.score) {
          if (unk_ < 0) throw InputError(source_ + ": a character of the text has no piece and the Unigram model has no "
                                                   "unk_id (the tokenizers package fails on it too)");
          t.score = cand;
          t.start = static_cast<int64_t>(start);
          t.id = unk_;
        }
      }
      start += mblen;
    }
    // Back from the end: pieces in reverse, unknown runs fused.
    std::vector<std::pair<std::size_t, std::size_t>>& path = sc.path;  // [begin, end) of each piece, reversed
    path.clear();
    std::size_t end = n;
    std::size_t unk_end = 0;
    bool in_unk = false;
    while (end > 0) {
      const Node& node = sc.nodes[end];
      const auto start = static_cast<std::size_t>(node.start);
      if (node.id == unk_) {
        if (!in_unk) unk_end = end;
        in_unk = true;
      } else {
        if (in_unk) path.emplace_back(end, unk_end);
        in_unk = false;
        path.emplace_back(start, end);
      }
      end = start;
    }
    if (in_unk) path.emplace_back(0, unk_end);
    for (std::size_t k = path.size(); k-- > 0;) {
      const auto [b, e] = path[k];
      sc.key.assign(w + b, e - b);
      const auto it = ids_.find(sc.key);
      if (it != ids_.end()) {
        out->push_back(it->second);
        continue;
      }
      if (byte_fallback_) {
        bool all = true;
        for (std::size_t i = b; i < e; ++i) all = all && byte_ids_[static_cast<unsigned char>(w[i])] >= 0;
        if (all) {
          for (std::size_t i = b; i < e; ++i) out->push_back(byte_ids_[static_cast<unsigned char>(w[i])]);
          continue;
        }
      }
      if (unk_ < 0) throw InputError(source_ + ": a piece of the text is unknown and the Unigram model has no unk_id "
                                               "(the tokenizers package fails on it too)");
      out->push_back(unk_);
    }
    release_if_large(sc.nodes);  // a long word's (core/scratch.h)
    release_if_large(sc.path);
    release_if_large(sc.key);
  }
  int32_t token_id(const std::string& t) const override {
    const auto it = ids_.find(t);
    return it == ids_.end() ? -1 : it->second;
  }
  int32_t unk_id() const override { return unk_; }
  int32_t size() const override { return static_cast<int32_t>(pieces_.size()); }
  std::string name() const override { return "Unigram"; }

 private:
  struct Node {
    double score = 0;
    int64_t start = -1;
    int32_t id = -1;
  };
  struct Scratch {
    std::vector<Node> nodes;
    std::vector<std::pair<std::size_t, std::size_t>> path;
    std::string key;
  };
  static Scratch& scratch() {
    thread_local Scratch s;
    return s;
  }

  std::string source_;  // the file, for errors found while encoding
  std::vector<std::string> pieces_;
  std::vector<double> scores_;
  std::unordered_map<std::string, int32_t> ids_;
  ByteTrie trie_;
  double min_score_ = 0;
  int32_t unk_ = -1;
  bool byte_fallback_ = false;
  int32_t byte_ids_[256] = {};
};

}  // namespace

std::unique_ptr<Model> make_model(const JsonAt& at) {
  if (at.json().is_null()) at.fail("a tokenizer needs a model");
  // Files written by old tokenizers versions may omit "type"; the fields say which model it is.
  std::string type;
  if (at.has("type")) type = at.type();
  else if (at.has("merges")) type = "BPE";
  else if (at.has("vocab") && at.at("vocab").json().is_array()) type = "Unigram";
  else type = "WordPiece";
  if (type == "WordPiece") return std::make_unique<WordPieceModel>(at);
  if (type == "BPE") return std::make_unique<BpeModel>(at);
  if (type == "Unigram") return std::make_unique<UnigramModel>(at);
  at.fail("unsupported model type " + json_quote(type) + " (supported: WordPiece, BPE, Unigram)");
}

}  // namespace hf
}  // namespace bertrain

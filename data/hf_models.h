// tokenizer.json models (Hugging Face tokenizers' models/*), word -> ids: WordPiece (greedy longest match),
// BPE (merge ranks, byte fallback, unknown-token fusing, continuing-subword prefix / end-of-word suffix,
// ignore_merges; no dropout) and Unigram (SentencePiece's Viterbi over piece scores). make_model refuses any
// other model type or an unsupported option by name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/hf_json.h"

namespace bertrain {
namespace hf {

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of one pre-tokenized word (valid UTF-8, n >= 1 bytes).
  virtual void tokenize(const char* word, std::size_t n, std::vector<int32_t>* out) const = 0;
  // Id of a token of the vocabulary, or -1 (added tokens take the model's id when it has one).
  virtual int32_t token_id(const std::string& token) const = 0;
  virtual int32_t unk_id() const = 0;  // -1 when the model has none
  virtual int32_t size() const = 0;    // one more than its largest id
  virtual std::string name() const = 0;
};

std::unique_ptr<Model> make_model(const JsonAt& at);

}  // namespace hf
}  // namespace bertrain

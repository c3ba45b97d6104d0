// tokenizer.json normalizers (Hugging Face tokenizers' normalizers/*.rs semantics, ids only, so no alignment
// tracking): BertNormalizer, Sequence, NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, Strip, Replace (String
// pattern; Regex: a literal, or one character repeated as " {2,}"), Prepend, Precompiled (SentencePiece's compiled
// character map). make_normalizer refuses anything else with an Error naming the component.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/hf_json.h"

namespace bertrain {
namespace hf {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Rewrites *s (valid UTF-8); *tmp is scratch space the call may use (swapped with *s).
  virtual void normalize(std::string* s, std::string* tmp) const = 0;
};

// The normalizer described at `at` (null JSON: nullptr, no normalization).
std::unique_ptr<Normalizer> make_normalizer(const JsonAt& at);

}  // namespace hf
}  // namespace bertrain

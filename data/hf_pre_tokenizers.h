// tokenizer.json pre-tokenizers (Hugging Face tokenizers' pre_tokenizers/*.rs semantics, ids only): they cut a
// normalized piece of text into the words the model sees, and ByteLevel and Metaspace also rewrite them.
// Supported: BertPreTokenizer, ByteLevel (add_prefix_space, use_regex with the GPT-2 pattern, the
// byte-to-unicode map), Metaspace (replacement, prepend_scheme / add_prefix_space, split), Whitespace,
// WhitespaceSplit, Punctuation, Digits, Sequence. make_pre_tokenizer refuses anything else by name.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/hf_json.h"

namespace bertrain {
namespace hf {

// Words as byte spans of one buffer. `first`: the span starts at byte 0 of the original text (Metaspace's
// prepend_scheme "first").
struct Span {
  uint32_t begin, end;
  bool first;
};
struct Pieces {
  std::string text;
  std::vector<Span> spans;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Rewrites *p; *tmp is scratch space the call may use (swapped with *p).
  virtual void apply(Pieces* p, Pieces* tmp) const = 0;
};

// The pre-tokenizer described at `at` (null JSON: nullptr, the whole piece is one word).
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const JsonAt& at);

}  // namespace hf
}  // namespace bertrain

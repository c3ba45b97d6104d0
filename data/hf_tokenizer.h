// Tokenizers from tokenizer.json, the file Hugging Face tokenizers (Rust) serializes and every hub model ships,
// with token ids equal to tokenizers' for the components these model families use:
//   normalizer     BertNormalizer, Sequence, NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, Strip,
//                  Replace (String pattern; Regex: a literal or one character repeated, as " {2,}"),
//                  Prepend, Precompiled (SentencePiece), null
//   pre_tokenizer  BertPreTokenizer, ByteLevel, Metaspace, Whitespace, WhitespaceSplit, Punctuation, Digits,
//                  Sequence, null
//   model          WordPiece (BERT, DistilBERT, ELECTRA), BPE (byte-level: RoBERTa, GPT-2), Unigram (XLM-R)
//   post_processor TemplateProcessing (its single template), RobertaProcessing, BertProcessing, ByteLevel,
//                  Sequence, null
//   added_tokens   cut out of the raw text before normalization (normalized: false) or of each normalized
//                  piece (normalized: true) as tokenizers' AddedVocabulary does: leftmost-longest match,
//                  single_word, lstrip, rstrip.
// Anything else (another type, BPE dropout, any other Regex Replace pattern, a template without special tokens) is an
// Error naming the file, the JSON path and the component; never a silently different tokenization. The
// file's own "truncation" and "padding" are ignored: bertrain's --max-length decides, and rows are packed,
// not padded. The "decoder" is ignored (bertrain never decodes).
//
// Known limits: Unicode data comes from utf8proc, Rust's from its crates' tables, which can be of other Unicode
// versions (characters assigned in between classify differently); Metaspace's prepend_scheme "first" treats a
// piece as first when it starts at byte 0 of the text after normalization. Invalid UTF-8 in the text (Rust
// accepts only valid strings) is read as U+FFFD per invalid sequence.
//
// Speed: per-thread scratch buffers (no heap growth per call once warm), byte tries for WordPiece, Unigram and
// added tokens, a per-thread word cache for BPE.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "data/tokenizer.h"

namespace bertrain {

class HfTokenizer : public Tokenizer {
 public:
  // Reads and checks tokenizer.json; Errors name the file (and the JSON path of what is refused).
  static HfTokenizer load(const std::string& tokenizer_json_path);
  // The same from parsed JSON; `source` names it in errors and describe().
  static HfTokenizer from_json(const nlohmann::json& json, const std::string& source);

  HfTokenizer(HfTokenizer&&) noexcept;
  HfTokenizer& operator=(HfTokenizer&&) noexcept;
  ~HfTokenizer() override;

  using Tokenizer::encode;
  void encode(const std::string& text, int max_length, Encoding* out) const override;
  int cls_id() const override;
  int sep_id() const override;
  int pad_id() const override;
  int prefix_specials() const override;
  int suffix_specials() const override;
  int unk_id() const override;
  int vocab_size() const override;
  std::string describe() const override;

 private:
  struct Impl;
  explicit HfTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace bertrain

// libFuzzer target: bytes -> vocab.txt -> Vocab::load (a path, so through a scratch file) ->
// BertTokenizer, then a fixed text tokenized at several lengths. bertrain::Error (invalid UTF-8,
// empty file, missing [CLS]/[SEP]/[PAD]/[UNK]) is the documented rejection.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/tokenizer.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

// Exercises the basic tokenizer and WordPiece: accents, CJK, punctuation, control characters, special
// tokens written in the text, "##" lookalikes, a long word and a word over 100 characters.
const std::string kText =
    "[CLS] Héllo, wörld! Transfer-learning with transformers: BERT's ##subword pieces; "
    "naïve café 日本語テキスト \t\r\n\x01 [SEP] [MASK] [UNK] [PAD] unaffable running jumped "
    "supercalifragilisticexpialidocious " + std::string(120, 'a') + " ÅΣσς ﬁ ① \xe2\x80\x8b end.";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string& path = bertrain_fuzz::write_scratch("vocab", data, size);
  try {
    bertrain::Vocab vocab = bertrain::Vocab::load(path);
    volatile int sink = vocab.size();
    for (int id = 0; id < vocab.size(); ++id) {
      if (vocab.find(vocab.token(id)) < id) __builtin_trap();  // the LAST line of a token wins
    }
    bertrain::BertTokenizer tokenizer(std::move(vocab));
    for (int max_length : {2, 3, 16, 512}) {
      const bertrain::Encoding e = tokenizer.encode(kText, max_length);
      bertrain_fuzz::check_framed(tokenizer, e, max_length);
      sink = sink + static_cast<int>(e.ids.size());
    }
    for (const std::string& w : tokenizer.basic_tokenize(kText)) sink = sink + static_cast<int>(w.size());
    (void)sink;
  } catch (const bertrain::Error&) {
    // Rejected cleanly.
  }
  return 0;
}

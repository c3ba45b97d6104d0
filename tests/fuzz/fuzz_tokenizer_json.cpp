// libFuzzer target: bytes -> tokenizer.json -> HfTokenizer::load (a path, so through a scratch file), then a
// fixed text encoded at several lengths. bertrain::Error (bad JSON, a missing field, an unsupported component,
// ids out of range) is the documented rejection; anything else, a crash or an id outside the vocabulary is a
// finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "data/hf_tokenizer.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

// Accents, CJK, emoji with ZWJ, control and zero-width characters, special tokens written in the text, a long
// word and invalid UTF-8.
const std::string kText =
    "<s> Héllo, wörld! [CLS] don't <mask> naïve café 日本語 👨\u200d👩\u200d👧 \t\r\n\x01 \xe2\x80\x8b ﬁ ① "
    "deep learning " + std::string(130, 'a') + " \xff\xfe end.";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string& path = bertrain_fuzz::write_scratch("tokenizer_json", data, size);
  try {
    const bertrain::HfTokenizer tokenizer = bertrain::HfTokenizer::load(path);
    for (int max_length : {2, 3, 16, 512}) {
      bertrain::Encoding e;
      try {
        e = tokenizer.encode(kText, max_length);
      } catch (const bertrain::Error&) {
        continue;  // max_length below the template's specials, or a Unigram model without unk_id
      }
      bertrain_fuzz::check_framed(tokenizer, e, max_length);
    }
  } catch (const bertrain::Error&) {
    // Rejected cleanly.
  }
  return 0;
}

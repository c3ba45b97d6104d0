// libFuzzer target: bytes -> a model directory's older tokenizer files -> load_tokenizer (data/tokenizer_files.h),
// then a fixed text encoded at several lengths. The first byte picks the layout (modulo 3: 0 vocab.json,
// merges.txt, tokenizer_config.json, special_tokens_map.json; 1 vocab.txt, tokenizer_config.json,
// special_tokens_map.json; 2 config.json, tokenizer_config.json, special_tokens_map.json, sentencepiece.bpe.model),
// the rest is split at NUL bytes into those files in order (a file the input does not reach is absent), but for
// a SentencePiece model, which is binary and takes all the bytes after the files before it.
// bertrain::Error is the documented rejection; anything else, a crash or an id outside the vocabulary is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/tokenizer_loader.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

const std::string kText = "<s> Héllo, WÖRLD! [CLS] don't <mask> naïve 日本語 \t\x01 ﬁ deep  learning   end.";

// This process's scratch folder, emptied for every input and removed at exit.
const std::string& scratch_dir() {
  static const std::string dir = bertrain_fuzz::scratch_path("tokenizer_files");
  static const bool registered = [] {
    return std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }) == 0;
  }();
  (void)registered;
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::vector<std::vector<const char*>> layouts = {
      {"vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json"},
      {"vocab.txt", "tokenizer_config.json", "special_tokens_map.json"},
      {"config.json", "tokenizer_config.json", "special_tokens_map.json", "sentencepiece.bpe.model"}};
  const std::vector<const char*>& names = layouts[data[0] % layouts.size()];
  const std::string& dir = scratch_dir();
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  std::filesystem::create_directories(dir);
  std::size_t begin = 1;
  for (const char* name : names) {
    if (begin > size) break;
    std::size_t end = begin;
    const bool binary = std::string(name) == "sentencepiece.bpe.model";
    while (end < size && (binary || data[end] != 0)) ++end;
    std::FILE* f = std::fopen((dir + "/" + name).c_str(), "wb");
    if (f == nullptr) std::abort();  // the harness itself is broken: not a parser finding
    if (end > begin && std::fwrite(data + begin, 1, end - begin, f) != end - begin) std::abort();
    std::fclose(f);
    begin = end + 1;
  }
  try {
    const std::unique_ptr<bertrain::Tokenizer> tokenizer = bertrain::load_tokenizer(dir);
    for (int max_length : {2, 3, 16, 512}) {
      bertrain::Encoding e;
      try {
        e = tokenizer->encode(kText, max_length);
      } catch (const bertrain::Error&) {
        continue;  // max_length below the template's specials
      }
      bertrain_fuzz::check_framed(*tokenizer, e, max_length);
    }
  } catch (const bertrain::Error&) {
    // Rejected cleanly.
  }
  return 0;
}

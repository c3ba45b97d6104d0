// Replays a fuzz target's corpus without libFuzzer: every file under the folders given on the command line
// is fed once to LLVMFuzzerTestOneInput, in name order. The normal test suite (GCC, and ./bertrain.sh asan
// under AddressSanitizer + UBSan) runs the committed seeds this way, so every input a fuzzer kept, findings
// included, stays a regression test without clang. A crash, a sanitizer report or an uncaught exception
// fails the test; a clean bertrain::Error is the target's own business.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    if (!fs::is_directory(argv[i])) {
      std::fprintf(stderr, "replay_corpus: %s is not a folder\n", argv[i]);
      return 2;
    }
    for (const auto& entry : fs::recursive_directory_iterator(argv[i])) {
      if (entry.is_regular_file()) inputs.push_back(entry.path());
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "replay_corpus: no inputs (usage: replay_corpus FOLDER...)\n");
    return 2;
  }
  std::sort(inputs.begin(), inputs.end());
  for (const fs::path& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("replay_corpus: %zu inputs replayed, none crashed\n", inputs.size());
  return 0;
}

#include "core/file_hash.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <vector>

#include "core/error.h"

namespace bertrain {

std::string file_fingerprint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  BERTRAIN_CHECK(in, path << ": cannot be read");
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a offset basis and prime
  uint64_t bytes = 0;
  std::vector<char> chunk(1 << 16);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const std::streamsize n = in.gcount();
    for (std::streamsize i = 0; i < n; ++i) {
      hash = (hash ^ static_cast<unsigned char>(chunk[static_cast<std::size_t>(i)])) * 0x100000001b3ull;
    }
    bytes += static_cast<uint64_t>(n);
  }
  BERTRAIN_CHECK(in.eof(), path << ": read error");
  char text[64];
  std::snprintf(text, sizeof(text), "fnv1a64:%016llx:%llu", static_cast<unsigned long long>(hash),
                static_cast<unsigned long long>(bytes));
  return text;
}

}  // namespace bertrain

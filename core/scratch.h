// Per-thread scratch buffers (text cleaning, tokenizers) are reused so that encoding a text allocates nothing once
// warm. One that a long text grew is let go after the call instead of kept: serve encodes on each of its hundreds of
// connection threads, and 2 MiB texts left tens of megabytes on each (a MiniLM server grew from 0.4 to 5.1 GB after
// two bursts of 300 such requests and stayed there).
#pragma once

#include <cstddef>

namespace bertrain {

// The largest scratch buffer a thread keeps between calls.
inline constexpr std::size_t kKeptScratchBytes = std::size_t{1} << 20;

// Frees `buffer` (a std::vector or std::string) when its capacity is over kKeptScratchBytes; else keeps it.
template <class Buffer>
void release_if_large(Buffer& buffer) {
  if (buffer.capacity() * sizeof(typename Buffer::value_type) > kKeptScratchBytes) Buffer().swap(buffer);
}

}  // namespace bertrain

// UTF-8 repair shared by the CSV, TSV and JSON Lines readers: invalid sequences become U+FFFD, one per
// maximal invalid subsequence (as Python's errors="replace"), so a stray byte in a user's file is never an
// error. The readers repair each field or line rather than each chunk they read: a chunk boundary can fall
// inside a multi-byte character, and repairing the two halves apart would turn one valid character into two
// replacements. The split is safe at any ASCII byte, since no invalid subsequence runs across one.
#pragma once

#include <cstddef>
#include <string>

namespace bertrain {

// Replaces invalid UTF-8 sequences by U+FFFD (maximal-subpart rule); valid text is returned unchanged.
std::string sanitize_utf8(const std::string& text);

// The same in place; no copy in the common case of valid text.
void sanitize_utf8_in_place(std::string* text);

// Length of the valid sequence starting at p[0] (*valid true), or of the maximal invalid subpart there
// (>= 1 byte, *valid false); n >= 1 bytes are available. A sequence cut off by the end of the n bytes is
// an invalid subpart, so callers pass everything up to the next ASCII byte or the end of the text.
std::size_t utf8_sequence(const char* p, std::size_t n, bool* valid);

}  // namespace bertrain

// UTF-8 as the dataset readers need it: the length of one sequence (valid, or the maximal invalid subpart
// Unicode defines), for the check that a dataset file is UTF-8 text (chunked_input.h) and for counting
// characters in positions; and the escaping that lets an error message quote any bytes of a user's file on one
// line of valid UTF-8.
#pragma once

#include <cstddef>
#include <string>

namespace bertrain {

// Length of the valid sequence starting at p[0] (*valid true), or of the maximal invalid subpart there
// (>= 1 byte, *valid false); n >= 1 bytes are available. A sequence cut off by the end of the n bytes is
// an invalid subpart, so callers pass everything up to the next ASCII byte or the end of the text.
std::size_t utf8_sequence(const char* p, std::size_t n, bool* valid);

// Whether all of `text` is valid UTF-8.
bool is_valid_utf8(const std::string& text);

// `text` as a message may quote it: valid characters as they are, except control characters (U+0000..U+001F,
// U+007F..U+009F) and bytes that are not valid UTF-8, which are written as \xHH per byte (é in Latin-1 is
// \xE9, a tab \x09, a C1 control \xC2\x85). The result is one line of valid UTF-8.
std::string escape_for_message(const std::string& text);

}  // namespace bertrain

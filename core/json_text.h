// JSON from outside the program (config and tokenizer files, run files a user may edit, serve's request bodies),
// parsed with a bound on nesting. nlohmann::json's parser is iterative, but copying, comparing and dumping a value
// recurse once per level: a file nested some 150,000 arrays deep (half a megabyte) parsed fine and then overflowed
// the stack when copied (SIGSEGV, no message). No file or request bertrain reads nests more than a few levels, so a
// value nested deeper than kMaxJsonDepth is refused by name instead.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace bertrain {

inline constexpr int kMaxJsonDepth = 512;

// json::parse(text) (throwing json::parse_error and friends as it does), except that a text with a value nested
// deeper than kMaxJsonDepth is not built: *too_deep says so (the result is then null) and the caller refuses it.
// Linear in the text's length.
nlohmann::json parse_json_bounded(const std::string& text, bool* too_deep);
// The same with every floating-point number (and integer too long for 64 bits) read from its text by `read_float`
// (when not null) instead of correctly rounded: another program's reading of the same file (tokenizer.json as Rust
// reads it).
nlohmann::json parse_json_bounded(const std::string& text, bool* too_deep, double (*read_float)(const std::string&));

// The JSON of `text`, or Error "<what>: invalid JSON: <the parser's reason>" / "<what>: JSON nested deeper than 512
// levels".
nlohmann::json parse_json(const std::string& text, const std::string& what);

// The JSON of `text`, or a discarded value (is_discarded()) when it is not valid JSON or nests too deep (then
// *too_deep, when given, is true).
nlohmann::json parse_json_or_discarded(const std::string& text, bool* too_deep = nullptr);

}  // namespace bertrain

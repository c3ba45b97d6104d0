// Standard base64 (RFC 4648, '+' and '/', '=' padding), as tokenizer.json stores a Precompiled normalizer's
// character map: decoded when a tokenizer.json is read (hf_normalizers.cpp), encoded when one is built from a
// SentencePiece model (tokenizer_files.cpp).
#pragma once

#include <string>

namespace bertrain {

std::string encode_base64(const std::string& bytes);

// False when `text` has a character outside the alphabet or anything but '=' after the first '='.
bool decode_base64(const std::string& text, std::string* bytes);

}  // namespace bertrain

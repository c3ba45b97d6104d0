// Made-With-ML's clean_text (madewithml/data.py), reproduced exactly (README: Predicting with transformers):
// lowercase; drop NLTK English stopwords as whole words (Python re \b semantics: any Unicode letter,
// digit or '_' is a word character) with the whitespace after them; pad ASCII punctuation with spaces;
// collapse every run of characters outside [A-Za-z0-9] to one space; collapse spaces and strip;
// remove "http\S+". The result holds only [a-z0-9 ].
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace bertrain {

// The 179 NLTK English stopwords in the order the original code joins them into its regex.
const std::vector<std::string>& nltk_english_stopwords();

// Cleans UTF-8 `text` exactly as Made-With-ML's clean_text(text) with its default stopwords. The text is cleaned a
// piece of about kCleanPieceBytes at a time (a code point per character of the piece is held, not of the text), and
// with `enough_words`, cleaning stops after the first piece that brings the result past that many words: the result
// is then the start of the whole text's, holding more than `enough_words` whole words (a 100 MB field is not
// cleaned whole when only its first words can be encoded).
constexpr std::size_t kCleanPieceBytes = 64 * 1024;
std::string clean_text(const std::string& text, std::size_t enough_words = SIZE_MAX);
// clean_text with pieces of `piece_bytes` (the tests compare sizes).
std::string clean_text_in_pieces(const std::string& text, std::size_t enough_words, std::size_t piece_bytes);

}  // namespace bertrain

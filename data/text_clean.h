// Made-With-ML's clean_text (madewithml/data.py), reproduced exactly (README: Predicting with transformers):
// lowercase; drop NLTK English stopwords as whole words (Python re \b semantics: any Unicode letter,
// digit or '_' is a word character) with the whitespace after them; pad ASCII punctuation with spaces;
// collapse every run of characters outside [A-Za-z0-9] to one space; collapse spaces and strip;
// remove "http\S+". The result holds only [a-z0-9 ].
#pragma once

#include <string>
#include <vector>

namespace bertrain {

// The 179 NLTK English stopwords in the order the original code joins them into its regex.
const std::vector<std::string>& nltk_english_stopwords();

// Cleans UTF-8 `text` exactly as Made-With-ML's clean_text(text) with its default stopwords.
std::string clean_text(const std::string& text);

}  // namespace bertrain

// The tokenizer of a model directory: its tokenizer.json when it has one (HfTokenizer: what transformers uses),
// else its vocab.txt (BertTokenizer, BERT uncased rules).
#pragma once

#include <memory>
#include <string>

#include "data/tokenizer.h"

namespace bertrain {

// Throws Error naming the directory and both files when it has neither.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_dir);

// A tokenizer file given directly: tokenizer.json format when the name ends in ".json", else vocab.txt format.
std::unique_ptr<Tokenizer> load_tokenizer_file(const std::string& path);

}  // namespace bertrain

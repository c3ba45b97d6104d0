// The tokenizer of a model directory: its tokenizer.json when it has one (HfTokenizer: what transformers uses),
// else what transformers builds from vocab.json + merges.txt (RoBERTa) or from a vocab.txt whose
// tokenizer_config.json asks for other rules (data/tokenizer_files.h), else its vocab.txt (BertTokenizer, BERT
// uncased rules), else what transformers builds from sentencepiece.bpe.model (XLM-R, CamemBERT).
#pragma once

#include <memory>
#include <string>

#include "data/tokenizer.h"

namespace bertrain {

// Throws Error naming the directory and the files it looked for when it has none of them (another
// SentencePiece model alone: how to write tokenizer.json from it).
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_dir);

// A tokenizer file given directly: tokenizer.json format when the name ends in ".json", else vocab.txt format.
std::unique_ptr<Tokenizer> load_tokenizer_file(const std::string& path);

}  // namespace bertrain

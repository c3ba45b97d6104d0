// A labelled text dataset as the workflow uses it: the CSV rows, their raw text (title + " " + description,
// for the evaluation slices), their tags, and the tokenized examples the model consumes.
#pragma once

#include <string>
#include <vector>

#include "data/batcher.h"
#include "data/labels.h"
#include "data/tokenizer.h"

namespace bertrain {

struct TextDataset {
  std::string source;                 // CSV path
  std::vector<std::string> ids;       // the "id" column when present, else the row number
  std::vector<std::string> raw_text;  // title + " " + description
  std::vector<std::string> tags;      // the "tag" column ("" when the file has none)
  std::vector<Example> examples;      // token ids (+ label index when tags and labels are known)
  int truncated = 0;                  // rows cut to max_length
};

struct DatasetOptions {
  bool clean = true;           // Made-With-ML's clean_text before tokenizing (--no-clean turns it off)
  bool require_tags = false;   // training / evaluation: the "tag" column must exist, no empty tags
  int max_length = 512;        // max_position_embeddings of the model
};

// Reads `path` (columns title and description required, tag when require_tags), builds the text,
// cleans and tokenizes it. Labels are assigned when `labels` is non-null; a tag outside it is an Error
// naming the file, line and tag.
TextDataset load_text_dataset(const std::string& path, const BertTokenizer& tokenizer, const LabelSet* labels,
                              const DatasetOptions& options);

// One example from a title and description (prediction from the command line).
Example encode_text(const std::string& title, const std::string& description, const BertTokenizer& tokenizer,
                    const DatasetOptions& options, bool* truncated);

}  // namespace bertrain

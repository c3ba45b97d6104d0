// Inference with a trained classifier: softmax probabilities per example, for `bertrain evaluate` and
// `bertrain predict`.
#pragma once

#include <string>
#include <vector>

#include "data/batcher.h"
#include "data/dataset.h"
#include "data/labels.h"
#include "data/tokenizer.h"
#include "model/model_dir.h"

namespace bertrain {

// config.json field (bertrain's own, ignored by transformers) recording whether training cleaned the text.
inline constexpr const char* kCleanTextKey = "bertrain_clean_text";

// A RUN_DIR (holding best/) means its best/; anything else is taken as a model directory.
std::string resolve_model_dir(const std::string& path);

// The tokenizer of a model directory (its vocab.txt); throws Error naming the file when it is missing.
BertTokenizer load_model_tokenizer(const std::string& dir);

// Index of the largest of row[0, n) (the first on ties).
int top_class(const float* row, int n);

class Predictor {
 public:
  // Loads config.json, model.safetensors (with its classifier) and vocab.txt of `path` (see resolve_model_dir).
  explicit Predictor(const std::string& path);

  const std::string& model_dir() const { return dir_; }
  const LabelSet& labels() const { return labels_; }
  const BertTokenizer& tokenizer() const { return tokenizer_; }
  DatasetOptions dataset_options() const;  // cleaning as in training, max_length from the config

  // Softmax probabilities [examples.size(), labels().size()], row-major, computed in batches of batch_size.
  std::vector<float> predict_proba(const std::vector<Example>& examples, int batch_size = 64);

 private:
  std::string dir_;
  LoadedModel model_;
  LabelSet labels_;
  BertTokenizer tokenizer_;
  bool clean_ = true;
};

}  // namespace bertrain

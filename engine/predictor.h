// Inference with a trained classifier for `bertrain evaluate` and `bertrain predict`: the model directory,
// its labels, how training read and cleaned its text (recorded in config.json), and probabilities per
// example — softmax over the labels (single-label) or one sigmoid per label (multi-label) — computed in
// batches on the CPU or a CUDA device (engine/inference_backend.h).
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "data/batcher.h"
#include "data/dataset.h"
#include "data/labels.h"
#include "data/tokenizer.h"
#include "engine/inference_backend.h"
#include "model/model_dir.h"

namespace bertrain {

// config.json fields (bertrain's own, ignored by transformers): whether training cleaned the text, and how it
// read its data ({"text_columns": [...], "label_column": "...", "label_separator": "...", "max_length": N}),
// so that evaluate and predict prepare text as training did without repeating the flags.
inline constexpr const char* kCleanTextKey = "bertrain_clean_text";
inline constexpr const char* kDataKey = "bertrain_data";

// A RUN_DIR (holding best/) means its best/; anything else is taken as a model directory.
std::string resolve_model_dir(const std::string& path);
// For tokenize: a RUN_DIR (best/config.json, no config.json) means its best/; anything else as given (a model
// directory, or a folder with only a tokenizer).
std::string resolve_tokenizer_dir(const std::string& path);

// Throws Error naming `dir` when `tokenizer` can produce ids outside the model's vocab_size rows of word embeddings
// (a tokenizer.json from another model, say), or, for a family that counts positions after the padding token
// (the RoBERTa-like families), when config.json's pad_token_id is not the tokenizer's; before any text is read.
void check_tokenizer_fits(const Tokenizer& tokenizer, const BertConfig& config, const std::string& dir);

// How the model in `config` reads text: cleaning, columns, label separator and max_length as a bertrain training read
// its data (config.json's kCleanTextKey and kDataKey), else the defaults with the model's whole max_sequence_length.
// `source` names config.json in errors.
DatasetOptions trained_dataset_options(const BertConfig& config, const std::string& source);
// Throws Error naming --max-length when `options` ask for more tokens than the model's position table holds.
void check_max_length(const DatasetOptions& options, const BertConfig& config);
// A note (one line, no "note: ") when `options` clean texts for a model whose config.json does not record how its
// training text was prepared (a model bertrain did not train): cleaning is then a default, not the model's own
// recipe, and --no-clean is the way out. "" otherwise.
std::string unrecorded_cleaning_note(const BertConfig& config, const std::string& model_dir,
                                     const DatasetOptions& options);

// Index of the largest of row[0, n) (the first on ties).
int top_class(const float* row, int n);

// A multi-label model's probability of one label: the sigmoid of its logit, in float. predict_proba computes it
// so, and predict, evaluate and training's validation metrics predict the label when it is >= the threshold.
inline float label_probability(float logit) { return 1.0f / (1.0f + std::exp(-logit)); }

// Whether a model predicts label sets: problem_type multi_label_classification. bertrain before multi-label
// support wrote that problem_type for its single-label (one-hot BCE) models; those have bertrain_clean_text but
// no bertrain_data, and stay single-label. A model of one label without problem_type is one too (a sigmoid).
bool is_multi_label(const BertConfig& config);

// Rows per forward pass when none is asked for, the fastest measured on each engine (docs/PERFORMANCE.md:
// "Inference batch size"): on the CPU a batch's activations must stay in the caches; a GPU needs many rows to fill it.
inline constexpr int kCpuInferenceBatch = 64;
inline constexpr int kGpuInferenceBatch = 256;

struct InferenceOptions {
  std::string device = "auto";     // auto | cpu | cuda
  std::string precision = "fp32";  // fp32 | bf16 (CUDA)
  int batch_size = 0;              // rows per forward pass; 0: the engine's default (above)
  int threads = 0;                 // CPU engine threads; 0: all cores, or OMP_NUM_THREADS (core/cpu_threads.h)
};

class Predictor {
 public:
  // Loads config.json, the weights (with the classifier) and the tokenizer (data/tokenizer_loader.h: tokenizer.json,
  // else vocab.txt) of `path` (see resolve_model_dir) onto the engine `options` choose.
  Predictor(const std::string& path, const InferenceOptions& options);

  const std::string& model_dir() const { return dir_; }
  const LabelSet& labels() const { return labels_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  bool multi_label() const { return multi_label_; }
  std::string engine_description() const { return engine_->description(); }
  int batch_size() const { return batch_size_; }
  // Cleaning, columns, label separator and max_length as in training (defaults for models from elsewhere).
  DatasetOptions dataset_options() const;
  // Throws Error naming --max-length when `options` ask for more tokens than the position table holds.
  void check_dataset_options(const DatasetOptions& options) const;

  // Probabilities [examples.size(), labels().size()], row-major, in batches of the options' batch size.
  std::vector<float> predict_proba(const std::vector<Example>& examples);
  // The same into *probs, and the logits (the scores before softmax / sigmoid, serve's raw_scores) into *logits
  // when it is not null; both resized here.
  void predict(const std::vector<Example>& examples, std::vector<float>* probs, std::vector<float>* logits);
  // Parameters of the model (weights and biases, the classifier's included), for serve's /v1/model.
  std::size_t parameter_count() const { return parameter_count_; }
  const BertConfig& config() const { return model_.config; }

 private:
  std::string dir_;
  LoadedModel model_;  // its params moved into engine_
  std::size_t parameter_count_ = 0;
  LabelSet labels_;
  std::unique_ptr<Tokenizer> tokenizer_;
  bool multi_label_ = false;
  int batch_size_ = 256;
  std::unique_ptr<InferenceBackend> engine_;
  std::vector<float> logits_;  // one batch's, reused
};

// The first row of `scores` ([rows, classes], row-major) with a score that is not finite, or -1. Finite weights can
// still overflow float32 on the way (a diverged training's checkpoint): the scores are then nan, and every command
// refuses to answer with them (non_finite_scores names the row and the model).
long first_non_finite_row(const std::vector<float>& scores, int classes);
std::string non_finite_scores(const std::string& model_dir, const std::string& row);

}  // namespace bertrain

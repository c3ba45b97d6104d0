// The rows a training run learns from and validates on: --train-data (and --val-data, else a split of it) read,
// tokenized and labelled as the model expects, with what was skipped, truncated or looks wrong about the labels.
#pragma once

#include <string>
#include <vector>

#include "data/batcher.h"
#include "data/dataset.h"
#include "data/labels.h"
#include "data/tokenizer.h"
#include "engine/trainer.h"
#include "model/bert_config.h"

namespace bertrain {

// The labelled training and validation rows.
struct TrainingData {
  LabelSet labels;
  std::vector<Example> train, val;
  DatasetOptions options;     // as the files were read (max_length resolved)
  std::size_t truncated = 0;  // rows cut to max_length tokens
  std::size_t skipped = 0;    // bad rows skipped (--skip-bad-rows)
  std::vector<std::string> skip_reasons;
  std::vector<std::string> warnings;  // about the labels (data/label_checks.h), printed by rank 0
};


// The rows of --train-data `file` a run with `args` reads (indices into it, in file order): --num-samples' sample,
// else all.
std::vector<int> sampled_rows(const TrainArgs& args, const TextDataset& file);

// Those `rows` split into the ones it trains on and the ones it holds out for validation when it has no --val-data,
// as --val-fraction, --split-seed and --multi-label say (indices into `file`). `labels`: the run's.
struct TrainingRows {
  std::vector<int> train, val;
};
TrainingRows split_training_rows(const TrainArgs& args, const TextDataset& file, const std::vector<int>& rows,
                                 const LabelSet& labels);

// Labels: the sorted labels of the training rows, or (--resume) the resumed model's. Throws Error naming the file or
// flag on bad input.
TrainingData load_training_data(const TrainArgs& args, const BertConfig& source_config, const Tokenizer& tokenizer);

}  // namespace bertrain

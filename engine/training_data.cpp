#include "engine/training_data.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "data/dataset.h"
#include "data/label_checks.h"
#include "data/split.h"
#include "engine/predictor.h"

namespace bertrain {

namespace {

// The examples of `rows` of `data`, labelled by `labels` (a label outside them is an Error naming the file and line).
std::vector<Example> labelled_examples(const TextDataset& data, const std::vector<int>& rows, const LabelSet& labels) {
  std::vector<Example> out;
  out.reserve(rows.size());
  for (int r : rows) {
    const auto i = static_cast<std::size_t>(r);
    Example e = data.examples[i];
    e.labels = labels.require_all(data.tags[i], data.source + ":" + std::to_string(data.lines[i]));
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<int> all_rows(std::size_t n) {
  std::vector<int> rows(n);
  for (std::size_t i = 0; i < n; ++i) rows[i] = static_cast<int>(i);
  return rows;
}
// Training rows and validation rows: with --multi-label a seeded random split (label sets do not stratify), else
// Made-With-ML's stratified split by label.
Split split_rows(const TrainArgs& args, const TextDataset& file, const std::vector<int>& rows, const LabelSet& labels) {
  if (args.data.multi_label) {
    const int n = static_cast<int>(rows.size());
    const int n_val = static_cast<int>(std::ceil(args.val_fraction * n));
    std::vector<int> order = seeded_permutation(n, args.split_seed);
    Split split;
    split.val.assign(order.begin(), order.begin() + n_val);
    split.train.assign(order.begin() + n_val, order.end());
    std::sort(split.val.begin(), split.val.end());
    std::sort(split.train.begin(), split.train.end());
    return split;
  }
  std::vector<int> row_labels;
  for (int r : rows) {
    const auto i = static_cast<std::size_t>(r);
    row_labels.push_back(labels.require(file.tags[i].at(0), file.source + ":" + std::to_string(file.lines[i])));
  }
  return stratified_split(row_labels, args.val_fraction, args.split_seed);
}

}  // namespace

std::vector<int> sampled_rows(const TrainArgs& args, const TextDataset& file) {
  std::vector<int> rows = all_rows(file.examples.size());
  if (args.num_samples > 0) rows = sample_rows(static_cast<int>(rows.size()), args.num_samples, args.split_seed);
  return rows;
}

TrainingRows split_training_rows(const TrainArgs& args, const TextDataset& file, const std::vector<int>& rows,
                                 const LabelSet& labels) {
  const Split split = split_rows(args, file, rows, labels);
  TrainingRows out;
  for (int i : split.train) out.train.push_back(rows[static_cast<std::size_t>(i)]);
  for (int i : split.val) out.val.push_back(rows[static_cast<std::size_t>(i)]);
  return out;
}

TrainingData load_training_data(const TrainArgs& args, const BertConfig& source_config, const Tokenizer& tokenizer) {
  DatasetOptions data_options = args.data;
  data_options.clean = args.clean;
  data_options.read_labels = true;
  if (data_options.max_length == 0) data_options.max_length = source_config.max_sequence_length();
  check_max_length(data_options, source_config);
  const TextDataset train_file = load_text_dataset(args.train_data, tokenizer, nullptr, data_options);
  const std::vector<int> rows = sampled_rows(args, train_file);

  std::vector<std::string> tags;
  for (int r : rows) {
    for (const std::string& tag : train_file.tags[static_cast<std::size_t>(r)]) tags.push_back(tag);
  }
  TrainingData data{args.resume ? LabelSet(source_config.labels) : LabelSet::from_tags(tags), {}, {}, data_options,
                    0, 0, {}, {}};
  BERTRAIN_CHECK(data.labels.size() >= (args.data.multi_label ? 1 : 2),
                 args.train_data << ": training needs at least " << (args.data.multi_label ? "one label" : "two distinct labels")
                                 << ", found " << data.labels.size());
  data.truncated = train_file.truncated;
  data.skipped = train_file.skipped;
  data.skip_reasons = train_file.skip_reasons;
  if (!args.val_data.empty()) {
    const TextDataset val_file = load_text_dataset(args.val_data, tokenizer, nullptr, data_options);
    data.truncated += val_file.truncated;
    data.skipped += val_file.skipped;
    data.skip_reasons.insert(data.skip_reasons.end(), val_file.skip_reasons.begin(), val_file.skip_reasons.end());
    data.train = labelled_examples(train_file, rows, data.labels);
    data.val = labelled_examples(val_file, all_rows(val_file.examples.size()), data.labels);
  } else {
    const TrainingRows split = split_training_rows(args, train_file, rows, data.labels);
    data.train = labelled_examples(train_file, split.train, data.labels);
    data.val = labelled_examples(train_file, split.val, data.labels);
  }
  const std::vector<int> val_counts = count_label_rows(data.val, data.labels.size());
  data.warnings =
      label_count_warnings(data.labels.names(), count_label_rows(data.train, data.labels.size()), val_counts);
  if (args.data.multi_label && !args.data.label_separator_given) {
    for (std::string& w : label_separator_warnings(data.labels.names(), args.data.label_separator)) {
      data.warnings.push_back(std::move(w));
    }
  }
  if (!args.data.multi_label) {
    for (std::string& w : label_list_warnings(data.labels.names())) data.warnings.push_back(std::move(w));
  }
  for (std::string& w : label_spelling_warnings(data.labels.names())) data.warnings.push_back(std::move(w));
  const bool one_row_each =
      data.train.empty() && std::all_of(val_counts.begin(), val_counts.end(), [](int n) { return n == 1; });
  BERTRAIN_CHECK(!data.train.empty() && !data.val.empty(),
                 "need at least one training and one validation row, got "
                     << data.train.size() << " and " << data.val.size()
                     << (one_row_each ? " (each of the " + std::to_string(data.labels.size()) +
                                            " labels has a single row, which the split holds out for validation; is "
                                            "--label-column '" + args.data.label_column + "' the label?)"
                                      : ""));
  return data;
}

}  // namespace bertrain

#include "engine/predictor.h"

#include <algorithm>

#include "core/error.h"
#include "engine/batch_view.h"
#include "engine/checkpoint.h"
#include "kernels/loss.h"
#include "model/bert_classifier.h"

namespace bertrain {

std::string resolve_model_dir(const std::string& path) {
  if (file_exists(path + "/config.json")) return path;
  if (file_exists(path + "/best/config.json")) return path + "/best";
  BERTRAIN_FAIL(path << ": neither a model directory (config.json) nor a run directory (best/config.json)");
}

BertTokenizer load_model_tokenizer(const std::string& dir) {
  const std::string vocab = dir + "/vocab.txt";
  BERTRAIN_CHECK(file_exists(vocab), vocab << ": not found (the model directory needs its vocab.txt)");
  return BertTokenizer(Vocab::load(vocab));
}

int top_class(const float* row, int n) {
  return static_cast<int>(std::max_element(row, row + n) - row);
}

Predictor::Predictor(const std::string& path)
    : dir_(resolve_model_dir(path)),
      model_(load_model_dir(dir_, {}, 0)),
      labels_(model_.config.labels),
      tokenizer_(load_model_tokenizer(dir_)) {
  const auto it = model_.config.extra.find(kCleanTextKey);
  if (it != model_.config.extra.end() && it->is_boolean()) clean_ = it->get<bool>();
}

DatasetOptions Predictor::dataset_options() const {
  DatasetOptions options;
  options.clean = clean_;
  options.max_length = model_.config.max_position_embeddings;
  return options;
}

std::vector<float> Predictor::predict_proba(const std::vector<Example>& examples, int batch_size) {
  const int classes = labels_.size();
  std::vector<float> probs(examples.size() * static_cast<std::size_t>(classes), 0.0f);
  if (examples.empty()) return probs;
  BatcherOptions options;
  options.batch_size = std::min<int>(batch_size, static_cast<int>(examples.size()));
  options.classes = classes;
  const Batcher batcher(&examples, options);
  BertClassifier<float> classifier(model_.config, classes, batch_limits({&batcher}));
  Batch batch;
  std::size_t done = 0;
  for (int i = 0; i < batcher.batches_per_epoch(); ++i) {
    batcher.batch(0, i, &batch);
    BERTRAIN_CHECK(!batch.rows.empty() && batch.rows.front() == static_cast<int>(done), "batches out of order");
    classifier.forward(model_.params.data(), bert_batch_view(batch), DropoutSetting{});
    softmax_cpu(probs.data() + done * classes, classifier.logits(), batch.batch, classes);
    done += static_cast<std::size_t>(batch.batch);
  }
  return probs;
}

}  // namespace bertrain

#include "engine/predictor.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <type_traits>

#include "core/cpu_threads.h"
#include "core/error.h"
#include "core/files.h"
#include "data/tokenizer_loader.h"
#include "engine/batch_view.h"
#include "kernels/loss.h"

namespace bertrain {

namespace {

// `path` may be a Hugging Face hub id ("bert-base-uncased", "allenai/scibert_scivocab_uncased"): one name, or two
// joined by one '/', of the hub's characters, and no folder of the first name here (else a mistyped local path).
bool may_be_hub_id(const std::string& path) {
  const std::size_t slash = path.find('/');
  if (path.empty() || slash == 0 || slash + 1 == path.size()) return false;
  if (slash != std::string::npos && path.find('/', slash + 1) != std::string::npos) return false;
  const std::string first = path.substr(0, slash);
  if (first == "." || first == ".." || (slash != std::string::npos && directory_exists(first))) return false;
  return std::all_of(path.begin(), path.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '/' || c == '-' ||
                                         c == '_' || c == '.'; });
}

// A missing `path` is an error naming it, with the way to get a model where `path` may be a hub id.
void require_model_path(const std::string& path) {
  BERTRAIN_CHECK(path_exists(path),
                 path << ": not found (expected a model directory or a training run's RUN_DIR"
                      << (may_be_hub_id(path) ? "; if it is a Hugging Face hub id: bertrain does not download, get it "
                                                "with hf download " + path + " --local-dir DIR (the huggingface_hub "
                                                "package) and pass that DIR)"
                                              : ")"));
}

}  // namespace

std::string resolve_model_dir(const std::string& path) {
  require_model_path(path);
  BERTRAIN_CHECK(directory_exists(path), path << ": a file, not a directory (expected a model directory with "
                                                 "config.json or a training run's RUN_DIR)");
  // Whatever is at config.json is the model's: loading it says what is wrong with it (a directory, bad JSON).
  if (path_exists(path + "/config.json")) return path;
  if (path_exists(path + "/best/config.json")) return path + "/best";
  BERTRAIN_FAIL(path << ": neither a model directory (config.json) nor a run directory (best/config.json)");
}

std::string resolve_tokenizer_dir(const std::string& path) {
  require_model_path(path);
  return !path_exists(path + "/config.json") && path_exists(path + "/best/config.json") ? path + "/best" : path;
}

int top_class(const float* row, int n) {
  return static_cast<int>(std::max_element(row, row + n) - row);
}

bool is_multi_label(const BertConfig& config) {
  const bool old_bertrain = config.extra.contains(kCleanTextKey) && !config.extra.contains(kDataKey);
  // One label and no problem_type: a sigmoid, as transformers' text-classification pipeline computes it (a softmax
  // over one logit would say 1 whatever the text).
  const bool one_logit = config.problem_type.empty() && config.labels.size() == 1;
  return (config.problem_type == "multi_label_classification" && !old_bertrain) || one_logit;
}

void check_tokenizer_fits(const Tokenizer& tokenizer, const BertConfig& config, const std::string& dir) {
  BERTRAIN_CHECK(tokenizer.vocab_size() <= config.vocab_size,
                 dir << ": the tokenizer (" << tokenizer.describe() << ") has ids up to " << tokenizer.vocab_size() - 1
                     << " but config.json's vocab_size is " << config.vocab_size
                     << ": the tokenizer belongs to another model");
  // The RoBERTa-like families number positions after the padding token, and transformers finds padding by
  // config.json's pad_token_id: one that is not the tokenizer's (a real token such as <s>) moves every position.
  BERTRAIN_CHECK(!config.family().positions_after_padding || tokenizer.pad_id() < 0 ||
                     tokenizer.pad_id() == config.pad_token_id,
                 dir << ": config.json's pad_token_id " << config.pad_token_id << " is not the tokenizer's padding token "
                     << tokenizer.pad_id() << " (" << tokenizer.describe() << "); a " << config.family().model_type
                     << " model counts positions from it, so the two must agree");
}

Predictor::Predictor(const std::string& path, const InferenceOptions& options)
    : dir_(resolve_model_dir(path)),
      model_(load_model_dir(dir_, {}, 0)),
      labels_(model_.config.labels),
      tokenizer_(load_tokenizer(dir_)),
      multi_label_(is_multi_label(model_.config)) {
  check_tokenizer_fits(*tokenizer_, model_.config, dir_);
  BERTRAIN_CHECK(model_.config.problem_type != "regression",
                 dir_ << "/config.json: problem_type regression: the model's head predicts numbers, not labels; "
                         "bertrain predicts with classifiers (fine-tune it as one with bertrain train)");
  BERTRAIN_CHECK(options.batch_size >= 0, "--batch-size must be at least 1, got " << options.batch_size);
  const BackendChoice choice = choose_backend(options.device, options.precision, 0);
  batch_size_ = options.batch_size > 0 ? options.batch_size : choice.cuda ? kGpuInferenceBatch : kCpuInferenceBatch;
  BERTRAIN_CHECK(options.threads >= 0, "--threads must be >= 0, got " << options.threads);
  if (!choice.cuda) configure_cpu_threads(options.threads);  // before the engine: it takes the count it is built with
  // The engine keeps (or uploads) the parameters; this copy is not needed after, and a second one of a large model
  // would double what serve and predict hold.
  parameter_count_ = model_.params.size();
  engine_ = make_inference_backend(choice, model_.config, labels_.size(), std::move(model_.params));
  model_.params = std::vector<float>();
}

DatasetOptions trained_dataset_options(const BertConfig& config, const std::string& source) {
  DatasetOptions options;
  const nlohmann::json& extra = config.extra;
  options.max_length = config.max_sequence_length();
  // Each field is named when it is missing or of another type (the library's messages name neither).
  const auto read = [&source](const nlohmann::json& object, const char* key, const std::string& name, auto* out) {
    try {
      *out = object.at(key).get<std::decay_t<decltype(*out)>>();
    } catch (const nlohmann::json::exception& e) {
      BERTRAIN_FAIL(source << ": field '" << name << "': " << e.what());
    }
  };
  if (extra.contains(kCleanTextKey)) read(extra, kCleanTextKey, kCleanTextKey, &options.clean);
  if (extra.contains(kDataKey)) {
    const nlohmann::json& data = extra.at(kDataKey);
    BERTRAIN_CHECK(data.is_object(), source << ": field '" << kDataKey << "' must be an object, found " << data.dump());
    const std::string in = std::string(kDataKey) + ".";
    read(data, "text_columns", in + "text_columns", &options.text_columns);
    read(data, "label_column", in + "label_column", &options.label_column);
    read(data, "label_separator", in + "label_separator", &options.label_separator);
    read(data, "max_length", in + "max_length", &options.max_length);
  }
  return options;
}

void check_max_length(const DatasetOptions& options, const BertConfig& config) {
  BERTRAIN_CHECK(options.max_length <= config.max_sequence_length(),
                 "--max-length " << options.max_length << " is more than the " << config.max_sequence_length()
                                 << " tokens the model's max_position_embeddings " << config.max_position_embeddings
                                 << " allow");
}

std::string unrecorded_cleaning_note(const BertConfig& config, const std::string& model_dir,
                                     const DatasetOptions& options) {
  if (!options.clean || config.extra.contains(kCleanTextKey)) return "";
  return model_dir + "/config.json does not record how the model's training text was prepared (" + kCleanTextKey +
         ", written by bertrain train): texts are cleaned as Made-With-ML's clean_text, as bertrain trains; "
         "--no-clean gives the model the text as it is";
}

DatasetOptions Predictor::dataset_options() const {
  DatasetOptions options = trained_dataset_options(model_.config, dir_ + "/config.json");
  options.multi_label = multi_label_;
  return options;
}

void Predictor::check_dataset_options(const DatasetOptions& options) const { check_max_length(options, model_.config); }

std::vector<float> Predictor::predict_proba(const std::vector<Example>& examples) {
  std::vector<float> probs;
  predict(examples, &probs, nullptr);
  return probs;
}

void Predictor::predict(const std::vector<Example>& examples, std::vector<float>* probs_out,
                        std::vector<float>* logits_out) {
  const int classes = labels_.size();
  std::vector<float>& probs = *probs_out;
  probs.assign(examples.size() * static_cast<std::size_t>(classes), 0.0f);
  if (logits_out != nullptr) logits_out->assign(probs.size(), 0.0f);
  if (examples.empty()) return;
  BatcherOptions options;
  options.batch_size = std::min<int>(batch_size_, static_cast<int>(examples.size()));
  options.classes = classes;
  const Batcher batcher(&examples, options);
  Batch batch;
  std::size_t done = 0;
  for (int i = 0; i < batcher.batches_per_epoch(); ++i) {
    batcher.batch(0, i, &batch);
    BERTRAIN_CHECK(!batch.rows.empty() && batch.rows.front() == static_cast<int>(done), "batches out of order");
    logits_.resize(static_cast<std::size_t>(batch.batch) * classes);
    engine_->logits(bert_batch_view(batch), logits_.data());
    if (logits_out != nullptr) std::copy(logits_.begin(), logits_.end(), logits_out->begin() + done * classes);
    float* out = probs.data() + done * classes;
    if (multi_label_) {
      for (std::size_t k = 0; k < logits_.size(); ++k) out[k] = label_probability(logits_[k]);
    } else {
      softmax_cpu(out, logits_.data(), batch.batch, classes);
    }
    done += static_cast<std::size_t>(batch.batch);
  }
}

long first_non_finite_row(const std::vector<float>& scores, int classes) {
  for (std::size_t k = 0; k < scores.size(); ++k) {
    if (!std::isfinite(scores[k])) return static_cast<long>(k / static_cast<std::size_t>(classes));
  }
  return -1;
}

std::string non_finite_scores(const std::string& model_dir, const std::string& row) {
  return "the model in " + model_dir + " gives scores that are not finite for " + row + ": its weights overflow " +
         "float32 on the way (a training that diverged?); it cannot predict";
}

}  // namespace bertrain

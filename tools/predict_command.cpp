// `bertrain predict`: label probabilities for one text, or for every row of a dataset file, streamed: rows are
// read, tokenized and predicted one batch at a time and written as JSON Lines, so a file of any length needs
// the memory of one batch.
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "engine/predictor.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/data_flags.h"

namespace bertrain {

namespace {

// What one row's prediction is: single-label, the arg-max ("other" below --threshold when given, Made-With-ML's
// serving rule); multi-label, every label with probability >= --threshold (0.5 by default).
struct PredictionRule {
  bool multi_label = false;
  double threshold = -1;  // < 0: not given
  int other = -1;         // index of "other"

  nlohmann::ordered_json predict(const float* row, const LabelSet& labels) const {
    nlohmann::ordered_json out;
    const int classes = labels.size();
    if (multi_label) {
      const double t = threshold >= 0 ? threshold : 0.5;
      nlohmann::json predicted = nlohmann::json::array();
      for (int c = 0; c < classes; ++c) {
        if (row[c] >= t) predicted.push_back(labels.name(c));
      }
      out["prediction"] = predicted;
    } else {
      const int top = top_class(row, classes);
      out["prediction"] = labels.name(threshold >= 0 && row[top] < threshold ? other : top);
    }
    nlohmann::ordered_json probabilities = nlohmann::ordered_json::object();
    for (int c = 0; c < classes; ++c) probabilities[labels.name(c)] = row[c];
    out["probabilities"] = probabilities;
    return out;
  }
};

// Where JSON Lines go: a file replaced atomically at the end (nothing is left of it when predict fails), or
// stdout as they come.
class LineSink {
 public:
  explicit LineSink(const std::string& path) {
    if (!path.empty()) file_ = std::make_unique<AtomicFile>(path);
  }
  void write(const std::string& text) {
    if (file_) {
      file_->write(text.data(), text.size());
    } else {
      std::fwrite(text.data(), 1, text.size(), stdout);
    }
  }
  void commit() {
    if (file_) file_->commit();
    std::fflush(stdout);
  }

 private:
  std::unique_ptr<AtomicFile> file_;
};

// Predicts every row of `path` in batches of `batch_size` rows; returns the rows written.
long predict_file(Predictor& predictor, const std::string& path, const DatasetOptions& options, int batch_size,
                  const PredictionRule& rule, LineSink& sink) {
  TextRowReader reader = input_step([&] { return TextRowReader(path, predictor.tokenizer(), options); });
  const int classes = predictor.labels().size();
  std::vector<Example> examples;
  std::vector<std::string> ids;
  std::string lines;
  TextRow row;
  long written = 0;
  bool more = true;
  while (more) {
    examples.clear();
    ids.clear();
    // A bad row is the input's fault (exit 2), wherever in the file it is.
    while (static_cast<int>(examples.size()) < batch_size && (more = input_step([&] { return reader.next(&row); }))) {
      examples.push_back(std::move(row.example));
      ids.push_back(std::move(row.id));
      row = TextRow{};
    }
    if (examples.empty()) break;
    const std::vector<float> probs = predictor.predict_proba(examples);
    lines.clear();
    for (std::size_t i = 0; i < examples.size(); ++i) {
      nlohmann::ordered_json out{{"id", ids[i]}};
      out.update(rule.predict(probs.data() + i * classes, predictor.labels()));
      lines += out.dump() + "\n";
    }
    sink.write(lines);
    written += static_cast<long>(examples.size());
  }
  if (reader.skipped() > 0) {
    std::fprintf(stderr, "predict: skipped %d bad rows of %s (first: %s)\n", reader.skipped(), path.c_str(),
                 reader.skip_reasons().front().c_str());
  }
  if (reader.truncated() > 0) {
    std::fprintf(stderr, "predict: %d rows were longer than %d tokens and were truncated\n", reader.truncated(),
                 options.max_length);
  }
  return written;
}

}  // namespace

int run_predict(const std::vector<std::string>& args) {
  ArgParser p("predict",
              "Label probabilities of one text (--text, or Made-With-ML's --title and --description), printed as a\n"
              "JSON array, or of every row of a CSV, TSV or JSON Lines file (--data), streamed in batches and\n"
              "written as JSON Lines ({\"id\", \"prediction\", \"probabilities\"} per row, in file order) to --out\n"
              "or stdout. Single-label models: softmax, the arg-max label; multi-label models: one sigmoid per\n"
              "label, every label at p >= --threshold. Text is read and cleaned as in training.");
  p.option("model", "", "RUN_DIR (uses its best/) or a model directory", true);
  p.option("text", "", "one text");
  p.option("title", "", "title of one project (Made-With-ML)");
  p.option("description", "", "description of that project (with --title)");
  p.option("data", "", "dataset file: one prediction per row");
  p.option("out", "", "with --data: write the JSON Lines to this file (replaced atomically when done)");
  p.option("threshold", "",
           "single-label: predict \"other\" when the top probability is below this (Made-With-ML's serving rule, "
           "0.9); multi-label: the probability a label needs (default 0.5)");
  add_data_flags(p, false);
  add_inference_flags(p);
  if (!p.parse(args)) return 0;
  const bool has_title = p.given("title"), has_text = p.given("text"), has_data = p.given("data");
  if (has_title + has_text + has_data != 1) throw UsageError("predict: give one of --text, --title or --data");
  if (!has_title && p.given("description")) throw UsageError("predict: --description goes with --title");
  // The text of one project as a dataset row's: the columns that are not empty, joined with one space.
  const std::string text = has_title ? join_text_columns({p.get("title"), p.get("description")})
                                     : has_text ? join_text_columns({p.get("text")}) : std::string();
  if (has_title && text.empty()) throw UsageError("predict: --title and --description are both empty");
  if (has_text && text.empty()) throw UsageError("predict: --text is empty");
  if (has_data && p.get("data").empty()) throw UsageError("predict: --data is empty");
  if (!has_data && !p.get("out").empty()) throw UsageError("predict: --out goes with --data");
  PredictionRule rule;
  if (!p.get("threshold").empty()) {
    rule.threshold = p.get_double("threshold");
    if (!(rule.threshold >= 0 && rule.threshold <= 1)) throw UsageError("predict: --threshold must be in [0, 1]");
  }
  const InferenceOptions inference = inference_options(p);

  // The model and the flags are the user's input: what fails here exits 2.
  Predictor predictor = input_step([&] { return Predictor(p.get("model"), inference); });
  const LabelSet& labels = predictor.labels();
  rule.multi_label = predictor.multi_label();
  rule.other = labels.find("other");
  const DatasetOptions options = input_step([&] {
    BERTRAIN_CHECK(rule.multi_label || rule.threshold < 0 || rule.other >= 0,
                   "--threshold needs a tag named 'other' but the model's tags are "
                       << nlohmann::json(labels.names()).dump());
    DatasetOptions o = predictor.dataset_options();
    apply_data_flags(p, &o);
    predictor.check_dataset_options(o);
    o.read_labels = false;
    return o;
  });

  if (!has_data) {
    const std::vector<float> probs = predictor.predict_proba({encode_text(text, predictor.tokenizer(), options, nullptr)});
    nlohmann::ordered_json out = nlohmann::ordered_json::array({rule.predict(probs.data(), labels)});
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  LineSink sink(p.get("out"));
  const auto start = std::chrono::steady_clock::now();
  const long rows = predict_file(predictor, p.get("data"), options, inference.batch_size, rule, sink);
  sink.commit();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "predict: %ld rows in %.2f s (%.0f rows/s) on %s%s%s\n", rows, seconds, rows / seconds,
               predictor.engine_description().c_str(), p.get("out").empty() ? "" : "; written to ",
               p.get("out").c_str());
  return 0;
}

}  // namespace bertrain

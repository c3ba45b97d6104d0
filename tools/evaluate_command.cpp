// `bertrain evaluate`: Made-With-ML's evaluation of a trained model on a tagged CSV: weighted overall
// metrics, per-class metrics sorted by F1, the nlp_llm and short_text slices, and a confusion matrix.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "engine/metrics.h"
#include "engine/predictor.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace bertrain {

namespace {

using ordered_json = nlohmann::ordered_json;

ordered_json metrics_json(const ClassMetrics& m) {
  return ordered_json{{"precision", m.precision}, {"recall", m.recall}, {"f1", m.f1},
                      {"num_samples", static_cast<double>(m.support)}};
}

std::string timestamp() {
  const std::time_t now = std::time(nullptr);
  char text[64];
  std::strftime(text, sizeof text, "%B %d, %Y %I:%M:%S %p", std::localtime(&now));
  return text;
}

}  // namespace

int run_evaluate(const std::vector<std::string>& args) {
  ArgParser p("evaluate",
              "Evaluates a model on a CSV with title, description and tag columns and prints JSON as\n"
              "Made-With-ML's evaluate: overall (weighted) precision/recall/f1, per_class sorted by f1,\n"
              "slices nlp_llm and short_text (micro, on the raw text), plus a confusion matrix.");
  p.option("model", "", "RUN_DIR (uses its best/) or a model directory", true);
  p.option("data", "", "CSV with title, description and tag", true);
  p.option("out", "", "also write the JSON to this file (replaced atomically)");
  p.option("batch-size", "64", "rows per forward pass");
  if (!p.parse(args)) return 0;
  const int batch_size = p.get_int("batch-size");
  if (batch_size < 1) throw UsageError("evaluate: --batch-size must be >= 1");

  Predictor predictor(p.get("model"));
  DatasetOptions options = predictor.dataset_options();
  options.require_tags = true;
  // Labels are checked here: a tag the model does not know is an error naming the file and line.
  const TextDataset data = load_text_dataset(p.get("data"), predictor.tokenizer(), &predictor.labels(), options);
  const std::vector<float> probs = predictor.predict_proba(data.examples, batch_size);

  const int classes = predictor.labels().size();
  std::vector<int> y_true, y_pred;
  for (std::size_t i = 0; i < data.examples.size(); ++i) {
    y_true.push_back(data.examples[i].label);
    y_pred.push_back(top_class(probs.data() + i * classes, classes));
  }

  ordered_json out;
  out["timestamp"] = timestamp();
  out["model"] = predictor.model_dir();
  out["data"] = p.get("data");
  out["overall"] = metrics_json(weighted_metrics(y_true, y_pred, classes));
  const std::vector<ClassMetrics> per_class = per_class_metrics(y_true, y_pred, classes);
  ordered_json per_class_json = ordered_json::object();
  for (int c : classes_by_f1(per_class)) per_class_json[predictor.labels().name(c)] = metrics_json(per_class[c]);
  out["per_class"] = per_class_json;

  ordered_json slices = ordered_json::object();
  const struct {
    const char* name;
    bool (*in_slice)(const std::string& tag, const std::string& text);
  } slice_functions[] = {
      {"nlp_llm", [](const std::string& tag, const std::string& text) { return is_nlp_llm(tag, text); }},
      {"short_text", [](const std::string&, const std::string& text) { return is_short_text(text); }}};
  for (const auto& slice : slice_functions) {
    std::vector<bool> mask(y_true.size());
    bool any = false;
    for (std::size_t i = 0; i < mask.size(); ++i) any |= (mask[i] = slice.in_slice(data.tags[i], data.raw_text[i]));
    // As the original: a slice with no rows is left out.
    if (any) slices[slice.name] = metrics_json(micro_metrics(y_true, y_pred, mask, classes));
  }
  out["slices"] = slices;
  out["confusion_matrix"] = ordered_json{{"labels", predictor.labels().names()},
                                         {"rows", "true tag"},
                                         {"columns", "predicted tag"},
                                         {"matrix", confusion_matrix(y_true, y_pred, classes)}};

  const std::string text = out.dump(2) + "\n";
  if (!p.get("out").empty()) write_file_atomically(p.get("out"), text);
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace bertrain

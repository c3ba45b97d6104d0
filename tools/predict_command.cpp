// `bertrain predict`: tag probabilities for a title/description or every row of a CSV.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/predictor.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace bertrain {

int run_predict(const std::vector<std::string>& args) {
  ArgParser p("predict",
              "Prints a JSON array with one object per input: {\"prediction\": tag, \"probabilities\": {tag: p}},\n"
              "softmax probabilities of the model's tags. Text is cleaned as it was in training.");
  p.option("model", "", "RUN_DIR (uses its best/) or a model directory", true);
  p.option("title", "", "title of one project");
  p.option("description", "", "description of that project (with --title)");
  p.option("data", "", "CSV with title and description columns: one prediction per row, in file order");
  p.option("threshold", "", "predict \"other\" when the top probability is below this (Made-With-ML's serving rule)");
  p.option("batch-size", "64", "rows per forward pass");
  if (!p.parse(args)) return 0;
  const bool has_title = !p.get("title").empty(), has_data = !p.get("data").empty();
  if (has_title == has_data) throw UsageError("predict: give either --title (and --description) or --data");
  if (has_data && !p.get("description").empty()) throw UsageError("predict: --description goes with --title");
  const int batch_size = p.get_int("batch-size");
  if (batch_size < 1) throw UsageError("predict: --batch-size must be >= 1");
  double threshold = -1;
  if (!p.get("threshold").empty()) {
    threshold = p.get_double("threshold");
    if (!(threshold >= 0 && threshold <= 1)) throw UsageError("predict: --threshold must be in [0, 1]");
  }

  Predictor predictor(p.get("model"));
  const LabelSet& labels = predictor.labels();
  const int other = labels.find("other");
  BERTRAIN_CHECK(threshold < 0 || other >= 0,
                 "--threshold needs a tag named 'other' but the model's tags are " << nlohmann::json(labels.names()).dump());
  std::vector<Example> examples;
  if (has_title) {
    examples.push_back(encode_text(p.get("title"), p.get("description"), predictor.tokenizer(),
                                   predictor.dataset_options(), nullptr));
  } else {
    examples = load_text_dataset(p.get("data"), predictor.tokenizer(), nullptr, predictor.dataset_options()).examples;
  }
  const std::vector<float> probs = predictor.predict_proba(examples, batch_size);

  nlohmann::json out = nlohmann::json::array();
  const int classes = labels.size();
  for (std::size_t i = 0; i < examples.size(); ++i) {
    const float* row = probs.data() + i * classes;
    const int top = top_class(row, classes);
    nlohmann::json probabilities = nlohmann::json::object();
    for (int c = 0; c < classes; ++c) probabilities[labels.name(c)] = row[c];
    const int prediction = (threshold >= 0 && row[top] < threshold) ? other : top;
    out.push_back({{"prediction", labels.name(prediction)}, {"probabilities", probabilities}});
  }
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

}  // namespace bertrain

// Model directories made from the CLI tests' fixture BERT with a classifier set by hand, for tests that need a model
// to answer in a known way (test_cli's and test_serve's).
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/param_store.h"
#include "model/bert_config.h"
#include "model/bert_params.h"
#include "model/model_dir.h"
#include "tests/tools/cli_test.h"

namespace bertrain {
namespace cli_test {

// The fixture BERT at `model` with `labels` and classifier rows set by `head`, saved in `dir`.
inline void save_bert_with_head(const std::filesystem::path& model, const std::filesystem::path& dir,
                                const std::vector<std::string>& labels,
                                const std::function<void(const ParamLayout&, std::vector<float>*)>& head) {
  LoadedModel loaded = load_model_dir(model.string(), {}, 0);
  BertConfig config = loaded.config;
  config.labels = labels;
  const ParamLayout layout = bert_classifier_layout(config, config.num_labels());
  std::vector<float> params(layout.total(), 0.0f);
  for (const ParamEntry& e : layout.entries()) {
    if (e.name.rfind("classifier.", 0) == 0) continue;
    const ParamEntry& from = loaded.layout.at(e.name);
    std::copy_n(loaded.params.begin() + from.offset, e.numel, params.begin() + e.offset);
  }
  head(layout, &params);
  save_model_dir(dir.string(), config, layout, params.data(), model.string());
}

// A single-label model of kTags whose logits are, for every text, 0.1 and the next float after it for the first two
// tags (-1 for the others): two logits an ulp apart, which softmax rounds to one probability.
inline void save_logit_tie_model(const std::filesystem::path& model, const std::filesystem::path& dir) {
  save_bert_with_head(model, dir, kTags, [](const ParamLayout& l, std::vector<float>* p) {
    const ParamEntry& b = l.at("classifier.bias");  // the weights stay 0: every text gets these logits
    const float biases[] = {0.1f, std::nextafter(0.1f, 1.0f), -1.0f, -1.0f};
    std::copy(std::begin(biases), std::end(biases), p->begin() + b.offset);
  });
  nlohmann::json config = nlohmann::json::parse(slurp(dir / "config.json"));
  config["problem_type"] = "single_label_classification";
  spit(dir / "config.json", config.dump());
}

}  // namespace cli_test
}  // namespace bertrain

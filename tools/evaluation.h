// The JSON `bertrain evaluate` prints and `bertrain serve`'s POST /evaluate/ answers. Single-label models:
// Made-With-ML's evaluation (weighted overall metrics, per-class metrics sorted by F1, the nlp_llm and short_text
// slices, a confusion matrix of at most kMaxConfusionClasses classes, engine/metrics.h). Multi-label models: micro / macro / weighted / samples averages and per-label
// metrics, as scikit-learn's classification_report computes them, a label predicted at p >= threshold.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "engine/predictor.h"

namespace bertrain {

// `probs` and `logits`: predictor's probabilities and logits of data's rows ([rows, labels], row-major). A
// single-label row's prediction is the arg-max of its logits, as Made-With-ML's evaluate.py (model.predict) and
// training's validation take it: two logits an ulp apart can round to one probability, whose first arg-max is the
// other class. A multi-label row predicts each label at probability >= threshold. `run_id` is left out when empty.
nlohmann::ordered_json evaluation_json(const Predictor& predictor, const std::string& data_path,
                                       const TextDataset& data, const std::vector<float>& probs,
                                       const std::vector<float>& logits, double threshold, const std::string& run_id);

}  // namespace bertrain

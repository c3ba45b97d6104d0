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

// `probs`: predictor's probabilities of data's rows ([rows, labels], row-major). `run_id` is left out when empty.
nlohmann::ordered_json evaluation_json(const Predictor& predictor, const std::string& data_path,
                                       const TextDataset& data, const std::vector<float>& probs, double threshold,
                                       const std::string& run_id);

}  // namespace bertrain

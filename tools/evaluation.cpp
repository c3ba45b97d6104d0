#include "tools/evaluation.h"

#include "core/timestamp.h"
#include "engine/metrics.h"
#include "engine/multilabel_metrics.h"

namespace bertrain {

namespace {

using ordered_json = nlohmann::ordered_json;

ordered_json metrics_json(const ClassMetrics& m) {
  return ordered_json{{"precision", m.precision}, {"recall", m.recall}, {"f1", m.f1},
                      {"num_samples", static_cast<double>(m.support)}};
}

// Per-class metrics keyed by label name, highest F1 first (Made-With-ML's order).
ordered_json per_class_json(const std::vector<ClassMetrics>& per_class, const LabelSet& labels) {
  ordered_json out = ordered_json::object();
  for (int c : classes_by_f1(per_class)) out[labels.name(c)] = metrics_json(per_class[static_cast<std::size_t>(c)]);
  return out;
}

void add_single_label_metrics(const TextDataset& data, const std::vector<float>& logits, const LabelSet& labels,
                              ordered_json* out) {
  const int classes = labels.size();
  std::vector<int> y_true, y_pred;
  for (std::size_t i = 0; i < data.examples.size(); ++i) {
    y_true.push_back(data.examples[i].labels.at(0));
    y_pred.push_back(top_class(logits.data() + i * classes, classes));
  }
  (*out)["overall"] = metrics_json(weighted_metrics(y_true, y_pred, classes));
  (*out)["per_class"] = per_class_json(per_class_metrics(y_true, y_pred, classes), labels);
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
    for (std::size_t i = 0; i < mask.size(); ++i) {
      any |= (mask[i] = slice.in_slice(data.tags[i].at(0), data.raw_text[i]));
    }
    // As the original: a slice with no rows is left out, and its num_samples is a count (len(), where the overall
    // and per-class ones are numpy floats: 191.0).
    if (any) {
      const ClassMetrics m = micro_metrics(y_true, y_pred, mask, classes);
      slices[slice.name] = metrics_json(m);
      slices[slice.name]["num_samples"] = m.support;
    }
  }
  (*out)["slices"] = slices;
  // Of many classes the matrix is mostly zeros and too big to read or draw (10,000 classes: 1.1 GB of JSON): left
  // out above kMaxConfusionClasses, and said.
  if (classes <= kMaxConfusionClasses) {
    (*out)["confusion_matrix"] = ordered_json{{"labels", labels.names()},
                                              {"rows", "true tag"},
                                              {"columns", "predicted tag"},
                                              {"matrix", confusion_matrix(y_true, y_pred, classes)}};
  } else {
    (*out)["confusion_matrix_omitted"] = std::to_string(classes) + " classes, more than " +
                                         std::to_string(kMaxConfusionClasses);
  }
}

void add_multi_label_metrics(const TextDataset& data, const std::vector<float>& probs, const LabelSet& labels,
                             double threshold, ordered_json* out) {
  const int classes = labels.size(), samples = static_cast<int>(data.examples.size());
  std::vector<uint8_t> y_true(static_cast<std::size_t>(samples) * classes, 0), y_pred(y_true.size(), 0);
  for (std::size_t i = 0; i < data.examples.size(); ++i) {
    for (int c : data.examples[i].labels) y_true[i * classes + static_cast<std::size_t>(c)] = 1;
    for (int c = 0; c < classes; ++c) y_pred[i * classes + c] = probs[i * classes + c] >= threshold ? 1 : 0;
  }
  const MultiLabelMetrics m = multilabel_metrics(y_true, y_pred, samples, classes);
  (*out)["threshold"] = threshold;
  (*out)["overall"] = ordered_json{{"micro", metrics_json(m.micro)},
                                   {"macro", metrics_json(m.macro)},
                                   {"weighted", metrics_json(m.weighted)},
                                   {"samples", metrics_json(m.samples)}};
  (*out)["per_class"] = per_class_json(m.per_label, labels);
}

}  // namespace

ordered_json evaluation_json(const Predictor& predictor, const std::string& data_path, const TextDataset& data,
                             const std::vector<float>& probs, const std::vector<float>& logits, double threshold,
                             const std::string& run_id) {
  ordered_json out;
  out["timestamp"] = iso_timestamp_now();
  out["model"] = predictor.model_dir();
  if (!run_id.empty()) out["run_id"] = run_id;
  out["data"] = data_path;
  out["problem_type"] = predictor.multi_label() ? "multi_label_classification" : "single_label_classification";
  out["num_rows"] = data.examples.size();
  out["skipped_rows"] = data.skipped;
  out["truncated_rows"] = data.truncated;
  if (predictor.multi_label()) {
    add_multi_label_metrics(data, probs, predictor.labels(), threshold, &out);
  } else {
    add_single_label_metrics(data, logits, predictor.labels(), &out);
  }
  return out;
}

}  // namespace bertrain

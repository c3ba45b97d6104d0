#include "model/bert_config.h"

#include <fstream>
#include <map>
#include <set>

#include "core/error.h"
#include "core/files.h"

namespace bertrain {

namespace {

using nlohmann::json;

// The fields BertConfig understands; everything else goes to `extra`. Classifier-specific fields that we
// rewrite on save (architectures, num_labels, problem_type, label2id) are dropped from `extra` too.
const std::set<std::string> kKnownFields = {
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "hidden_act",
    "max_position_embeddings", "type_vocab_size", "layer_norm_eps", "hidden_dropout_prob",
    "attention_probs_dropout_prob", "classifier_dropout", "initializer_range", "id2label", "label2id",
    "num_labels", "architectures", "problem_type"};

int read_int(const json& j, const char* key, int fallback, const std::string& source) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  BERTRAIN_CHECK(v.is_number_integer(), source << ": field '" << key << "' must be an integer, found " << v.dump());
  const auto value = v.get<int64_t>();
  BERTRAIN_CHECK(value >= -(int64_t(1) << 31) && value < (int64_t(1) << 31),
                 source << ": field '" << key << "' is out of range: " << value);
  return static_cast<int>(value);
}

double read_double(const json& j, const char* key, double fallback, const std::string& source) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  BERTRAIN_CHECK(v.is_number(), source << ": field '" << key << "' must be a number, found " << v.dump());
  return v.get<double>();
}

// id2label: {"0": "a", "1": "b"} with ids 0..C-1 each exactly once; label2id, when present, its inverse.
std::vector<std::string> read_labels(const json& j, const std::string& source) {
  std::vector<std::string> labels;
  if (!j.contains("id2label")) return labels;
  const json& id2label = j.at("id2label");
  BERTRAIN_CHECK(id2label.is_object(), source << ": field 'id2label' must be an object, found " << id2label.dump());
  std::map<long, std::string> by_id;
  for (const auto& [key, value] : id2label.items()) {
    std::size_t used = 0;
    long id = -1;
    try {
      id = std::stol(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    BERTRAIN_CHECK(used == key.size() && id >= 0,
                   source << ": id2label key '" << key << "' is not a non-negative integer");
    BERTRAIN_CHECK(value.is_string(), source << ": id2label[" << key << "] must be a string, found " << value.dump());
    by_id[id] = value.get<std::string>();
  }
  long expected = 0;
  std::set<std::string> seen;
  for (const auto& [id, label] : by_id) {
    BERTRAIN_CHECK(id == expected, source << ": id2label ids must be 0.." << by_id.size() - 1 << ", missing " << expected);
    BERTRAIN_CHECK(seen.insert(label).second, source << ": id2label names '" << label << "' twice");
    labels.push_back(label);
    ++expected;
  }
  if (j.contains("label2id")) {
    const json& label2id = j.at("label2id");
    BERTRAIN_CHECK(label2id.is_object(), source << ": field 'label2id' must be an object");
    BERTRAIN_CHECK(label2id.size() == labels.size(), source << ": label2id has " << label2id.size()
                                                             << " entries but id2label has " << labels.size());
    for (std::size_t id = 0; id < labels.size(); ++id) {
      const auto it = label2id.find(labels[id]);
      BERTRAIN_CHECK(it != label2id.end() && it->is_number_integer() && it->get<int64_t>() == int64_t(id),
                     source << ": label2id['" << labels[id] << "'] must be " << id << " to match id2label");
    }
  }
  return labels;
}

}  // namespace

BertConfig BertConfig::from_json(const json& j, const std::string& source) {
  BERTRAIN_CHECK(j.is_object(), source << ": expected a JSON object, found " << j.type_name());
  if (j.contains("model_type")) {
    const json& type = j.at("model_type");
    BERTRAIN_CHECK(type.is_string() && type.get<std::string>() == "bert",
                   source << ": model_type must be \"bert\", found " << type.dump());
  }
  BertConfig c;
  c.vocab_size = read_int(j, "vocab_size", c.vocab_size, source);
  c.hidden_size = read_int(j, "hidden_size", c.hidden_size, source);
  c.num_hidden_layers = read_int(j, "num_hidden_layers", c.num_hidden_layers, source);
  c.num_attention_heads = read_int(j, "num_attention_heads", c.num_attention_heads, source);
  c.intermediate_size = read_int(j, "intermediate_size", c.intermediate_size, source);
  if (j.contains("hidden_act")) {
    BERTRAIN_CHECK(j.at("hidden_act").is_string(),
                   source << ": field 'hidden_act' must be a string, found " << j.at("hidden_act").dump());
    c.hidden_act = j.at("hidden_act").get<std::string>();
  }
  c.max_position_embeddings = read_int(j, "max_position_embeddings", c.max_position_embeddings, source);
  c.type_vocab_size = read_int(j, "type_vocab_size", c.type_vocab_size, source);
  c.layer_norm_eps = read_double(j, "layer_norm_eps", c.layer_norm_eps, source);
  c.hidden_dropout_prob = read_double(j, "hidden_dropout_prob", c.hidden_dropout_prob, source);
  c.attention_probs_dropout_prob = read_double(j, "attention_probs_dropout_prob", c.attention_probs_dropout_prob, source);
  if (j.contains("classifier_dropout") && !j.at("classifier_dropout").is_null()) {
    c.classifier_dropout = read_double(j, "classifier_dropout", 0.0, source);
  }
  c.initializer_range = read_double(j, "initializer_range", c.initializer_range, source);
  c.labels = read_labels(j, source);
  if (j.contains("problem_type") && !j.at("problem_type").is_null()) {
    const json& type = j.at("problem_type");
    BERTRAIN_CHECK(type.is_string(), source << ": field 'problem_type' must be a string, found " << type.dump());
    c.problem_type = type.get<std::string>();
  }
  for (const auto& [key, value] : j.items()) {
    if (kKnownFields.count(key) == 0) c.extra[key] = value;
  }
  c.validate(source);
  return c;
}

BertConfig BertConfig::load(const std::string& path) {
  require_readable_file(path, "config file");
  std::ifstream in(path);
  BERTRAIN_CHECK(in, path << ": cannot open config file");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    BERTRAIN_FAIL(path << ": invalid JSON: " << e.what());
  }
  return from_json(j, path);
}

void BertConfig::validate(const std::string& source) const {
  const std::pair<const char*, int> sizes[] = {
      {"vocab_size", vocab_size},
      {"hidden_size", hidden_size},
      {"num_hidden_layers", num_hidden_layers},
      {"num_attention_heads", num_attention_heads},
      {"intermediate_size", intermediate_size},
      {"max_position_embeddings", max_position_embeddings},
      {"type_vocab_size", type_vocab_size}};
  for (const auto& [name, value] : sizes) {
    BERTRAIN_CHECK(value > 0, source << ": " << name << " must be positive, found " << value);
  }
  BERTRAIN_CHECK(hidden_size % num_attention_heads == 0, source << ": hidden_size " << hidden_size
                                                                << " is not divisible by num_attention_heads "
                                                                << num_attention_heads);
  try {
    const Activation act = activation_from_name(hidden_act);
    BERTRAIN_CHECK(act != Activation::kTanh, "tanh is not a BERT hidden_act");
  } catch (const Error&) {
    BERTRAIN_FAIL(source << ": unknown hidden_act '" << hidden_act
                         << "' (expected gelu, gelu_new, gelu_pytorch_tanh or relu)");
  }
  BERTRAIN_CHECK(layer_norm_eps > 0, source << ": layer_norm_eps must be positive, found " << layer_norm_eps);
  BERTRAIN_CHECK(initializer_range > 0, source << ": initializer_range must be positive, found " << initializer_range);
  const std::pair<const char*, double> probabilities[] = {
      {"hidden_dropout_prob", hidden_dropout_prob},
      {"attention_probs_dropout_prob", attention_probs_dropout_prob},
      {"classifier_dropout", classifier_dropout.value_or(0.0)}};
  for (const auto& [name, value] : probabilities) {
    BERTRAIN_CHECK(value >= 0 && value < 1, source << ": " << name << " must be in [0, 1), found " << value);
  }
}

json BertConfig::to_classifier_json() const {
  json j = extra;
  j["architectures"] = json::array({"BertForSequenceClassification"});
  j["model_type"] = "bert";
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["intermediate_size"] = intermediate_size;
  j["hidden_act"] = hidden_act;
  j["max_position_embeddings"] = max_position_embeddings;
  j["type_vocab_size"] = type_vocab_size;
  j["layer_norm_eps"] = layer_norm_eps;
  j["hidden_dropout_prob"] = hidden_dropout_prob;
  j["attention_probs_dropout_prob"] = attention_probs_dropout_prob;
  j["classifier_dropout"] = classifier_dropout ? json(*classifier_dropout) : json(nullptr);
  j["initializer_range"] = initializer_range;
  json id2label = json::object(), label2id = json::object();
  for (std::size_t id = 0; id < labels.size(); ++id) {
    id2label[std::to_string(id)] = labels[id];
    label2id[labels[id]] = id;
  }
  j["id2label"] = id2label;
  j["label2id"] = label2id;
  j["num_labels"] = labels.size();
  j["problem_type"] = problem_type.empty() ? "single_label_classification" : problem_type;
  return j;
}

}  // namespace bertrain

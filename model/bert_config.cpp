#include "model/bert_config.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/count_text.h"
#include "core/error.h"
#include "core/files.h"
#include "core/json_text.h"

namespace bertrain {

namespace {

using nlohmann::json;

// The fields BertConfig understands; everything else goes to `extra`. Classifier-specific fields that we
// rewrite on save (architectures, num_labels, problem_type, label2id) are dropped from `extra` too.
const std::set<std::string> kKnownFields = {
    "model_type", "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
    "hidden_act", "max_position_embeddings", "type_vocab_size", "layer_norm_eps", "hidden_dropout_prob",
    "attention_probs_dropout_prob", "classifier_dropout", "initializer_range", "pad_token_id", "embedding_size",
    "id2label", "label2id", "num_labels", "architectures", "problem_type"};
// DistilBertConfig names its fields differently (its attribute_map makes hidden_size read dim, and so on).
const std::set<std::string> kDistilBertFields = {
    "model_type", "vocab_size", "dim", "n_layers", "n_heads", "hidden_size", "num_hidden_layers",
    "num_attention_heads", "hidden_dim", "activation", "max_position_embeddings",
    "dropout", "attention_dropout", "seq_classif_dropout", "initializer_range", "pad_token_id",
    "sinusoidal_pos_embds", "id2label", "label2id", "num_labels", "architectures", "problem_type"};

int read_int(const json& j, const char* key, int fallback, const std::string& source) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  BERTRAIN_CHECK(v.is_number_integer(), source << ": field '" << key << "' must be an integer, found " << v.dump());
  const auto value = v.get<int64_t>();
  BERTRAIN_CHECK(value >= -(int64_t(1) << 31) && value < (int64_t(1) << 31),
                 source << ": field '" << key << "' is out of range: " << value);
  return static_cast<int>(value);
}

// pad_token_id, whose null (transformers: no padding_idx) is -1.
int read_pad_token_id(const json& j, int fallback, const std::string& source) {
  if (j.contains("pad_token_id") && j.at("pad_token_id").is_null()) return -1;
  const int id = read_int(j, "pad_token_id", fallback, source);
  BERTRAIN_CHECK(id >= 0, source << ": pad_token_id " << id << " is outside the vocabulary (null says there is none)");
  return id;
}

double read_double(const json& j, const char* key, double fallback, const std::string& source) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  BERTRAIN_CHECK(v.is_number(), source << ": field '" << key << "' must be a number, found " << v.dump());
  return v.get<double>();
}

// id2label: {"0": "a", "1": "b"} with ids 0..C-1 each exactly once. label2id is not read: transformers predicts by
// id2label alone, so a checkpoint whose id2label was renamed and label2id left as it was (LABEL_0, ...) works there;
// a saved config.json gets id2label's inverse.
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
  return labels;
}

std::string read_string(const json& j, const char* key, const std::string& fallback, const std::string& source) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  BERTRAIN_CHECK(v.is_string(), source << ": field '" << key << "' must be a string, found " << v.dump());
  return v.get<std::string>();
}

// A config.json without model_type: transformers' AutoConfig refuses it, but Google's original BERT checkpoints
// and SciBERT's have none and are BERT. Where `architectures` names a class, that class's family, so that a
// RobertaModel is not trained as a BERT (without RoBERTa's position offset); a class of no family is refused.
ModelType family_without_model_type(const json& j, const std::string& source) {
  if (!j.contains("architectures") || j.at("architectures").is_null()) return ModelType::kBert;
  const json& classes = j.at("architectures");
  BERTRAIN_CHECK(classes.is_array(), source << ": field 'architectures' must be an array, found " << classes.dump());
  if (classes.empty()) return ModelType::kBert;
  const json& first = classes.front();
  const ModelFamily* family = first.is_string() ? model_family_of_class(first.get<std::string>()) : nullptr;
  BERTRAIN_CHECK(family != nullptr, source << ": no model_type, and architectures " << classes.dump()
                                           << " is not a class of a supported family (" << supported_model_types()
                                           << "): add the checkpoint's model_type");
  return family->type;
}

// transformers runs a model whose config says is_decoder with causal attention (each token sees only those before
// it), and add_cross_attention needs is_decoder; bertrain's encoder attends both ways, so such a model is refused
// rather than run with other numbers.
void refuse_decoder(const json& j, const std::string& source) {
  for (const char* key : {"is_decoder", "add_cross_attention"}) {
    if (!j.contains(key)) continue;
    const json& v = j.at(key);
    BERTRAIN_CHECK(v.is_boolean(), source << ": field '" << key << "' must be true or false, found " << v.dump());
    BERTRAIN_CHECK(!v.get<bool>(), source << ": " << key << " true is not supported: transformers runs such a model as "
                                          << "a decoder, with causal attention, and bertrain's encoders attend both ways");
  }
}

// problem_type as transformers defines it; "" when absent or null. single_label_classification needs two labels or
// more, as transformers requires; regression is read here (train replaces the head) and refused by predictions.
std::string read_problem_type(const json& j, std::size_t labels, const std::string& source) {
  if (!j.contains("problem_type") || j.at("problem_type").is_null()) return "";
  const json& type = j.at("problem_type");
  BERTRAIN_CHECK(type.is_string(), source << ": field 'problem_type' must be a string, found " << type.dump());
  const std::string value = type.get<std::string>();
  BERTRAIN_CHECK(value == "single_label_classification" || value == "multi_label_classification" ||
                     value == "regression",
                 source << ": problem_type " << type.dump()
                        << " is not single_label_classification, multi_label_classification or regression");
  BERTRAIN_CHECK(value != "single_label_classification" || labels != 1,
                 source << ": problem_type single_label_classification with one label (it needs two or more; a "
                           "one-label classifier is multi_label_classification)");
  return value;
}

// DistilBertConfig's fields (and its defaults) into BERT's names. DistilBERT's LayerNorms use eps 1e-12 whatever
// the config says (the model hard-codes it).
void read_distilbert_fields(const json& j, const std::string& source, BertConfig* c) {
  BERTRAIN_CHECK(!j.contains("sinusoidal_pos_embds") || j.at("sinusoidal_pos_embds") == json(false),
                 source << ": sinusoidal_pos_embds " << j.at("sinusoidal_pos_embds").dump()
                        << " is not supported (bertrain trains learned position embeddings)");
  c->vocab_size = read_int(j, "vocab_size", 30522, source);
  // DistilBertConfig's attribute_map reads BERT's names as its own (hidden_size sets dim): a config.json written
  // with them loads in transformers, so here too; its own names win where both are given.
  const auto own_or_bert = [&](const char* own, const char* bert, int fallback) {
    return read_int(j, j.contains(own) ? own : bert, fallback, source);
  };
  c->hidden_size = own_or_bert("dim", "hidden_size", 768);
  c->num_hidden_layers = own_or_bert("n_layers", "num_hidden_layers", 6);
  c->num_attention_heads = own_or_bert("n_heads", "num_attention_heads", 12);
  c->intermediate_size = read_int(j, "hidden_dim", 3072, source);
  c->hidden_act = read_string(j, "activation", "gelu", source);
  c->max_position_embeddings = read_int(j, "max_position_embeddings", 512, source);
  c->layer_norm_eps = 1e-12;
  c->hidden_dropout_prob = read_double(j, "dropout", 0.1, source);
  c->attention_probs_dropout_prob = read_double(j, "attention_dropout", 0.1, source);
  c->classifier_dropout = read_double(j, "seq_classif_dropout", 0.2, source);
  c->initializer_range = read_double(j, "initializer_range", 0.02, source);
  c->pad_token_id = read_pad_token_id(j, 0, source);
}

// The fields of BertConfig, ElectraConfig and the RoBERTa-like configs (RobertaConfig, XLMRobertaConfig,
// CamembertConfig, Data2VecTextConfig), from each class's defaults.
void read_bert_fields(const json& j, const std::string& source, BertConfig* out) {
  BertConfig& c = *out;
  const ModelType type = c.model_type;
  if (c.family().positions_after_padding) c.pad_token_id = 1;
  if (type == ModelType::kRoberta) c.vocab_size = 50265;  // RobertaConfig's GPT-2 vocabulary; the others keep 30522
  if (type == ModelType::kElectra) {  // ElectraConfig's small defaults
    c.embedding_size = 128;
    c.hidden_size = 256;
    c.num_attention_heads = 4;
    c.intermediate_size = 1024;
  }
  refuse_decoder(j, source);
  const std::string positions = read_string(j, "position_embedding_type", "absolute", source);
  BERTRAIN_CHECK(positions == "absolute", source << ": position_embedding_type \"" << positions
                                                 << "\" is not supported (only \"absolute\")");
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
  c.pad_token_id = read_pad_token_id(j, c.pad_token_id, source);
  if (type == ModelType::kElectra) c.embedding_size = read_int(j, "embedding_size", c.embedding_size, source);
}

// The fields in BertConfig's names (the RoBERTa-like families and ELECTRA use them too).
void write_bert_fields(const BertConfig& c, json* out) {
  json& j = *out;
  if (c.model_type == ModelType::kElectra) j["embedding_size"] = c.embedding_width();
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["intermediate_size"] = c.intermediate_size;
  j["hidden_act"] = c.hidden_act;
  j["type_vocab_size"] = c.type_vocab_size;
  j["layer_norm_eps"] = c.layer_norm_eps;
  j["hidden_dropout_prob"] = c.hidden_dropout_prob;
  j["attention_probs_dropout_prob"] = c.attention_probs_dropout_prob;
  j["classifier_dropout"] = c.classifier_dropout ? json(*c.classifier_dropout) : json(nullptr);
}

}  // namespace

BertConfig BertConfig::from_json(const json& j, const std::string& source) {
  BERTRAIN_CHECK(j.is_object(), source << ": expected a JSON object, found " << j.type_name());
  BertConfig c;
  if (j.contains("model_type")) {
    const json& type = j.at("model_type");
    BERTRAIN_CHECK(type.is_string(), source << ": field 'model_type' must be a string, found " << type.dump());
    try {
      c.model_type = model_family(type.get<std::string>()).type;
    } catch (const Error&) {
      BERTRAIN_FAIL(source << ": model_type " << type.dump() << " is not supported (supported: "
                           << supported_model_types() << ")");
    }
  } else {
    c.model_type = family_without_model_type(j, source);
  }
  if (c.model_type == ModelType::kDistilBert) {
    read_distilbert_fields(j, source, &c);
  } else {
    read_bert_fields(j, source, &c);
  }
  c.labels = read_labels(j, source);
  c.problem_type = read_problem_type(j, c.labels.size(), source);
  const std::set<std::string>& known = c.model_type == ModelType::kDistilBert ? kDistilBertFields : kKnownFields;
  for (const auto& [key, value] : j.items()) {
    // embedding_size is ELECTRA's; another family's config keeps it as transformers does, unused.
    const bool unused = key == "embedding_size" && c.model_type != ModelType::kElectra;
    if (known.count(key) == 0 || unused) c.extra[key] = value;
  }
  c.validate(source);
  return c;
}

BertConfig BertConfig::load(const std::string& path) {
  require_readable_file(path, "config file");
  return from_json(parse_json(read_file(path, "config file"), path), path);
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
  // The parameter layout lists each layer's tensors before the weights' shapes are compared with it: a bound keeps a
  // corrupt count from exhausting memory there (the deepest BERT-family checkpoints have 48 layers).
  BERTRAIN_CHECK(num_hidden_layers <= kMaxHiddenLayers, source << ": num_hidden_layers " << num_hidden_layers
                                                               << " is more than bertrain supports ("
                                                               << kMaxHiddenLayers << ")");
  BERTRAIN_CHECK(hidden_size % num_attention_heads == 0, source << ": hidden_size " << hidden_size
                                                                << " is not divisible by num_attention_heads "
                                                                << num_attention_heads);
  try {
    const Activation act = activation_from_name(hidden_act);
    BERTRAIN_CHECK(act != Activation::kTanh, "tanh is not a BERT hidden_act");
  } catch (const Error&) {
    BERTRAIN_FAIL(source << ": unknown " << (model_type == ModelType::kDistilBert ? "activation" : "hidden_act") << " '"
                         << hidden_act << "' (expected " << kActivationNames << ")");
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
  if (pad_token_id == -1) {
    BERTRAIN_CHECK(!family().positions_after_padding,
                   source << ": pad_token_id is null, but " << family().model_type
                          << " numbers positions from the padding token (transformers cannot run it either)");
  } else {
    BERTRAIN_CHECK(pad_token_id >= 0 && pad_token_id < vocab_size, source << ": pad_token_id " << pad_token_id
                                                                          << " is outside the vocabulary [0, "
                                                                          << vocab_size << ")");
  }
  BERTRAIN_CHECK(embedding_size >= 0, source << ": embedding_size must be positive, found " << embedding_size);
  BERTRAIN_CHECK(embedding_size == 0 || family().embedding_projection,
                 source << ": embedding_size is an ELECTRA field, this is a " << family().model_type << " config");
  // A text is at least [CLS] and [SEP]: a model with fewer positions can read none.
  const std::string offset =
      position_offset() > 0 ? " after the padding offset " + std::to_string(position_offset()) : "";
  const std::string left = count_of(std::max(max_sequence_length(), 0), "position");
  BERTRAIN_CHECK(max_sequence_length() >= 2, source << ": max_position_embeddings " << max_position_embeddings
                                                    << " leaves " << left << offset
                                                    << "; a text needs at least 2 ([CLS] and [SEP])");
}

json BertConfig::to_classifier_json() const {
  json j = extra;
  // bertrain writes float32 weights: a source's "torch_dtype" (transformers 4) or "dtype" (5) of float16 would make
  // from_pretrained(..., dtype="auto") load them in half precision.
  for (const char* key : {"torch_dtype", "dtype"}) {
    if (j.contains(key)) j[key] = "float32";
  }
  j["architectures"] = json::array({family().architecture});
  j["model_type"] = family().model_type;
  j["vocab_size"] = vocab_size;
  j["max_position_embeddings"] = max_position_embeddings;
  j["initializer_range"] = initializer_range;
  j["pad_token_id"] = pad_token_id >= 0 ? json(pad_token_id) : json(nullptr);
  if (model_type == ModelType::kDistilBert) {
    j["dim"] = hidden_size;
    j["n_layers"] = num_hidden_layers;
    j["n_heads"] = num_attention_heads;
    j["hidden_dim"] = intermediate_size;
    j["activation"] = hidden_act;
    j["dropout"] = hidden_dropout_prob;
    j["attention_dropout"] = attention_probs_dropout_prob;
    j["seq_classif_dropout"] = classifier_dropout.value_or(0.2);
    j["sinusoidal_pos_embds"] = false;
  } else {
    write_bert_fields(*this, &j);
  }
  json id2label = json::object(), label2id = json::object();
  for (std::size_t id = 0; id < labels.size(); ++id) {
    id2label[std::to_string(id)] = labels[id];
    label2id[labels[id]] = id;
  }
  j["id2label"] = id2label;
  j["label2id"] = label2id;
  j["num_labels"] = labels.size();
  // No problem_type: softmax over two or more labels, a sigmoid for one (transformers' pipeline reads it so).
  j["problem_type"] = !problem_type.empty()  ? problem_type
                      : labels.size() == 1 ? "multi_label_classification"
                                           : "single_label_classification";
  return j;
}

}  // namespace bertrain

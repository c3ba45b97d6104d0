#include "model/model_family.h"

#include <string>
#include <utility>

#include "core/error.h"

namespace bertrain {

namespace {

constexpr LayerTensorNames kBertLayer = {
    "attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
    "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm"};
constexpr LayerTensorNames kDistilBertLayer = {
    "attention.q_lin", "attention.k_lin", "attention.v_lin", "attention.out_lin",
    "sa_layer_norm", "ffn.lin1", "ffn.lin2", "output_layer_norm"};

// Buffers some checkpoints carry beside the parameters (transformers registers them, older versions save them).
const std::vector<std::string> kBuffers = {"embeddings.position_ids", "embeddings.token_type_ids"};

std::vector<std::string> with_buffers(std::vector<std::string> prefixes) {
  prefixes.insert(prefixes.end(), kBuffers.begin(), kBuffers.end());
  return prefixes;
}

// RoBERTa and the models built as RoBERTa (transformers' Camembert* and Data2VecText* classes are copies of
// Roberta*: the same tensors, position numbering and head), told apart only by their names.
const ModelFamily& roberta_like(ModelType type) {
  const auto family = [](ModelType t, const char* model_type, const char* architecture, const char* base) {
    return ModelFamily{t, model_type, architecture, base, "encoder.layer.", kBertLayer, "classifier.dense",
                       "classifier.out_proj", Activation::kTanh, true, true, true, true, false,
                       with_buffers({"lm_head.", "pooler."})};
  };
  static const ModelFamily roberta = family(ModelType::kRoberta, "roberta", "RobertaForSequenceClassification",
                                            "roberta.");
  static const ModelFamily xlmr = family(ModelType::kXlmRoberta, "xlm-roberta", "XLMRobertaForSequenceClassification",
                                         "roberta.");
  static const ModelFamily camembert = family(ModelType::kCamembert, "camembert", "CamembertForSequenceClassification",
                                              "roberta.");
  static const ModelFamily data2vec = family(ModelType::kData2VecText, "data2vec-text",
                                             "Data2VecTextForSequenceClassification", "data2vec_text.");
  switch (type) {
    case ModelType::kXlmRoberta: return xlmr;
    case ModelType::kCamembert: return camembert;
    case ModelType::kData2VecText: return data2vec;
    default: return roberta;
  }
}

}  // namespace

const ModelFamily& model_family(ModelType type) {
  static const ModelFamily bert{ModelType::kBert, "bert", "BertForSequenceClassification", "bert.", "encoder.layer.",
                                kBertLayer, "bert.pooler.dense", "classifier", Activation::kTanh, false, true, true,
                                false, false, with_buffers({"cls."})};
  static const ModelFamily distilbert{ModelType::kDistilBert, "distilbert", "DistilBertForSequenceClassification",
                                      "distilbert.", "transformer.layer.", kDistilBertLayer, "pre_classifier",
                                      "classifier", Activation::kRelu, false, false, false, false, false,
                                      with_buffers({"vocab_transform.", "vocab_layer_norm.", "vocab_projector."})};
  static const ModelFamily electra{ModelType::kElectra, "electra", "ElectraForSequenceClassification", "electra.",
                                   "encoder.layer.", kBertLayer, "classifier.dense", "classifier.out_proj",
                                   Activation::kGelu, true, true, true, false, true,
                                   with_buffers({"discriminator_predictions.", "generator_predictions.",
                                                 "generator_lm_head."})};
  switch (type) {
    case ModelType::kBert: return bert;
    case ModelType::kRoberta:
    case ModelType::kXlmRoberta:
    case ModelType::kCamembert:
    case ModelType::kData2VecText: return roberta_like(type);
    case ModelType::kDistilBert: return distilbert;
    case ModelType::kElectra: return electra;
  }
  BERTRAIN_FAIL("unknown model type " << static_cast<int>(type));
}

const ModelFamily& model_family(const std::string& model_type) {
  for (ModelType type : kModelTypes) {
    if (model_type == model_family(type).model_type) return model_family(type);
  }
  BERTRAIN_FAIL("model_type \"" << model_type << "\" is not supported (supported: " << supported_model_types() << ")");
}

const ModelFamily* model_family_of_class(const std::string& class_name) {
  // Longest prefix first: "XLMRoberta..." is not a "Roberta..." class, nor "DistilBert..." a "Bert..." one.
  const std::pair<const char*, ModelType> prefixes[] = {{"XLMRoberta", ModelType::kXlmRoberta},
                                                        {"DistilBert", ModelType::kDistilBert},
                                                        {"Camembert", ModelType::kCamembert},
                                                        {"Data2VecText", ModelType::kData2VecText},
                                                        {"Roberta", ModelType::kRoberta},
                                                        {"Electra", ModelType::kElectra},
                                                        {"Bert", ModelType::kBert}};
  for (const auto& [prefix, type] : prefixes) {
    if (class_name.rfind(prefix, 0) != 0) continue;
    const std::string rest = class_name.substr(std::char_traits<char>::length(prefix));
    for (const char* kind : {"Model", "For", "LMHead"}) {
      if (rest.rfind(kind, 0) == 0) return &model_family(type);
    }
    return nullptr;  // RobertaPreLayerNormModel, BertGenerationEncoder: another architecture with a family's prefix
  }
  return nullptr;
}

std::string supported_model_types() {
  std::string names;
  for (ModelType type : kModelTypes) names += std::string(names.empty() ? "" : ", ") + model_family(type).model_type;
  return names;
}

}  // namespace bertrain

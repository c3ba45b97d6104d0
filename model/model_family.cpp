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

const ModelFamily& roberta_like(ModelType type) {
  static const ModelFamily roberta{ModelType::kRoberta, "roberta", "RobertaForSequenceClassification", "roberta.",
                                   "encoder.layer.", kBertLayer, "classifier.dense", "classifier.out_proj",
                                   Activation::kTanh, true, false, true, true, true, false,
                                   with_buffers({"lm_head.", "pooler."})};
  static const ModelFamily xlmr{ModelType::kXlmRoberta, "xlm-roberta", "XLMRobertaForSequenceClassification",
                                "roberta.", "encoder.layer.", kBertLayer, "classifier.dense", "classifier.out_proj",
                                Activation::kTanh, true, false, true, true, true, false,
                                with_buffers({"lm_head.", "pooler."})};
  return type == ModelType::kRoberta ? roberta : xlmr;
}

}  // namespace

const ModelFamily& model_family(ModelType type) {
  static const ModelFamily bert{ModelType::kBert, "bert", "BertForSequenceClassification", "bert.", "encoder.layer.",
                                kBertLayer, "bert.pooler.dense", "classifier", Activation::kTanh, false, true, true,
                                true, false, false, with_buffers({"cls."})};
  static const ModelFamily distilbert{ModelType::kDistilBert, "distilbert", "DistilBertForSequenceClassification",
                                      "distilbert.", "transformer.layer.", kDistilBertLayer, "pre_classifier",
                                      "classifier", Activation::kRelu, false, false, false, false, false, false,
                                      with_buffers({"vocab_transform.", "vocab_layer_norm.", "vocab_projector."})};
  static const ModelFamily electra{ModelType::kElectra, "electra", "ElectraForSequenceClassification", "electra.",
                                   "encoder.layer.", kBertLayer, "classifier.dense", "classifier.out_proj",
                                   Activation::kGelu, true, false, true, true, false, true,
                                   with_buffers({"discriminator_predictions.", "generator_predictions.",
                                                 "generator_lm_head."})};
  switch (type) {
    case ModelType::kBert: return bert;
    case ModelType::kRoberta:
    case ModelType::kXlmRoberta: return roberta_like(type);
    case ModelType::kDistilBert: return distilbert;
    case ModelType::kElectra: return electra;
  }
  BERTRAIN_FAIL("unknown model type " << static_cast<int>(type));
}

const ModelFamily& model_family(const std::string& model_type) {
  for (ModelType type : {ModelType::kBert, ModelType::kRoberta, ModelType::kXlmRoberta, ModelType::kDistilBert,
                         ModelType::kElectra}) {
    if (model_type == model_family(type).model_type) return model_family(type);
  }
  BERTRAIN_FAIL("model_type \"" << model_type << "\" is not supported (supported: " << supported_model_types() << ")");
}

const ModelFamily* model_family_of_class(const std::string& class_name) {
  // Longest prefix first: "XLMRoberta..." is not a "Roberta..." class, nor "DistilBert..." a "Bert..." one.
  const std::pair<const char*, ModelType> prefixes[] = {{"XLMRoberta", ModelType::kXlmRoberta},
                                                        {"DistilBert", ModelType::kDistilBert},
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

std::string supported_model_types() { return "bert, roberta, xlm-roberta, distilbert, electra"; }

}  // namespace bertrain

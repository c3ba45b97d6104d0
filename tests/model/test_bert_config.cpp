// BertConfig parsing and validation, and the Hugging Face tensor-name mapping.
#include <gtest/gtest.h>

#include "core/error.h"
#include "model/bert_config.h"
#include "model/hf_names.h"

namespace bertrain {
namespace {

using nlohmann::json;

json valid_config() {
  return json::parse(R"({"model_type": "bert", "vocab_size": 50, "hidden_size": 12, "num_hidden_layers": 2,
    "num_attention_heads": 3, "intermediate_size": 20, "hidden_act": "gelu_new", "max_position_embeddings": 16,
    "type_vocab_size": 2, "layer_norm_eps": 1e-5, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.2,
    "classifier_dropout": null, "initializer_range": 0.02, "id2label": {"1": "b", "0": "a"},
    "label2id": {"a": 0, "b": 1}, "pad_token_id": 0})");
}

// Expects from_json to throw an Error whose message contains every fragment.
void expect_error(const json& j, std::initializer_list<const char*> fragments) {
  try {
    BertConfig::from_json(j, "cfg.json");
    FAIL() << "no error for " << j.dump();
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("cfg.json"), std::string::npos) << message;
    for (const char* f : fragments) EXPECT_NE(message.find(f), std::string::npos) << "'" << f << "' not in: " << message;
  }
}

TEST(BertConfig, ParsesEveryField) {
  const BertConfig c = BertConfig::from_json(valid_config(), "cfg.json");
  EXPECT_EQ(c.vocab_size, 50);
  EXPECT_EQ(c.hidden_size, 12);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.num_attention_heads, 3);
  EXPECT_EQ(c.head_dim(), 4);
  EXPECT_EQ(c.intermediate_size, 20);
  EXPECT_EQ(c.activation(), Activation::kGeluTanh);
  EXPECT_EQ(c.max_position_embeddings, 16);
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.attention_probs_dropout_prob, 0.2);
  EXPECT_FALSE(c.classifier_dropout.has_value());
  EXPECT_EQ(c.labels, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(c.pad_token_id, 0);
  EXPECT_EQ(c.model_type, ModelType::kBert);
}

TEST(BertConfig, MissingFieldsTakeTransformersDefaults) {
  const BertConfig c = BertConfig::from_json(json::object(), "cfg.json");
  EXPECT_EQ(c.vocab_size, 30522);
  EXPECT_EQ(c.hidden_size, 768);
  EXPECT_EQ(c.num_hidden_layers, 12);
  EXPECT_EQ(c.hidden_act, "gelu");
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-12);
  EXPECT_TRUE(c.labels.empty());
}

TEST(BertConfig, ActivationNames) {
  for (const auto& [name, act] : {std::pair<const char*, Activation>{"gelu", Activation::kGelu},
                                  {"gelu_new", Activation::kGeluTanh},
                                  {"gelu_pytorch_tanh", Activation::kGeluTanh},
                                  {"gelu_python", Activation::kGelu},  // transformers' other names of the same two
                                  {"gelu_python_tanh", Activation::kGeluTanh},
                                  {"gelu_fast", Activation::kGeluTanh},
                                  {"relu", Activation::kRelu}}) {
    json j = valid_config();
    j["hidden_act"] = name;
    EXPECT_EQ(BertConfig::from_json(j, "cfg.json").activation(), act) << name;
  }
}

TEST(BertConfig, RejectsInvalidValues) {
  json j = valid_config();
  j["hidden_size"] = 0;
  expect_error(j, {"hidden_size", "positive"});
  j = valid_config();
  j["num_attention_heads"] = 5;
  expect_error(j, {"hidden_size 12", "not divisible", "num_attention_heads 5"});
  j = valid_config();
  j["hidden_act"] = "swish";
  expect_error(j, {"hidden_act", "swish"});
  j = valid_config();
  j["hidden_act"] = "tanh";
  expect_error(j, {"hidden_act", "tanh"});
  j = valid_config();
  j["intermediate_size"] = "big";
  expect_error(j, {"intermediate_size", "integer"});
  j = valid_config();
  j["num_hidden_layers"] = -1;
  expect_error(j, {"num_hidden_layers", "positive"});
  j = valid_config();
  j["hidden_dropout_prob"] = 1.5;
  expect_error(j, {"hidden_dropout_prob", "[0, 1)"});
  j = valid_config();
  j["layer_norm_eps"] = 0;
  expect_error(j, {"layer_norm_eps"});
  j = valid_config();
  j["model_type"] = "gpt2";
  expect_error(j, {"model_type", "gpt2"});
  expect_error(json::array(), {"JSON object"});
}

TEST(BertConfig, RejectsInconsistentLabels) {
  json j = valid_config();
  j["id2label"] = json{{"0", "a"}, {"2", "b"}};
  j.erase("label2id");
  expect_error(j, {"id2label", "missing 1"});
  j = valid_config();
  j["id2label"] = json{{"0", "a"}, {"x", "b"}};
  expect_error(j, {"id2label key 'x'"});
  j = valid_config();
  j["id2label"] = json{{"0", "a"}, {"1", "a"}};
  j.erase("label2id");
  expect_error(j, {"'a' twice"});
  // label2id is not read (transformers predicts by id2label): one left behind by a renaming is no error, and a
  // saved config gets id2label's inverse.
  j = valid_config();
  j["label2id"] = json{{"LABEL_0", 0}, {"LABEL_1", 1}};
  const BertConfig renamed = BertConfig::from_json(j, "cfg.json");
  EXPECT_EQ(renamed.labels, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(renamed.to_classifier_json().at("label2id"), (json{{"a", 0}, {"b", 1}}));
}

TEST(BertConfig, ClassifierJsonRoundTrips) {
  const BertConfig c = BertConfig::from_json(valid_config(), "cfg.json");
  const json out = c.to_classifier_json();
  EXPECT_EQ(out.at("architectures"), json::array({"BertForSequenceClassification"}));
  EXPECT_EQ(out.at("problem_type"), "single_label_classification");  // valid_config has none
  EXPECT_EQ(out.at("num_labels"), 2);
  EXPECT_EQ(out.at("id2label").at("1"), "b");
  EXPECT_EQ(out.at("label2id").at("a"), 0);
  EXPECT_EQ(out.at("pad_token_id"), 0);
  EXPECT_FALSE(out.contains("torch_dtype"));  // not added where the source had none
  const BertConfig back = BertConfig::from_json(out, "out.json");
  EXPECT_EQ(back.labels, c.labels);
  // A half-precision source's dtype is not kept beside the float32 weights bertrain writes.
  json half = valid_config();
  half["torch_dtype"] = "float16";
  half["dtype"] = "bfloat16";
  const json written = BertConfig::from_json(half, "half.json").to_classifier_json();
  EXPECT_EQ(written.at("torch_dtype"), "float32");
  EXPECT_EQ(written.at("dtype"), "float32");
  EXPECT_EQ(back.problem_type, "single_label_classification");
  // A null pad_token_id (transformers: no padding_idx) is none, and written back as null.
  json no_pad = valid_config();
  no_pad["pad_token_id"] = nullptr;
  const BertConfig without = BertConfig::from_json(no_pad, "cfg.json");
  EXPECT_EQ(without.pad_token_id, -1);
  EXPECT_TRUE(without.to_classifier_json().at("pad_token_id").is_null());
  BertConfig multi = c;
  multi.problem_type = "multi_label_classification";
  EXPECT_EQ(BertConfig::from_json(multi.to_classifier_json(), "m.json").problem_type, "multi_label_classification");
  json bad = valid_config();
  bad["problem_type"] = 3;
  expect_error(bad, {"problem_type", "must be a string"});
  EXPECT_EQ(back.hidden_act, c.hidden_act);
  EXPECT_EQ(back.intermediate_size, c.intermediate_size);
}

// Each family's config.json in its own field names: read into BERT's, written back as the family's classifier, and
// read again to the same values.
TEST(BertConfig, FamiliesRoundTripInTheirOwnNames) {
  const json distilbert = json::parse(R"({"model_type": "distilbert", "vocab_size": 40, "dim": 16, "n_layers": 3,
    "n_heads": 4, "hidden_dim": 24, "activation": "relu", "max_position_embeddings": 20, "dropout": 0.15,
    "attention_dropout": 0.05, "seq_classif_dropout": 0.3, "qa_dropout": 0.1, "sinusoidal_pos_embds": false,
    "tie_weights_": true, "pad_token_id": 0, "id2label": {"0": "a", "1": "b"}})");
  const BertConfig d = BertConfig::from_json(distilbert, "cfg.json");
  EXPECT_EQ(d.model_type, ModelType::kDistilBert);
  EXPECT_EQ(d.hidden_size, 16);
  EXPECT_EQ(d.num_hidden_layers, 3);
  EXPECT_EQ(d.num_attention_heads, 4);
  EXPECT_EQ(d.intermediate_size, 24);
  EXPECT_EQ(d.hidden_act, "relu");
  EXPECT_DOUBLE_EQ(d.hidden_dropout_prob, 0.15);
  EXPECT_DOUBLE_EQ(d.attention_probs_dropout_prob, 0.05);
  EXPECT_DOUBLE_EQ(d.classifier_dropout.value(), 0.3);
  EXPECT_DOUBLE_EQ(d.layer_norm_eps, 1e-12);  // DistilBERT's LayerNorms hard-code it
  EXPECT_EQ(d.token_type_rows(), 0);
  EXPECT_EQ(d.max_sequence_length(), 20);
  const json dj = d.to_classifier_json();
  EXPECT_EQ(dj.at("architectures"), json::array({"DistilBertForSequenceClassification"}));
  EXPECT_EQ(dj.at("dim"), 16);
  EXPECT_EQ(dj.at("seq_classif_dropout"), 0.3);
  EXPECT_EQ(dj.at("qa_dropout"), 0.1);  // kept from the source
  EXPECT_FALSE(dj.contains("hidden_size"));
  EXPECT_FALSE(dj.contains("type_vocab_size"));
  const BertConfig d2 = BertConfig::from_json(dj, "back.json");
  EXPECT_EQ(d2.hidden_size, 16);
  EXPECT_EQ(d2.hidden_act, "relu");
  EXPECT_EQ(d2.labels, d.labels);

  json roberta = valid_config();
  roberta["model_type"] = "roberta";
  roberta.erase("pad_token_id");
  roberta["max_position_embeddings"] = 18;
  const BertConfig r = BertConfig::from_json(roberta, "cfg.json");
  EXPECT_EQ(r.pad_token_id, 1);  // RobertaConfig's default
  EXPECT_EQ(r.position_offset(), 2);
  EXPECT_EQ(r.max_sequence_length(), 16);
  EXPECT_EQ(r.to_classifier_json().at("architectures"), json::array({"RobertaForSequenceClassification"}));
  // The families transformers builds as RoBERTa: the same defaults and positions, their own names written back.
  for (const auto& [model_type, architecture] :
       {std::pair<const char*, const char*>{"xlm-roberta", "XLMRobertaForSequenceClassification"},
        {"camembert", "CamembertForSequenceClassification"},
        {"data2vec-text", "Data2VecTextForSequenceClassification"}}) {
    roberta["model_type"] = model_type;
    const BertConfig like = BertConfig::from_json(roberta, "cfg.json");
    EXPECT_EQ(like.pad_token_id, 1) << model_type;
    EXPECT_EQ(like.position_offset(), 2) << model_type;
    EXPECT_EQ(like.to_classifier_json().at("model_type"), model_type);
    EXPECT_EQ(like.to_classifier_json().at("architectures"), json::array({architecture}));
  }
  // RobertaConfig's vocabulary is GPT-2's; the other RoBERTa-like configs keep BERT's default.
  roberta.erase("vocab_size");
  roberta["model_type"] = "roberta";
  EXPECT_EQ(BertConfig::from_json(roberta, "cfg.json").vocab_size, 50265);
  roberta["model_type"] = "camembert";
  EXPECT_EQ(BertConfig::from_json(roberta, "cfg.json").vocab_size, 30522);

  json electra = valid_config();
  electra["model_type"] = "electra";
  electra["embedding_size"] = 8;
  const BertConfig e = BertConfig::from_json(electra, "cfg.json");
  EXPECT_EQ(e.embedding_width(), 8);
  EXPECT_TRUE(e.has_embedding_projection());
  EXPECT_EQ(e.to_classifier_json().at("embedding_size"), 8);
  electra["embedding_size"] = 12;  // = hidden: no projection, as ElectraModel builds none
  EXPECT_FALSE(BertConfig::from_json(electra, "cfg.json").has_embedding_projection());
  // BertConfig has no embedding_size: transformers keeps it as an unused attribute, and so does bertrain.
  json bert = valid_config();
  bert["embedding_size"] = 8;
  const BertConfig b = BertConfig::from_json(bert, "cfg.json");
  EXPECT_FALSE(b.has_embedding_projection());
  EXPECT_EQ(b.extra.at("embedding_size"), 8);
}

TEST(BertConfig, RefusesWhatNoFamilyComputes) {
  json c = valid_config();
  c["model_type"] = "gpt2";
  expect_error(c, {"model_type \"gpt2\" is not supported", "roberta", "distilbert", "electra"});
  c = valid_config();
  c["position_embedding_type"] = "relative_key";
  expect_error(c, {"position_embedding_type", "relative_key"});
  c = valid_config();
  c["pad_token_id"] = 50;
  expect_error(c, {"pad_token_id 50"});
  c = valid_config();
  c["pad_token_id"] = -1;  // only null says "none"
  expect_error(c, {"pad_token_id -1"});
  c = valid_config();
  c["model_type"] = "roberta";
  c["pad_token_id"] = nullptr;  // RoBERTa counts positions from it
  expect_error(c, {"pad_token_id is null", "roberta"});
  c = valid_config();
  c["model_type"] = "roberta";
  c["pad_token_id"] = 1;
  c["max_position_embeddings"] = 2;  // all used up by the padding offset
  expect_error(c, {"max_position_embeddings 2", "padding offset"});
  c["max_position_embeddings"] = 3;  // one position left: not even [CLS] and [SEP]
  expect_error(c, {"max_position_embeddings 3 leaves 1 position after the padding offset 2", "at least 2"});
  c = valid_config();
  c["max_position_embeddings"] = 1;  // train named --max-length for it, which was never given
  expect_error(c, {"max_position_embeddings 1 leaves 1 position; a text needs at least 2 ([CLS] and [SEP])"});
  const json d = json::parse(R"({"model_type": "distilbert", "sinusoidal_pos_embds": true})");
  expect_error(d, {"sinusoidal_pos_embds"});
  expect_error(json::parse(R"({"model_type": "distilbert", "activation": "silu"})"), {"unknown activation 'silu'"});
  // BERT's names in a DistilBERT config are read as its own, as DistilBertConfig's attribute_map reads them.
  const BertConfig aliased = BertConfig::from_json(
      json::parse(R"({"model_type": "distilbert", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4})"),
      "cfg.json");
  EXPECT_EQ(aliased.hidden_size, 64);
  EXPECT_EQ(aliased.num_hidden_layers, 2);
  EXPECT_EQ(aliased.num_attention_heads, 4);
  EXPECT_FALSE(aliased.extra.contains("hidden_size"));  // written back as dim, not kept twice
}

// transformers computes these otherwise than an encoder classifier (causal attention; numbers, not labels), so they are
// refused or read as the pipeline reads them, never run with other numbers.
TEST(BertConfig, RefusesDecodersAndUnknownProblemTypes) {
  for (const char* key : {"is_decoder", "add_cross_attention"}) {
    json c = valid_config();
    c[key] = true;
    expect_error(c, {key, "causal attention"});
    c[key] = false;
    EXPECT_NO_THROW(BertConfig::from_json(c, "cfg.json")) << key;
    c[key] = "yes";
    expect_error(c, {key, "true or false"});
  }
  json c = valid_config();
  c["problem_type"] = "multilabel";
  expect_error(c, {"problem_type \"multilabel\"", "multi_label_classification"});
  c["problem_type"] = "regression";
  EXPECT_EQ(BertConfig::from_json(c, "cfg.json").problem_type, "regression");  // train replaces the head
  c["problem_type"] = "single_label_classification";
  c["id2label"] = json{{"0", "only"}};
  c["label2id"] = json{{"only", 0}};
  expect_error(c, {"single_label_classification with one label"});
  // One label and no problem_type is saved as what it predicts with: a sigmoid.
  c.erase("problem_type");
  const BertConfig one = BertConfig::from_json(c, "cfg.json");
  EXPECT_EQ(one.problem_type, "");
  EXPECT_EQ(one.to_classifier_json().at("problem_type"), "multi_label_classification");
}

// Without model_type (Google's BERT and SciBERT have none) a config is BERT unless its architectures name another
// family's class; a class of no family is refused, not run as a BERT.
TEST(BertConfig, AConfigWithoutModelTypeIsTheFamilyOfItsArchitecture) {
  json c = valid_config();
  c.erase("model_type");
  EXPECT_EQ(BertConfig::from_json(c, "cfg.json").model_type, ModelType::kBert);
  c["architectures"] = json::array();
  EXPECT_EQ(BertConfig::from_json(c, "cfg.json").model_type, ModelType::kBert);
  const std::pair<const char*, ModelType> classes[] = {{"BertForMaskedLM", ModelType::kBert},
                                                       {"RobertaModel", ModelType::kRoberta},
                                                       {"XLMRobertaForSequenceClassification", ModelType::kXlmRoberta},
                                                       {"CamembertForMaskedLM", ModelType::kCamembert},
                                                       {"Data2VecTextModel", ModelType::kData2VecText},
                                                       {"ElectraForPreTraining", ModelType::kElectra},
                                                       {"BertLMHeadModel", ModelType::kBert}};
  for (const auto& [name, type] : classes) {
    c["architectures"] = json::array({name});
    c["pad_token_id"] = 1;  // RoBERTa's padding row
    EXPECT_EQ(BertConfig::from_json(c, "cfg.json").model_type, type) << name;
  }
  for (const char* name : {"MegatronBertModel", "BertGenerationEncoder", "RobertaPreLayerNormModel", "GPT2Model"}) {
    c["architectures"] = json::array({name});
    expect_error(c, {"no model_type", name, "add the checkpoint's model_type"});
  }
  EXPECT_EQ(model_family_of_class("DistilBertForSequenceClassification"), &model_family(ModelType::kDistilBert));
  c["architectures"] = "BertModel";
  expect_error(c, {"'architectures' must be an array"});
}

TEST(HfNames, MapsEachFamilysCheckpointNames) {
  const ModelFamily& roberta = model_family(ModelType::kRoberta);
  EXPECT_EQ(canonical_param_name("embeddings.word_embeddings.weight", roberta), "roberta.embeddings.word_embeddings.weight");
  EXPECT_EQ(canonical_param_name("classifier.out_proj.weight", roberta), "classifier.out_proj.weight");
  EXPECT_EQ(canonical_param_name("lm_head.dense.weight", roberta), std::nullopt);
  EXPECT_EQ(canonical_param_name("roberta.pooler.dense.weight", roberta), std::nullopt);
  EXPECT_EQ(canonical_param_name("pooler.dense.bias", roberta), std::nullopt);
  const ModelFamily& data2vec = model_family(ModelType::kData2VecText);
  EXPECT_EQ(canonical_param_name("embeddings.word_embeddings.weight", data2vec),
            "data2vec_text.embeddings.word_embeddings.weight");
  EXPECT_EQ(canonical_param_name("data2vec_text.encoder.layer.1.output.dense.bias", data2vec),
            "data2vec_text.encoder.layer.1.output.dense.bias");
  EXPECT_EQ(canonical_param_name("lm_head.decoder.weight", data2vec), std::nullopt);
  const ModelFamily& distilbert = model_family(ModelType::kDistilBert);
  EXPECT_EQ(canonical_param_name("transformer.layer.0.attention.q_lin.weight", distilbert),
            "distilbert.transformer.layer.0.attention.q_lin.weight");
  EXPECT_EQ(canonical_param_name("pre_classifier.weight", distilbert), "pre_classifier.weight");
  EXPECT_EQ(canonical_param_name("vocab_projector.bias", distilbert), std::nullopt);
  const ModelFamily& electra = model_family(ModelType::kElectra);
  EXPECT_EQ(canonical_param_name("embeddings_project.weight", electra), "electra.embeddings_project.weight");
  EXPECT_EQ(canonical_param_name("discriminator_predictions.dense.weight", electra), std::nullopt);
  EXPECT_EQ(canonical_param_name("electra.embeddings.position_ids", electra), std::nullopt);
}

TEST(HfNames, MapsCheckpointNames) {
  const ModelFamily& bert = model_family(ModelType::kBert);
  EXPECT_EQ(canonical_param_name("bert.pooler.dense.weight", bert), "bert.pooler.dense.weight");
  EXPECT_EQ(canonical_param_name("pooler.dense.weight", bert), "bert.pooler.dense.weight");
  EXPECT_EQ(canonical_param_name("embeddings.LayerNorm.gamma", bert), "bert.embeddings.LayerNorm.weight");
  EXPECT_EQ(canonical_param_name("bert.encoder.layer.3.output.LayerNorm.beta", bert),
            "bert.encoder.layer.3.output.LayerNorm.bias");
  EXPECT_EQ(canonical_param_name("classifier.weight", bert), "classifier.weight");
  EXPECT_EQ(canonical_param_name("cls.predictions.bias", bert), std::nullopt);
  EXPECT_EQ(canonical_param_name("cls.seq_relationship.weight", bert), std::nullopt);
  EXPECT_EQ(canonical_param_name("bert.embeddings.position_ids", bert), std::nullopt);
  EXPECT_EQ(canonical_param_name("embeddings.position_ids", bert), std::nullopt);
}

}  // namespace
}  // namespace bertrain

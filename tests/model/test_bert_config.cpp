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
  EXPECT_EQ(c.extra.at("pad_token_id"), 0);
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
  j["model_type"] = "roberta";
  expect_error(j, {"model_type", "roberta"});
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
  j = valid_config();
  j["label2id"] = json{{"a", 1}, {"b", 0}};
  expect_error(j, {"label2id['a']", "must be 0"});
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
  const BertConfig back = BertConfig::from_json(out, "out.json");
  EXPECT_EQ(back.labels, c.labels);
  EXPECT_EQ(back.problem_type, "single_label_classification");
  BertConfig multi = c;
  multi.problem_type = "multi_label_classification";
  EXPECT_EQ(BertConfig::from_json(multi.to_classifier_json(), "m.json").problem_type, "multi_label_classification");
  json bad = valid_config();
  bad["problem_type"] = 3;
  expect_error(bad, {"problem_type", "must be a string"});
  EXPECT_EQ(back.hidden_act, c.hidden_act);
  EXPECT_EQ(back.intermediate_size, c.intermediate_size);
}

TEST(HfNames, MapsCheckpointNames) {
  EXPECT_EQ(canonical_param_name("bert.pooler.dense.weight"), "bert.pooler.dense.weight");
  EXPECT_EQ(canonical_param_name("pooler.dense.weight"), "bert.pooler.dense.weight");
  EXPECT_EQ(canonical_param_name("embeddings.LayerNorm.gamma"), "bert.embeddings.LayerNorm.weight");
  EXPECT_EQ(canonical_param_name("bert.encoder.layer.3.output.LayerNorm.beta"),
            "bert.encoder.layer.3.output.LayerNorm.bias");
  EXPECT_EQ(canonical_param_name("classifier.weight"), "classifier.weight");
  EXPECT_EQ(canonical_param_name("cls.predictions.bias"), std::nullopt);
  EXPECT_EQ(canonical_param_name("cls.seq_relationship.weight"), std::nullopt);
  EXPECT_EQ(canonical_param_name("bert.embeddings.position_ids"), std::nullopt);
  EXPECT_EQ(canonical_param_name("embeddings.position_ids"), std::nullopt);
}

}  // namespace
}  // namespace bertrain

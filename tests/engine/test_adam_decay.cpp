// trainer_decay_mask: Hugging Face Trainer's weight-decay groups over bertrain's parameter layouts (biases and
// LayerNorm weights not decayed). The golden fixtures tiny_relu_ce_adamw, tiny_xlmr_ce_adamw and
// tiny_gelu_bce_adamw_clip check the same end to end against transformers' own Trainer.get_decay_parameter_names.
#include <gtest/gtest.h>

#include "engine/adam.h"
#include "model/bert_params.h"

namespace bertrain {
namespace {

// Whether every element of tensor `name` is decayed (true), none is (false); a tensor split between both fails.
bool tensor_decays(const ParamLayout& layout, const std::vector<uint32_t>& mask, const std::string& name) {
  const ParamEntry& e = layout.at(name);
  std::size_t decayed = 0;
  for (std::size_t i = e.offset; i < e.offset + e.numel; ++i) decayed += decays(mask.data(), i) ? 1 : 0;
  EXPECT_TRUE(decayed == 0 || decayed == e.numel) << name << ": " << decayed << " of " << e.numel;
  return decayed == e.numel;
}

BertConfig tiny(const char* model_type) {
  nlohmann::json j = {{"model_type", model_type}, {"vocab_size", 30},      {"hidden_size", 8},
                      {"num_hidden_layers", 2},   {"num_attention_heads", 2}, {"intermediate_size", 12},
                      {"max_position_embeddings", 20}, {"id2label", {{"0", "a"}, {"1", "b"}, {"2", "c"}}}};
  if (std::string(model_type) == "distilbert") {
    j = {{"model_type", model_type}, {"vocab_size", 30}, {"dim", 8}, {"n_layers", 2}, {"n_heads", 2},
         {"hidden_dim", 12}, {"max_position_embeddings", 20}, {"id2label", {{"0", "a"}, {"1", "b"}, {"2", "c"}}}};
  }
  return BertConfig::from_json(j, "tiny");
}

TEST(TrainerDecayMask, LeavesBiasesAndLayerNormsOut) {
  const BertConfig bert = tiny("bert");
  const ParamLayout layout = bert_classifier_layout(bert, 3);
  const std::vector<uint32_t> mask = trainer_decay_mask(layout);
  ASSERT_EQ(mask.size(), (layout.total() + 31) / 32);
  for (const char* decayed : {"bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
                              "bert.embeddings.token_type_embeddings.weight",
                              "bert.encoder.layer.1.attention.self.key.weight", "bert.encoder.layer.0.output.dense.weight",
                              "bert.pooler.dense.weight", "classifier.weight"}) {
    EXPECT_TRUE(tensor_decays(layout, mask, decayed)) << decayed;
  }
  for (const char* kept : {"bert.embeddings.LayerNorm.weight", "bert.embeddings.LayerNorm.bias",
                           "bert.encoder.layer.0.attention.self.query.bias",
                           "bert.encoder.layer.1.attention.output.LayerNorm.weight",
                           "bert.encoder.layer.1.output.LayerNorm.weight", "bert.pooler.dense.bias", "classifier.bias"}) {
    EXPECT_FALSE(tensor_decays(layout, mask, kept)) << kept;
  }
  // The alignment padding between tensors is no tensor's: never decayed.
  std::vector<bool> in_tensor(layout.total(), false);
  for (const ParamEntry& e : layout.entries()) std::fill_n(in_tensor.begin() + e.offset, e.numel, true);
  std::size_t padding = 0;
  for (std::size_t i = 0; i < layout.total(); ++i) {
    if (in_tensor[i]) continue;
    ++padding;
    EXPECT_FALSE(decays(mask.data(), i)) << i;
  }
  EXPECT_GT(padding, 0u);  // the check above saw some
}

TEST(TrainerDecayMask, DistilBertsLayerNormsByTheirOwnNames) {
  const BertConfig distilbert = tiny("distilbert");
  const ParamLayout layout = bert_classifier_layout(distilbert, 3);
  const std::vector<uint32_t> mask = trainer_decay_mask(layout);
  EXPECT_FALSE(tensor_decays(layout, mask, "distilbert.transformer.layer.0.sa_layer_norm.weight"));
  EXPECT_FALSE(tensor_decays(layout, mask, "distilbert.transformer.layer.1.output_layer_norm.weight"));
  EXPECT_FALSE(tensor_decays(layout, mask, "distilbert.embeddings.LayerNorm.weight"));
  EXPECT_TRUE(tensor_decays(layout, mask, "distilbert.transformer.layer.0.ffn.lin1.weight"));
  EXPECT_TRUE(tensor_decays(layout, mask, "pre_classifier.weight"));
}

}  // namespace
}  // namespace bertrain

// ParamLayout: aligned and contiguous placement, and the fingerprint that guards flat buffers saved in a layout.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/param_store.h"
#include "model/bert_config.h"
#include "model/bert_params.h"

namespace bertrain {
namespace {

TEST(ParamLayout, ContiguousTensorsFollowWithoutPadding) {
  ParamLayout layout;
  layout.add("a", {3});
  layout.add("q", {3, 3});
  layout.add_contiguous("k", {3, 3});
  layout.add_contiguous("v", {3, 3});
  layout.add("b", {5});
  EXPECT_EQ(layout.at("a").offset, 0u);
  EXPECT_EQ(layout.at("q").offset, ParamLayout::kAlignment);  // aligned: 3 rounds up
  EXPECT_EQ(layout.at("k").offset, ParamLayout::kAlignment + 9);
  EXPECT_EQ(layout.at("v").offset, ParamLayout::kAlignment + 18);
  EXPECT_EQ(layout.at("b").offset % ParamLayout::kAlignment, 0u);
  EXPECT_EQ(layout.parameter_count(), 3u + 27u + 5u);
  ParamLayout empty;
  EXPECT_THROW(empty.add_contiguous("first", {2}), Error);
  EXPECT_THROW(layout.add_contiguous("k", {1}), Error);  // duplicate name
}

TEST(ParamLayout, FingerprintChangesWithOrderShapeAndOffset) {
  auto build = [](bool swap, int64_t width, bool contiguous) {
    ParamLayout layout;
    layout.add(swap ? "y" : "x", {width});
    if (contiguous) {
      layout.add_contiguous(swap ? "x" : "y", {4});
    } else {
      layout.add(swap ? "x" : "y", {4});
    }
    return layout.fingerprint();
  };
  const std::string base = build(false, 3, false);
  EXPECT_EQ(base, build(false, 3, false));  // deterministic
  EXPECT_NE(base, build(true, 3, false));   // order
  EXPECT_NE(base, build(false, 2, false));  // shape
  EXPECT_NE(base, build(false, 3, true));   // offset
}

// Every layer's query, key and value (weights, then biases) lie back to back, so one GEMM with N = 3H reads them,
// whatever H is (odd sizes would otherwise be padded apart); the names are still Hugging Face's.
TEST(ParamLayout, BertQueryKeyValueAreOneTensor) {
  BertConfig c;
  c.hidden_size = 12;
  c.num_attention_heads = 3;
  c.intermediate_size = 20;
  c.num_hidden_layers = 2;
  c.vocab_size = 30;
  c.max_position_embeddings = 16;
  const ParamLayout layout = bert_classifier_layout(c, 3);
  for (int l = 0; l < 2; ++l) {
    const std::string p = "bert.encoder.layer." + std::to_string(l) + ".attention.self.";
    for (const char* part : {"weight", "bias"}) {
      const ParamEntry& q = layout.at(p + "query." + part);
      EXPECT_EQ(layout.at(p + "key." + part).offset, q.offset + q.numel) << p << part;
      EXPECT_EQ(layout.at(p + "value." + part).offset, q.offset + 2 * q.numel) << p << part;
    }
    std::vector<float> buffer(layout.total());
    const BertWeights<float> w = bind_bert_weights(layout, c, buffer.data());
    EXPECT_EQ(w.layers[static_cast<std::size_t>(l)].qkv_w, buffer.data() + layout.at(p + "query.weight").offset);
    EXPECT_EQ(w.layers[static_cast<std::size_t>(l)].qkv_b, buffer.data() + layout.at(p + "query.bias").offset);
  }
}

}  // namespace
}  // namespace bertrain

// Whole-model finite-difference check of BertClassifier<double>::backward: every element of every
// parameter tensor of a tiny BERT, with and without dropout. The per-op checks (tests/kernels) cannot see
// wiring errors: a residual gradient added twice, a dropout key differing between forward and backward,
// a saved activation overwritten before backward reads it.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/loss.h"
#include "model/bert_classifier.h"
#include "model/bert_config.h"
#include "tests/kernels/gradient_check.h"

namespace bertrain {
namespace {

using gradcheck::check_gradient;
using gradcheck::kDoubleFd;
using gradcheck::random_normal;

constexpr int kBatch = 3, kSeq = 5, kTokens = 9, kLabels = 3;

BertConfig tiny_config() {
  BertConfig c;
  c.vocab_size = 20;
  c.hidden_size = 8;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 12;
  c.hidden_act = "gelu";
  c.max_position_embeddings = 10;
  c.type_vocab_size = 2;
  c.layer_norm_eps = 1e-12;  // BERT's value: the hardest case for LayerNorm backward
  c.hidden_dropout_prob = 0.2;
  c.attention_probs_dropout_prob = 0.1;
  c.classifier_dropout = 0.3;
  return c;
}

// Weights ~ N(0, 0.3): large enough that attention is far from uniform and GELU is in its curved region;
// LayerNorm weights ~ N(1, 0.1) as after pretraining. Padding between tensors stays 0.
std::vector<double> random_params(const ParamLayout& layout) {
  std::vector<double> params(layout.total(), 0.0);
  uint64_t seed = 1000;
  for (const ParamEntry& e : layout.entries()) {
    const bool ln_weight = e.name.find("LayerNorm.weight") != std::string::npos;
    const std::vector<double> values = random_normal(e.numel, seed++, ln_weight ? 1.0 : 0.0, ln_weight ? 0.1 : 0.3);
    std::copy(values.begin(), values.end(), params.begin() + static_cast<std::ptrdiff_t>(e.offset));
  }
  return params;
}

struct ModelCase {
  BertConfig config = tiny_config();
  BertClassifier<double> model{config, kLabels, BatchLimits{kBatch, kSeq, kTokens}};
  std::vector<double> params = random_params(model.layout());
  // Packed rows of 5, 3 and 1 tokens: a repeated id (5) within row 0, id 1 across rows, a one-token row.
  std::vector<int32_t> ids = {1, 5, 7, 5, 2, 1, 9, 3, 1};
  std::vector<int32_t> cu_seqlens = {0, 5, 8, 9};
  std::vector<double> targets = {0, 0, 1, 1, 0, 0, 0, 1, 0};  // one-hot: classes 2, 0 and 1
  BertBatch batch = packed_batch(ids.data(), cu_seqlens.data(), kBatch, 2);  // rows 2..4 of a global batch

  double loss(const DropoutSetting& dropout) {
    model.forward(params.data(), batch, dropout);
    return classification_loss_cpu(LossKind::kBce, static_cast<double*>(nullptr), model.logits(), targets.data(),
                                   static_cast<const double*>(nullptr), kBatch, kLabels);
  }

  // Checks every parameter tensor; backward must run right after its own forward (it reads the saved
  // activations), so the analytic gradient is taken before any differencing forward.
  void check(const DropoutSetting& dropout, const std::string& tag) {
    model.forward(params.data(), batch, dropout);
    std::vector<double> dlogits(kBatch * kLabels);
    classification_loss_cpu(LossKind::kBce, dlogits.data(), model.logits(), targets.data(),
                            static_cast<const double*>(nullptr), kBatch, kLabels);
    std::vector<double> grads(model.layout().total(), 0.0);
    model.backward(grads.data(), params.data(), dlogits.data());

    auto f = [&] { return loss(dropout); };
    for (const ParamEntry& e : model.layout().entries()) {
      // The key bias adds q_i·b_k to every score of query row i, a constant softmax removes: its gradient
      // is zero by mathematics (HF keeps it for checkpoint compatibility). It is still compared, against 0.
      const bool key_bias = e.name.find("attention.self.key.bias") != std::string::npos;
      EXPECT_TRUE(check_gradient(tag + " " + e.name, f, params.data() + e.offset, grads.data() + e.offset, e.numel,
                                 kDoubleFd, e.shape, {},
                                 key_bias ? gradcheck::ZeroGradient::kAllow : gradcheck::ZeroGradient::kReject));
    }
  }
};

TEST(ModelGradient, AllParametersNoDropout) {
  ModelCase c;
  c.check(DropoutSetting{}, "no dropout:");
}

TEST(ModelGradient, AllParametersWithDropout) {
  ModelCase c;
  // One fixed key for every forward: the masks are a function of (seed, step, site, element), so the
  // loss is a smooth function of the parameters and central differences apply.
  const DropoutSetting dropout = DropoutSetting::training(c.config, 77, 3);
  ASSERT_EQ(dropout.hidden, 0.2f);
  ASSERT_EQ(dropout.attention, 0.1f);
  ASSERT_EQ(dropout.classifier, 0.3f);
  // Dropout must change the function, or this test would repeat the one above.
  EXPECT_NE(c.loss(dropout), c.loss(DropoutSetting{}));
  c.check(dropout, "dropout:");
}

}  // namespace
}  // namespace bertrain

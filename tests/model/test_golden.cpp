// Golden tests: the CPU engine against Hugging Face transformers on the committed fixtures
// (tests/fixtures/<case>/, made by tests/reference/make_fixtures.py) for every model family (BERT, RoBERTa,
// XLM-R, CamemBERT, Data2VecText, DistilBERT, ELECTRA with and without embeddings_project): logits, the head's
// hidden activation (BERT's pooled output), sequence outputs, loss, the gradient of every parameter, and the
// parameters after two optimizer steps (tiny_gelu_bce_adamw_clip: each clipped by the gradient's norm, as
// clip_grad_norm_).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/classifier_trainer.h"
#include "model/model_dir.h"
#include "model/safetensors.h"
#include "tests/packed_rows.h"
#include "tests/tolerance.h"

namespace bertrain {
namespace {

using testing::all_close;

// float32 against references computed in float64 by the fixture script: rtol 1e-5 with an atol of
// 1e-5 × the tensor's largest magnitude, because an element that is a sum of cancelling O(1) terms
// carries the rounding error of its terms, not of its own (small) value.
constexpr double kForwardRtol = 1e-5;
constexpr double kGradientRtol = 1e-5;
// After two Adam steps: each update is about lr · g / (|g| + eps), so a gradient rounding error δ moves it
// by up to lr · δ / (|g| + eps). The fixtures use lr 1e-3 and eps 1e-5 (see make_fixtures.py); gradients
// near eps with δ ~ 1e-9 then move a parameter by up to ~2e-7 per step. PyTorch's own float32 run is off
// by 5.4e-7 on the worst element, so 1e-6 (1e-5 relative to parameters of size ~0.1) is the bound.
constexpr double kAdamAtol = 1e-6;
constexpr double kAdamRtol = 1e-6;

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::abs(x)));
  return m;
}

struct GoldenCase {
  std::string dir;
  LoadedModel model;
  SafetensorsFile golden;
  // Hugging Face ran the padded batch with its attention mask; the engine runs the same rows packed.
  testing::PackedRows rows;
  std::vector<float> targets;

  explicit GoldenCase(const std::string& name)
      : dir(std::string(BERTRAIN_FIXTURES_DIR) + "/" + name),
        model(load_model_dir(dir, {}, 0)),
        golden(dir + "/golden.safetensors"),
        rows(testing::PackedRows::from_golden(golden)),
        targets(golden.read_float("targets")) {}

  TrainerOptions options() const {
    const auto& meta = golden.metadata();
    TrainerOptions o;
    o.loss = meta.at("loss") == "bce" ? LossKind::kBce : LossKind::kSoftmaxCrossEntropy;
    o.adam.lr = std::stod(meta.at("lr"));
    o.adam.beta1 = std::stod(meta.at("beta1"));
    o.adam.beta2 = std::stod(meta.at("beta2"));
    o.adam.eps = std::stod(meta.at("eps"));
    o.adam.weight_decay = std::stod(meta.at("weight_decay"));
    EXPECT_EQ(meta.at("optimizer"), o.adam.weight_decay > 0 ? "adamw" : "adam");
    if (golden.contains("class_weights")) o.class_weights = golden.read_float("class_weights");
    // torch.nn.utils.clip_grad_norm_ before each step (absent: no clipping).
    if (meta.count("max_grad_norm") != 0) o.max_grad_norm = std::stod(meta.at("max_grad_norm"));
    return o;
  }
};

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, MatchesTransformers) {
  GoldenCase c(GetParam());
  ASSERT_TRUE(c.model.classifier_loaded);
  const int labels = c.model.config.num_labels();
  const testing::PackedRows& rows = c.rows;
  ClassifierTrainer<float> trainer(c.model.config, labels, rows.limits(), c.model.params, c.options());
  const BertBatch batch = rows.view();

  // Step 1: forward outputs and gradients at the initial parameters.
  const float loss = trainer.step(batch, c.targets.data());
  const std::vector<float> ref_loss = c.golden.read_float("loss");
  EXPECT_TRUE(all_close("loss", &loss, ref_loss.data(), 1, 0, kForwardRtol));
  const struct {
    const char* name;
    const float* got;
  } outputs[] = {{"logits", trainer.model().logits()},
                 // BERT's fixtures call the head's activation pooled_output, the other families' head_hidden.
                 {c.golden.contains("pooled_output") ? "pooled_output" : "head_hidden", trainer.model().pooled_output()},
                 {"sequence_output", trainer.model().sequence_output()}};
  for (const auto& out : outputs) {
    std::vector<float> ref = c.golden.read_float(out.name);
    // The reference's sequence output is [B, S, H] padded; padding rows are not computed by the engine.
    if (std::string(out.name) == "sequence_output") ref = rows.real_tokens(ref, c.model.config.hidden_size);
    const double atol = kForwardRtol * max_abs(ref);
    const auto result = all_close(out.name, out.got, ref.data(), ref.size(), atol, kForwardRtol);
    EXPECT_TRUE(result);
    std::printf("  %s\n", result.message());
  }

  for (const ParamEntry& e : c.model.layout.entries()) {
    const std::vector<float> ref = c.golden.read_float("grad." + e.name);
    ASSERT_EQ(ref.size(), e.numel) << e.name;
    // The key bias gradient is exactly zero in exact arithmetic (softmax ignores a constant added to a
    // whole row of scores), so what we compute is pure rounding noise of the summed terms: measure it on
    // the scale of the key weight gradient, whose terms are the same.
    const std::string suffix = "." + std::string(c.model.config.family().layer.key) + ".bias";
    const bool is_key_bias = e.name.size() > suffix.size() && e.name.compare(e.name.size() - suffix.size(), suffix.size(), suffix) == 0;
    const std::string scale_name = is_key_bias ? e.name.substr(0, e.name.size() - 4) + "weight" : e.name;
    const double atol = kGradientRtol * max_abs(c.golden.read_float("grad." + scale_name));
    const auto result =
        all_close("grad." + e.name, trainer.gradients().data() + e.offset, ref.data(), e.numel, atol, kGradientRtol);
    EXPECT_TRUE(result);
    std::printf("  %s\n", result.message());
  }

  // Step 2, then the parameters after both updates.
  trainer.step(batch, c.targets.data());
  for (const ParamEntry& e : c.model.layout.entries()) {
    const std::vector<float> ref = c.golden.read_float("adam." + e.name);
    const auto result =
        all_close("adam." + e.name, trainer.parameters().data() + e.offset, ref.data(), e.numel, kAdamAtol, kAdamRtol);
    EXPECT_TRUE(result);
    std::printf("  %s\n", result.message());
  }
}

// A model built for inference (one layer's activations, the hidden states in two alternating buffers) computes
// what the training model computes, bit for bit: the same kernels in the same order on the same values.
TEST_P(GoldenTest, InferenceModelGivesTheTrainingModelsBits) {
  GoldenCase c(GetParam());
  const int labels = c.model.config.num_labels(), H = c.model.config.hidden_size;
  const testing::PackedRows& rows = c.rows;
  BertClassifier<float> training(c.model.config, labels, rows.limits());
  BertClassifier<float> inference(c.model.config, labels, rows.limits(), BertUse::kInference);
  training.forward(c.model.params.data(), rows.view(), DropoutSetting{});
  inference.forward(c.model.params.data(), rows.view(), DropoutSetting{});
  const std::size_t B = rows.batch, T = rows.cu_seqlens.back();
  EXPECT_EQ(0, std::memcmp(training.logits(), inference.logits(), B * labels * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(training.pooled_output(), inference.pooled_output(), B * H * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(training.sequence_output(), inference.sequence_output(), T * H * sizeof(float)));
  if (c.model.config.num_hidden_layers > 1) {
    EXPECT_LT(inference.activation_bytes(), training.activation_bytes());
  }
  std::vector<float> grads(training.layout().total()), dlogits(B * labels, 1.0f);
  EXPECT_THROW(inference.backward(grads.data(), c.model.params.data(), dlogits.data()), Error);
}

// The activation bytes of `c`'s model with `layers` layers and 4 labels, built for `use`.
std::size_t activation_bytes_with_layers(const GoldenCase& c, int layers, const BatchLimits& limits, BertUse use) {
  BertConfig config = c.model.config;
  config.num_hidden_layers = layers;
  return BertClassifier<float>(config, 4, limits, use).activation_bytes();
}

// An inference model's activations do not grow with the depth (a training model's do, by a layer's worth each).
TEST(InferenceModel, ActivationsDoNotGrowWithTheLayers) {
  const GoldenCase c("tiny_gelu_bce_adam");
  const BatchLimits limits{8, 32, 200};
  const auto bytes = [&](int layers, BertUse use) { return activation_bytes_with_layers(c, layers, limits, use); };
  EXPECT_EQ(bytes(2, BertUse::kInference), bytes(12, BertUse::kInference));
  EXPECT_GT(bytes(12, BertUse::kTraining), bytes(2, BertUse::kTraining));
}

// Recomputing the activations in backward (BertUse::kTrainingRecompute, --gradient-checkpointing) gives the
// kept-activation model's logits and gradients bit for bit, with every dropout on, in every family (ELECTRA's
// projection, DistilBERT's head, RoBERTa's positions) and in double; and its activations are smaller.
template <typename T>
void expect_recomputed_gradients_equal(const std::string& fixture) {
  SCOPED_TRACE(fixture);
  GoldenCase c(fixture);
  BertConfig config = c.model.config;
  config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.2;  // the fixtures have none
  config.num_hidden_layers = std::max(config.num_hidden_layers, 2);
  const int labels = config.num_labels();
  const std::vector<T> params = [&] {
    const std::size_t total = bert_classifier_layout(config, labels).total();
    std::vector<T> p(total);
    for (std::size_t i = 0; i < total; ++i) p[i] = T(c.model.params[i % c.model.params.size()]);
    return p;
  }();
  const DropoutSetting dropout = DropoutSetting::training(config, 7, 3);
  std::vector<T> dlogits(static_cast<std::size_t>(c.rows.batch) * labels);
  for (std::size_t i = 0; i < dlogits.size(); ++i) dlogits[i] = T(0.25) * T(static_cast<int>(i % 7) - 3);
  std::vector<std::vector<T>> grads, logits;
  for (BertUse use : {BertUse::kTraining, BertUse::kTrainingRecompute}) {
    BertClassifier<T> model(config, labels, c.rows.limits(), use);
    model.forward(params.data(), c.rows.view(), dropout);
    logits.emplace_back(model.logits(), model.logits() + dlogits.size());
    grads.emplace_back(params.size(), T(7));
    model.backward(grads.back().data(), params.data(), dlogits.data());
  }
  EXPECT_EQ(logits[0], logits[1]);
  ASSERT_EQ(grads[0].size(), grads[1].size());
  EXPECT_EQ(0, std::memcmp(grads[0].data(), grads[1].data(), grads[0].size() * sizeof(T)));
  EXPECT_NE(grads[0], std::vector<T>(grads[0].size(), T(0)));
  EXPECT_LT(BertClassifier<T>::activation_bytes(config, labels, c.rows.limits(), BertUse::kTrainingRecompute),
            BertClassifier<T>::activation_bytes(config, labels, c.rows.limits(), BertUse::kTraining));
}

TEST(RecomputingModel, GradientsAreTheKeptActivationsModelsBitForBit) {
  for (const char* fixture : {"tiny_gelu_bce_adam", "tiny_relu_ce_adamw", "tiny_electra_bce_adam",
                              "tiny_distilbert_bce_adam", "tiny_roberta_bce_adam", "odd_gelunew_bce_weighted_adam"}) {
    expect_recomputed_gradients_equal<float>(fixture);
  }
  expect_recomputed_gradients_equal<double>("tiny_gelu_bce_adam");
}

// Its activations: the layers' inputs and one layer's set; a layer more adds only its input (T × H), where the
// kept-activation model adds a whole set.
TEST(RecomputingModel, ActivationsGrowOnlyByTheLayersInputs) {
  const GoldenCase c("tiny_gelu_bce_adam");
  const BatchLimits limits{8, 32, 200};
  const auto bytes = [&](int layers, BertUse use) { return activation_bytes_with_layers(c, layers, limits, use); };
  const std::size_t input = static_cast<std::size_t>(limits.tokens) * c.model.config.hidden_size * sizeof(float);
  EXPECT_EQ(bytes(3, BertUse::kTrainingRecompute) - bytes(2, BertUse::kTrainingRecompute), input);
  EXPECT_GT(bytes(3, BertUse::kTraining) - bytes(2, BertUse::kTraining), 4 * input);
  EXPECT_EQ(bytes(1, BertUse::kTrainingRecompute), bytes(1, BertUse::kTraining));
}

// A packed row is computed from its own tokens only: with dropout on, the logits of row 1 of a three-row batch
// equal those of the same row alone in a batch whose first_sample is 1 (its global row keys its masks), and its
// [CLS] output is unchanged. Float rounding may differ with the GEMM shapes, so the bound is fp32 rounding.
TEST(PackedBatch, ARowDoesNotSeeItsNeighbours) {
  GoldenCase c("tiny_gelu_bce_adam");
  c.model.config.hidden_dropout_prob = c.model.config.attention_probs_dropout_prob = 0.2;  // the fixture has none
  const int labels = c.model.config.num_labels(), H = c.model.config.hidden_size;
  const testing::PackedRows& rows = c.rows;
  ASSERT_EQ(rows.batch, 3);
  const DropoutSetting dropout = DropoutSetting::training(c.model.config, 11, 4);
  ASSERT_GT(dropout.hidden, 0.0f);
  BertClassifier<float> model(c.model.config, labels, rows.limits());
  model.forward(c.model.params.data(), rows.view(), dropout);
  const std::vector<float> logits(model.logits(), model.logits() + 3 * labels);
  const std::vector<float> cls(model.sequence_output() + static_cast<std::size_t>(rows.cu_seqlens[1]) * H,
                               model.sequence_output() + static_cast<std::size_t>(rows.cu_seqlens[1] + 1) * H);

  const std::vector<int32_t> alone_ids(rows.ids.begin() + rows.cu_seqlens[1], rows.ids.begin() + rows.cu_seqlens[2]);
  const std::vector<int32_t> alone_cu = {0, rows.cu_seqlens[2] - rows.cu_seqlens[1]};
  model.forward(c.model.params.data(), packed_batch(alone_ids.data(), alone_cu.data(), 1, 1), dropout);
  EXPECT_TRUE(all_close("row 1 alone: logits", model.logits(), logits.data() + labels, labels, 1e-6, 1e-5));
  EXPECT_TRUE(all_close("row 1 alone: [CLS] output", model.sequence_output(), cls.data(), H, 1e-6, 1e-5));

  // And the same row keyed as global row 0 draws other masks: the check above is not vacuous.
  model.forward(c.model.params.data(), packed_batch(alone_ids.data(), alone_cu.data(), 1, 0), dropout);
  EXPECT_FALSE(all_close("row 1 keyed as row 0", model.logits(), logits.data() + labels, labels, 1e-6, 1e-5));
}

// Bad batches are one clear error, never a crash: offsets that disagree with the token count, an empty row, a
// batch beyond the limits the model was built for.
TEST(PackedBatch, BrokenBatchesAreErrors) {
  GoldenCase c("tiny_gelu_bce_adam");
  const testing::PackedRows& rows = c.rows;
  BertClassifier<float> model(c.model.config, c.model.config.num_labels(), rows.limits());
  const float* params = c.model.params.data();
  BertBatch b = rows.view();
  b.tokens += 1;
  EXPECT_THROW(model.forward(params, b, DropoutSetting{}), Error);
  b = rows.view();
  b.longest -= 1;
  EXPECT_THROW(model.forward(params, b, DropoutSetting{}), Error);
  std::vector<int32_t> cu = rows.cu_seqlens;
  cu[1] = cu[0];  // row 0 empty
  b = rows.view();
  b.cu_seqlens = cu.data();
  EXPECT_THROW(model.forward(params, b, DropoutSetting{}), Error);
  const std::vector<int32_t> one_row = {0, 1};
  BertBatch too_many = packed_batch(rows.ids.data(), one_row.data(), 1);
  too_many.batch = rows.batch + 1;
  EXPECT_THROW(model.forward(params, too_many, DropoutSetting{}), Error);
  EXPECT_THROW(BertClassifier<float>(c.model.config, 2, BatchLimits{2, 4, 9}), Error);  // 9 tokens > 2 rows of 4
  EXPECT_THROW(BertClassifier<float>(c.model.config, 2, BatchLimits{2, 4096, 8}), Error);  // past max positions
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenTest,
                         ::testing::Values("tiny_gelu_bce_adam", "odd_gelunew_bce_weighted_adam", "tiny_relu_ce_adamw",
                                           "tiny_tanhgelu_bce_adam", "tiny_roberta_bce_adam", "tiny_xlmr_ce_adamw",
                                           "tiny_distilbert_bce_adam", "tiny_electra_bce_adam",
                                           "tiny_electra_same_size_relu_ce_adam", "tiny_gelu_bce_adamw_clip",
                                           "tiny_gelu_literal_pad_bce_adam", "tiny_roberta_literal_pad_bce_adam",
                                           "tiny_camembert_ce_adamw", "tiny_data2vec_bce_adam"));

}  // namespace
}  // namespace bertrain

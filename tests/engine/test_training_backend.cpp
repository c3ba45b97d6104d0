// The CPU TrainingBackend's evaluate with logits (engine/training_backend.h), for the validation metrics: the
// logits are the model's forward of the batch (the inference engine's, and Hugging Face's golden ones) at the
// current parameters, only B × C of them are written, and the loss is the same with or without them.
#include "engine/training_backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "dist/communicator.h"
#include "engine/inference_backend.h"
#include "kernels/loss.h"
#include "model/model_dir.h"
#include "model/safetensors.h"
#include "tests/address_space_room.h"
#include "tests/packed_rows.h"
#include "tests/tolerance.h"

namespace bertrain {
namespace {

class EvaluateLogitsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string dir = std::string(BERTRAIN_FIXTURES_DIR) + "/" + GetParam();
    model_ = load_model_dir(dir, {}, 0);
    golden_ = std::make_unique<SafetensorsFile>(dir + "/golden.safetensors");
    rows_ = std::make_unique<testing::PackedRows>(testing::PackedRows::from_golden(*golden_));
    targets_ = golden_->read_float("targets");
    options_.loss = golden_->metadata().at("loss") == "bce" ? LossKind::kBce : LossKind::kSoftmaxCrossEntropy;
    if (golden_->contains("class_weights")) options_.class_weights = golden_->read_float("class_weights");
    comm_ = make_communicator(LaunchInfo{});
    engine_ = make_training_backend(BackendChoice{}, model_.config, labels(), rows_->limits(), model_.params, options_,
                                    *comm_);
  }
  int labels() const { return model_.config.num_labels(); }
  // The loss of `logits` as the engine computes it.
  double loss_of(const std::vector<float>& logits, int rows) const {
    return classification_loss_cpu<float>(options_.loss, nullptr, logits.data(), targets_.data(),
                                          options_.class_weights.empty() ? nullptr : options_.class_weights.data(),
                                          rows, labels());
  }
  // The inference engine's logits of `batch` with `params`.
  std::vector<float> inference_logits(const BertBatch& batch, const std::vector<float>& params) const {
    const auto inference = make_inference_backend(BackendChoice{}, model_.config, labels(), params);
    std::vector<float> out(static_cast<std::size_t>(batch.batch) * labels());
    inference->logits(batch, out.data());
    return out;
  }

  LoadedModel model_;
  std::unique_ptr<SafetensorsFile> golden_;
  std::unique_ptr<testing::PackedRows> rows_;
  std::vector<float> targets_;
  TrainerOptions options_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<TrainingBackend> engine_;
};

TEST_P(EvaluateLogitsTest, LogitsAreTheForwardOfTheBatchAndTheLossIsUnchanged) {
  const BertBatch batch = rows_->view();
  const std::size_t n = static_cast<std::size_t>(batch.batch) * labels();
  const float sentinel = -12345.0f;
  std::vector<float> logits(n + 3, std::numeric_limits<float>::quiet_NaN());
  std::fill(logits.begin() + static_cast<std::ptrdiff_t>(n), logits.end(), sentinel);

  const double without = engine_->evaluate(batch, targets_.data());
  const double with = engine_->evaluate(batch, targets_.data(), logits.data());
  EXPECT_EQ(with, without);
  EXPECT_EQ(with, loss_of(logits, batch.batch));  // the loss of exactly these logits
  for (std::size_t k = n; k < logits.size(); ++k) EXPECT_EQ(logits[k], sentinel) << "written past B x C at " << k;
  logits.resize(n);

  // The same rows through the inference engine: the same model forward, bit for bit.
  EXPECT_EQ(logits, inference_logits(batch, model_.params));
  // And Hugging Face's logits of the batch (float64 reference rounded to float32; the CPU engine is ~3e-7 off).
  const std::vector<float> golden = golden_->read_float("logits");
  ASSERT_EQ(golden.size(), n);
  EXPECT_TRUE(testing::all_close("logits vs golden", logits.data(), golden.data(), n, 1e-5, 1e-5));
}

TEST_P(EvaluateLogitsTest, LogitsFollowTheParametersAndTheBatchSize) {
  // After an update the logits are the new parameters' (evaluation runs on the model being trained).
  const BertBatch batch = rows_->view();
  engine_->train_step(batch, targets_.data(), 1.0, *comm_);
  engine_->take_loss();
  std::vector<float> logits(static_cast<std::size_t>(batch.batch) * labels());
  engine_->evaluate(batch, targets_.data(), logits.data());
  EXPECT_EQ(logits, inference_logits(batch, engine_->parameters()));
  EXPECT_NE(logits, inference_logits(batch, model_.params));

  // The first row alone: one row of logits, that row's.
  const BertBatch first = packed_batch(rows_->ids.data(), rows_->cu_seqlens.data(), 1);
  std::vector<float> one(static_cast<std::size_t>(labels()) + 1, 7.0f);
  engine_->evaluate(first, targets_.data(), one.data());
  EXPECT_EQ(one.back(), 7.0f);
  one.pop_back();
  EXPECT_EQ(one, inference_logits(first, engine_->parameters()));

  // No rows: nothing written, loss 0.
  const BertBatch none = packed_batch(rows_->ids.data(), rows_->cu_seqlens.data(), 0);
  std::vector<float> untouched(static_cast<std::size_t>(labels()), 7.0f);
  EXPECT_EQ(engine_->evaluate(none, targets_.data(), untouched.data()), 0.0);
  EXPECT_EQ(untouched, std::vector<float>(static_cast<std::size_t>(labels()), 7.0f));
}

// The CPU engine's step is done when train_step returns (its parameters are updated before take_loss), so the
// training loop takes its loss at once (losses_left_pending 0): each progress line then comes at its own step's
// end. Taken one step late, as a GPU's are, the first line's samples/s was about half the true rate.
TEST_P(EvaluateLogitsTest, TheCpuEnginesStepIsDoneWhenItReturns) {
  EXPECT_EQ(engine_->losses_left_pending(), 0);
  const BertBatch batch = rows_->view();
  engine_->train_step(batch, targets_.data(), 1.0, *comm_);
  EXPECT_NE(engine_->parameters(), model_.params);
  EXPECT_EQ(engine_->optimizer_steps(), 1);
  EXPECT_TRUE(std::isfinite(engine_->take_loss()));
}

// A batch whose activations cannot fit is refused before the engine allocates them (InputError naming the batch
// flags), and the engine goes on with the batches it could take: its limits grow only once they fit. Here the room
// is an address-space limit set for the call (1 million tokens need ~1.8 GiB; 256 MiB are left).
TEST(CpuInference, ARefusedBatchLeavesTheEngineForSmallerOnes) {
#ifdef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "AddressSanitizer's allocator does not work under an address-space limit this tight";
#endif
  const LoadedModel model = load_model_dir(std::string(BERTRAIN_FIXTURES_DIR) + "/tiny_gelu_bce_adam", {}, 0);
  const int labels = model.config.num_labels();
  const auto engine = make_inference_backend(BackendChoice{}, model.config, labels, model.params);
  const auto rows_of = [](int rows, int length, std::vector<int32_t>* ids, std::vector<int32_t>* offsets) {
    ids->assign(static_cast<std::size_t>(rows) * length, 5);
    offsets->assign(1, 0);
    for (int r = 0; r < rows; ++r) offsets->push_back(offsets->back() + length);
  };
  std::vector<int32_t> small_ids, small_offsets, big_ids, big_offsets;
  rows_of(4, 10, &small_ids, &small_offsets);
  rows_of(100000, 10, &big_ids, &big_offsets);
  std::vector<float> before(4 * static_cast<std::size_t>(labels)), after(before.size());
  engine->logits(packed_batch(small_ids.data(), small_offsets.data(), 4), before.data());

  std::vector<float> big_out(100000 * static_cast<std::size_t>(labels));
  testing::AddressSpaceRoom room(std::size_t{256} << 20);
  ASSERT_GT(room.mapped(), 0u);
  if (!room.set()) GTEST_SKIP() << "the hard limit is below this process's mapping plus 256 MiB";
  std::string error, small_error;
  try {
    engine->logits(packed_batch(big_ids.data(), big_offsets.data(), 100000), big_out.data());
  } catch (const InputError& e) {
    error = e.what();
  }
  try {  // still under the limit: the small batch is built for as before, not for the refused one
    engine->logits(packed_batch(small_ids.data(), small_offsets.data(), 4), after.data());
  } catch (const Error& e) {
    small_error = e.what();
  }
  room.restore();
  EXPECT_NE(error.find("the CPU engine needs"), std::string::npos) << error;
  EXPECT_NE(error.find("--batch-size"), std::string::npos) << error;
  EXPECT_EQ(small_error, "");
  EXPECT_EQ(before, after);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EvaluateLogitsTest,
                         ::testing::Values("tiny_gelu_bce_adam", "odd_gelunew_bce_weighted_adam", "tiny_relu_ce_adamw"));

}  // namespace
}  // namespace bertrain

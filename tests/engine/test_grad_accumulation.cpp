// Gradient accumulation (--grad-accum-steps): K micro-batches of B rows with one optimizer step train exactly what one
// batch of B·K rows trains, to float32 summation order: the same dropout masks (keyed by the rows' positions in the
// step batch), the same loss weights, the summed gradient, one Adam update.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "data/batcher.h"
#include "dist/communicator.h"
#include "engine/batch_view.h"
#include "engine/training_backend.h"
#include "model/model_dir.h"
#include "tests/tolerance.h"

namespace bertrain {
namespace {

std::vector<Example> random_examples(int rows, int vocab, int classes) {
  std::vector<Example> examples;
  uint32_t x = 12345;
  auto next = [&x] { return x = x * 1664525u + 1013904223u; };
  for (int r = 0; r < rows; ++r) {
    Example e;
    const int length = 3 + static_cast<int>(next() % 9);
    e.ids.push_back(2);
    for (int t = 1; t < length - 1; ++t) e.ids.push_back(static_cast<int32_t>(5 + next() % (vocab - 5)));
    e.ids.push_back(3);
    e.labels = {static_cast<int>(next() % classes)};
    examples.push_back(e);
  }
  return examples;
}

struct Trained {
  std::vector<float> params;
  std::vector<double> step_losses;
  std::vector<double> gradient_norms;  // of each step's summed gradient
};

// Two epochs of `examples` in steps of batch_size · accumulation rows, on the CPU engine.
Trained train(const LoadedModel& model, const std::vector<Example>& examples, int batch_size, int accumulation) {
  BatcherOptions o;
  o.batch_size = batch_size;
  o.accumulation = accumulation;
  o.classes = model.config.num_labels();
  const Batcher batcher(&examples, o);
  TrainerOptions options;
  options.adam.lr = 1e-3;
  // Adam divides by sqrt(v) + eps: with eps 1e-8 a gradient at rounding level (~1e-9, an element the batch barely
  // touches) becomes a full lr-sized step whose sign is rounding noise. eps 1e-3 keeps updates proportional to such
  // gradients, so what is compared is the gradient sum, not noise amplified by the optimizer.
  options.adam.eps = 1e-3;
  options.seed = 7;
  options.accumulation = accumulation;
  std::unique_ptr<Communicator> comm = make_communicator(LaunchInfo{});
  std::unique_ptr<TrainingBackend> engine = make_training_backend(
      BackendChoice{}, model.config, o.classes, batch_limits({&batcher}), model.params, options, *comm);
  Trained out;
  Batch batch;
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (int step = 0; step < batcher.batches_per_epoch(); ++step) {
      double loss = 0;
      const int micros = batcher.micro_batches(step);
      for (int m = 0; m < micros; ++m) {
        batcher.batch(epoch, step, &batch, m);
        engine->train_step(bert_batch_view(batch), batch.targets.data(), batch.loss_scale, *comm,
                           MicroStep{m == 0, m + 1 == micros});
        loss += engine->take_loss();
      }
      out.step_losses.push_back(loss);
      out.gradient_norms.push_back(engine->last_gradient_norm());
    }
  }
  EXPECT_EQ(engine->optimizer_steps(), 2 * batcher.batches_per_epoch());
  out.params = engine->parameters();
  return out;
}

TEST(GradientAccumulation, MicroBatchesTrainWhatOneBatchTrains) {
  LoadedModel model = load_model_dir(std::string(BERTRAIN_FIXTURES_DIR) + "/tiny_gelu_bce_adam", {}, 0);
  model.config.hidden_dropout_prob = 0.1;  // the masks must be the whole batch's
  model.config.attention_probs_dropout_prob = 0.1;
  model.config.classifier_dropout = 0.2;
  const std::vector<Example> examples = random_examples(23, model.config.vocab_size, model.config.num_labels());
  const Trained whole = train(model, examples, 8, 1);  // steps of 8, 8, 7 rows
  const Trained tiled = train(model, examples, 2, 4);  // steps of 2+2+2+2, 2+2+2+2, 2+2+2+1 rows: the same 8, 8, 7
  const Trained other = train(model, examples, 3, 2);  // steps of 6 rows: another training
  ASSERT_EQ(whole.step_losses.size(), tiled.step_losses.size());
  for (std::size_t i = 0; i < whole.step_losses.size(); ++i) {
    EXPECT_NEAR(tiled.step_losses[i], whole.step_losses[i], 1e-6 + 1e-5 * std::abs(whole.step_losses[i])) << "step " << i;
    EXPECT_NEAR(tiled.gradient_norms[i], whole.gradient_norms[i], 1e-5 * whole.gradient_norms[i]) << "step " << i;
  }
  // float32 rounding: the two sum the per-row gradients in a different order (about 1e-7 relative); after 6 Adam
  // steps of lr 1e-3 that moves a parameter by far less than 1e-6.
  EXPECT_TRUE(testing::all_close("parameters after 6 steps", tiled.params.data(), whole.params.data(),
                                 whole.params.size(), 1e-6, 1e-5));
  // And the comparison can fail: steps of 9 rows are another training.
  const testing::Comparison different = testing::compare(other.params.data(), whole.params.data(), whole.params.size(), 1e-6, 1e-5);
  EXPECT_GT(different.worst_excess, 1.0);
}

}  // namespace
}  // namespace bertrain

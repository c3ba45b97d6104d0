// A steady-state CPU training step performs no C++ heap allocation: every buffer is sized at construction.
// (Eigen's GEMM takes its packing buffers from malloc inside each product; those are Eigen's, reused from
// malloc's free lists, and not counted here: this guards our own code against per-step vectors and strings.)
// Global operator new is replaced in this test binary only, so it runs as its own executable.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "dist/communicator.h"
#include "engine/classifier_trainer.h"
#include "engine/training_backend.h"
#include "engine/validation_metrics.h"
#include "model/model_dir.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  if (g_counting.load()) g_allocations.fetch_add(1);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace bertrain {
namespace {

TEST(NoAllocation, TrainingStepAllocatesNothing) {
  LoadedModel model = load_model_dir(std::string(BERTRAIN_FIXTURES_DIR) + "/tiny_gelu_bce_adam", {}, 0);
  model.config.hidden_dropout_prob = 0.1;  // exercise the dropout paths too
  model.config.attention_probs_dropout_prob = 0.1;
  const int batch = 2, labels = model.config.num_labels();
  const std::vector<int32_t> ids = {2, 7, 9, 11, 3, 2, 5, 6};
  const std::vector<int32_t> cu_seqlens = {0, 5, 8};  // packed rows of 5 and 3 tokens
  const std::vector<float> targets = {1, 0, 0, 0, 0, 0, 1, 0};
  ClassifierTrainer<float> trainer(model.config, labels, BatchLimits{batch, 5, 8}, model.params, TrainerOptions{});
  const BertBatch bert_batch = packed_batch(ids.data(), cu_seqlens.data(), batch);
  trainer.step(bert_batch, targets.data());  // the first step binds the parameter views

  g_allocations = 0;
  g_counting = true;
  trainer.step(bert_batch, targets.data());
  trainer.evaluate(bert_batch, targets.data());
  g_counting = false;
  EXPECT_EQ(g_allocations.load(), 0) << "operator new was called inside a training step";
}

// A validation batch: the engine's evaluate with its logits, and counting them for the validation metrics.
TEST(NoAllocation, ValidationBatchAllocatesNothing) {
  const LoadedModel model = load_model_dir(std::string(BERTRAIN_FIXTURES_DIR) + "/tiny_gelu_bce_adam", {}, 0);
  const int batch = 2, labels = model.config.num_labels();
  const std::vector<int32_t> ids = {2, 7, 9, 11, 3, 2, 5, 6};
  const std::vector<int32_t> cu_seqlens = {0, 5, 8};
  const std::vector<float> targets = {1, 0, 0, 0, 0, 0, 1, 0};
  const std::unique_ptr<Communicator> comm = make_communicator(LaunchInfo{});
  const auto engine = make_training_backend(BackendChoice{}, model.config, labels, BatchLimits{batch, 5, 8},
                                            model.params, TrainerOptions{}, *comm);
  const BertBatch bert_batch = packed_batch(ids.data(), cu_seqlens.data(), batch);
  std::vector<float> logits(static_cast<std::size_t>(batch) * labels);
  ValidationCounts single(labels, false), multi(labels, true);
  engine->evaluate(bert_batch, targets.data(), logits.data());

  g_allocations = 0;
  g_counting = true;
  engine->evaluate(bert_batch, targets.data(), logits.data());
  single.add(logits.data(), targets.data(), batch);
  multi.add(logits.data(), targets.data(), batch);
  g_counting = false;
  EXPECT_EQ(g_allocations.load(), 0) << "operator new was called inside a validation batch";
  EXPECT_EQ(single.counts()[3 * static_cast<std::size_t>(labels)], batch);  // the two rows counted
}

}  // namespace
}  // namespace bertrain

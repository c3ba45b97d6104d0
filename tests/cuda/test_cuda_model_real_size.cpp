// The CUDA model at BERT-base width against the CPU engine: the golden fixtures (test_cuda_model) are 32–36
// wide, which leaves every kernel's large-shape branches (full warps and tiles, many blocks, head dim 64,
// split-K GEMMs) unexercised. Here: random transformers-initialised weights at hidden 768, 12 heads,
// intermediate 3072, two layers, SciBERT's vocabulary, dropout 0.1 everywhere, a packed batch of ragged rows of 1
// to 77 tokens. Checked: GPU fp32 against the CPU (logits, the packed [T, H] sequence output, every gradient
// tensor, two Adam steps); bf16 against fp32 per gradient tensor; a resume round trip on the GPU, bit for bit, in
// fp32 and bf16; sequence lengths off the block sizes (1, 77, 300, 512) on a narrower model; and one model (its
// arena sized once for the largest batch) running ragged batches of every shape in turn, as training does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/cuda/device_buffer.h"
#include "core/cuda/gpu_context.h"
#include "core/philox.h"
#include "dist/communicator.h"
#include "engine/classifier_trainer.h"
#include "engine/training_backend.h"
#include "kernels/loss.h"
#include "kernels/tensor_ops.h"
#include "model/bert_classifier.h"
#include "model/bert_classifier_gpu.h"
#include "model/model_dir.h"
#include "tests/cuda/gpu_test.h"
#include "tests/cuda/model_checks.h"
#include "tests/temp_dir.h"
#include "tests/tolerance.h"

namespace bertrain {
namespace {

using testing::all_close;
using testing::expect_gradients_match;
using testing::max_abs;

// GPU fp32 against CPU fp32, as in test_cuda_model: summation orders differ (cuBLAS tiles, warp
// reductions), so elements differ by float ulps of the terms summed; at K = 3072 that is about 1e-5 of the
// tensor's largest magnitude.
constexpr double kRtol = 1e-4;
constexpr double kScaledAtol = 2e-5;

// bf16 against fp32, per gradient tensor: bf16 rounds weights and activations to 8 significant bits (2⁻⁹
// relative) at every op of two layers, so a gradient tensor's direction may turn by a little and its
// elements move by a few percent of its norm: cosine ≥ 0.999 and ‖g_bf16 − g_fp32‖ ≤ 0.05 ‖g_fp32‖.
constexpr double kBf16MinCosine = 0.999;
constexpr double kBf16MaxRelativeError = 0.05;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

BertConfig base_width_config(int layers) {
  BertConfig c;
  c.num_hidden_layers = layers;
  c.hidden_size = 768;
  c.num_attention_heads = 12;
  c.intermediate_size = 3072;
  c.vocab_size = 31090;  // SciBERT's
  c.hidden_dropout_prob = c.attention_probs_dropout_prob = 0.1;
  c.validate("test config");
  return c;
}

// A random model and a packed batch of `lengths.size()` rows (row b has lengths[b] tokens, the first one
// [CLS]-like, all rows back to back), one label per row.
struct Problem {
  BertConfig config;
  int labels = 4, batch = 0;
  ParamLayout layout;
  std::vector<float> params, targets;
  std::vector<int32_t> ids, cu_seqlens;  // ids [T], row offsets [B + 1]
  TrainerOptions options;

  Problem(const BertConfig& c, const std::vector<int>& lengths, uint64_t seed) : config(c) {
    batch = static_cast<int>(lengths.size());
    layout = bert_classifier_layout(config, labels);
    params = random_bert_parameters(layout, config, seed);
    cu_seqlens = testing::row_offsets(lengths);
    ids.assign(static_cast<std::size_t>(cu_seqlens.back()), 0);
    targets.assign(static_cast<std::size_t>(batch) * labels, 0.0f);
    const RandomKey key{seed, 0, 0x7e57u};
    for (int b = 0; b < batch; ++b) {
      for (int s = 0; s < lengths[static_cast<std::size_t>(b)]; ++s) {
        const double u = philox_uniform(key, 1000003ull * (b + 1) + s);
        ids[static_cast<std::size_t>(cu_seqlens[b] + s)] =
            s == 0 ? 2 : 5 + static_cast<int32_t>(u * (c.vocab_size - 5));
      }
      targets[static_cast<std::size_t>(b) * labels + static_cast<std::size_t>(b % labels)] = 1.0f;
    }
    options.adam.lr = 1e-4;
    options.seed = seed;
  }
  BertBatch host_batch() const { return packed_batch(ids.data(), cu_seqlens.data(), batch); }
  BatchLimits limits() const {
    const BertBatch b = host_batch();
    return BatchLimits{b.batch, b.longest, b.tokens};
  }
  DropoutSetting dropout() const {
    DropoutSetting d = DropoutSetting::training(config, 7, 1);
    d.classifier = 0.1f;
    return d;
  }
};

// Lengths 1..77, ragged: the longest (77) twice and not first, a one-token row, rows of every size between.
const std::vector<int> kMixedLengths{64, 1, 77, 33, 77, 12, 50, 70};

// logits [B, C], the sequence output [T, H] (before any dropout of the head) and the gradients of one forward +
// backward (BCE).
struct Outputs {
  std::vector<float> logits, sequence, grads;
};

// One forward + backward of `cpu` (built for limits covering p's batch).
Outputs cpu_outputs(BertClassifier<float>& cpu, const Problem& p) {
  const BertBatch batch = p.host_batch();
  cpu.forward(p.params.data(), batch, p.dropout());
  std::vector<float> dlogits(static_cast<std::size_t>(p.batch) * p.labels);
  classification_loss_cpu(LossKind::kBce, dlogits.data(), cpu.logits(), p.targets.data(),
                          static_cast<const float*>(nullptr), p.batch, p.labels);
  const std::size_t n_sequence = static_cast<std::size_t>(batch.tokens) * p.config.hidden_size;
  Outputs out{std::vector<float>(cpu.logits(), cpu.logits() + dlogits.size()),
              std::vector<float>(cpu.sequence_output(), cpu.sequence_output() + n_sequence),
              std::vector<float>(p.params.size())};
  cpu.backward(out.grads.data(), p.params.data(), dlogits.data());
  return out;
}

Outputs cpu_outputs(const Problem& p) {
  BertClassifier<float> cpu(p.config, p.labels, p.limits());
  return cpu_outputs(cpu, p);
}

// One forward + backward of `gpu` (built for limits covering p's batch) in T (float or bf16: parameters rounded to
// bf16 once, as the bf16 engine's copy).
template <typename T>
Outputs gpu_outputs(BertClassifierGpu<T>& gpu, const GpuContext& context, const Problem& p) {
  DeviceBuffer<float> master(p.params), grads(p.params.size()), targets(p.targets), loss(1);
  DeviceBuffer<T> compute_copy;
  const T* params = nullptr;
  if constexpr (std::is_same_v<T, bf16>) {
    compute_copy = DeviceBuffer<T>(p.params.size());
    cast_cuda(compute_copy.data(), master.data(), p.params.size(), context.stream());
    params = compute_copy.data();
  } else {
    params = master.data();
  }
  // The GPU model reads ids and row offsets on the device, with the host's counts (T, S, B).
  DeviceBuffer<int32_t> ids(p.ids), cu_seqlens(p.cu_seqlens);
  BertBatch batch = p.host_batch();
  batch.input_ids = ids.data();
  batch.cu_seqlens = cu_seqlens.data();
  gpu.forward(params, batch, p.dropout());
  classification_loss_cuda(LossKind::kBce, loss.data(), gpu.dlogits(), gpu.logits(), targets.data(), nullptr, p.batch,
                           p.labels, 1.0f, context.stream());
  gpu.backward(grads.data(), params, gpu.dlogits());
  context.synchronize();
  const std::size_t n_logits = static_cast<std::size_t>(p.batch) * p.labels;
  std::vector<T> logits(n_logits);
  BERTRAIN_CUDA_CHECK(cudaMemcpy(logits.data(), gpu.logits(), n_logits * sizeof(T), cudaMemcpyDeviceToHost));
  // The sequence output is the float residual stream whatever T is.
  const std::size_t n_sequence = static_cast<std::size_t>(batch.tokens) * p.config.hidden_size;
  Outputs out{std::vector<float>(n_logits), std::vector<float>(n_sequence), grads.download()};
  BERTRAIN_CUDA_CHECK(cudaMemcpy(out.sequence.data(), gpu.sequence_output(), n_sequence * sizeof(float),
                                 cudaMemcpyDeviceToHost));
  for (std::size_t i = 0; i < n_logits; ++i) {
    if constexpr (std::is_same_v<T, bf16>) {
      out.logits[i] = bf16_to_float(logits[i]);
    } else {
      out.logits[i] = logits[i];
    }
  }
  return out;
}

template <typename T>
Outputs gpu_outputs(const Problem& p) {
  GpuContext context(0, gpu_reduction_workspace_elements(BertClassifierGpu<T>::widest_reduction(p.config)));
  DeviceBuffer<char> arena(BertClassifierGpu<T>::arena_bytes(p.config, p.labels, p.limits()));
  BertClassifierGpu<T> gpu(p.config, p.labels, p.limits(), context.handles(), arena.data(), arena.size());
  return gpu_outputs(gpu, context, p);
}

// GPU fp32 against CPU fp32: logits, the packed sequence output and every gradient tensor.
void expect_fp32_outputs_match(const Outputs& gpu, const Outputs& cpu, const ParamLayout& layout) {
  EXPECT_TRUE(all_close("logits", gpu.logits.data(), cpu.logits.data(), cpu.logits.size(),
                        kScaledAtol * max_abs(cpu.logits.data(), cpu.logits.size()), kRtol));
  ASSERT_EQ(gpu.sequence.size(), cpu.sequence.size());
  EXPECT_TRUE(all_close("sequence_output", gpu.sequence.data(), cpu.sequence.data(), cpu.sequence.size(),
                        kScaledAtol * max_abs(cpu.sequence.data(), cpu.sequence.size()), kRtol));
  expect_gradients_match(layout, gpu.grads.data(), cpu.grads.data(), kScaledAtol, kRtol);
}

TEST(CudaModelRealSize, Fp32ForwardAndEveryGradientMatchTheCpu) {
  BERTRAIN_REQUIRE_GPU();
  const Problem p(base_width_config(2), kMixedLengths, 3);
  const Outputs cpu = cpu_outputs(p), gpu = gpu_outputs<float>(p);
  expect_fp32_outputs_match(gpu, cpu, p.layout);
}

std::unique_ptr<TrainingBackend> engine(const Problem& p, bool cuda, bool bf16, const std::vector<float>& params,
                                        Communicator& comm) {
  BackendChoice choice;
  choice.cuda = cuda;
  choice.bf16 = bf16;
  return make_training_backend(choice, p.config, p.labels, p.limits(), params, p.options, comm);
}

TEST(CudaModelRealSize, Fp32AdamStepsMatchTheCpuEngine) {
  BERTRAIN_REQUIRE_GPU();
  const Problem p(base_width_config(2), kMixedLengths, 4);
  const std::unique_ptr<Communicator> comm = make_communicator(LaunchInfo{});
  auto cpu = engine(p, false, false, p.params, *comm);
  auto gpu = engine(p, true, false, p.params, *comm);
  for (int step = 0; step < 2; ++step) {
    cpu->train_step(p.host_batch(), p.targets.data(), 1.0, *comm);
    gpu->train_step(p.host_batch(), p.targets.data(), 1.0, *comm);
    const double cpu_loss = cpu->take_loss(), gpu_loss = gpu->take_loss();
    EXPECT_NEAR(gpu_loss, cpu_loss, 1e-5 * std::abs(cpu_loss)) << "step " << step;
  }
  // Adam's first steps move a parameter by about lr · g / (|g| + eps): where |g| is near eps (1e-8) a
  // rounding difference in g changes the step by up to lr. 2·lr absolute covers that; most parameters
  // agree far more closely, so also the mean absolute difference must stay below 1e-3·lr.
  const std::vector<float> a = cpu->parameters(), b = gpu->parameters();
  EXPECT_TRUE(all_close("parameters after 2 steps", b.data(), a.data(), a.size(), 2 * p.options.adam.lr, 0));
  double mean_diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) mean_diff += std::abs(static_cast<double>(a[i]) - b[i]) / a.size();
  EXPECT_LT(mean_diff, 1e-3 * p.options.adam.lr);
}

TEST(CudaModelRealSize, Bf16GradientsFollowFp32PerTensor) {
  BERTRAIN_REQUIRE_GPU();
  const Problem p(base_width_config(2), kMixedLengths, 5);
  const Outputs fp32 = gpu_outputs<float>(p), bf = gpu_outputs<bf16>(p);
  double worst_cosine = 1, worst_error = 0;
  std::string worst_cosine_name, worst_error_name;
  for (const ParamEntry& e : p.layout.entries()) {
    if (ends_with(e.name, ".attention.self.key.bias")) continue;  // rounding noise around zero (model_checks.h)
    double dot = 0, nf = 0, nb = 0, diff = 0;
    for (std::size_t i = e.offset; i < e.offset + e.numel; ++i) {
      const double f = fp32.grads[i], b = bf.grads[i];
      dot += f * b;
      nf += f * f;
      nb += b * b;
      diff += (f - b) * (f - b);
    }
    ASSERT_GT(nf, 0) << e.name << ": zero fp32 gradient";
    const double cosine = dot / std::sqrt(nf * nb), error = std::sqrt(diff / nf);
    EXPECT_GE(cosine, kBf16MinCosine) << e.name << ": relative error " << error;
    EXPECT_LE(error, kBf16MaxRelativeError) << e.name << ": cosine " << cosine;
    if (cosine < worst_cosine) worst_cosine = cosine, worst_cosine_name = e.name;
    if (error > worst_error) worst_error = error, worst_error_name = e.name;
  }
  std::printf("bf16 vs fp32 gradients: worst cosine %.6f (%s), worst relative error %.4f (%s)\n", worst_cosine,
              worst_cosine_name.c_str(), worst_error, worst_error_name.c_str());
}

// 4 steps in one engine equal 2 steps, a checkpoint (parameters + optimizer file), a new engine from it and
// 2 more steps, bit for bit.
void expect_resume_is_bit_exact(bool bf16_mode) {
  const Problem p(base_width_config(2), kMixedLengths, 6);
  const std::unique_ptr<Communicator> comm = make_communicator(LaunchInfo{});
  auto straight = engine(p, true, bf16_mode, p.params, *comm);
  for (int step = 0; step < 4; ++step) {
    straight->train_step(p.host_batch(), p.targets.data(), 1.0, *comm);
    straight->take_loss();
  }
  testing::TempDir temp("bertrain_gpu_resume");
  const std::string optimizer_file = (temp.path() / "optimizer.safetensors").string();
  std::vector<float> saved;
  {
    auto first = engine(p, true, bf16_mode, p.params, *comm);
    for (int step = 0; step < 2; ++step) {
      first->train_step(p.host_batch(), p.targets.data(), 1.0, *comm);
      first->take_loss();
    }
    saved = first->parameters();
    first->save_optimizer(optimizer_file);
  }
  auto resumed = engine(p, true, bf16_mode, saved, *comm);
  resumed->load_optimizer(optimizer_file);
  EXPECT_EQ(resumed->optimizer_steps(), 2);
  for (int step = 0; step < 2; ++step) {
    resumed->train_step(p.host_batch(), p.targets.data(), 1.0, *comm);
    resumed->take_loss();
  }
  const std::vector<float> a = straight->parameters(), b = resumed->parameters();
  ASSERT_EQ(a.size(), b.size());
  std::size_t differ = 0, first = a.size();
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0 && differ++ == 0) first = i;
  }
  EXPECT_EQ(differ, 0u) << "first difference at " << first << ": " << a[first] << " vs " << b[first];
}

TEST(CudaModelRealSize, Fp32ResumeIsBitExact) {
  BERTRAIN_REQUIRE_GPU();
  expect_resume_is_bit_exact(false);
}

TEST(CudaModelRealSize, Bf16ResumeIsBitExact) {
  BERTRAIN_REQUIRE_GPU();
  expect_resume_is_bit_exact(true);
}

// A model 128 wide with head dim 64, so the CPU side stays quick.
BertConfig narrow_config() {
  BertConfig c = base_width_config(1);
  c.hidden_size = 128;
  c.num_attention_heads = 2;
  c.intermediate_size = 256;
  c.vocab_size = 1000;
  return c;
}

// Sequence lengths off every block size: one token, 77, 300, and the longest BERT allows (512), each in a batch
// with a row of half its length and a row of one token.
TEST(CudaModelRealSize, Fp32LengthsOffTheBlockSizesMatchTheCpu) {
  BERTRAIN_REQUIRE_GPU();
  const BertConfig c = narrow_config();
  for (int longest : {1, 77, 300, 512}) {
    SCOPED_TRACE("longest row " + std::to_string(longest));
    const Problem p(c, {longest, std::max(1, longest / 2), 1}, 8);
    const Outputs cpu = cpu_outputs(p), gpu = gpu_outputs<float>(p);
    expect_fp32_outputs_match(gpu, cpu, p.layout);
  }
}

// One CPU and one GPU model, each built once for the largest of these batches (as the trainer builds its model for
// the batchers' limits), run ragged batches of every shape in turn: fewer rows, tokens and a shorter longest row
// than the arena holds, so the padded attention internals change stride from batch to batch. Every row of one
// token; mixed lengths 1..512; one row of 512; 64 rows of mixed lengths.
TEST(CudaModelRealSize, Fp32OneModelRunsRaggedBatchesOfEveryShape) {
  BERTRAIN_REQUIRE_GPU();
  const BertConfig c = narrow_config();
  const std::vector<testing::RaggedRows> sets = testing::ragged_row_sets(512, 29);
  std::vector<Problem> problems;
  BatchLimits limits{1, 1, 1};
  for (const testing::RaggedRows& rows : sets) {
    problems.emplace_back(c, rows.lengths, 9);  // the same seed: the same parameters for every batch
    const BertBatch b = problems.back().host_batch();
    limits.rows = std::max(limits.rows, b.batch);
    limits.longest = std::max(limits.longest, b.longest);
    limits.tokens = std::max(limits.tokens, b.tokens);
  }
  BertClassifier<float> cpu(c, problems.front().labels, limits);
  GpuContext context(0, gpu_reduction_workspace_elements(BertClassifierGpu<float>::widest_reduction(c)));
  DeviceBuffer<char> arena(BertClassifierGpu<float>::arena_bytes(c, problems.front().labels, limits));
  BertClassifierGpu<float> gpu(c, problems.front().labels, limits, context.handles(), arena.data(), arena.size());
  for (std::size_t i = 0; i < problems.size(); ++i) {
    SCOPED_TRACE(sets[i].name + ": " + testing::describe_lengths(sets[i].lengths));
    const Problem& p = problems[i];
    const Outputs cpu_out = cpu_outputs(cpu, p), gpu_out = gpu_outputs(gpu, context, p);
    expect_fp32_outputs_match(gpu_out, cpu_out, p.layout);
  }
}

}  // namespace
}  // namespace bertrain

// The memory check before an engine is built (engine/memory_fit.h): what the CPU engine will allocate, known
// before it allocates, and the error or warning when that does not fit.
#include "engine/memory_fit.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/classifier_trainer.h"
#include "model/model_dir.h"
#include "tests/expect_error.h"

namespace bertrain {
namespace {

constexpr std::size_t kGiB = std::size_t{1} << 30;

// What the machine has: memory available, swap, the limit that lowered them ("" for none).
HostMemory machine(std::size_t available, std::size_t swap, const std::string& limited_by) {
  HostMemory have;
  have.available = available;
  have.swap_free = swap;
  have.limited_by = limited_by;
  return have;
}

// An engine's need by part.
MemoryNeed need_of(std::size_t activations, std::size_t state, std::size_t workspace = 0) {
  MemoryNeed need;
  need.activations = activations;
  need.state = state;
  need.workspace = workspace;
  return need;
}

LoadedModel tiny_model() { return load_model_dir(std::string(BERTRAIN_FIXTURES_DIR) + "/tiny_gelu_bce_adam", {}, 0); }

// The sizes said before the build are the sizes the build allocates: a model's activations (training and
// inference), and the trainer's parameters, gradients and moments.
TEST(MemoryFit, TheCpuEnginesNeedIsWhatItAllocates) {
  const LoadedModel model = tiny_model();
  const int labels = model.config.num_labels();
  for (const BatchLimits& limits : {BatchLimits{1, 1, 1}, BatchLimits{8, 20, 100}, BatchLimits{64, 24, 1536}}) {
    for (BertUse use : {BertUse::kTraining, BertUse::kTrainingRecompute, BertUse::kInference}) {
      const BertClassifier<float> built(model.config, labels, limits, use);
      EXPECT_EQ(BertClassifier<float>::activation_bytes(model.config, labels, limits, use), built.activation_bytes())
          << limits.rows << " rows, " << limits.tokens << " tokens";
    }
    TrainerOptions options;
    const MemoryNeed need = cpu_training_memory(model.config, labels, limits, options);
    ClassifierTrainer<float> trainer(model.config, labels, limits, model.params, TrainerOptions{});
    EXPECT_EQ(need.activations, BertClassifier<float>(model.config, labels, limits).activation_bytes());
    EXPECT_EQ(need.state, (trainer.parameters().size() + trainer.gradients().size() +
                           trainer.optimizer().first_moment().size() + trainer.optimizer().second_moment().size()) *
                              sizeof(float));
    // --grad-accum-steps above 1 keeps one more gradient-sized buffer (CpuBackend's sum of the micro-batches).
    options.accumulation = 4;
    EXPECT_EQ(cpu_training_memory(model.config, labels, limits, options).state, need.state / 4 * 5);
    // --gradient-checkpointing: the recomputing model's activations.
    options.recompute_activations = true;
    const MemoryNeed recomputing = cpu_training_memory(model.config, labels, limits, options);
    EXPECT_TRUE(recomputing.recomputes);
    EXPECT_EQ(recomputing.activations,
              BertClassifier<float>(model.config, labels, limits, BertUse::kTrainingRecompute).activation_bytes());
  }
}

TEST(MemoryFit, WhatFitsInMemoryPassesSilently) {
  const MemoryNeed need = need_of(3 * kGiB, kGiB);
  EXPECT_EQ(check_host_memory(need, BatchLimits{256, 128, 32768}, 1, machine(4 * kGiB, 0, ""), "train"), "");
  EXPECT_EQ(check_host_memory(need, BatchLimits{256, 128, 32768}, 2, machine(8 * kGiB, 0, ""), "train"), "");
}

// Too large for memory and swap: one line with the need by part, what there is, and the flags that lower it.
TEST(MemoryFit, WhatCannotFitIsAnInputErrorNamingTheFlags) {
  const MemoryNeed need = need_of(82 * kGiB, 2 * kGiB);
  const BatchLimits limits{256, 512, 131072};
  EXPECT_THROW(check_host_memory(need, limits, 1, machine(20 * kGiB, 0, ""), "train"), InputError);
  testing::expect_error([&] { check_host_memory(need, limits, 1, machine(20 * kGiB, 0, ""), "train"); },
                        {"train: the CPU engine needs 84.0 GiB", "256 rows and 131072 tokens", "82.0 GiB of activations",
                         "2.0 GiB of parameters", "this machine has 20.0 GiB of memory available", "--batch-size",
                         "--grad-accum-steps", "--max-length", "or add --gradient-checkpointing"});
  // Recomputing already: that advice is not given again.
  MemoryNeed recomputing = need_of(82 * kGiB, 2 * kGiB);
  recomputing.recomputes = true;
  try {
    check_host_memory(recomputing, limits, 1, machine(20 * kGiB, 0, ""), "train");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).find("--gradient-checkpointing"), std::string::npos) << e.what();
  }
  // Where a limit leaves less than the machine has, the message names it; several processes on one host each
  // need it.
  testing::expect_error(
      [&] {
        check_host_memory(need_of(3 * kGiB, kGiB), limits, 4,
                          machine(12 * kGiB, 2 * kGiB, "the cgroup limit in /sys/fs/cgroup/job/memory.max"), "train");
      },
      {"needs 4.0 GiB", "16.0 GiB for the 4 processes on this host",
       "12.0 GiB of memory is available to it under the cgroup limit in /sys/fs/cgroup/job/memory.max",
       "and 2.0 GiB of swap"});
}

// More than memory but within memory and swap: it would run, paging; a warning says so, with the same advice.
TEST(MemoryFit, WhatFitsOnlyWithSwapIsAWarning) {
  const std::string warning =
      check_host_memory(need_of(5 * kGiB, kGiB), BatchLimits{64, 512, 32768}, 1, machine(4 * kGiB, 4 * kGiB, ""),
                        "train");
  EXPECT_NE(warning.find("needs 6.0 GiB"), std::string::npos) << warning;
  EXPECT_NE(warning.find("it will swap"), std::string::npos) << warning;
  EXPECT_NE(warning.find("--batch-size"), std::string::npos) << warning;
}

// ulimit -v bounds each process alone: two ranks of 470 MiB each fit where each has 920 MiB of address space,
// whatever the two need together (a job that fits was refused when the two were compared with one room).
TEST(MemoryFit, AnAddressSpaceLimitIsEachProcesssOwn) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  HostMemory have = machine(20 * kGiB, 0, "");
  have.address_space = 920 * kMiB;
  have.address_space_limit = 2 * kGiB;
  const MemoryNeed need = need_of(400 * kMiB, 70 * kMiB);
  EXPECT_EQ(check_host_memory(need, BatchLimits{64, 512, 32768}, 2, have, "train"), "");
  have.address_space = 300 * kMiB;
  testing::expect_error([&] { check_host_memory(need, BatchLimits{64, 512, 32768}, 2, have, "train"); },
                        {"needs 470 MiB", "300 MiB of address space is left to it under ulimit -v (RLIMIT_AS) of 2.0 GiB",
                         "--batch-size"});
}

// Inference: the arena of the largest batch against memory and swap (no warning: it would come mid-run), the
// address space, or the device; the message names every command's batch flags.
TEST(MemoryFit, AnInferenceBatchThatCannotFitNamesTheBatchFlags) {
  const BatchLimits limits{4096, 512, 2097152};
  EXPECT_NO_THROW(check_inference_host_memory(20 * kGiB, limits, machine(16 * kGiB, 8 * kGiB, "")));
  testing::expect_error([&] { check_inference_host_memory(30 * kGiB, limits, machine(16 * kGiB, 8 * kGiB, "")); },
                        {"the CPU engine needs 30.0 GiB for the activations of batches of up to 4096 rows and 2097152 tokens",
                         "this machine has 16.0 GiB of memory available and 8.0 GiB of swap",
                         "predict's and evaluate's --batch-size", "serve's --max-batch-size and --max-batch-tokens",
                         "--max-length"});
  HostMemory limited = machine(16 * kGiB, 0, "");
  limited.address_space = kGiB;
  limited.address_space_limit = 3 * kGiB;
  EXPECT_THROW(check_inference_host_memory(2 * kGiB, limits, limited), InputError);
  EXPECT_NO_THROW(check_inference_device_memory(20 * kGiB, limits, 40 * kGiB, 80 * kGiB, "cuda:0"));
  testing::expect_error([&] { check_inference_device_memory(60 * kGiB, limits, 40 * kGiB, 80 * kGiB, "cuda:1"); },
                        {"the GPU engine needs 60.0 GiB of cuda:1's memory for the activations", "40.0 GiB of its 80.0 GiB",
                         "--batch-size"});
}

TEST(MemoryFit, TheDevicesFreeMemoryBoundsTheGpuEngine) {
  EXPECT_NO_THROW(check_device_memory(need_of(70 * kGiB, 2 * kGiB), BatchLimits{256, 128, 32768}, 1, 130 * kGiB,
                                      139 * kGiB, "cuda:0", "train"));
  EXPECT_THROW(check_device_memory(need_of(70 * kGiB, 2 * kGiB), BatchLimits{256, 512, 131072}, 1, 60 * kGiB,
                                   139 * kGiB, "cuda:0", "train"),
               InputError);
  testing::expect_error(
      [&] {
        check_device_memory(need_of(70 * kGiB, 2 * kGiB), BatchLimits{256, 512, 131072}, 1, 60 * kGiB, 139 * kGiB,
                            "cuda:0", "train");
      },
      {"train: the GPU engine needs 72.0 GiB of cuda:0's memory", "60.0 GiB of its 139.0 GiB are free",
       "--batch-size", "--grad-accum-steps", "--max-length"});
  // Ranks sharing the device each need it; a headroom is kept for the libraries; the workspaces are counted.
  EXPECT_NO_THROW(check_device_memory(need_of(30 * kGiB, 2 * kGiB), BatchLimits{256, 128, 32768}, 2, 65 * kGiB,
                                      139 * kGiB, "cuda:0", "train"));
  testing::expect_error(
      [&] {
        check_device_memory(need_of(30 * kGiB, 2 * kGiB, kGiB), BatchLimits{256, 128, 32768}, 2, 65 * kGiB,
                            139 * kGiB, "cuda:0", "train");
      },
      {"needs 33.0 GiB of cuda:0's memory", "1.0 GiB of workspaces", "66.0 GiB for the 2 processes sharing it"});
  EXPECT_THROW(check_device_memory(need_of(32 * kGiB, 0), BatchLimits{256, 128, 32768}, 2, 64 * kGiB + 100,
                                   139 * kGiB, "cuda:0", "train"),
               InputError);  // fits but for the headroom
}

}  // namespace
}  // namespace bertrain

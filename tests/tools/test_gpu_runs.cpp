// The resume guarantees of the main job on the GPU engine, through the bertrain binary (label gpu; skipped with a
// message without a device, failed under BERTRAIN_EXPECT_GPU=1), in fp32 and bf16:
// - a run stopped by SIGTERM finishes its step, writes its checkpoint and exits 75; resumed, it ends bit for bit
//   as the uninterrupted GPU run;
// - chaos (tests/tools/chaos_test.h): runs killed with SIGKILL at random moments and resumed until done end bit for
//   bit as the uninterrupted GPU run.
#include <csignal>

#include "tests/tools/chaos_test.h"

namespace bertrain::chaos {
namespace {

// 20 epochs (80 steps, a checkpoint after each): the signal goes out once the first checkpoint exists, and the
// steps still to come take long enough, also on a fast GPU, for it to land inside training.
TEST_P(InterruptedRunTest, StoppedBySigtermAndResumedEndsBitForBit) {
  const int epochs = 20;
  const testing::RunResult reference = testing::run_process(train_argv("reference", false, epochs), {}, 600);
  ASSERT_EQ(reference.exit_code, 0) << reference.describe();
  const std::string out = dir_.path("stopped");
  const testing::RunResult stopped = testing::run_process(
      train_argv("stopped", false, epochs), {}, 600,
      {{0.0, SIGTERM, [&] { return fs::exists(out + "/last/trainer_state.json"); }}});
  ASSERT_EQ(stopped.exit_code, 75) << stopped.describe();
  const long at = json::parse(slurp(out + "/last/trainer_state.json")).at("optimizer_steps").get<long>();
  EXPECT_LT(at, 4L * epochs) << "the run was not stopped early";
  const testing::RunResult resumed = testing::run_process(train_argv("stopped", true, epochs), {}, 600);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  std::printf("%s %s: stopped by SIGTERM after optimizer step %ld of %d, resumed\n", GetParam().device.c_str(),
              GetParam().precision.c_str(), at, 4 * epochs);
  expect_same_as(dir_.path("reference"), out);
}

// 6 chaos runs per precision (the CPU's suite makes 20): GPU time is lent by the minute.
INSTANTIATE_TEST_SUITE_P(Gpu, InterruptedRunTest,
                         ::testing::Values(Engine{"cuda", "fp32", 6, false}, Engine{"cuda", "bf16", 6, false}),
                         engine_name);

}  // namespace
}  // namespace bertrain::chaos

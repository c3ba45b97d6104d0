// Tests for engine/checkpoint: the optimizer state file (round trip, mismatches naming the file).
#include "engine/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "model/safetensors.h"
#include "tests/temp_dir.h"

namespace bertrain {
namespace {

namespace fs = std::filesystem;

class CheckpointTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return (root_ / name).string(); }

  testing::TempDir temp_{"bertrain_checkpoint"};
  const fs::path root_ = temp_.path();
};

AdamOptimizer<float> filled_optimizer(std::size_t n, long steps) {
  AdamOptimizer<float> opt(n, AdamHyper{});
  for (std::size_t i = 0; i < n; ++i) {
    opt.first_moment()[i] = 0.25f * static_cast<float>(i) - 1.0f / 3.0f;
    opt.second_moment()[i] = 1e-7f * static_cast<float>(i * i + 1);
  }
  opt.set_steps_taken(steps);
  return opt;
}

TEST_F(CheckpointTest, OptimizerStateRoundTrip) {
  const AdamOptimizer<float> saved = filled_optimizer(37, 123456789012L);
  save_optimizer_state(path("optimizer.safetensors"), saved, "layout-a");
  AdamOptimizer<float> loaded(37, AdamHyper{});
  load_optimizer_state(path("optimizer.safetensors"), &loaded, "layout-a");
  EXPECT_EQ(loaded.first_moment(), saved.first_moment());  // exact: F32 stored as F32
  EXPECT_EQ(loaded.second_moment(), saved.second_moment());
  EXPECT_EQ(loaded.steps_taken(), 123456789012L);
}

TEST_F(CheckpointTest, OptimizerStateSizeMismatchNamesTheFile) {
  save_optimizer_state(path("optimizer.safetensors"), filled_optimizer(37, 5), "layout-a");
  AdamOptimizer<float> bigger(38, AdamHyper{});
  try {
    load_optimizer_state(path("optimizer.safetensors"), &bigger, "layout-a");
    FAIL() << "a size mismatch was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path("optimizer.safetensors")), std::string::npos) << what;
    EXPECT_NE(what.find("37"), std::string::npos) << what;
    EXPECT_NE(what.find("38"), std::string::npos) << what;
  }
  EXPECT_EQ(bigger.steps_taken(), 0);
}

TEST_F(CheckpointTest, OptimizerStateMissingPiecesNameTheFile) {
  const std::vector<float> values(4, 1.0f);
  {
    SafetensorsWriter w;  // exp_avg_sq missing
    w.add_f32("exp_avg", {4}, values.data());
    w.set_metadata("step", "3");
    w.set_metadata("param_layout", "layout-a");
    w.write(path("no_sq.safetensors"));
  }
  {
    SafetensorsWriter w;  // step missing
    w.add_f32("exp_avg", {4}, values.data());
    w.add_f32("exp_avg_sq", {4}, values.data());
    w.set_metadata("param_layout", "layout-a");
    w.write(path("no_step.safetensors"));
  }
  {
    SafetensorsWriter w;  // step not an integer
    w.add_f32("exp_avg", {4}, values.data());
    w.add_f32("exp_avg_sq", {4}, values.data());
    w.set_metadata("step", "three");
    w.set_metadata("param_layout", "layout-a");
    w.write(path("bad_step.safetensors"));
  }
  {
    SafetensorsWriter w;  // no layout fingerprint: written before Q, K and V were laid out together
    w.add_f32("exp_avg", {4}, values.data());
    w.add_f32("exp_avg_sq", {4}, values.data());
    w.set_metadata("step", "3");
    w.write(path("no_layout.safetensors"));
  }
  save_optimizer_state(path("other_layout.safetensors"), filled_optimizer(4, 3), "layout-b");
  for (const char* name : {"no_sq.safetensors", "no_step.safetensors", "bad_step.safetensors", "no_layout.safetensors",
                           "other_layout.safetensors", "absent.safetensors"}) {
    AdamOptimizer<float> opt(4, AdamHyper{});
    try {
      load_optimizer_state(path(name), &opt, "layout-a");
      ADD_FAILURE() << name << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path(name)), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace bertrain

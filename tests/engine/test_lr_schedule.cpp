// The step-wise schedules against transformers.get_scheduler: every learning rate of every case of
// tests/fixtures/lr_schedules.json (tests/reference/make_lr_schedule_cases.py), Trainer's warmup-step
// rule, hand-checked values, and the argument errors.
#include "engine/lr_schedule.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "tests/expect_error.h"

namespace bertrain {
namespace {

using nlohmann::json;

json load_fixture() {
  const std::string path = std::string(BERTRAIN_FIXTURES_DIR) + "/lr_schedules.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  return json::parse(in);
}

// Warmup ramps, linear and constant are the same IEEE operations (int -> double conversions, one
// division, a max) as transformers' lambdas, and torch multiplies base_lr by the lambda once, as the
// test does: those lrs must be bit-identical. Cosine also calls cos(), which IEEE does not require to be
// correctly rounded; glibc's is within 1 ulp, and 0.5 * (1 + cos) turns that into an absolute error of
// at most DBL_EPSILON / 4 in the multiplier (1 + cos can cancel, so the bound is absolute, not relative),
// plus the rounding of the product: |lr - want| <= base_lr * DBL_EPSILON covers it. With the same C
// library as the generator every cosine lr is bit-identical too (the test prints the count).
TEST(LrSchedule, MatchesTransformers) {
  const json doc = load_fixture();
  const json& cases = doc.at("cases");
  ASSERT_EQ(cases.size(), 49u);  // make_lr_schedule_cases.py writes 49 cases
  long checked = 0, cosine_values = 0, cosine_bit_identical = 0;
  for (const json& c : cases) {
    const std::string name = c.at("name").get<std::string>();
    const LrSchedulerKind kind = parse_lr_scheduler(c.at("kind").get<std::string>());
    const double base_lr = c.at("base_lr").get<double>();
    const long total = c.at("total_steps").get<long>();
    const double ratio = c.at("warmup_ratio").get<double>();
    long warmup = c.at("warmup_steps").get<long>();
    if (ratio > 0) {
      EXPECT_EQ(warmup_steps_for(0, ratio, total), warmup) << name;
    } else {
      EXPECT_EQ(warmup_steps_for(warmup, 0.0, total), warmup) << name;
    }
    const json& lrs = c.at("lrs");
    ASSERT_EQ(lrs.size(), static_cast<std::size_t>(total + c.at("extra_steps").get<long>())) << name;
    for (long step = 0; step < static_cast<long>(lrs.size()); ++step) {
      const double want = lrs[step].get<double>();
      const double got = base_lr * lr_multiplier(kind, step, warmup, total);
      ++checked;
      if (kind == LrSchedulerKind::kCosine && step >= warmup) {
        ++cosine_values;
        cosine_bit_identical += got == want;
        EXPECT_NEAR(got, want, base_lr * DBL_EPSILON) << name << " step " << step;
      } else {
        EXPECT_EQ(got, want) << name << " step " << step;
      }
    }
  }
  EXPECT_GT(checked, 4000);
  std::cout << "[          ] " << checked << " lrs checked; " << cosine_bit_identical << " of " << cosine_values
            << " cosine values bit-identical to transformers " << doc.at("transformers_version").get<std::string>()
            << "\n";
}

TEST(LrSchedule, WarmupStepsMatchTrainer) {
  const json doc = load_fixture();
  ASSERT_EQ(doc.at("warmup").size(), 16u);
  for (const json& w : doc.at("warmup")) {
    const long steps = w.at("warmup_steps").get<long>();
    const double ratio = w.at("warmup_ratio").get<double>();
    const long total = w.at("total_steps").get<long>();
    EXPECT_EQ(warmup_steps_for(steps, ratio, total), w.at("result").get<long>())
        << "steps " << steps << " ratio " << ratio << " total " << total;
  }
}

// Hand-computed values, independent of the fixture: 10 steps, 2 of warmup.
TEST(LrSchedule, HandComputed) {
  // Update 0 runs with lr 0 during a warmup (transformers' first lambda value is 0 / W).
  EXPECT_EQ(lr_multiplier(LrSchedulerKind::kLinear, 0, 2, 10), 0.0);
  EXPECT_EQ(lr_multiplier(LrSchedulerKind::kLinear, 1, 2, 10), 0.5);
  EXPECT_EQ(lr_multiplier(LrSchedulerKind::kLinear, 2, 2, 10), 1.0);   // (10 - 2) / 8
  EXPECT_EQ(lr_multiplier(LrSchedulerKind::kLinear, 6, 2, 10), 0.5);   // (10 - 6) / 8
  EXPECT_EQ(lr_multiplier(LrSchedulerKind::kLinear, 9, 2, 10), 0.125);
  EXPECT_EQ(lr_multiplier(LrSchedulerKind::kLinear, 10, 2, 10), 0.0);
  EXPECT_EQ(lr_multiplier(LrSchedulerKind::kLinear, 25, 2, 10), 0.0);  // clamped past the end
  EXPECT_EQ(lr_multiplier(LrSchedulerKind::kCosine, 1, 2, 10), 0.5);
  EXPECT_EQ(lr_multiplier(LrSchedulerKind::kCosine, 2, 2, 10), 1.0);
  EXPECT_NEAR(lr_multiplier(LrSchedulerKind::kCosine, 6, 2, 10), 0.5, 1e-15);  // half way: cos(pi/2)
  EXPECT_EQ(lr_multiplier(LrSchedulerKind::kCosine, 10, 2, 10), 0.0);          // 1 + cos(pi) = 0 exactly
  EXPECT_NEAR(lr_multiplier(LrSchedulerKind::kCosine, 14, 2, 10), 0.5, 1e-15);  // climbing back past the end
  EXPECT_EQ(lr_multiplier(LrSchedulerKind::kCosine, 18, 2, 10), 1.0);           // 2N - W: a full period
  EXPECT_EQ(lr_multiplier(LrSchedulerKind::kConstant, 1, 2, 10), 0.5);
  EXPECT_EQ(lr_multiplier(LrSchedulerKind::kConstant, 2, 2, 10), 1.0);
  EXPECT_EQ(lr_multiplier(LrSchedulerKind::kConstant, 1000, 2, 10), 1.0);
  // No warmup: the first update runs with the full lr.
  EXPECT_EQ(lr_multiplier(LrSchedulerKind::kLinear, 0, 0, 10), 1.0);
  EXPECT_EQ(lr_multiplier(LrSchedulerKind::kCosine, 0, 0, 10), 1.0);
  EXPECT_EQ(lr_multiplier(LrSchedulerKind::kConstant, 0, 0, 10), 1.0);
  // Warmup longer than the run: ramp for W updates, then linear drops to 0 (N - W clamps to 1).
  EXPECT_EQ(lr_multiplier(LrSchedulerKind::kLinear, 14, 15, 10), 14.0 / 15.0);
  EXPECT_EQ(lr_multiplier(LrSchedulerKind::kLinear, 15, 15, 10), 0.0);
  // Plateau is epoch-wise (engine/lr_scheduler.h): the step-wise multiplier is always 1.
  for (long step : {0L, 1L, 9L, 10L, 100L}) EXPECT_EQ(lr_multiplier(LrSchedulerKind::kPlateau, step, 2, 10), 1.0);
}

TEST(LrSchedule, NamesRoundTrip) {
  for (LrSchedulerKind kind :
       {LrSchedulerKind::kPlateau, LrSchedulerKind::kLinear, LrSchedulerKind::kCosine, LrSchedulerKind::kConstant}) {
    EXPECT_EQ(parse_lr_scheduler(to_string(kind)), kind);
  }
  EXPECT_EQ(to_string(LrSchedulerKind::kPlateau), "plateau");
  EXPECT_EQ(to_string(LrSchedulerKind::kLinear), "linear");
  EXPECT_EQ(to_string(LrSchedulerKind::kCosine), "cosine");
  EXPECT_EQ(to_string(LrSchedulerKind::kConstant), "constant");
}

using testing::expect_error;

TEST(LrSchedule, Errors) {
  expect_error([] { parse_lr_scheduler("Linear"); },
               {"--lr-scheduler", "plateau, linear, cosine or constant", "\"Linear\""});
  expect_error([] { parse_lr_scheduler("cosine_with_restarts"); }, {"--lr-scheduler"});
  expect_error([] { parse_lr_scheduler(""); }, {"--lr-scheduler"});
  expect_error([] { warmup_steps_for(-1, 0.0, 10); }, {"--warmup-steps", ">= 0", "-1"});
  expect_error([] { warmup_steps_for(0, -0.1, 10); }, {"--warmup-ratio", "[0, 1)"});
  expect_error([] { warmup_steps_for(0, 1.0, 10); }, {"--warmup-ratio", "[0, 1)"});
  expect_error([] { warmup_steps_for(0, std::nan(""), 10); }, {"--warmup-ratio"});
  expect_error([] { warmup_steps_for(0, 0.1, 0); }, {"training steps", ">= 1"});
  expect_error([] { lr_multiplier(LrSchedulerKind::kLinear, -1, 0, 10); }, {"step", ">= 0"});
  expect_error([] { lr_multiplier(LrSchedulerKind::kCosine, 0, -1, 10); }, {"warmup", ">= 0"});
  expect_error([] { lr_multiplier(LrSchedulerKind::kConstant, 0, 0, 0); }, {"total steps", ">= 1"});
}

}  // namespace
}  // namespace bertrain

// ASHA as Ray's AsyncHyperBandScheduler decides (a trace worked by hand), numpy's percentile, and the study record
// (study.json's round trip, the best trial, the searches' observations).
#include <gtest/gtest.h>

#include <cmath>

#include "engine/asha_scheduler.h"
#include "engine/study.h"
#include "tests/expect_error.h"

namespace bertrain {
namespace {

using Decision = AshaScheduler::Decision;
using nlohmann::json;

TEST(NanPercentile, AsNumpy) {
  // numpy.percentile([1, 2, 3, 4], 75) = 3.25; [-0.35, -0.3] at 50 = -0.325; NaNs left out.
  EXPECT_DOUBLE_EQ(nan_percentile({4, 1, 3, 2}, 75), 3.25);
  EXPECT_DOUBLE_EQ(nan_percentile({-0.3, -0.35}, 50), -0.325);
  EXPECT_DOUBLE_EQ(nan_percentile({5, NAN, 1}, 50), 3);
  EXPECT_TRUE(std::isnan(nan_percentile({NAN}, 50)));
  EXPECT_DOUBLE_EQ(nan_percentile({7}, 75), 7);
}

TEST(Asha, RungsAsRay) {
  // int(log(10 / 1) / log(4) + 1) = 2 rungs: 4 and 1 (Made-With-ML's study: 10 epochs, grace period 1, Ray's 4).
  EXPECT_EQ(AshaScheduler(1, 10, 4, true).milestones(), (std::vector<double>{4, 1}));
  EXPECT_EQ(AshaScheduler(1, 8, 2, true).milestones(), (std::vector<double>{8, 4, 2, 1}));
  EXPECT_EQ(AshaScheduler(2, 10, 3, true).milestones(), (std::vector<double>{6, 2}));
  EXPECT_EQ(AshaScheduler(1, 1, 4, true).milestones(), (std::vector<double>{1}));
  testing::expect_error([] { AshaScheduler(0, 10, 4, true); }, "--grace-period must be positive");
  testing::expect_error([] { AshaScheduler(11, 10, 4, true); }, "--grace-period (11) must not exceed the trials' epochs (10)");
  testing::expect_error([] { AshaScheduler(1, 10, 1, true); }, "--reduction-factor must be above 1");
}

// Grace period 1, max_t 8, reduction factor 2 (rungs 4, 2, 1; a trial goes on in the top half), losses:
TEST(Asha, DecisionsEqualAHandComputedTrace) {
  AshaScheduler asha(1, 8, 2, /*lower_is_better=*/true);
  // Rung 1 empty: A goes on, its reward -0.5 recorded.
  EXPECT_EQ(asha.on_result("A", 1, 0.5), Decision::kContinue);
  // Rung 1 {-0.5}: cutoff -0.5; B's -0.4 is not below it.
  EXPECT_EQ(asha.on_result("B", 1, 0.4), Decision::kContinue);
  // Rung 1 {-0.5, -0.4}: cutoff (50th percentile) -0.45; C's -0.6 is below: stopped (and recorded).
  EXPECT_EQ(asha.on_result("C", 1, 0.6), Decision::kStop);
  EXPECT_EQ(asha.recorded(1).size(), 3u);
  // Rung 2 empty: A goes on.
  EXPECT_EQ(asha.on_result("A", 2, 0.3), Decision::kContinue);
  // Rung 2 {-0.3}: B's -0.35 is below: stopped.
  EXPECT_EQ(asha.on_result("B", 2, 0.35), Decision::kStop);
  // Rung 1 {-0.6, -0.5, -0.4}: cutoff -0.5; D's -0.45 goes on.
  EXPECT_EQ(asha.on_result("D", 1, 0.45), Decision::kContinue);
  // Rung 2 {-0.35, -0.3}: cutoff -0.325; D's -0.2 goes on.
  EXPECT_DOUBLE_EQ(asha.cutoff(2), -0.325);
  EXPECT_EQ(asha.on_result("D", 2, 0.2), Decision::kContinue);
  // A at 3: every rung it has reached already has its result; nothing is decided or recorded.
  EXPECT_EQ(asha.on_result("A", 3, 9.0), Decision::kContinue);
  EXPECT_EQ(asha.recorded(2).at("A"), -0.3);
  // Rung 4: A first, then D's -0.28 is below A's -0.25: stopped.
  EXPECT_EQ(asha.on_result("A", 4, 0.25), Decision::kContinue);
  EXPECT_EQ(asha.on_result("D", 4, 0.28), Decision::kStop);
  // At max_t a trial ends by itself: nothing recorded.
  EXPECT_EQ(asha.on_result("A", 8, 0.01), Decision::kContinue);
  EXPECT_EQ(asha.recorded(8).size(), 0u);
  // A NaN metric never stops a trial (it compares false), as in Ray.
  EXPECT_EQ(asha.on_result("E", 1, NAN), Decision::kContinue);
}

TEST(Asha, MaximizingKeepsTheHigherMetric) {
  AshaScheduler asha(1, 10, 4, /*lower_is_better=*/false);
  EXPECT_EQ(asha.on_result("A", 1, 0.8), Decision::kContinue);
  EXPECT_EQ(asha.on_result("B", 1, 0.7), Decision::kStop);   // below the 75th percentile of {0.8}
  EXPECT_EQ(asha.on_result("C", 1, 0.85), Decision::kContinue);
}

Study three_trials() {
  Study s;
  s.settings = {{"search", "tpe"}};
  s.searched = {"lr"};
  TrialRecord a, b, c;
  a.id = "000", b.id = "001", c.id = "002";
  a.params = {{"lr", 1e-4}}, b.params = {{"lr", 2e-4}}, c.params = {{"lr", 3e-4}};
  for (double v : {0.5, 0.4, 0.45}) a.add_evaluation(v, true);
  a.status = TrialStatus::kCompleted;
  b.add_evaluation(0.3, true);
  b.status = TrialStatus::kStopped;
  c.add_evaluation(0.1, true);
  c.status = TrialStatus::kFailed;
  c.error = "exit status 1: bertrain: error: boom";
  s.trials = {a, b, c};
  s.scheduler_events = {{"000", 1, 0.5}, {"001", 1, 0.3}};
  return s;
}

TEST(Study, BestTrialObservationsAndRanking) {
  const Study s = three_trials();
  EXPECT_EQ(s.trials[0].epochs, 3);
  EXPECT_EQ(s.trials[0].best_metric, 0.4);
  EXPECT_EQ(s.trials[0].best_epoch, 1);
  EXPECT_EQ(s.trials[0].last_metric, 0.45);
  // The failed trial's 0.1 is neither the best nor an observation.
  EXPECT_EQ(s.best_trial(), 1);
  ASSERT_EQ(s.observations().size(), 2u);
  EXPECT_EQ(s.observations()[1].loss, 0.3);
  EXPECT_EQ(s.ranking(), (std::vector<std::size_t>{1, 0, 2}));  // the failed trial last
}

TEST(Study, JsonRoundTrip) {
  const Study s = three_trials();
  const json j = s.to_json();
  EXPECT_EQ(j["best_trial"], "001");
  EXPECT_EQ(j["trials"][0]["best_epoch"], 1);
  EXPECT_TRUE(j["trials"][0]["best_epoch"].is_number_integer());
  EXPECT_EQ(j["trials"][2]["error"], "exit status 1: bertrain: error: boom");
  EXPECT_FALSE(j["trials"][0].contains("error"));
  const Study back = Study::from_json(j, "study.json");
  EXPECT_EQ(back.to_json(), j);
  json bad = j;
  bad["trials"][1]["status"] = "lost";
  testing::expect_error([&] { Study::from_json(bad, "study.json"); }, "study.json: field 'trials[1].status' is 'lost', not completed, stopped, failed, interrupted or running");
  bad = j;
  bad["trials"][1].erase("params");
  testing::expect_error([&] { Study::from_json(bad, "study.json"); }, "study.json: no field 'trials[1].params'");
  bad = j;
  bad["mode"] = "up";
  testing::expect_error([&] { Study::from_json(bad, "study.json"); }, "study.json: field 'mode' is 'up', not min or max");
  // What a metrics line is: epochs, unless the study says evaluations; a study written before the field counted epochs.
  EXPECT_EQ(j["iteration"], "epoch");
  json evaluations = j;
  evaluations["iteration"] = "evaluation";
  EXPECT_EQ(Study::from_json(evaluations, "study.json").iteration, "evaluation");
  json older = j;
  older.erase("iteration");
  EXPECT_EQ(Study::from_json(older, "study.json").iteration, "epoch");
  // The searched integer flags: written when there are any, read when present.
  EXPECT_FALSE(j.contains("integers"));
  Study integers = s;
  integers.integers = {integers.searched.at(0)};
  EXPECT_EQ(Study::from_json(integers.to_json(), "study.json").integers, integers.integers);
  bad = integers.to_json();
  bad["integers"] = {"not-searched"};
  testing::expect_error([&] { Study::from_json(bad, "study.json"); },
                        "study.json: field 'integers[0]' names 'not-searched', which 'searched' does not");
  bad = j;
  bad["iteration"] = "step";
  testing::expect_error([&] { Study::from_json(bad, "study.json"); }, "study.json: field 'iteration' is 'step', not epoch or evaluation");
}

// What report charts and --resume runs again is checked as it is read: each trial's params against the study's
// space (as --initial-params are), and its best epoch against the epochs it ran.
TEST(Study, TrialsAreCheckedAgainstTheSpaceAndTheirEpochs) {
  Study s = three_trials();
  s.settings["space"] = {{"lr", {{"type", "loguniform"}, {"low", 1e-5}, {"high", 5e-4}}}, {"dropout", 0.1}};
  const json j = s.to_json();
  EXPECT_EQ(Study::from_json(j, "study.json").to_json(), j);
  json bad = j;
  bad["trials"][1]["params"]["lr"] = "2e-4";
  testing::expect_error([&] { Study::from_json(bad, "study.json"); },
                        "study.json: field 'trials[1].params': \"lr\": \"2e-4\" is not a number in [1e-05, 0.0005]");
  bad = j;
  bad["trials"][2]["params"]["lr"] = 0.5;
  testing::expect_error([&] { Study::from_json(bad, "study.json"); }, "field 'trials[2].params': \"lr\": 0.5 is not a number");
  bad = j;
  bad["trials"][0]["params"]["batch-size"] = 8;
  testing::expect_error([&] { Study::from_json(bad, "study.json"); },
                        "field 'trials[0].params': \"batch-size\" is not in the search space");
  bad = j;
  bad["trials"][0]["params"].erase("lr");
  testing::expect_error([&] { Study::from_json(bad, "study.json"); }, "field 'trials[0].params': no value for \"lr\"");
  bad = j;
  bad["settings"]["space"]["lr"]["low"] = -1;
  testing::expect_error([&] { Study::from_json(bad, "study.json"); }, "study.json: field 'settings.space'");
  bad = j;
  bad["trials"][0]["best_epoch"] = 3;  // it ran epochs 0, 1 and 2
  testing::expect_error([&] { Study::from_json(bad, "study.json"); },
                        "study.json: field 'trials[0].best_epoch' is 3, not below the trial's epochs (3; it counts from 0)");
  bad["trials"][0]["best_epoch"] = 2;
  EXPECT_NO_THROW(Study::from_json(bad, "study.json"));
}

}  // namespace
}  // namespace bertrain

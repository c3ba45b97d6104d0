// EarlyStopping against transformers' EarlyStoppingCallback and Trainer's state.best_metric: the stop,
// the patience counter, the best and the new-best flag after every evaluation of every case of
// tests/fixtures/early_stopping.json (tests/reference/make_early_stopping_cases.py); save/restore at
// every point; bertrain's patience 0; argument and state validation.
#include "engine/early_stopping.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/expect_error.h"

namespace bertrain {
namespace {

using nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The fixture writes what JSON cannot hold as "nan" / "inf" / "-inf".
double decode(const json& v) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "nan") return kNaN;
    if (s == "inf") return kInf;
    if (s == "-inf") return -kInf;
    throw std::runtime_error("unexpected string in the fixture: " + s);
  }
  return v.get<double>();
}

struct Evaluation {
  double metric;
  int bad_evaluations;
  double best;
  bool improved;
  bool stop;
};

struct Case {
  std::string name;
  std::string bertrain_metric;  // empty when the case overrides greater_is_better
  bool greater_is_better;
  int patience;
  double threshold;
  std::vector<Evaluation> evaluations;
};

std::vector<Case> load_cases() {
  const std::string path = std::string(BERTRAIN_FIXTURES_DIR) + "/early_stopping.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  const json doc = json::parse(in);
  std::vector<Case> cases;
  for (const json& c : doc.at("cases")) {
    Case k;
    k.name = c.at("name").get<std::string>();
    if (!c.at("bertrain_metric").is_null()) k.bertrain_metric = c.at("bertrain_metric").get<std::string>();
    k.greater_is_better = c.at("greater_is_better").get<bool>();
    k.patience = c.at("patience").get<int>();
    k.threshold = c.at("threshold").get<double>();
    for (const json& e : c.at("evaluations")) {
      k.evaluations.push_back({decode(e.at("metric")), e.at("bad_evaluations").get<int>(), decode(e.at("best")),
                               e.at("improved").get<bool>(), e.at("stop").get<bool>()});
    }
    cases.push_back(k);
  }
  return cases;
}

// Exact: the class makes the same comparisons and the one subtraction transformers makes, on the same
// doubles, and the best is a copy of a metric (never NaN, so EXPECT_EQ works).
void expect_state(const EarlyStopping& s, bool stop, const Evaluation& want, const std::string& where) {
  EXPECT_EQ(stop, want.stop) << where;
  EXPECT_EQ(s.stopped(), want.stop) << where;
  EXPECT_EQ(s.bad_evaluations(), want.bad_evaluations) << where;
  EXPECT_EQ(s.best(), want.best) << where;
  EXPECT_EQ(s.improved(), want.improved) << where;
}

TEST(EarlyStopping, MatchesTransformers) {
  const std::vector<Case> cases = load_cases();
  ASSERT_EQ(cases.size(), 23u);  // make_early_stopping_cases.py writes 23 cases
  int stopped_cases = 0;
  for (const Case& c : cases) {
    if (!c.bertrain_metric.empty()) {
      // --metric-for-best's direction is TrainingArguments' default for the same metric.
      EXPECT_EQ(parse_metric_for_best(c.bertrain_metric).greater_is_better, c.greater_is_better) << c.name;
    }
    EarlyStopping s(c.patience, c.threshold, c.greater_is_better);
    for (std::size_t i = 0; i < c.evaluations.size(); ++i) {
      const bool stop = s.update(c.evaluations[i].metric);
      EXPECT_EQ(s.evaluations(), static_cast<int64_t>(i + 1));
      expect_state(s, stop, c.evaluations[i], c.name + " evaluation " + std::to_string(i + 1));
    }
    stopped_cases += s.stopped();
  }
  // The fixture has both outcomes (a test that only ever saw one could not tell them apart).
  EXPECT_GT(stopped_cases, 10);
  EXPECT_LT(stopped_cases, static_cast<int>(cases.size()));
}

// Stopping after k evaluations, saving through text (as a checkpoint does), restoring and continuing
// gives exactly the uninterrupted run, for every case and every k.
TEST(EarlyStopping, SaveRestoreContinuesExactly) {
  for (const Case& c : load_cases()) {
    for (std::size_t k = 0; k <= c.evaluations.size(); ++k) {
      EarlyStopping first(c.patience, c.threshold, c.greater_is_better);
      for (std::size_t i = 0; i < k; ++i) first.update(c.evaluations[i].metric);
      EarlyStopping resumed = EarlyStopping::from_json(json::parse(first.to_json().dump()));
      EXPECT_EQ(resumed.to_json(), first.to_json()) << c.name << " k=" << k;
      EXPECT_EQ(resumed.evaluations(), static_cast<int64_t>(k));
      for (std::size_t i = k; i < c.evaluations.size(); ++i) {
        const bool stop = resumed.update(c.evaluations[i].metric);
        expect_state(resumed, stop, c.evaluations[i],
                     c.name + " resumed after " + std::to_string(k) + ", evaluation " + std::to_string(i + 1));
      }
    }
  }
}

TEST(EarlyStopping, StartingState) {
  const EarlyStopping loss(3, 0.0, false);
  EXPECT_EQ(loss.best(), kInf);
  EXPECT_EQ(loss.bad_evaluations(), 0);
  EXPECT_EQ(loss.evaluations(), 0);
  EXPECT_FALSE(loss.stopped());
  EXPECT_FALSE(loss.improved());
  EXPECT_EQ(EarlyStopping(3, 0.0, true).best(), -kInf);
  const json j = loss.to_json();
  EXPECT_EQ(j["best"], "inf");
  EXPECT_EQ(EarlyStopping(1, 0.5, true).to_json()["best"], "-inf");
  EXPECT_EQ(EarlyStopping::from_json(json::parse(j.dump())).best(), kInf);
}

// bertrain's patience 0 turns early stopping off (transformers would stop after the first evaluation),
// while the best is still tracked for best/.
TEST(EarlyStopping, PatienceZeroNeverStops) {
  EarlyStopping s(0, 0.0, false);
  EXPECT_FALSE(s.update(0.5));
  EXPECT_TRUE(s.improved());
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(s.update(0.6 + i));
  EXPECT_FALSE(s.update(kNaN));
  EXPECT_FALSE(s.stopped());
  EXPECT_EQ(s.bad_evaluations(), 101);
  EXPECT_EQ(s.best(), 0.5);
  EXPECT_FALSE(s.improved());
  EXPECT_FALSE(EarlyStopping::from_json(s.to_json()).stopped());
}

// The callback-before-best order spelled out by hand: threshold 0.1, lower is better, patience 2.
TEST(EarlyStopping, SmallImprovementsMoveTheBestButCountAsBad) {
  EarlyStopping s(2, 0.1, false);
  EXPECT_FALSE(s.update(1.0));  // first: counter 0, best 1.0
  EXPECT_FALSE(s.update(0.95)); // better by 0.05 <= 0.1: bad (1), yet the new best is 0.95
  EXPECT_EQ(s.bad_evaluations(), 1);
  EXPECT_EQ(s.best(), 0.95);
  EXPECT_TRUE(s.improved());
  EXPECT_FALSE(s.update(0.8)); // 0.15 below 0.95 (but only 0.2 below the old 1.0): counter reset
  EXPECT_EQ(s.bad_evaluations(), 0);
  EXPECT_FALSE(s.update(0.75));
  EXPECT_TRUE(s.update(0.7));  // two small improvements in a row: stop, with best 0.7
  EXPECT_EQ(s.best(), 0.7);
  EXPECT_TRUE(s.improved());
  EXPECT_TRUE(s.update(0.1));  // stays stopped; the counter and the best still move
  EXPECT_EQ(s.bad_evaluations(), 0);
  EXPECT_EQ(s.best(), 0.1);
}

TEST(EarlyStopping, NaNIsNeverBetter) {
  EarlyStopping s(2, 0.0, true);
  EXPECT_FALSE(s.update(kNaN));  // the first evaluation resets the counter, but NaN is not a best
  EXPECT_EQ(s.bad_evaluations(), 0);
  EXPECT_EQ(s.best(), -kInf);
  EXPECT_FALSE(s.improved());
  EXPECT_FALSE(s.update(0.5));
  EXPECT_EQ(s.best(), 0.5);
  EXPECT_FALSE(s.update(kNaN));
  EXPECT_TRUE(s.update(kNaN));
  EXPECT_EQ(s.best(), 0.5);
}

TEST(EarlyStopping, MetricNames) {
  const BestMetric loss = parse_metric_for_best("val_loss");
  EXPECT_EQ(loss.name, "val_loss");
  EXPECT_FALSE(loss.greater_is_better);
  const BestMetric f1 = parse_metric_for_best("f1");
  EXPECT_EQ(f1.name, "f1");
  EXPECT_TRUE(f1.greater_is_better);
  const BestMetric accuracy = parse_metric_for_best("accuracy");
  EXPECT_EQ(accuracy.name, "accuracy");
  EXPECT_TRUE(accuracy.greater_is_better);
  // metrics.jsonl's names for the same two (tune --metric's).
  for (const char* name : {"val_f1", "val_accuracy"}) {
    const BestMetric m = parse_metric_for_best(name);
    EXPECT_EQ("val_" + m.name, name);
    EXPECT_TRUE(m.greater_is_better);
  }
}

using testing::expect_error;

TEST(EarlyStopping, ArgumentErrors) {
  expect_error([] { parse_metric_for_best("loss"); },
               {"--metric-for-best", "val_loss, f1 or accuracy", "\"loss\""});
  expect_error([] { parse_metric_for_best("F1"); }, {"--metric-for-best", "\"F1\""});
  expect_error([] { parse_metric_for_best("eval_f1"); }, {"--metric-for-best"});
  expect_error([] { EarlyStopping(-1, 0.0, false); }, {"patience", ">= 0", "-1"});
  expect_error([] { EarlyStopping(1, -0.5, false); }, {"threshold", ">= 0"});
  expect_error([] { EarlyStopping(1, kNaN, false); }, {"threshold"});
  expect_error([] { EarlyStopping(1, kInf, true); }, {"threshold", "finite"});
}

TEST(EarlyStopping, StateErrors) {
  EarlyStopping s(2, 0.01, false);
  s.update(0.5);
  s.update(0.6);
  const json good = s.to_json();  // evaluations 2, bad 1, best 0.5
  ASSERT_NO_THROW(EarlyStopping::from_json(good));
  const auto with = [&good](const char* key, json value) {
    return [=] {
      json j = good;
      j[key] = value;
      EarlyStopping::from_json(j);
    };
  };
  expect_error([] { EarlyStopping::from_json(json::array()); }, {"early stopping state", "JSON object"});
  for (const char* key :
       {"patience", "threshold", "greater_is_better", "evaluations", "bad_evaluations", "best", "improved", "stopped"}) {
    json j = good;
    j.erase(key);
    expect_error([j] { EarlyStopping::from_json(j); }, {"missing field", key});
  }
  expect_error(with("patience", -1), {"patience", "out of range"});
  expect_error(with("patience", 1.5), {"patience", "integer"});
  expect_error(with("threshold", -0.1), {"threshold"});
  expect_error(with("threshold", "0.1"), {"threshold", "number"});
  expect_error(with("greater_is_better", 1), {"greater_is_better", "true or false"});
  expect_error(with("evaluations", -1), {"evaluations", "out of range"});
  expect_error(with("bad_evaluations", 2), {"bad_evaluations", "out of range"});  // > evaluations - 1
  expect_error(with("best", "nan"), {"best"});
  expect_error(with("best", nullptr), {"best", "number"});
  expect_error(with("improved", "yes"), {"improved"});
  expect_error(with("stopped", true), {"stopped", "patience"});  // 2 evaluations cannot stop with patience 2
  json reached = good;
  reached["evaluations"] = 5;
  reached["bad_evaluations"] = 2;
  expect_error([reached] { EarlyStopping::from_json(reached); }, {"bad_evaluations", "stopped"});
  json fresh = EarlyStopping(2, 0.0, false).to_json();
  fresh["best"] = 0.3;
  expect_error([fresh] { EarlyStopping::from_json(fresh); }, {"evaluations", "0"});
}

}  // namespace
}  // namespace bertrain

// Training's validation metrics (engine/validation_metrics.h) against scikit-learn's accuracy_score and f1_score on
// the same logits and targets (tests/fixtures/validation_metrics.json, made by
// tests/reference/make_validation_metric_cases.py), the rows split over accumulators whose counts are summed as
// ranks sum them, the prediction rules at their edges, and the errors.
#include "engine/validation_metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "tests/expect_error.h"

namespace bertrain {
namespace {

using nlohmann::json;

// The averages are sums in numpy's pairwise order, which label_averages reproduces, but numpy may change that
// order: compared with a relative tolerance (a 0 must be exactly 0). Accuracy and micro F1 are single divisions.
constexpr double kRelTol = 1e-12;

struct Case {
  std::string name;
  bool multi_label = false;
  int num_labels = 0, rows = 0;
  std::vector<float> logits, targets;  // [rows, num_labels]
  ValidationMetrics want;
  int labels_averaged = 0;
  double f1_macro_every_label = NAN;  // single-label: macro over every class (labels=range(C))
};

std::vector<float> matrix(const json& rows, int columns) {
  std::vector<float> out;
  for (const json& row : rows) {
    EXPECT_EQ(row.size(), static_cast<std::size_t>(columns));
    // Multiples of 1/64 (logits) or 0/1 (targets): exact in float.
    for (const json& v : row) out.push_back(static_cast<float>(v.get<double>()));
  }
  return out;
}

std::vector<Case> fixture_cases() {
  const std::string path = std::string(BERTRAIN_FIXTURES_DIR) + "/validation_metrics.json";
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot open " << path;
  std::vector<Case> cases;
  for (const json& c : json::parse(in)) {
    Case k;
    k.name = c.at("name").get<std::string>();
    k.multi_label = c.at("multi_label").get<bool>();
    k.num_labels = c.at("num_labels").get<int>();
    k.rows = static_cast<int>(c.at("logits").size());
    k.logits = matrix(c.at("logits"), k.num_labels);
    k.targets = matrix(c.at("targets"), k.num_labels);
    k.want = {c.at("accuracy").get<double>(), c.at("f1_weighted").get<double>(), c.at("f1_micro").get<double>(),
              c.at("f1_macro").get<double>()};
    k.labels_averaged = c.at("labels_averaged").get<int>();
    if (c.contains("f1_macro_every_label")) k.f1_macro_every_label = c.at("f1_macro_every_label").get<double>();
    cases.push_back(std::move(k));
  }
  return cases;
}

ValidationMetrics metrics_of(const Case& c) {
  ValidationCounts counts(c.num_labels, c.multi_label);
  counts.add(c.logits.data(), c.targets.data(), c.rows);
  return counts.metrics();
}

void expect_near(double got, double want, const std::string& where) {
  EXPECT_NEAR(got, want, kRelTol * std::fabs(want)) << where;
}

void expect_same(const ValidationMetrics& got, const ValidationMetrics& want, const std::string& where) {
  EXPECT_EQ(got.accuracy, want.accuracy) << where << " accuracy";
  EXPECT_EQ(got.f1_weighted, want.f1_weighted) << where << " f1_weighted";
  EXPECT_EQ(got.f1_micro, want.f1_micro) << where << " f1_micro";
  EXPECT_EQ(got.f1_macro, want.f1_macro) << where << " f1_macro";
}

TEST(ValidationMetrics, MatchScikitLearnOnTheFixtures) {
  const std::vector<Case> cases = fixture_cases();
  ASSERT_EQ(cases.size(), 21u);  // make_validation_metric_cases.py writes 21 cases
  int left_out = 0, multi = 0, bit_identical = 0;
  for (const Case& c : cases) {
    const ValidationMetrics got = metrics_of(c);
    EXPECT_EQ(got.accuracy, c.want.accuracy) << c.name << " accuracy";
    EXPECT_EQ(got.f1_micro, c.want.f1_micro) << c.name << " f1_micro";
    expect_near(got.f1_weighted, c.want.f1_weighted, c.name + " f1_weighted");
    expect_near(got.f1_macro, c.want.f1_macro, c.name + " f1_macro");
    bit_identical += (got.f1_weighted == c.want.f1_weighted) + (got.f1_macro == c.want.f1_macro);
    multi += c.multi_label;
    if (!c.multi_label && c.labels_averaged < c.num_labels) {
      // A class neither true nor predicted is out of sklearn's macro mean; averaged over every class it would
      // count as a 0.
      ++left_out;
      expect_near(c.f1_macro_every_label, c.want.f1_macro * c.labels_averaged / c.num_labels, c.name + " every label");
    }
  }
  EXPECT_EQ(multi, 9);
  EXPECT_GE(left_out, 4);  // the fixture exercises sklearn's label set
  std::cout << "[          ] " << bit_identical << " of " << 2 * cases.size()
            << " weighted/macro F1 values are bit-identical to scikit-learn's\n";
}

// Data parallelism: each rank counts its rows, the counts are summed, any rank computes the metrics.
TEST(ValidationMetrics, RowsSplitOverAccumulatorsGiveTheSameMetricsOnceSummed) {
  for (const Case& c : fixture_cases()) {
    const ValidationMetrics whole = metrics_of(c);
    const std::size_t width = static_cast<std::size_t>(c.num_labels);
    for (int split : {0, 1, c.rows / 3, c.rows - 1, c.rows}) {
      if (split < 0) continue;
      ValidationCounts first(c.num_labels, c.multi_label), second(c.num_labels, c.multi_label);
      // The second share arrives in batches of up to 7 rows, as a validation loop adds them.
      first.add(c.logits.data(), c.targets.data(), split);
      for (int r = split; r < c.rows; r += 7) {
        const int n = std::min(7, c.rows - r);
        second.add(c.logits.data() + r * width, c.targets.data() + r * width, n);
      }
      std::vector<double>& sum = first.counts();
      ASSERT_EQ(sum.size(), 3 * width + 2);
      for (std::size_t k = 0; k < sum.size(); ++k) sum[k] += second.counts()[k];  // allreduce_sum of two ranks
      expect_same(first.metrics(), whole, c.name + " split at " + std::to_string(split));
    }
  }
}

TEST(ValidationMetrics, CountsAreLaidOutPerLabelThenRows) {
  // Three classes; rows: true 0 predicted 0, true 1 predicted 0, true 0 predicted 2.
  const std::vector<float> logits = {2, 1, 0, 3, 1, 0, 0, 1, 5}, targets = {1, 0, 0, 0, 1, 0, 1, 0, 0};
  ValidationCounts counts(3, false);
  counts.add(logits.data(), targets.data(), 3);
  EXPECT_EQ(counts.counts(), (std::vector<double>{1, 2, 2, 0, 1, 0, 0, 0, 1, 3, 1}));
  counts.clear();
  EXPECT_EQ(counts.counts(), std::vector<double>(11, 0.0));
  counts.add(logits.data(), targets.data(), 1);
  EXPECT_EQ(counts.metrics().accuracy, 1.0);
}

TEST(ValidationMetrics, ASingleLabelClassNoRowHasIsLeftOutOfTheMacroMean) {
  // Four classes, class 3 never true and never predicted. Class 0: tp 2, true 2, pred 3 (F1 0.8); class 1: tp 0,
  // true 1, pred 0 (F1 0); class 2: tp 1, true 1, pred 1 (F1 1). Macro over the three classes sklearn sees.
  const std::vector<float> targets = {1, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
  const std::vector<float> logits = {3, 0, 0, 0, 3, 0, 0, 0, 3, 1, 0, 0, 0, 0, 3, 0};
  ValidationCounts counts(4, false);
  counts.add(logits.data(), targets.data(), 4);
  const ValidationMetrics m = counts.metrics();
  EXPECT_EQ(m.accuracy, 0.75);
  EXPECT_EQ(m.f1_micro, 0.75);
  EXPECT_DOUBLE_EQ(m.f1_macro, (0.8 + 0.0 + 1.0) / 3);
  EXPECT_DOUBLE_EQ(m.f1_weighted, (0.8 * 2 + 0.0 * 1 + 1.0 * 1) / 4);
  // Multi-label keeps every column: the same targets as indicator rows, predicted perfectly, average over four
  // labels, label 3 (never true, never predicted) counting as F1 0.
  std::vector<float> exact(targets.size());
  for (std::size_t k = 0; k < targets.size(); ++k) exact[k] = 2 * targets[k] - 1;
  ValidationCounts multi(4, true);
  multi.add(exact.data(), targets.data(), 4);
  const ValidationMetrics mm = multi.metrics();
  EXPECT_EQ(mm.accuracy, 1.0);
  EXPECT_EQ(mm.f1_micro, 1.0);
  EXPECT_EQ(mm.f1_weighted, 1.0);
  EXPECT_EQ(mm.f1_macro, 0.75);
}

// The labels a model never gets right: class 1 above (true once, never predicted); class 3 has no row, so it is no
// such label. The warning names it with its rows, the two F1 averages, and the advice unless --class-weights is on.
TEST(ValidationMetrics, LabelsNeverPredictedRightAreNamed) {
  const std::vector<float> targets = {1, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
  const std::vector<float> logits = {3, 0, 0, 0, 3, 0, 0, 0, 3, 1, 0, 0, 0, 0, 3, 0};
  ValidationCounts counts(4, false);
  counts.add(logits.data(), targets.data(), 4);
  EXPECT_EQ(counts.labels_never_predicted_right(), (std::vector<std::pair<int, long>>{{1, 1}}));
  const std::vector<std::string> names{"cv", "mlops", "nlp", "other"};
  EXPECT_EQ(unlearned_labels_warning(counts, counts.metrics(), names, false),
            "the best model predicts no validation row of label 'mlops' (1 row) right: F1 0 (val_f1 0.6500 weights "
            "labels by their rows; their mean, val_f1_macro, is 0.6000); --class-weights weighs the loss by how rare "
            "each label is");
  EXPECT_EQ(unlearned_labels_warning(counts, counts.metrics(), names, true).find("--class-weights"), std::string::npos);
  ValidationCounts right(4, false);
  right.add(targets.data(), targets.data(), 4);
  EXPECT_EQ(unlearned_labels_warning(right, right.metrics(), names, false), "");
}

TEST(ValidationMetrics, AMultiLabelLogitOfAboutZeroIsPredictedAsEvaluatePredictsIt) {
  // evaluate and predict: a label is predicted when its float sigmoid is >= 0.5. sigmoid(0) = 0.5, and a logit a
  // little below 0 still rounds to 0.5; -1e-3 does not.
  const std::vector<float> logits = {0.0f, -1e-9f, -1e-3f, 1e-3f};
  const std::vector<float> targets = {1, 1, 0, 1};
  ValidationCounts counts(4, true);
  counts.add(logits.data(), targets.data(), 1);
  const std::vector<double>& k = counts.counts();
  EXPECT_EQ(k[0 * 3 + 2], 1) << "logit 0";
  EXPECT_EQ(k[1 * 3 + 2], 1) << "logit -1e-9";
  EXPECT_EQ(k[2 * 3 + 2], 0) << "logit -1e-3";
  EXPECT_EQ(k[3 * 3 + 2], 1) << "logit 1e-3";
  EXPECT_EQ(counts.metrics().accuracy, 1.0);
}

TEST(ValidationMetrics, SingleLabelTiesGoToTheFirstClass) {
  const std::vector<float> logits = {0.5f, 0.5f, 0.5f}, targets = {0, 1, 0};
  ValidationCounts counts(3, false);
  counts.add(logits.data(), targets.data(), 1);
  EXPECT_EQ(counts.counts()[0 * 3 + 2], 1);  // predicted class 0
  EXPECT_EQ(counts.metrics().accuracy, 0.0);
}

using testing::expect_error;

TEST(ValidationMetrics, RejectsNoRowsAndCountsThatAreNotCounts) {
  expect_error([] { ValidationCounts(0, false); }, "num_labels must be >= 1, got 0");
  ValidationCounts empty(3, false);
  empty.add(nullptr, nullptr, 0);
  expect_error([&] { empty.metrics(); }, "no rows were counted");
  const std::vector<float> logits = {2, 1, 0, 3, 1, 0}, targets = {1, 0, 0, 0, 1, 0};
  ValidationCounts counts(3, false);
  counts.add(logits.data(), targets.data(), 2);
  // Counts averaged instead of summed over ranks are no longer whole numbers.
  for (double& v : counts.counts()) v /= 4;
  expect_error([&] { counts.metrics(); }, "the number of rows is 0.5, not a count");
  counts.clear();
  counts.add(logits.data(), targets.data(), 2);
  counts.counts()[3 * 3] += 1;  // a row counted that no class has
  expect_error([&] { counts.metrics(); }, "3 single-label rows with 2 true and 2 predicted classes");
  counts.clear();
  counts.add(logits.data(), targets.data(), 2);
  counts.counts()[0] += 2;  // more true positives than true rows
  expect_error([&] { counts.metrics(); }, "label 0 has 3 true positives, 1 true and 2 predicted rows");
}

}  // namespace
}  // namespace bertrain

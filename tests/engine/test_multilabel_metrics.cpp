// Multi-label metrics against scikit-learn's precision_recall_fscore_support on indicator matrices: every
// number of every case of tests/fixtures/multilabel_metrics.json (tests/reference/
// make_multilabel_metric_cases.py, scikit-learn 1.9.1), hand-computed cases of the zero-division rules,
// and argument errors.
#include "engine/multilabel_metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
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

// Per-label and micro values are single divisions of the same integers as in sklearn: compared exactly.
// The macro/weighted/samples averages are sums in numpy's pairwise order, which multilabel_metrics
// reproduces (so they come out bit-identical with numpy 2.4), but numpy is free to change its summation
// order: they are compared with a relative tolerance (a 0 must be exactly 0).
constexpr double kAverageRelTol = 1e-12;

void expect_metrics(const ClassMetrics& got, const ClassMetrics& want, bool exact, const std::string& where) {
  const auto check = [&](double g, double w, const char* what) {
    if (exact) {
      EXPECT_EQ(g, w) << where << " " << what;
    } else {
      EXPECT_NEAR(g, w, kAverageRelTol * std::fabs(w)) << where << " " << what;
    }
  };
  check(got.precision, want.precision, "precision");
  check(got.recall, want.recall, "recall");
  check(got.f1, want.f1, "f1");
  EXPECT_EQ(got.support, want.support) << where << " support";
}

std::vector<uint8_t> flatten(const std::vector<std::vector<int>>& rows) {
  std::vector<uint8_t> out;
  for (const auto& row : rows) {
    for (int v : row) out.push_back(static_cast<uint8_t>(v));
  }
  return out;
}

MultiLabelMetrics compute(const std::vector<std::vector<int>>& y_true, const std::vector<std::vector<int>>& y_pred) {
  return multilabel_metrics(flatten(y_true), flatten(y_pred), static_cast<int>(y_true.size()),
                            static_cast<int>(y_true.at(0).size()));
}

ClassMetrics from_json(const json& j) {
  ClassMetrics m;
  m.precision = j.at("precision").get<double>();
  m.recall = j.at("recall").get<double>();
  m.f1 = j.at("f1").get<double>();
  m.support = j.at("support").get<long>();
  return m;
}

std::vector<uint8_t> matrix_from_json(const json& rows, int num_samples, int num_labels) {
  EXPECT_EQ(rows.size(), static_cast<std::size_t>(num_samples));
  std::vector<uint8_t> out;
  for (const json& row : rows) {
    EXPECT_EQ(row.size(), static_cast<std::size_t>(num_labels));
    for (const json& v : row) out.push_back(static_cast<uint8_t>(v.get<int>()));
  }
  return out;
}

TEST(MultiLabelMetrics, MatchesSklearnFixtures) {
  const std::string path = std::string(BERTRAIN_FIXTURES_DIR) + "/multilabel_metrics.json";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot open " << path;
  const json cases = json::parse(in);
  ASSERT_TRUE(cases.is_array());
  ASSERT_EQ(cases.size(), 16u);  // make_multilabel_metric_cases.py writes 16 cases
  int averages = 0;
  int bit_identical = 0;
  for (const json& c : cases) {
    const std::string name = c.at("name").get<std::string>();
    const int n = c.at("num_samples").get<int>();
    const int l = c.at("num_labels").get<int>();
    const MultiLabelMetrics got = multilabel_metrics(matrix_from_json(c.at("y_true"), n, l),
                                                     matrix_from_json(c.at("y_pred"), n, l), n, l);
    const json& per_label = c.at("per_label");
    ASSERT_EQ(got.per_label.size(), per_label.size()) << name;
    ASSERT_EQ(got.per_label.size(), static_cast<std::size_t>(l)) << name;
    for (std::size_t k = 0; k < per_label.size(); ++k) {
      expect_metrics(got.per_label[k], from_json(per_label[k]), true, name + " label " + std::to_string(k));
    }
    expect_metrics(got.micro, from_json(c.at("micro")), true, name + " micro");
    const std::pair<const char*, const ClassMetrics*> avgs[] = {
        {"macro", &got.macro}, {"weighted", &got.weighted}, {"samples", &got.samples}};
    for (const auto& [avg, m] : avgs) {
      const ClassMetrics want = from_json(c.at(avg));
      expect_metrics(*m, want, false, name + " " + avg);
      averages += 3;
      bit_identical += (m->precision == want.precision) + (m->recall == want.recall) + (m->f1 == want.f1);
    }
  }
  // Informational: how many averages also match bit for bit (all of them with numpy 2.4's pairwise sums).
  std::cout << "[          ] " << bit_identical << " of " << averages
            << " macro/weighted/samples values are bit-identical to scikit-learn's\n";
}

TEST(MultiLabelMetrics, HandComputed) {
  // Per label (tp, true, pred): label 0 (1, 2, 2), label 1 (2, 2, 2), label 2 (0, 1, 1).
  // Per sample (tp, true, pred): (1, 2, 1), (1, 1, 2), (1, 2, 1), (0, 0, 1).
  const MultiLabelMetrics m = compute({{1, 0, 1}, {0, 1, 0}, {1, 1, 0}, {0, 0, 0}},
                                      {{1, 0, 0}, {0, 1, 1}, {0, 1, 0}, {1, 0, 0}});
  ASSERT_EQ(m.per_label.size(), 3u);
  expect_metrics(m.per_label[0], {0.5, 0.5, 0.5, 2}, true, "label 0");
  expect_metrics(m.per_label[1], {1.0, 1.0, 1.0, 2}, true, "label 1");
  expect_metrics(m.per_label[2], {0.0, 0.0, 0.0, 1}, true, "label 2");    // tp 0: F1 = 0/2, no 0/0
  expect_metrics(m.micro, {0.6, 0.6, 0.6, 5}, true, "micro");             // 3/5 each
  expect_metrics(m.macro, {0.5, 0.5, 0.5, 5}, true, "macro");             // (0.5 + 1 + 0) / 3
  expect_metrics(m.weighted, {0.6, 0.6, 0.6, 5}, true, "weighted");       // (0.5·2 + 1·2 + 0·1) / 5
  // Samples: P (1 + 0.5 + 1 + 0) / 4, R (0.5 + 1 + 0.5 + 0/0→0) / 4, F1 (2/3 + 2/3 + 2/3 + 0) / 4.
  expect_metrics(m.samples, {0.625, 0.5, 0.5, 5}, false, "samples");
}

TEST(MultiLabelMetrics, LabelNeverTrueNorPredictedCountsAsZeroInMacro) {
  const MultiLabelMetrics m = compute({{1, 0}, {1, 0}}, {{1, 0}, {1, 0}});
  expect_metrics(m.per_label[0], {1.0, 1.0, 1.0, 2}, true, "label 0");
  expect_metrics(m.per_label[1], {0.0, 0.0, 0.0, 0}, true, "label 1");
  expect_metrics(m.macro, {0.5, 0.5, 0.5, 2}, true, "macro");  // not 1: the unused label is in the mean
  expect_metrics(m.weighted, {1.0, 1.0, 1.0, 2}, true, "weighted");
  expect_metrics(m.micro, {1.0, 1.0, 1.0, 2}, true, "micro");
  expect_metrics(m.samples, {1.0, 1.0, 1.0, 2}, true, "samples");
}

TEST(MultiLabelMetrics, LabelPredictedButNeverTrue) {
  // Label 1: tp 0, true 0, pred 1: precision 0/1, recall 0/0 -> 0, F1 0/1; no weight in "weighted".
  const MultiLabelMetrics m = compute({{1, 0}, {1, 0}}, {{1, 1}, {0, 0}});
  expect_metrics(m.per_label[1], {0.0, 0.0, 0.0, 0}, true, "label 1");
  expect_metrics(m.per_label[0], {1.0, 0.5, 2.0 / 3.0, 2}, true, "label 0");
  expect_metrics(m.weighted, m.per_label[0], true, "weighted");
  expect_metrics(m.micro, {0.5, 0.5, 0.5, 2}, true, "micro");  // tp 1, true 2, pred 2
}

TEST(MultiLabelMetrics, EmptySamplesCountAsZeroInSamplesAverage) {
  // Sample 0: nothing true, nothing predicted: 0/0 everywhere -> 0 (zero_division="warn"), still counted.
  // Sample 1: nothing true, label 0 predicted: precision 0/1, recall 0/0 -> 0, F1 0/1.
  // Sample 2: label 1 true, nothing predicted: precision 0/0 -> 0, recall 0/1, F1 0/1.
  // Sample 3: perfect.
  const MultiLabelMetrics m = compute({{0, 0}, {0, 0}, {0, 1}, {1, 1}}, {{0, 0}, {1, 0}, {0, 0}, {1, 1}});
  expect_metrics(m.samples, {0.25, 0.25, 0.25, 3}, true, "samples");
  // A perfect prediction with an empty row: samples average < 1, every other average is 1.
  const MultiLabelMetrics p = compute({{1, 0}, {0, 0}}, {{1, 0}, {0, 0}});
  expect_metrics(p.samples, {0.5, 0.5, 0.5, 1}, true, "perfect samples");
  expect_metrics(p.micro, {1.0, 1.0, 1.0, 1}, true, "perfect micro");
  expect_metrics(p.weighted, {1.0, 1.0, 1.0, 1}, true, "perfect weighted");
  expect_metrics(p.macro, {0.5, 0.5, 0.5, 1}, true, "perfect macro");  // label 1 unused
}

TEST(MultiLabelMetrics, NoTrueLabelsAtAll) {
  // Total support 0: numpy's weighted average would divide by 0; sklearn falls back to the plain mean (0).
  const MultiLabelMetrics m = compute({{0, 0}, {0, 0}, {0, 0}}, {{1, 0}, {0, 0}, {1, 1}});
  for (const ClassMetrics* avg : {&m.micro, &m.macro, &m.weighted, &m.samples}) {
    expect_metrics(*avg, {0.0, 0.0, 0.0, 0}, true, "average");
    EXPECT_FALSE(std::isnan(avg->precision) || std::isnan(avg->recall) || std::isnan(avg->f1));
  }
  // Nothing predicted either.
  const MultiLabelMetrics z = compute({{0, 0, 0}}, {{0, 0, 0}});
  for (const ClassMetrics& c : z.per_label) expect_metrics(c, {0.0, 0.0, 0.0, 0}, true, "label");
  expect_metrics(z.weighted, {0.0, 0.0, 0.0, 0}, true, "weighted");
  expect_metrics(z.samples, {0.0, 0.0, 0.0, 0}, true, "samples");
}

TEST(MultiLabelMetrics, SingleLabelAndSingleSample) {
  const MultiLabelMetrics one = compute({{1}, {0}, {1}, {1}}, {{1}, {1}, {0}, {1}});  // tp 2, true 3, pred 3
  ASSERT_EQ(one.per_label.size(), 1u);
  const ClassMetrics want = {2.0 / 3.0, 2.0 / 3.0, 2.0 / 3.0, 3};
  expect_metrics(one.per_label[0], want, true, "label 0");
  expect_metrics(one.micro, want, true, "micro");
  expect_metrics(one.macro, want, true, "macro");
  expect_metrics(one.weighted, want, true, "weighted");
  expect_metrics(one.samples, {0.5, 0.5, 0.5, 3}, true, "samples");  // samples: 1, 0 (0/1, 0/0), 0 (0/0, 0/1), 1

  const MultiLabelMetrics row = compute({{1, 0, 1}}, {{1, 1, 0}});  // tp 1, true 2, pred 2
  expect_metrics(row.samples, {0.5, 0.5, 0.5, 2}, true, "one sample");
  expect_metrics(row.micro, {0.5, 0.5, 0.5, 2}, true, "one sample micro");
}

using testing::expect_error;

TEST(MultiLabelMetrics, RejectsInvalidArguments) {
  const std::vector<uint8_t> six = {1, 0, 0, 1, 1, 1};
  const std::vector<uint8_t> four = {1, 0, 0, 1};
  expect_error([&] { multilabel_metrics(six, six, 0, 3); }, "num_samples must be >= 1, got 0");
  expect_error([&] { multilabel_metrics(six, six, -2, 3); }, "num_samples must be >= 1, got -2");
  expect_error([&] { multilabel_metrics(six, six, 2, 0); }, "num_labels must be >= 1, got 0");
  expect_error([&] { multilabel_metrics({}, {}, 0, 0); }, "num_samples must be >= 1");
  expect_error([&] { multilabel_metrics(four, six, 2, 3); }, "y_true has 4 entries, expected 2 samples x 3 labels = 6");
  expect_error([&] { multilabel_metrics(six, four, 2, 3); }, "y_pred has 4 entries, expected 2 samples x 3 labels = 6");
  expect_error([&] { multilabel_metrics(six, six, 3, 3); }, "y_true has 6 entries, expected 3 samples x 3 labels = 9");
  expect_error([&] { multilabel_metrics({1, 0, 0, 1, 2, 1}, six, 2, 3); }, "y_true[sample 1, label 1] = 2 is not 0 or 1");
  expect_error([&] { multilabel_metrics(six, {1, 0, 255, 1, 1, 1}, 3, 2); }, "y_pred[sample 1, label 0] = 255 is not 0 or 1");
  EXPECT_NO_THROW(multilabel_metrics(six, six, 3, 2));
  EXPECT_NO_THROW(multilabel_metrics(six, six, 6, 1));
}

}  // namespace
}  // namespace bertrain

// ServeMetrics, bertrain serve's /metrics: request and batch counts, cumulative histogram buckets, unknown paths
// and methods folded into "other", label escaping, the rows-per-second window sliding, and the text itself read
// back by a small parser of the Prometheus text format 0.0.4 (every sample in a declared family, no duplicate
// series, histograms cumulative up to +Inf == _count), which is itself shown to reject broken texts.
// tests/reference/check_prometheus_metrics.py checks the same text with prometheus_client's parser.
#include "tools/serve/serve_metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace bertrain {
namespace {

const std::vector<std::string> kRoutes = {"/", "/predict", "/predict/", "/v1/predict", "/metrics", "/healthz"};

// ---- A small reader of the text format ----------------------------------------------------------------------

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;  // unescaped
  double value = 0.0;
};

struct Exposition {
  std::map<std::string, std::string> types;  // family -> counter | gauge | histogram | ...
  std::set<std::string> helps;
  std::vector<Sample> samples;
  std::vector<std::string> problems;  // empty when the text is valid
};

bool is_name_char(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' || (!first && c >= '0' && c <= '9');
}

double parse_value(const std::string& text, bool* ok) {
  *ok = true;
  if (text == "+Inf") return std::numeric_limits<double>::infinity();
  if (text == "-Inf") return -std::numeric_limits<double>::infinity();
  if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  *ok = !text.empty() && *end == '\0';
  return value;
}

// Reads one sample line: name{label="value",...} value. Returns false (with a reason) when it is not one.
bool parse_sample(const std::string& line, Sample* sample, std::string* why) {
  std::size_t i = 0;
  while (i < line.size() && is_name_char(line[i], i == 0)) ++i;
  if (i == 0) return *why = "no metric name", false;
  sample->name = line.substr(0, i);
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      const std::size_t start = i;
      while (i < line.size() && is_name_char(line[i], i == start)) ++i;
      const std::string key = line.substr(start, i - start);
      if (key.empty() || i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') {
        return *why = "bad label", false;
      }
      i += 2;
      std::string value;
      while (i < line.size() && line[i] != '"') {
        if (line[i] == '\\') {
          if (i + 1 >= line.size()) return *why = "dangling escape", false;
          const char e = line[i + 1];
          if (e == '\\' || e == '"') {
            value += e;
          } else if (e == 'n') {
            value += '\n';
          } else {
            return *why = std::string("bad escape \\") + e, false;
          }
          i += 2;
        } else {
          value += line[i++];
        }
      }
      if (i >= line.size()) return *why = "unterminated label value", false;
      ++i;  // the closing quote
      if (!sample->labels.emplace(key, value).second) return *why = "label " + key + " twice", false;
      if (i < line.size() && line[i] == ',') ++i;
    }
    if (i >= line.size()) return *why = "unterminated labels", false;
    ++i;  // '}'
  }
  if (i >= line.size() || line[i] != ' ') return *why = "no value", false;
  bool ok = false;
  sample->value = parse_value(line.substr(i + 1), &ok);
  if (!ok) return *why = "bad value '" + line.substr(i + 1) + "'", false;
  return true;
}

// The sample names a family of each type may hold.
bool belongs(const std::string& sample, const std::string& family, const std::string& type) {
  if (type == "histogram") {
    return sample == family + "_bucket" || sample == family + "_sum" || sample == family + "_count";
  }
  if (type == "summary") return sample == family || sample == family + "_sum" || sample == family + "_count";
  return sample == family;
}

std::string series_key(const Sample& s) {
  std::string key = s.name + "{";
  for (const auto& [k, v] : s.labels) key += k + "=" + v + "\x1f";
  return key + "}";
}

Exposition parse_exposition(const std::string& text) {
  Exposition e;
  std::set<std::string> series;
  std::string family;  // the family of the last # TYPE line
  std::istringstream in(text);
  std::string line;
  int number = 0;
  if (!text.empty() && text.back() != '\n') e.problems.push_back("the text does not end with a line feed");
  while (std::getline(in, line)) {
    ++number;
    const std::string where = "line " + std::to_string(number) + ": ";
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      std::istringstream words(line.substr(7));
      std::string name, rest;
      words >> name;
      std::getline(words, rest);
      if (line[2] == 'H') {
        if (!e.helps.insert(name).second) e.problems.push_back(where + "second HELP for " + name);
        continue;
      }
      const std::string type = rest.empty() ? "" : rest.substr(1);
      if (type != "counter" && type != "gauge" && type != "histogram" && type != "summary" && type != "untyped") {
        e.problems.push_back(where + "bad type '" + type + "'");
      }
      if (!e.types.emplace(name, type).second) e.problems.push_back(where + "second TYPE for " + name);
      if (e.helps.count(name) == 0) e.problems.push_back(where + "TYPE without a HELP before it for " + name);
      family = name;
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    Sample sample;
    std::string why;
    if (!parse_sample(line, &sample, &why)) {
      e.problems.push_back(where + why + ": " + line);
      continue;
    }
    if (family.empty() || !belongs(sample.name, family, e.types[family])) {
      e.problems.push_back(where + sample.name + " outside its declared family (last TYPE: " + family + ")");
    }
    if (!series.insert(series_key(sample)).second) e.problems.push_back(where + "duplicate series: " + line);
    e.samples.push_back(sample);
  }
  // Histograms: per series, buckets in ascending le, cumulative, ending in +Inf equal to _count, with a _sum.
  for (const auto& [name, type] : e.types) {
    if (type != "histogram") continue;
    std::map<std::map<std::string, std::string>, std::vector<std::pair<double, double>>> buckets;  // labels-le
    std::map<std::map<std::string, std::string>, double> counts, sums;
    for (const Sample& s : e.samples) {
      std::map<std::string, std::string> labels = s.labels;
      if (s.name == name + "_bucket") {
        auto le = labels.find("le");
        if (le == labels.end()) {
          e.problems.push_back(name + ": a bucket without le");
          continue;
        }
        bool ok = false;
        const double bound = parse_value(le->second, &ok);
        if (!ok) e.problems.push_back(name + ": bad le '" + le->second + "'");
        labels.erase(le);
        buckets[labels].push_back({bound, s.value});
      } else if (s.name == name + "_count") {
        counts[labels] = s.value;
      } else if (s.name == name + "_sum") {
        sums[labels] = s.value;
      }
    }
    for (const auto& [labels, list] : buckets) {
      for (std::size_t i = 1; i < list.size(); ++i) {
        if (!(list[i].first > list[i - 1].first)) e.problems.push_back(name + ": le not ascending");
        if (list[i].second < list[i - 1].second) e.problems.push_back(name + ": buckets not cumulative");
      }
      if (list.empty() || !std::isinf(list.back().first)) e.problems.push_back(name + ": no +Inf bucket last");
      if (counts.count(labels) == 0 || sums.count(labels) == 0) {
        e.problems.push_back(name + ": a series without _count or _sum");
      } else if (!list.empty() && list.back().second != counts[labels]) {
        e.problems.push_back(name + ": +Inf bucket != _count");
      }
    }
    if (counts.size() != buckets.size() || sums.size() != buckets.size()) {
      e.problems.push_back(name + ": _count or _sum without buckets");
    }
  }
  for (const std::string& help : e.helps) {
    if (e.types.count(help) == 0) e.problems.push_back("HELP without TYPE for " + help);
  }
  return e;
}

std::string problems_of(const Exposition& e) {
  std::string out;
  for (const std::string& p : e.problems) out += p + "\n";
  return out;
}

// Parses `text` and fails the test on any format problem.
Exposition valid_exposition(const std::string& text) {
  Exposition e = parse_exposition(text);
  EXPECT_TRUE(e.problems.empty()) << problems_of(e) << "in:\n" << text;
  return e;
}

// The value of one series, NaN when it is not there.
double value_of(const Exposition& e, const std::string& name, const std::map<std::string, std::string>& labels = {}) {
  for (const Sample& s : e.samples) {
    if (s.name == name && s.labels == labels) return s.value;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

int series_count(const Exposition& e, const std::string& name) {
  int n = 0;
  for (const Sample& s : e.samples) n += s.name == name ? 1 : 0;
  return n;
}

// ---- The reader rejects broken texts (else the checks below could not fail) ---------------------------------

TEST(PrometheusReader, RejectsBrokenTexts) {
  const std::string head = "# HELP h A histogram.\n# TYPE h histogram\n";
  const std::string good = head + "h_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n";
  EXPECT_TRUE(parse_exposition(good).problems.empty()) << problems_of(parse_exposition(good));
  const std::vector<std::string> bad = {
      "x 1\n",                                                            // no family
      "# HELP c C.\n# TYPE c counter\nc 1\nc 2\n",                        // duplicate series
      "# HELP c C.\n# TYPE c counter\nc{a=\"1\"} 1\nd 2\n",               // outside its family
      "# HELP c C.\n# TYPE c counter\nc 1",                               // no final line feed
      "# TYPE c counter\nc 1\n",                                          // no HELP
      "# HELP c C.\n# TYPE c countr\nc 1\n",                              // bad type
      "# HELP c C.\n# TYPE c counter\nc{a=\"x\\ty\"} 1\n",                // bad escape
      "# HELP c C.\n# TYPE c counter\nc{a=\"x} 1\n",                      // unterminated
      "# HELP c C.\n# TYPE c counter\nc one\n",                           // bad value
      head + "h_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n",  // not cumulative
      head + "h_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 5\n",  // +Inf != count
      head + "h_bucket{le=\"1\"} 1\nh_bucket{le=\"2\"} 2\nh_sum 3\nh_count 2\n",     // no +Inf
      head + "h_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_count 2\n",           // no _sum
  };
  for (const std::string& text : bad) {
    EXPECT_FALSE(parse_exposition(text).problems.empty()) << "accepted:\n" << text;
  }
}

// ---- ServeMetrics ---------------------------------------------------------------------------------------------

TEST(ServeMetrics, FreshServerRendersEveryFamily) {
  ServeMetrics metrics(kRoutes);
  const Exposition e = valid_exposition(metrics.render({}, 0.0));
  const std::map<std::string, std::string> expected = {
      {"bertrain_http_requests_total", "counter"},
      {"bertrain_http_request_duration_seconds", "histogram"},
      {"bertrain_batch_rows", "histogram"},
      {"bertrain_batch_tokens", "histogram"},
      {"bertrain_batch_duration_seconds", "histogram"},
      {"bertrain_rows_total", "counter"},
      {"bertrain_tokens_total", "counter"},
      {"bertrain_batches_total", "counter"},
      {"bertrain_truncated_rows_total", "counter"},
      {"bertrain_queue_rows", "gauge"},
      {"bertrain_queue_requests", "gauge"},
      {"bertrain_in_flight_requests", "gauge"},
      {"bertrain_open_connections", "gauge"},
      {"bertrain_max_open_connections", "gauge"},
      {"bertrain_ready", "gauge"},
      {"bertrain_rows_per_second", "gauge"},
  };
  EXPECT_EQ(e.types, expected);
  EXPECT_EQ(series_count(e, "bertrain_http_requests_total"), 0);
  // A duration histogram per route and "other", all empty.
  EXPECT_EQ(series_count(e, "bertrain_http_request_duration_seconds_count"), static_cast<int>(kRoutes.size()) + 1);
  EXPECT_EQ(value_of(e, "bertrain_http_request_duration_seconds_count", {{"path", "other"}}), 0.0);
  EXPECT_EQ(value_of(e, "bertrain_http_request_duration_seconds_bucket", {{"path", "/predict"}, {"le", "+Inf"}}),
            0.0);
  EXPECT_EQ(series_count(e, "bertrain_http_request_duration_seconds_bucket"),
            14 * (static_cast<int>(kRoutes.size()) + 1))
      << "13 bounds and +Inf per path";
  EXPECT_EQ(series_count(e, "bertrain_batch_rows_bucket"), 11);
  EXPECT_EQ(series_count(e, "bertrain_batch_tokens_bucket"), 12);
  EXPECT_EQ(series_count(e, "bertrain_batch_duration_seconds_bucket"), 14);
  for (const char* zero : {"bertrain_rows_total", "bertrain_tokens_total", "bertrain_batches_total",
                           "bertrain_truncated_rows_total", "bertrain_queue_rows", "bertrain_queue_requests",
                           "bertrain_in_flight_requests", "bertrain_open_connections",
                           "bertrain_max_open_connections", "bertrain_ready", "bertrain_rows_per_second",
                           "bertrain_batch_rows_count", "bertrain_batch_rows_sum"}) {
    EXPECT_EQ(value_of(e, zero), 0.0) << zero;
  }
}

TEST(ServeMetrics, CountsRequestsByPathMethodAndCode) {
  ServeMetrics metrics(kRoutes);
  metrics.record_request("/predict", "POST", 200, 0.01);
  metrics.record_request("/predict", "POST", 200, 0.02);
  metrics.record_request("/predict", "POST", 503, 0.001);
  metrics.record_request("/predict", "GET", 405, 0.0001);
  metrics.record_request("/", "GET", 200, 0.0002);
  const Exposition e = valid_exposition(metrics.render({}, 0.0));
  const auto count = [&](const char* path, const char* method, const char* code) {
    return value_of(e, "bertrain_http_requests_total", {{"path", path}, {"method", method}, {"code", code}});
  };
  EXPECT_EQ(count("/predict", "POST", "200"), 2.0);
  EXPECT_EQ(count("/predict", "POST", "503"), 1.0);
  EXPECT_EQ(count("/predict", "GET", "405"), 1.0);
  EXPECT_EQ(count("/", "GET", "200"), 1.0);
  EXPECT_EQ(series_count(e, "bertrain_http_requests_total"), 4);
  EXPECT_EQ(value_of(e, "bertrain_http_request_duration_seconds_count", {{"path", "/predict"}}), 4.0);
  EXPECT_DOUBLE_EQ(value_of(e, "bertrain_http_request_duration_seconds_sum", {{"path", "/predict"}}), 0.0311);
  EXPECT_EQ(value_of(e, "bertrain_http_request_duration_seconds_count", {{"path", "/"}}), 1.0);
  EXPECT_EQ(value_of(e, "bertrain_http_request_duration_seconds_count", {{"path", "/metrics"}}), 0.0);
}

TEST(ServeMetrics, HistogramBucketsAreCumulativeAndInclusive) {
  ServeMetrics metrics(kRoutes);
  // 0.001 sits exactly on a bound: "le" is less than or equal, so it counts in that bucket.
  for (double seconds : {0.001, 0.003, 0.003, 0.7, 20.0}) metrics.record_request("/predict", "POST", 200, seconds);
  metrics.record_batch(1, 64, 0.02, 1.0);      // on the first bounds
  metrics.record_batch(3, 65, 0.02, 1.0);      // just above
  metrics.record_batch(64, 4000, 0.3, 1.0);
  metrics.record_batch(1000, 70000, 11.0, 1.0);  // above every bound: only +Inf
  const Exposition e = valid_exposition(metrics.render({}, 1.0));
  const auto bucket = [&](const char* name, const std::map<std::string, std::string>& labels) {
    return value_of(e, std::string(name) + "_bucket", labels);
  };
  const std::vector<std::pair<const char*, double>> request_buckets = {
      {"0.001", 1}, {"0.0025", 1}, {"0.005", 3}, {"0.01", 3}, {"0.025", 3}, {"0.05", 3}, {"0.1", 3},
      {"0.25", 3},  {"0.5", 3},    {"1", 4},     {"2.5", 4},  {"5", 4},     {"10", 4},   {"+Inf", 5}};
  for (const auto& [le, expected] : request_buckets) {
    EXPECT_EQ(bucket("bertrain_http_request_duration_seconds", {{"path", "/predict"}, {"le", le}}), expected)
        << "le " << le;
  }
  EXPECT_DOUBLE_EQ(value_of(e, "bertrain_http_request_duration_seconds_sum", {{"path", "/predict"}}), 20.707);
  const std::vector<std::pair<const char*, double>> rows_buckets = {
      {"1", 1}, {"2", 1}, {"4", 2}, {"8", 2}, {"16", 2}, {"32", 2}, {"64", 3}, {"128", 3}, {"256", 3}, {"512", 3},
      {"+Inf", 4}};
  for (const auto& [le, expected] : rows_buckets) {
    EXPECT_EQ(bucket("bertrain_batch_rows", {{"le", le}}), expected) << "rows le " << le;
  }
  EXPECT_EQ(value_of(e, "bertrain_batch_rows_sum"), 1068.0);
  EXPECT_EQ(bucket("bertrain_batch_tokens", {{"le", "64"}}), 1.0);
  EXPECT_EQ(bucket("bertrain_batch_tokens", {{"le", "128"}}), 2.0);
  EXPECT_EQ(bucket("bertrain_batch_tokens", {{"le", "4096"}}), 3.0);
  EXPECT_EQ(bucket("bertrain_batch_tokens", {{"le", "65536"}}), 3.0);
  EXPECT_EQ(bucket("bertrain_batch_tokens", {{"le", "+Inf"}}), 4.0);
  EXPECT_EQ(bucket("bertrain_batch_duration_seconds", {{"le", "0.025"}}), 2.0);
  EXPECT_EQ(bucket("bertrain_batch_duration_seconds", {{"le", "0.5"}}), 3.0);
  EXPECT_EQ(bucket("bertrain_batch_duration_seconds", {{"le", "10"}}), 3.0);
  EXPECT_EQ(value_of(e, "bertrain_batch_duration_seconds_count"), 4.0);
  EXPECT_EQ(value_of(e, "bertrain_rows_total"), 1068.0);
  EXPECT_EQ(value_of(e, "bertrain_tokens_total"), 74129.0);
  EXPECT_EQ(value_of(e, "bertrain_batches_total"), 4.0);
}

TEST(ServeMetrics, UnknownPathsAndMethodsAreOther) {
  ServeMetrics metrics(kRoutes);
  metrics.record_request("/wp-admin", "GET", 404, 0.0001);
  const std::string after_one = metrics.render({}, 0.0);
  for (int i = 0; i < 1000; ++i) {
    metrics.record_request("/scan/" + std::to_string(i) + "?q=\"x\"", "GET", 404, 0.0001);
  }
  metrics.record_request("/predict", "BREW", 405, 0.0001);
  metrics.record_request("/predict/x", "POST", 404, 0.0001);  // a known route's prefix is not the route
  const std::string after_many = metrics.render({}, 0.0);
  const Exposition e = valid_exposition(after_many);
  EXPECT_EQ(value_of(e, "bertrain_http_requests_total", {{"path", "other"}, {"method", "GET"}, {"code", "404"}}),
            1001.0);
  EXPECT_EQ(value_of(e, "bertrain_http_requests_total", {{"path", "/predict"}, {"method", "other"}, {"code", "405"}}),
            1.0);
  EXPECT_EQ(value_of(e, "bertrain_http_requests_total", {{"path", "other"}, {"method", "POST"}, {"code", "404"}}),
            1.0);
  EXPECT_EQ(value_of(e, "bertrain_http_request_duration_seconds_count", {{"path", "other"}}), 1002.0);
  EXPECT_EQ(series_count(e, "bertrain_http_requests_total"), 3);
  // A thousand new URLs added no line: only the two new (path, method, code) triples did.
  const auto lines = [](const std::string& s) { return std::count(s.begin(), s.end(), '\n'); };
  EXPECT_EQ(lines(after_many), lines(after_one) + 2);
  EXPECT_EQ(after_many.find("scan"), std::string::npos);
}

TEST(ServeMetrics, LabelValuesAreEscaped) {
  const std::string odd = "/a\\b\"c\nd";  // a route with a backslash, a quote and a line feed
  ServeMetrics metrics({odd});
  metrics.record_request(odd, "GET", 200, 0.001);
  const std::string text = metrics.render({}, 0.0);
  EXPECT_NE(text.find("path=\"/a\\\\b\\\"c\\nd\",method=\"GET\",code=\"200\"} 1\n"), std::string::npos) << text;
  const Exposition e = valid_exposition(text);
  EXPECT_EQ(value_of(e, "bertrain_http_requests_total", {{"path", odd}, {"method", "GET"}, {"code", "200"}}), 1.0);
  EXPECT_EQ(value_of(e, "bertrain_http_request_duration_seconds_count", {{"path", odd}}), 1.0);
}

TEST(ServeMetrics, RowsPerSecondOverTheLastTenSeconds) {
  ServeMetrics metrics(kRoutes);
  const auto rate = [&](double now) {
    return value_of(valid_exposition(metrics.render({}, now)), "bertrain_rows_per_second");
  };
  metrics.record_batch(10, 100, 0.01, 100.5);  // second 100
  EXPECT_EQ(rate(100.5), 1.0);
  EXPECT_EQ(rate(109.999), 1.0) << "seconds 100..109";
  EXPECT_EQ(rate(110.0), 0.0) << "seconds 101..110: second 100 has left";
  metrics.record_batch(20, 100, 0.01, 101.2);
  metrics.record_batch(30, 100, 0.01, 105.0);
  metrics.record_batch(4, 100, 0.01, 105.9);
  EXPECT_EQ(rate(105.5), 6.4);
  EXPECT_EQ(rate(110.5), 5.4) << "seconds 101..110";
  EXPECT_EQ(rate(111.0), 3.4) << "seconds 102..111";
  // Second 111 takes the ring slot second 101 had: the old count is dropped, not added.
  metrics.record_batch(5, 100, 0.01, 111.3);
  EXPECT_EQ(rate(111.5), 3.9);
  EXPECT_EQ(rate(114.99), 3.9);
  EXPECT_EQ(rate(115.0), 0.5) << "seconds 106..115";
  EXPECT_EQ(rate(500.0), 0.0) << "long idle";
  // A batch stamped with a second older than its slot's (out of order) counts in the totals, not the rate.
  metrics.record_batch(7, 100, 0.01, 121.0);
  metrics.record_batch(100, 100, 0.01, 111.9);
  EXPECT_EQ(rate(121.5), 0.7);
  const Exposition e = valid_exposition(metrics.render({}, 121.5));
  EXPECT_EQ(value_of(e, "bertrain_rows_total"), 176.0);
  EXPECT_EQ(value_of(e, "bertrain_batches_total"), 7.0);
}

TEST(ServeMetrics, GaugesAndTruncatedRows) {
  ServeMetrics metrics(kRoutes);
  metrics.add_truncated_rows(3);
  metrics.add_truncated_rows(4);
  ServeMetrics::Gauges gauges;
  gauges.queue_rows = 17;
  gauges.queue_requests = 5;
  gauges.in_flight_requests = 9;
  gauges.open_connections = 11;
  gauges.max_open_connections = 19872;
  gauges.ready = true;
  const Exposition e = valid_exposition(metrics.render(gauges, 0.0));
  EXPECT_EQ(value_of(e, "bertrain_truncated_rows_total"), 7.0);
  EXPECT_EQ(value_of(e, "bertrain_queue_rows"), 17.0);
  EXPECT_EQ(value_of(e, "bertrain_queue_requests"), 5.0);
  EXPECT_EQ(value_of(e, "bertrain_in_flight_requests"), 9.0);
  EXPECT_EQ(value_of(e, "bertrain_open_connections"), 11.0);
  EXPECT_EQ(value_of(e, "bertrain_max_open_connections"), 19872.0);
  EXPECT_EQ(value_of(e, "bertrain_ready"), 1.0);
  gauges.ready = false;
  EXPECT_EQ(value_of(valid_exposition(metrics.render(gauges, 0.0)), "bertrain_ready"), 0.0);
}

TEST(ServeMetrics, BusyServerTextIsValid) {
  // Many series at once: every sample in its family, no duplicates, every histogram consistent.
  ServeMetrics metrics(kRoutes);
  const std::vector<std::string> methods = {"GET", "POST", "DELETE", "WHATEVER"};
  const std::vector<int> codes = {200, 400, 401, 404, 413, 429, 503};
  for (int i = 0; i < 2000; ++i) {
    const std::string path =
        i % 7 == 0 ? "/nope/" + std::to_string(i) : kRoutes[static_cast<std::size_t>(i) % kRoutes.size()];
    metrics.record_request(path, methods[static_cast<std::size_t>(i) % methods.size()],
                           codes[static_cast<std::size_t>(i) % codes.size()], 0.0001 * (i % 300));
    if (i % 3 == 0) metrics.record_batch(1 + i % 300, 10 + i * 37 % 70000, 0.001 * (i % 50), i * 0.01);
  }
  const Exposition e = valid_exposition(metrics.render({3, 2, 1, true}, 20.0));
  EXPECT_GT(series_count(e, "bertrain_http_requests_total"), 50);
  EXPECT_EQ(value_of(e, "bertrain_batches_total"), 667.0);
}

}  // namespace
}  // namespace bertrain

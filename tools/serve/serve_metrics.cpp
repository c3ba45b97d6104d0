// ServeMetrics: bertrain serve's Prometheus metrics (see the header).
#include "tools/serve/serve_metrics.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <utility>

#include "core/number_text.h"

namespace bertrain {

namespace {

// Prometheus' usual latency buckets (client_golang's DefBuckets), for requests and forward passes alike.
const std::vector<double> kSecondsBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
// Powers of two up to the largest --max-batch-size and --max-batch-tokens worth running.
const std::vector<double> kRowsBuckets = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
const std::vector<double> kTokensBuckets = {64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};

const std::string kOther = "other";

// RFC 9110's methods: what a client sends beyond them is one "other" label, not a new series per word.
const std::set<std::string> kMethods = {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"};

// The shortest text that reads back as the same double (Go's client writes the same numbers); the format's
// spellings of the infinities and NaN.
std::string format_double(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char text[32];
  // Whole numbers as such: the shortest %g of 10 is "1e+01", a valid but unreadable bucket bound.
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    std::snprintf(text, sizeof text, "%.0f", value);
    return text;
  }
  return shortest_double(value);
}

// Label values: backslash, double quote and line feed escaped, as the format requires.
std::string escape_label(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void family(std::ostringstream& out, const char* name, const char* type, const char* help) {
  out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

// `labels` is empty or `key="value",...` already escaped; `le` joins it.
void histogram_samples(std::ostringstream& out, const std::string& name, const std::string& labels,
                       const std::vector<double>& bounds, const std::vector<long>& counts, double sum, long count) {
  const std::string prefix = labels.empty() ? "" : labels + ",";
  long cumulative = 0;
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    cumulative += counts[i];
    out << name << "_bucket{" << prefix << "le=\"" << format_double(bounds[i]) << "\"} " << cumulative << '\n';
  }
  out << name << "_bucket{" << prefix << "le=\"+Inf\"} " << count << '\n';
  const std::string braces = labels.empty() ? "" : "{" + labels + "}";
  out << name << "_sum" << braces << ' ' << format_double(sum) << '\n';
  out << name << "_count" << braces << ' ' << count << '\n';
}

long long second_of(double now) { return static_cast<long long>(std::floor(now)); }

std::size_t slot_of(long long second) {
  const long long window = ServeMetrics::kRateWindowSeconds;
  return static_cast<std::size_t>(((second % window) + window) % window);
}

}  // namespace

ServeMetrics::Histogram::Histogram(const std::vector<double>* bounds)
    : bounds(bounds), counts(bounds->size() + 1, 0) {}

void ServeMetrics::Histogram::observe(double value) {
  std::size_t bucket = 0;  // the first whose upper bound holds the value ("le": less than or equal)
  while (bucket < bounds->size() && !(value <= (*bounds)[bucket])) ++bucket;
  ++counts[bucket];
  sum += value;
  ++count;
}

ServeMetrics::ServeMetrics(std::vector<std::string> known_paths)
    : known_paths_(known_paths.begin(), known_paths.end()),
      batch_rows_(&kRowsBuckets),
      batch_tokens_(&kTokensBuckets),
      batch_durations_(&kSecondsBuckets) {
  for (const std::string& path : known_paths_) request_durations_.emplace(path, Histogram(&kSecondsBuckets));
  request_durations_.emplace(kOther, Histogram(&kSecondsBuckets));
}

const std::string& ServeMetrics::path_label(const std::string& path) const {
  auto it = known_paths_.find(path);
  return it == known_paths_.end() ? kOther : *it;
}

void ServeMetrics::record_request(const std::string& path, const std::string& method, int status, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string& label = path_label(path);
  ++requests_[{label, kMethods.count(method) != 0 ? method : kOther, status}];
  request_durations_.at(label).observe(seconds);
}

void ServeMetrics::record_batch(int rows, int tokens, double seconds, double now) {
  std::lock_guard<std::mutex> lock(mutex_);
  batch_rows_.observe(rows);
  batch_tokens_.observe(tokens);
  batch_durations_.observe(seconds);
  rows_total_ += rows;
  tokens_total_ += tokens;
  ++batches_total_;
  const long long second = second_of(now);
  const std::size_t slot = slot_of(second);
  if (second_of_slot_[slot] < second) {  // the slot held a second that has left the window
    second_of_slot_[slot] = second;
    rows_in_second_[slot] = 0;
  }
  // A batch stamped before the slot's second (a clock read out of order) is out of the window: only the total.
  if (second_of_slot_[slot] == second) rows_in_second_[slot] += rows;
}

void ServeMetrics::add_truncated_rows(long rows) {
  std::lock_guard<std::mutex> lock(mutex_);
  truncated_rows_total_ += rows;
}

std::string ServeMetrics::render(const Gauges& gauges, double now) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream out;

  family(out, "bertrain_http_requests_total", "counter", "HTTP requests answered, by route, method and status code.");
  for (const auto& [key, count] : requests_) {
    const auto& [path, method, code] = key;
    out << "bertrain_http_requests_total{path=\"" << escape_label(path) << "\",method=\"" << escape_label(method)
        << "\",code=\"" << code << "\"} " << count << '\n';
  }
  family(out, "bertrain_http_request_duration_seconds", "histogram",
         "Time from a request's arrival to its answer, by route.");
  for (const auto& [path, h] : request_durations_) {
    histogram_samples(out, "bertrain_http_request_duration_seconds", "path=\"" + escape_label(path) + "\"",
                      *h.bounds, h.counts, h.sum, h.count);
  }
  family(out, "bertrain_batch_rows", "histogram", "Rows per forward pass.");
  histogram_samples(out, "bertrain_batch_rows", "", *batch_rows_.bounds, batch_rows_.counts, batch_rows_.sum,
                    batch_rows_.count);
  family(out, "bertrain_batch_tokens", "histogram", "Real (unpadded) tokens per forward pass.");
  histogram_samples(out, "bertrain_batch_tokens", "", *batch_tokens_.bounds, batch_tokens_.counts,
                    batch_tokens_.sum, batch_tokens_.count);
  family(out, "bertrain_batch_duration_seconds", "histogram", "Time of one forward pass.");
  histogram_samples(out, "bertrain_batch_duration_seconds", "", *batch_durations_.bounds, batch_durations_.counts,
                    batch_durations_.sum, batch_durations_.count);

  family(out, "bertrain_rows_total", "counter", "Rows (texts) predicted.");
  out << "bertrain_rows_total " << rows_total_ << '\n';
  family(out, "bertrain_tokens_total", "counter", "Real tokens run through the model.");
  out << "bertrain_tokens_total " << tokens_total_ << '\n';
  family(out, "bertrain_batches_total", "counter", "Forward passes run.");
  out << "bertrain_batches_total " << batches_total_ << '\n';
  family(out, "bertrain_truncated_rows_total", "counter", "Rows cut to the model's maximum length.");
  out << "bertrain_truncated_rows_total " << truncated_rows_total_ << '\n';

  family(out, "bertrain_queue_rows", "gauge", "Rows waiting for a forward pass.");
  out << "bertrain_queue_rows " << gauges.queue_rows << '\n';
  family(out, "bertrain_queue_requests", "gauge", "Requests with rows waiting for a forward pass.");
  out << "bertrain_queue_requests " << gauges.queue_requests << '\n';
  family(out, "bertrain_in_flight_requests", "gauge", "HTTP requests being handled.");
  out << "bertrain_in_flight_requests " << gauges.in_flight_requests << '\n';
  family(out, "bertrain_open_connections", "gauge", "TCP connections open: idle, sending a request, or being answered.");
  out << "bertrain_open_connections " << gauges.open_connections << '\n';
  family(out, "bertrain_max_open_connections", "gauge",
         "--max-open-connections: past it new connections wait in the listen backlog.");
  out << "bertrain_max_open_connections " << gauges.max_open_connections << '\n';
  family(out, "bertrain_ready", "gauge", "1 once the model is loaded and warmed up, else 0.");
  out << "bertrain_ready " << (gauges.ready ? 1 : 0) << '\n';

  const long long second = second_of(now);
  long rows = 0;
  for (int i = 0; i < kRateWindowSeconds; ++i) {
    const long long s = second_of_slot_[static_cast<std::size_t>(i)];
    if (s <= second && s > second - kRateWindowSeconds) rows += rows_in_second_[static_cast<std::size_t>(i)];
  }
  family(out, "bertrain_rows_per_second", "gauge", "Rows predicted per second over the last 10 seconds.");
  out << "bertrain_rows_per_second " << format_double(static_cast<double>(rows) / kRateWindowSeconds) << '\n';
  return out.str();
}

}  // namespace bertrain

// bertrain serve's /metrics: request and batch counters and histograms, rendered in the Prometheus text exposition
// format 0.0.4 for a Prometheus server (or anything that scrapes it) to collect. Label values come only from
// bounded sets (the server's routes, the HTTP methods, status codes), so a scan of random URLs cannot grow the
// number of series. Every method is thread-safe (one mutex): HTTP threads record requests, the engine thread
// records batches, and a scrape renders.
#pragma once

#include <array>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace bertrain {

class ServeMetrics {
 public:
  // known_paths: the server's routes; any other path is counted as "other". Every known path (and "other") has
  // its request-duration histogram from the start, so the set of series does not change as traffic arrives.
  explicit ServeMetrics(std::vector<std::string> known_paths);

  // One HTTP request answered with `status` after `seconds`. A method outside the standard HTTP ones is "other".
  void record_request(const std::string& path, const std::string& method, int status, double seconds);
  // One forward pass of `rows` rows and `tokens` real tokens that took `seconds` and finished at `now` (seconds
  // on the clock render()'s `now` reads).
  void record_batch(int rows, int tokens, double seconds, double now);
  // Rows whose text was cut to the model's maximum length (the TEI client's truncate: true).
  void add_truncated_rows(long rows);

  // What the server knows at scrape time rather than counts as it goes.
  struct Gauges {
    int queue_rows = 0;
    int queue_requests = 0;
    int in_flight_requests = 0;
    int open_connections = 0;
    int max_open_connections = 0;
    bool ready = false;
  };

  // Prometheus text exposition format 0.0.4: every family with # HELP and # TYPE lines, label values escaped
  // (\\ \" \n), histograms as cumulative _bucket{le=...} series ending in +Inf, then _sum and _count.
  // bertrain_rows_per_second is the rows of batches finished in the 10 seconds up to `now` (the second `now`
  // is in and the 9 before it), divided by 10.
  std::string render(const Gauges& gauges, double now) const;

  // The window of bertrain_rows_per_second, in 1-second buckets.
  static constexpr int kRateWindowSeconds = 10;

 private:
  struct Histogram {
    explicit Histogram(const std::vector<double>* bounds);
    void observe(double value);

    const std::vector<double>* bounds;  // upper bounds, ascending; +Inf is implicit
    std::vector<long> counts;           // per bucket (not cumulative), the last one above every bound
    double sum = 0.0;
    long count = 0;
  };

  const std::string& path_label(const std::string& path) const;

  mutable std::mutex mutex_;
  std::set<std::string> known_paths_;
  std::map<std::tuple<std::string, std::string, int>, long> requests_;  // (path, method, code) -> count
  std::map<std::string, Histogram> request_durations_;                  // by path label
  Histogram batch_rows_;
  Histogram batch_tokens_;
  Histogram batch_durations_;
  long rows_total_ = 0;
  long tokens_total_ = 0;
  long batches_total_ = 0;
  long truncated_rows_total_ = 0;
  // Rows finished per second of the clock, in a ring: slot s % kRateWindowSeconds holds second s.
  std::array<long, kRateWindowSeconds> rows_in_second_{};
  std::array<long long, kRateWindowSeconds> second_of_slot_{};
};

}  // namespace bertrain

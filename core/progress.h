// Training progress for people. On a terminal: one self-overwriting status line (epoch, step, loss, samples/s,
// the run's ETA) on stderr. Elsewhere (a log file, a batch job's output, a pipe): a plain line on stderr at most
// every `plain_interval_s` seconds, so that a log says how far a long epoch is without a line per step. Epoch lines
// come from the trainer.
#pragma once

#include <chrono>
#include <string>

namespace bertrain {

class Progress {
 public:
  // Reports only when `enabled` (rank 0, not --quiet); `plain_interval_s` 0: no plain lines.
  Progress(bool enabled, double plain_interval_s);
  ~Progress();

  void update(int epoch, int epochs, int step, int steps, double loss, double samples_per_s, double eta_s);
  // Clears the status line before a regular log line is printed; the next plain line comes an interval after it.
  void clear();

 private:
  using Clock = std::chrono::steady_clock;
  bool terminal_ = false;
  double plain_interval_s_ = 0;  // 0: none (on a terminal, or not enabled, or asked so)
  bool dirty_ = false;
  Clock::time_point last_line_;
};

// "1h02m", "3m05s", "42s"
std::string format_duration(double seconds);

}  // namespace bertrain

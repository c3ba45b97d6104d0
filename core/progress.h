// Training progress for people: on a terminal, one self-overwriting status line (epoch, step, loss,
// samples/s, ETA) on stderr; otherwise nothing per step, so logs stay readable (epoch lines come from
// the trainer).
#pragma once

#include <string>

namespace bertrain {

class Progress {
 public:
  // Active when stderr is a terminal and `enabled` (only rank 0 reports).
  explicit Progress(bool enabled);
  ~Progress();

  void update(int epoch, int epochs, int step, int steps, double loss, double samples_per_s, double eta_s);
  // Clears the status line before a regular log line is printed.
  void clear();

 private:
  bool active_ = false;
  bool dirty_ = false;
};

// "1h02m", "3m05s", "42s"
std::string format_duration(double seconds);

}  // namespace bertrain

#include "core/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace bertrain {

Progress::Progress(bool enabled, double plain_interval_s)
    : terminal_(enabled && ::isatty(STDERR_FILENO) == 1),
      plain_interval_s_(enabled && !terminal_ ? plain_interval_s : 0),
      last_line_(Clock::now()) {}

Progress::~Progress() { clear(); }

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = std::lround(seconds);
  char text[32];
  if (s >= 3600) {
    std::snprintf(text, sizeof text, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  } else if (s >= 60) {
    std::snprintf(text, sizeof text, "%ldm%02lds", s / 60, s % 60);
  } else {
    std::snprintf(text, sizeof text, "%lds", s);
  }
  return text;
}

void Progress::update(int epoch, int epochs, int step, int steps, double loss, double samples_per_s, double eta_s) {
  if (plain_interval_s_ > 0) {
    const Clock::time_point now = Clock::now();
    if (std::chrono::duration<double>(now - last_line_).count() < plain_interval_s_) return;
    last_line_ = now;
    std::fprintf(stderr, "epoch %d/%d  step %d/%d  loss %.4f  %.1f samples/s  run ETA %s\n", epoch, epochs, step,
                 steps, loss, samples_per_s, format_duration(eta_s).c_str());
    std::fflush(stderr);
    return;
  }
  if (!terminal_) return;
  constexpr int kBarWidth = 24;
  const int filled = steps > 0 ? kBarWidth * step / steps : kBarWidth;
  char bar[kBarWidth + 1];
  for (int i = 0; i < kBarWidth; ++i) bar[i] = i < filled ? '#' : '.';
  bar[kBarWidth] = '\0';
  std::fprintf(stderr, "\r\033[Kepoch %d/%d [%s] step %d/%d  loss %.4f  %.1f samples/s  run ETA %s", epoch, epochs, bar,
               step, steps, loss, samples_per_s, format_duration(eta_s).c_str());
  std::fflush(stderr);
  dirty_ = true;
}

void Progress::clear() {
  last_line_ = Clock::now();
  if (!dirty_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  dirty_ = false;
}

}  // namespace bertrain

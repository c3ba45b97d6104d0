#include "engine/stop_signals.h"

#include <atomic>
#include <cstdio>

namespace bertrain {

namespace {

std::atomic<int> first_signal{0};
struct sigaction previous[sizeof kStopSignals / sizeof kStopSignals[0]];

// Async-signal-safe: an atomic store, or for a second signal the default action (sigaction and raise are
// async-signal-safe).
void on_signal(int sig) {
  int expected = 0;
  if (first_signal.compare_exchange_strong(expected, sig)) return;
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(sig, &default_action, nullptr);
  raise(sig);
}

}  // namespace

StopSignals::StopSignals() {
  first_signal = 0;
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // reads and writes in progress go on; the training loop polls the flag
  for (std::size_t i = 0; i < sizeof kStopSignals / sizeof kStopSignals[0]; ++i) {
    sigaction(kStopSignals[i], nullptr, &previous[i]);
    // A signal ignored on entry stays ignored: `nohup` (SIGHUP) or a shell's background job (SIGINT) asked for it.
    if (previous[i].sa_handler != SIG_IGN) sigaction(kStopSignals[i], &action, nullptr);
  }
}

StopSignals::~StopSignals() {
  for (std::size_t i = 0; i < sizeof kStopSignals / sizeof kStopSignals[0]; ++i) {
    sigaction(kStopSignals[i], &previous[i], nullptr);
  }
}

int StopSignals::received() { return first_signal.load(); }

bool ignored_on_entry(int sig) {
  struct sigaction current {};
  sigaction(sig, nullptr, &current);
  return current.sa_handler == SIG_IGN;
}

int end_by_signal(int sig) {
  std::fflush(stderr);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
  return 128 + sig;  // not reached: the signal's default action ends the process
}

}  // namespace bertrain

#include "engine/stop_signals.h"

#include <atomic>

namespace bertrain {

namespace {

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGUSR1, SIGHUP};
std::atomic<int> first_signal{0};
struct sigaction previous[sizeof kSignals / sizeof kSignals[0]];

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
  for (std::size_t i = 0; i < sizeof kSignals / sizeof kSignals[0]; ++i) {
    sigaction(kSignals[i], nullptr, &previous[i]);
    // A signal ignored on entry stays ignored: `nohup` (SIGHUP) or a shell's background job (SIGINT) asked for it.
    if (previous[i].sa_handler != SIG_IGN) sigaction(kSignals[i], &action, nullptr);
  }
}

StopSignals::~StopSignals() {
  for (std::size_t i = 0; i < sizeof kSignals / sizeof kSignals[0]; ++i) sigaction(kSignals[i], &previous[i], nullptr);
}

int StopSignals::received() { return first_signal.load(); }

}  // namespace bertrain

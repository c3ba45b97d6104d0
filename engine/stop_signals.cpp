#include "engine/stop_signals.h"

#include <time.h>

#include <atomic>
#include <cstdio>

namespace bertrain {

namespace {

std::atomic<int> first_signal{0};
std::atomic<long long> first_signal_ns{0};  // when it came (CLOCK_MONOTONIC), for kSameSignalWindowS
struct sigaction previous[sizeof kStopSignals / sizeof kStopSignals[0]];

std::atomic<bool> sigpipe_received{false};  // a SIGPIPE came (ClosedOutput::kStops): stays ignored from then on

long long monotonic_ns() {  // async-signal-safe (clock_gettime)
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<long long>(now.tv_sec) * 1000000000LL + now.tv_nsec;
}

// Async-signal-safe: atomic stores, or for a second signal the default action (sigaction and raise are
// async-signal-safe). After a closed output's stop, the first real stop signal asks for the same stop: it is recorded
// in its place (and named), not taken as a second one. The first signal again within kSameSignalWindowS is the same
// request delivered twice, not a second one.
void on_signal(int sig) {
  const long long now = monotonic_ns();
  long long unset = 0;
  first_signal_ns.compare_exchange_strong(unset, now);  // before first_signal: a signal nested in between sees a time
  int expected = 0;
  if (first_signal.compare_exchange_strong(expected, sig)) return;
  if (expected == SIGPIPE && first_signal.compare_exchange_strong(expected, sig)) {
    first_signal_ns = now;
    return;
  }
  if (expected == sig && now - first_signal_ns.load() < static_cast<long long>(kSameSignalWindowS * 1e9)) return;
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(sig, &default_action, nullptr);
  raise(sig);
}

// SIGPIPE, for a command whose output is progress (train): its stdout or stderr was closed (`train ... | head`). A
// stop like the others, but the writes that follow (the checkpoint's messages) would raise it again, which is no
// second request to stop: from now on it is ignored, and those writes fail with EPIPE.
void on_closed_output(int sig) {
  int expected = 0;
  first_signal.compare_exchange_strong(expected, sig);
  sigpipe_received = true;
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, nullptr);
}

struct sigaction previous_sigpipe;
bool sigpipe_handled = false;

}  // namespace

StopSignals::StopSignals(ClosedOutput closed_output) {
  first_signal = 0;
  first_signal_ns = 0;
  sigpipe_received = false;
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // reads and writes in progress go on; the training loop polls the flag
  for (std::size_t i = 0; i < sizeof kStopSignals / sizeof kStopSignals[0]; ++i) {
    sigaction(kStopSignals[i], nullptr, &previous[i]);
    // A signal ignored on entry stays ignored: `nohup` (SIGHUP) or a shell's background job (SIGINT) asked for it.
    if (previous[i].sa_handler != SIG_IGN) sigaction(kStopSignals[i], &action, nullptr);
  }
  sigpipe_handled = closed_output == ClosedOutput::kStops;
  if (sigpipe_handled) {
    sigaction(SIGPIPE, nullptr, &previous_sigpipe);
    action.sa_handler = on_closed_output;
    if (previous_sigpipe.sa_handler != SIG_IGN) sigaction(SIGPIPE, &action, nullptr);
  }
}

StopSignals::~StopSignals() {
  for (std::size_t i = 0; i < sizeof kStopSignals / sizeof kStopSignals[0]; ++i) {
    sigaction(kStopSignals[i], &previous[i], nullptr);
  }
  // Once the output is closed, what the command still prints (where it stopped, its last lines) would raise SIGPIPE
  // under the previous action and end it by the signal: it stays ignored.
  if (sigpipe_handled && !sigpipe_received) sigaction(SIGPIPE, &previous_sigpipe, nullptr);
}

int StopSignals::received() { return first_signal.load(); }

bool StopSignals::output_closed() { return sigpipe_received.load(); }

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

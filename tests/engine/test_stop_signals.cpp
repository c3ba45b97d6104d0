// StopSignals (engine/stop_signals.h): the first SIGTERM / SIGINT / SIGUSR1 is recorded, a second one takes
// the signal's default action (the same signal within kSameSignalWindowS is the same request), and the previous
// handlers come back afterwards. Each case runs in a forked child, since a default action ends the process.
#include <gtest/gtest.h>

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/stop_signals.h"
#include "tests/run_process.h"

namespace bertrain {
namespace {

using testing::wait_status_in_child;

// A child's wait status: it exited with `code`, or was ended by signal `sig`.
::testing::AssertionResult exited_with(int status, int code) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == code) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "wait status " << status << ", expected exit " << code;
}
::testing::AssertionResult ended_by(int status, int sig) {
  if (WIFSIGNALED(status) && WTERMSIG(status) == sig) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "wait status " << status << ", expected signal " << sig;
}

TEST(StopSignals, FirstSignalIsRecordedSecondEndsTheProcess) {
  for (const int sig : {SIGTERM, SIGINT, SIGUSR1}) {
    const int once = wait_status_in_child([sig] {
      const StopSignals signals;
      if (StopSignals::received() != 0) return 2;
      ::raise(sig);
      return StopSignals::received() == sig ? 0 : 3;
    });
    EXPECT_TRUE(exited_with(once, 0)) << "signal " << sig;
    // Another stop signal is a second request at once.
    const int other = sig == SIGTERM ? SIGINT : SIGTERM;
    const int twice = wait_status_in_child([sig, other] {
      const StopSignals signals;
      ::raise(sig);
      ::raise(other);  // the default action: never returns
      return 4;
    });
    EXPECT_TRUE(ended_by(twice, other)) << "signal " << sig << ", then " << other;
  }
}

// A signal to a process group reaches train itself and through launch or mpirun, which pass it on: the first signal
// again within kSameSignalWindowS is the same request (before, `kill -TERM -PGID` of `bertrain launch -- bertrain
// train` ended train by SIGTERM without its checkpoint); after the window it is a second one.
TEST(StopSignals, TheSameSignalAgainAtOnceIsOneRequest) {
  const int at_once = wait_status_in_child([] {
    const StopSignals signals;
    for (int copy = 0; copy < 3; ++copy) ::raise(SIGTERM);
    return StopSignals::received() == SIGTERM ? 0 : 5;
  });
  EXPECT_TRUE(exited_with(at_once, 0));
  const int later = wait_status_in_child([] {
    const StopSignals signals;
    ::raise(SIGTERM);
    const double wait_s = kSameSignalWindowS + 0.05;
    timespec pause{static_cast<time_t>(wait_s), static_cast<long>((wait_s - static_cast<time_t>(wait_s)) * 1e9)};
    while (::nanosleep(&pause, &pause) != 0 && errno == EINTR) {
    }
    ::raise(SIGTERM);  // the default action: never returns
    return 6;
  });
  EXPECT_TRUE(ended_by(later, SIGTERM));
}

TEST(StopSignals, PreviousHandlersComeBack) {
  const int status = wait_status_in_child([] {
    ::signal(SIGUSR1, SIG_IGN);
    { const StopSignals signals; }
    ::raise(SIGUSR1);  // ignored again
    return StopSignals::received() == 0 ? 0 : 5;
  });
  EXPECT_TRUE(exited_with(status, 0));
}

// `nohup` ignores SIGHUP so that a closed terminal does not stop the command: it stays ignored.
TEST(StopSignals, ASignalIgnoredOnEntryStaysIgnored) {
  const int status = wait_status_in_child([] {
    ::signal(SIGHUP, SIG_IGN);
    const StopSignals signals;
    ::raise(SIGHUP);
    ::raise(SIGHUP);  // not the default action either
    if (StopSignals::received() != 0) return 6;
    ::raise(SIGTERM);  // the others are still caught
    return StopSignals::received() == SIGTERM ? 0 : 7;
  });
  EXPECT_TRUE(exited_with(status, 0));
}

// A closed pipe (SIGPIPE) stops a command that asks for it, once: the writes after it fail with EPIPE instead of
// ending the process before its checkpoint; it is that command's stop signal only if none came before. Other
// commands keep SIGPIPE's default action, and the previous action comes back.
TEST(StopSignals, AClosedOutputStopsOnceWhereAsked) {
  const int stops = wait_status_in_child([] {
    const StopSignals signals(StopSignals::ClosedOutput::kStops);
    int out[2];
    if (::pipe(out) != 0) return 10;
    ::close(out[0]);
    for (int i = 0; i < 3; ++i) {  // each write to the pipe without a reader raises SIGPIPE unless it is ignored
      if (::write(out[1], "x", 1) != -1 || errno != EPIPE) return 11;
    }
    return StopSignals::received() == SIGPIPE ? 0 : 12;
  });
  EXPECT_TRUE(exited_with(stops, 0));
  const int after_sigterm = wait_status_in_child([] {
    const StopSignals signals(StopSignals::ClosedOutput::kStops);
    ::raise(SIGTERM);
    ::raise(SIGPIPE);  // no second stop request: the process goes on
    return StopSignals::received() == SIGTERM ? 0 : 13;
  });
  EXPECT_TRUE(exited_with(after_sigterm, 0));
  // A stop signal after the closed output asks for the same stop: recorded in its place, not a second signal. And
  // once the output is closed, the lines printed after the StopSignals is gone (where the run stopped) do not end
  // the process either.
  const int then_sigterm = wait_status_in_child([] {
    {
      const StopSignals signals(StopSignals::ClosedOutput::kStops);
      ::raise(SIGPIPE);
      ::raise(SIGTERM);
      if (StopSignals::received() != SIGTERM) return 16;
    }
    ::raise(SIGPIPE);
    return 0;
  });
  EXPECT_TRUE(exited_with(then_sigterm, 0));
  const int ends = wait_status_in_child([] {
    const StopSignals signals;
    ::raise(SIGPIPE);
    return 14;
  });
  EXPECT_TRUE(ended_by(ends, SIGPIPE));
  const int restored = wait_status_in_child([] {
    { const StopSignals signals(StopSignals::ClosedOutput::kStops); }
    ::raise(SIGPIPE);
    return 15;
  });
  EXPECT_TRUE(ended_by(restored, SIGPIPE));
}

}  // namespace
}  // namespace bertrain

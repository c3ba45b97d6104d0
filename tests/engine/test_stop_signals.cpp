// StopSignals (engine/stop_signals.h): the first SIGTERM / SIGINT / SIGUSR1 is recorded, a second one takes
// the signal's default action, and the previous handlers come back afterwards. Each case runs in a forked
// child, since a default action ends the process.
#include <gtest/gtest.h>

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/stop_signals.h"
#include "tests/run_process.h"

namespace bertrain {
namespace {

// Runs `body` in a child process; returns its wait status.
template <typename F>
int in_child(F body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    testing::default_signals_in_child();  // as a command starts outside a background job or nohup
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(StopSignals, FirstSignalIsRecordedSecondEndsTheProcess) {
  for (const int sig : {SIGTERM, SIGINT, SIGUSR1}) {
    const int once = in_child([sig] {
      const StopSignals signals;
      if (StopSignals::received() != 0) return 2;
      ::raise(sig);
      return StopSignals::received() == sig ? 0 : 3;
    });
    ASSERT_TRUE(WIFEXITED(once)) << "signal " << sig;
    EXPECT_EQ(WEXITSTATUS(once), 0) << "signal " << sig;
    const int twice = in_child([sig] {
      const StopSignals signals;
      ::raise(sig);
      ::raise(sig);  // the default action: never returns
      return 4;
    });
    ASSERT_TRUE(WIFSIGNALED(twice)) << "signal " << sig << " status " << twice;
    EXPECT_EQ(WTERMSIG(twice), sig);
  }
}

TEST(StopSignals, PreviousHandlersComeBack) {
  const int status = in_child([] {
    ::signal(SIGUSR1, SIG_IGN);
    { const StopSignals signals; }
    ::raise(SIGUSR1);  // ignored again
    return StopSignals::received() == 0 ? 0 : 5;
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// `nohup` ignores SIGHUP so that a closed terminal does not stop the command: it stays ignored.
TEST(StopSignals, ASignalIgnoredOnEntryStaysIgnored) {
  const int status = in_child([] {
    ::signal(SIGHUP, SIG_IGN);
    const StopSignals signals;
    ::raise(SIGHUP);
    ::raise(SIGHUP);  // not the default action either
    if (StopSignals::received() != 0) return 6;
    ::raise(SIGTERM);  // the others are still caught
    return StopSignals::received() == SIGTERM ? 0 : 7;
  });
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// A closed pipe (SIGPIPE) stops a command that asks for it, once: the writes after it fail with EPIPE instead of
// ending the process before its checkpoint; it is that command's stop signal only if none came before. Other
// commands keep SIGPIPE's default action, and the previous action comes back.
TEST(StopSignals, AClosedOutputStopsOnceWhereAsked) {
  const int stops = in_child([] {
    const StopSignals signals(StopSignals::ClosedOutput::kStops);
    int out[2];
    if (::pipe(out) != 0) return 10;
    ::close(out[0]);
    for (int i = 0; i < 3; ++i) {  // each write to the pipe without a reader raises SIGPIPE unless it is ignored
      if (::write(out[1], "x", 1) != -1 || errno != EPIPE) return 11;
    }
    return StopSignals::received() == SIGPIPE ? 0 : 12;
  });
  ASSERT_TRUE(WIFEXITED(stops)) << stops;
  EXPECT_EQ(WEXITSTATUS(stops), 0);
  const int after_sigterm = in_child([] {
    const StopSignals signals(StopSignals::ClosedOutput::kStops);
    ::raise(SIGTERM);
    ::raise(SIGPIPE);  // no second stop request: the process goes on
    return StopSignals::received() == SIGTERM ? 0 : 13;
  });
  ASSERT_TRUE(WIFEXITED(after_sigterm)) << after_sigterm;
  EXPECT_EQ(WEXITSTATUS(after_sigterm), 0);
  // A stop signal after the closed output asks for the same stop: recorded in its place, not a second signal. And
  // once the output is closed, the lines printed after the StopSignals is gone (where the run stopped) do not end
  // the process either.
  const int then_sigterm = in_child([] {
    {
      const StopSignals signals(StopSignals::ClosedOutput::kStops);
      ::raise(SIGPIPE);
      ::raise(SIGTERM);
      if (StopSignals::received() != SIGTERM) return 16;
    }
    ::raise(SIGPIPE);
    return 0;
  });
  ASSERT_TRUE(WIFEXITED(then_sigterm)) << then_sigterm;
  EXPECT_EQ(WEXITSTATUS(then_sigterm), 0);
  const int ends = in_child([] {
    const StopSignals signals;
    ::raise(SIGPIPE);
    return 14;
  });
  ASSERT_TRUE(WIFSIGNALED(ends)) << ends;
  EXPECT_EQ(WTERMSIG(ends), SIGPIPE);
  const int restored = in_child([] {
    { const StopSignals signals(StopSignals::ClosedOutput::kStops); }
    ::raise(SIGPIPE);
    return 15;
  });
  ASSERT_TRUE(WIFSIGNALED(restored)) << restored;
  EXPECT_EQ(WTERMSIG(restored), SIGPIPE);
}

}  // namespace
}  // namespace bertrain

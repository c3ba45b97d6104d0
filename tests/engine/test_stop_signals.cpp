// StopSignals (engine/stop_signals.h): the first SIGTERM / SIGINT / SIGUSR1 is recorded, a second one takes
// the signal's default action, and the previous handlers come back afterwards. Each case runs in a forked
// child, since a default action ends the process.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace bertrain

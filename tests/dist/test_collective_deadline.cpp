// The collective watchdog (dist/collective_deadline.h) on its own: it calls on_expiry once, with the
// collective's name, for a collective that waits past the timeout, and never for collectives that return in time,
// for time outside any collective, or for time this process was stopped. (MpiTest.AStoppedRankEndsTheJob runs it
// under mpirun.)
#include <gtest/gtest.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "dist/collective_deadline.h"

namespace bertrain {
namespace {

using std::chrono::milliseconds;

// What on_expiry was called with, and when (seconds after the recorder was made).
struct Expiries {
  std::mutex mutex;
  std::vector<std::string> names;
  std::vector<double> after_s;
  const std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

  std::function<void(const std::string&)> recorder() {
    return [this](const std::string& what) {
      std::lock_guard<std::mutex> lock(mutex);
      names.push_back(what);
      after_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    };
  }
  std::size_t count() {
    std::lock_guard<std::mutex> lock(mutex);
    return names.size();
  }
};

TEST(CollectiveDeadline, ACollectiveWaitingPastTheTimeoutExpiresOnceByName) {
  Expiries expiries;
  {
    CollectiveDeadline deadline(0.2, expiries.recorder());
    const CollectiveDeadline::Scope watched(&deadline, "MPI_Allreduce");
    std::this_thread::sleep_for(milliseconds(800));
  }
  ASSERT_EQ(expiries.names.size(), 1u);
  EXPECT_EQ(expiries.names[0], "MPI_Allreduce");
  EXPECT_GT(expiries.after_s[0], 0.2);
  EXPECT_LT(expiries.after_s[0], 0.7);  // noticed within a period (0.01 s here), with room for a loaded machine
}

TEST(CollectiveDeadline, CollectivesThatReturnInTimeAndTimeBetweenThemNeverExpire) {
  Expiries expiries;
  {
    CollectiveDeadline deadline(0.5, expiries.recorder());
    const auto end = std::chrono::steady_clock::now() + milliseconds(1500);  // three timeouts of collectives
    while (std::chrono::steady_clock::now() < end) {
      const CollectiveDeadline::Scope watched(&deadline, "MPI_Allreduce");
      std::this_thread::sleep_for(milliseconds(5));
    }
    std::this_thread::sleep_for(milliseconds(1000));  // two timeouts outside any collective
    const CollectiveDeadline::Scope unwatched(nullptr, "MPI_Bcast");  // no deadline: nothing to watch
  }
  EXPECT_EQ(expiries.count(), 0u);
}

TEST(CollectiveDeadline, RefusesATimeoutThatIsNotPositive) {
  EXPECT_THROW(CollectiveDeadline(0, [](const std::string&) {}), Error);
}

// A process stopped (SIGSTOP) inside a collective for longer than the timeout, then continued, has not waited for
// its peers that long: the wait counts from where it runs again (a job suspended with Ctrl-Z and resumed goes on),
// and a wait that then runs past the timeout still expires. In a child process, which stops itself.
// The child's exit status: 0 (no expiry), 3 (expired), 4 (was not stopped as planned).
int stopped_child(double stopped_s, double running_s) {
  const pid_t child = ::fork();
  if (child == 0) {
    std::atomic<bool> expired{false};
    {
      CollectiveDeadline deadline(0.5, [&](const std::string&) { expired = true; });
      const CollectiveDeadline::Scope watched(&deadline, "MPI_Allreduce");
      ::raise(SIGSTOP);  // every thread stops, the watchdog's included, until the parent continues it
      std::this_thread::sleep_for(std::chrono::duration<double>(running_s));
    }
    ::_exit(expired ? 3 : 0);
  }
  int status = 0;
  if (child < 0 || ::waitpid(child, &status, WUNTRACED) != child || !WIFSTOPPED(status)) {
    if (child > 0) ::kill(child, SIGKILL), ::waitpid(child, &status, 0);
    return 4;
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(stopped_s));
  ::kill(child, SIGCONT);
  if (::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return 4;
  return WEXITSTATUS(status);
}

TEST(CollectiveDeadline, TimeThisProcessWasStoppedDoesNotCount) {
  EXPECT_EQ(stopped_child(1.5, 0.1), 0);  // stopped for three timeouts, then 0.1 s of waiting: in time
  EXPECT_EQ(stopped_child(1.5, 1.0), 3);  // the same, then two timeouts of waiting: expired
}

}  // namespace
}  // namespace bertrain

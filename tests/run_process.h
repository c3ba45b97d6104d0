// Runs a program for a test: captured stdout and stderr, exit code or signal, and a timeout that turns a
// hang into a failure.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/stop_signals.h"

extern char** environ;

namespace bertrain::testing {

struct RunResult {
  int exit_code = -1;  // -1 when the process did not exit normally
  int signal = 0;      // the terminating signal, 0 when it exited
  bool timed_out = false;
  std::string out, err;

  std::string describe() const {
    std::ostringstream os;
    os << "exit_code=" << exit_code << " signal=" << signal << (timed_out ? " (timed out)" : "") << "\n--- stdout ---\n"
       << out.substr(0, 4000) << "\n--- stderr ---\n" << err.substr(0, 4000);
    return os.str();
  }
};

// A signal to send to the child `after_s` seconds after it started, and once `ready()` (when given) says so, e.g.
// when a file the child writes exists (checked every 10 ms).
struct TimedSignal {
  double after_s;
  int signal;
  std::function<bool()> ready = nullptr;
};

// A child's environment: this process's, with one OpenMP thread (the tiny models gain nothing from more and the
// machine may be shared), then `extra_env` ("NAME=value" entries).
inline std::vector<std::string> child_environment(const std::vector<std::string>& extra_env = {}) {
  std::vector<std::string> env{"OMP_NUM_THREADS=1"};
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "OMP_NUM_THREADS=", 16) != 0) env.emplace_back(*e);
  }
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  return env;
}

// In a forked child before execve: the stop signals (and SIGPIPE) back to their default actions and none blocked.
// The suite may run as a shell's background job (SIGINT ignored) or under nohup (SIGHUP ignored), which every
// command would inherit and keep ignoring (engine/stop_signals.h), and the tests that stop a command by those
// signals need them.
// Async-signal-safe (sigaction, sigprocmask).
inline void default_signals_in_child() {
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  for (const int sig : kStopSignals) sigaction(sig, &action, nullptr);
  sigaction(SIGPIPE, &action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

// The wait status of `body` run in a forked child, its signals as a command's start outside a background job or
// nohup (default_signals_in_child): for code that changes the process (its affinity, OpenMP's settings, its signal
// handlers) or that counts its threads. The child starts with one thread whatever the parent has, and must not start
// an OpenMP team of several: libgomp hangs a child that does after its parent ran one.
template <typename F>
int wait_status_in_child(F body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    default_signals_in_child();
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

// wait_status_in_child's exit code, 100 when the child did not exit normally.
template <typename F>
int exit_code_in_child(F body) {
  const int status = wait_status_in_child(body);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

// execve's null-terminated array of pointers into `storage` (which must outlive it).
inline std::vector<char*> exec_pointers(std::vector<std::string>& storage) {
  std::vector<char*> pointers;
  for (std::string& s : storage) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// Runs argv_storage[0] (a path) with its arguments (and `extra_env`, "NAME=value" entries); stdin is
// /dev/null; both pipes are drained concurrently (no deadlock on big outputs); `signals` are sent on time
// (in order); the child is killed after `timeout_s` so a hang fails the test instead of stalling the suite.
inline RunResult run_process(std::vector<std::string> argv_storage, const std::vector<std::string>& extra_env = {},
                             double timeout_s = 120, const std::vector<TimedSignal>& signals = {}) {
  const std::vector<char*> argv = exec_pointers(argv_storage);
  std::vector<std::string> env_storage = child_environment(extra_env);
  const std::vector<char*> envp = exec_pointers(env_storage);

  int out_pipe[2], err_pipe[2];
  RunResult r;
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return r;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    return r;
  }
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    default_signals_in_child();
    ::execve(argv[0], argv.data(), envp.data());
    // Only write(2) here (the parent may have threads): the path and errno's number, its digits made by hand.
    const int error = errno;
    char digits[12];
    int at = sizeof digits;
    for (unsigned v = static_cast<unsigned>(error); at == sizeof digits || v > 0; v /= 10) digits[--at] = '0' + v % 10;
    const char before[] = "run_process: execve ", after[] = " failed: errno ";
    (void)!::write(2, before, sizeof before - 1);
    (void)!::write(2, argv[0], std::strlen(argv[0]));
    (void)!::write(2, after, sizeof after - 1);
    (void)!::write(2, digits + at, sizeof digits - at);
    (void)!::write(2, "\n", 1);
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + std::chrono::duration<double>(timeout_s);
  std::size_t next_signal = 0;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  char buffer[65536];
  while (open_fds > 0) {
    while (next_signal < signals.size() &&
           std::chrono::steady_clock::now() >= started + std::chrono::duration<double>(signals[next_signal].after_s) &&
           (!signals[next_signal].ready || signals[next_signal].ready())) {
      ::kill(pid, signals[next_signal++].signal);
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    long long wait_ms = std::min<long long>(left.count(), 1000);
    if (next_signal < signals.size()) {  // wake up in time for the next signal
      const auto until_signal = std::chrono::duration_cast<std::chrono::milliseconds>(
          started + std::chrono::duration<double>(signals[next_signal].after_s) - std::chrono::steady_clock::now());
      wait_ms = std::max<long long>(1, std::min<long long>(wait_ms, until_signal.count()));
      if (signals[next_signal].ready) wait_ms = std::min<long long>(wait_ms, 10);
    }
    const int ready = ::poll(fds, 2, static_cast<int>(wait_ms));
    if (ready < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (const pollfd& p : fds) {
    if (p.fd >= 0) ::close(p.fd);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

}  // namespace bertrain::testing

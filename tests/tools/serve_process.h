// A `bertrain serve` child process for the serve suite: started with its stderr in a file (the access log of a
// load test would fill a pipe nobody reads), waited for until its ready line says which port it took, stopped by
// SIGTERM with a bounded wait, and killed by the destructor if a failing test left it running, so that no test
// leaves a server behind or hangs the suite.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/run_process.h"

extern char** environ;

namespace bertrain::testing {

class ServeProcess {
 public:
  // How the process ended (or did not, within the wait).
  struct Exit {
    bool exited = false;  // false: still running when the wait ended
    int code = -1;        // exit status when it exited normally
    int signal = 0;       // the terminating signal, 0 when it exited
  };

  // Starts `binary serve args...` with stdin from /dev/null, stdout and stderr appended to `log_path`, and one
  // OpenMP thread (the tiny model gains nothing from more, and the machine may be shared). `wrapper` goes before the
  // binary: a shell that sets limits and execs the rest keeps the same process id.
  ServeProcess(const std::string& binary, const std::vector<std::string>& args, std::string log_path,
               const std::vector<std::string>& wrapper = {})
      : log_path_(std::move(log_path)) {
    std::vector<std::string> argv_storage = wrapper;
    argv_storage.insert(argv_storage.end(), {binary, "serve"});
    argv_storage.insert(argv_storage.end(), args.begin(), args.end());
    const std::vector<char*> argv = testing::exec_pointers(argv_storage);
    std::vector<std::string> env_storage = testing::child_environment();
    const std::vector<char*> envp = testing::exec_pointers(env_storage);
    const int log = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log < 0) {
      ADD_FAILURE() << "open " << log_path_ << ": " << std::strerror(errno);
      return;
    }
    pid_ = ::fork();
    if (pid_ < 0) {
      ADD_FAILURE() << "fork: " << std::strerror(errno);
      ::close(log);
      return;
    }
    if (pid_ == 0) {
      const int devnull = ::open("/dev/null", O_RDONLY);
      if (devnull >= 0) ::dup2(devnull, 0);
      ::dup2(log, 1);
      ::dup2(log, 2);
      testing::default_signals_in_child();
      ::execve(argv[0], argv.data(), envp.data());
      const char msg[] = "serve_process: execve failed\n";
      (void)!::write(2, msg, sizeof msg - 1);
      ::_exit(127);
    }
    ::close(log);
  }

  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  ~ServeProcess() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      reap(/*block=*/true);
    }
  }

  // Waits (at most timeout_s) for `bertrain serve: ready on http://127.0.0.1:PORT`; true with port() set, false
  // when the process exited first or the time ran out (log() says why).
  bool wait_ready(double timeout_s = 60) {
    static const std::regex ready(R"(bertrain serve: ready on http://[^:\s]+:([0-9]+))");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (;;) {
      std::smatch m;
      const std::string text = log();
      if (std::regex_search(text, m, ready)) {
        port_ = std::stoi(m[1].str());
        return true;
      }
      if (!running() || std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  int port() const { return port_; }
  pid_t pid() const { return pid_; }

  // Everything the process wrote so far (stdout and stderr).
  std::string log() const {
    std::ifstream in(log_path_, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  // Whether the process is still running (reaps it when it has ended).
  bool running() {
    if (pid_ <= 0 || reaped_) return false;
    reap(/*block=*/false);
    return !reaped_;
  }

  // Sends `sig` (SIGTERM by default), then waits at most timeout_s for the exit.
  Exit stop(double timeout_s = 10, int sig = SIGTERM) {
    if (pid_ > 0 && !reaped_) ::kill(pid_, sig);
    return wait_exit(timeout_s);
  }

  // Waits at most timeout_s for the process to end by itself (a startup error).
  Exit wait_exit(double timeout_s) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (running() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return exit_;
  }

  std::string describe() const {
    std::ostringstream os;
    os << "pid=" << pid_ << (exit_.exited ? " exited" : " running") << " code=" << exit_.code
       << " signal=" << exit_.signal << "\n--- log (last 4000 bytes) ---\n";
    const std::string text = log();
    os << (text.size() > 4000 ? text.substr(text.size() - 4000) : text);
    return os.str();
  }

 private:
  void reap(bool block) {
    int status = 0;
    pid_t r;
    do {
      r = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r != pid_) return;
    reaped_ = true;
    exit_.exited = true;
    if (WIFEXITED(status)) exit_.code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) exit_.signal = WTERMSIG(status);
  }

  std::string log_path_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int port_ = 0;
  Exit exit_;
};

}  // namespace bertrain::testing

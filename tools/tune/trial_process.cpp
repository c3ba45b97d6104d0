#include "tools/tune/trial_process.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace bertrain {

TrialProcess::TrialProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                           const std::string& log_path, int stop_signal, const std::vector<int>& cpus)
    : stop_signal_(stop_signal) {
  BERTRAIN_CHECK(!argv.empty(), "tune: an empty trial command");
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  BERTRAIN_CHECK(log >= 0, "cannot open the trial log '" << log_path << "': " << std::strerror(errno));
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_text;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    if (env.count(kv.substr(0, kv.find('='))) == 0) env_text.push_back(kv);
  }
  for (const auto& [key, value] : env) env_text.push_back(key + "=" + value);
  std::vector<char*> envp;
  for (std::string& kv : env_text) envp.push_back(kv.data());
  envp.push_back(nullptr);
  cpu_set_t cpu_set;
  CPU_ZERO(&cpu_set);
  for (int cpu : cpus) CPU_SET(cpu, &cpu_set);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) {
    const int err = errno;
    ::close(log);
    BERTRAIN_FAIL("tune: fork failed: " << std::strerror(err));
  }
  if (pid_ == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, stop_signal);
    if (::getppid() != parent) ::_exit(75);  // tune died before the line above: stop as the signal would
    for (int sig : {SIGTERM, SIGINT, SIGUSR1, SIGCHLD}) ::signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (!cpus.empty()) ::sched_setaffinity(0, sizeof(cpu_set), &cpu_set);
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    ::execvpe(args[0], args.data(), envp.data());
    std::fprintf(stderr, "bertrain: error: tune: cannot run '%s': %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(log);
}

TrialProcess::~TrialProcess() {
  if (pid_ > 0 && !ended_) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

void TrialProcess::stop() {
  if (!ended_) ::kill(pid_, stop_signal_);
}

bool TrialProcess::poll() {
  if (ended_) return true;
  int status = 0;
  const pid_t got = ::waitpid(pid_, &status, WNOHANG);
  if (got == pid_) {
    ended_ = true;
    status_ = status;
  } else if (got < 0 && errno != EINTR) {
    BERTRAIN_FAIL("tune: waitpid for trial process " << pid_ << " failed: " << std::strerror(errno));
  }
  return ended_;
}

std::string shell_syntax_error(const std::string& script) {
  int out[2];
  BERTRAIN_CHECK(::pipe2(out, O_CLOEXEC) == 0, "tune: pipe failed: " << std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], STDERR_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    ::execl("/bin/sh", "sh", "-n", "-c", script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  if (pid < 0) {
    ::close(out[0]);
    BERTRAIN_FAIL("tune: cannot start /bin/sh: " << std::strerror(errno));
  }
  std::string said;
  char buffer[512];
  for (ssize_t n; (n = ::read(out[0], buffer, sizeof(buffer))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    said.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  BERTRAIN_CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 127 && said.empty()),
                 "tune: cannot start /bin/sh to read --launcher");
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  while (!said.empty() && (said.back() == '\n' || said.back() == '\r')) said.pop_back();
  return said.empty() ? "sh -n exited with status " + std::to_string(WEXITSTATUS(status)) : said;
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
  }
  if (cpus.empty()) cpus.push_back(0);
  return cpus;
}

}  // namespace bertrain

// One trial of `bertrain tune` as a child process: started with its own environment additions and its output in
// a log file, in a process group of its own (a Ctrl-C at the terminal reaches tune, which stops each trial with
// its checkpoint, not every process at once), told to stop with its stop signal (SIGTERM or SIGUSR1: bertrain train
// checkpoints and exits 75 on either), and sent the same by the kernel if tune itself dies (PR_SET_PDEATHSIG), so
// no trial outlives its study.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace bertrain {

class TrialProcess {
 public:
  // Starts argv[0] (searched in PATH) with `env` added to tune's environment, stdout and stderr appended to
  // `log_path`, and, when `cpus` is not empty, only those CPUs allowed (trials sharing a machine's cores each get
  // their own, so that the training's thread pinning in each does not stack them onto the same cores). Throws
  // Error naming the log or the program when it cannot.
  TrialProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
               const std::string& log_path, int stop_signal, const std::vector<int>& cpus = {});
  ~TrialProcess();  // a process still running is killed (SIGKILL) and reaped: only on tune's own failure
  TrialProcess(const TrialProcess&) = delete;
  TrialProcess& operator=(const TrialProcess&) = delete;

  pid_t pid() const { return pid_; }
  void stop();  // the stop signal: bertrain train writes its checkpoint and exits 75
  // Whether it has ended; then status() is its wait status. Never blocks.
  bool poll();
  int status() const { return status_; }

 private:
  pid_t pid_ = -1;
  int stop_signal_ = 0;
  bool ended_ = false;
  int status_ = 0;
};

// The CPUs this process may run on (sched_getaffinity), in order.
std::vector<int> allowed_cpus();

// What /bin/sh says of shell text `script` when it cannot parse it (sh -n: read, not run), "" when it can. Throws
// Error when /bin/sh cannot be started.
std::string shell_syntax_error(const std::string& script);

}  // namespace bertrain

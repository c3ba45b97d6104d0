// `bertrain launch`: runs a training command and runs it again, with --resume, when it fails or is preempted,
// up to --max-restarts times: the automatic restart that Ray's FailureConfig gives Made-With-ML. Works for one
// process (`bertrain launch -- build/bertrain train ...`) and for a whole MPI job (`bertrain launch -- mpirun -np 4
// build/bertrain train ...`): the command's own --out names the run directory whose last/ decides --resume.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/count_text.h"
#include "core/error.h"
#include "core/files.h"
#include "engine/stop_signals.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/wait_status.h"

namespace bertrain {

namespace {

std::atomic<pid_t> child_pid{0};
std::atomic<int> launcher_signal{0};

// SIGTERM / SIGINT / SIGUSR1 / SIGHUP (a closed terminal) to the launcher: the job is being stopped on purpose. Pass
// the signal on to the command (bertrain checkpoints and exits 75; mpirun forwards SIGUSR1 to its ranks) and do not
// restart it. COMMAND runs in a process group of its own, so that a signal to launch's group (Ctrl-C in a terminal,
// kill -TERM -PGID) reaches it once, through here: Open MPI's mpirun takes a second SIGTERM, SIGINT or SIGHUP for
// "abort at once" and ends its ranks before their checkpoint.
void forward_signal(int sig) {
  launcher_signal = sig;
  const pid_t pid = child_pid.load();
  if (pid > 0) ::kill(pid, sig);
}

// Ctrl-Z (SIGTSTP) stops COMMAND's process group with launch, and SIGCONT (fg, bg) continues it: in a group of its
// own it is out of the terminal's reach. Async-signal-safe (kill, raise, sigaction, sigprocmask).
void pause_command(int sig) {
  const pid_t pid = child_pid.load();
  if (pid > 0) ::kill(-pid, sig == SIGCONT ? SIGCONT : SIGSTOP);
  if (sig == SIGTSTP) {
    struct sigaction stop {};
    stop.sa_handler = SIG_DFL;
    sigemptyset(&stop.sa_mask);
    sigaction(SIGTSTP, &stop, nullptr);
    sigset_t tstp;
    sigemptyset(&tstp);
    sigaddset(&tstp, SIGTSTP);
    sigprocmask(SIG_UNBLOCK, &tstp, nullptr);  // blocked while its handler runs: raised, it would wait until after
    ::raise(SIGTSTP);  // stops launch here; the SIGCONT that continues it runs this handler for SIGCONT
    stop.sa_handler = pause_command;
    sigaction(SIGTSTP, &stop, nullptr);
  }
}

// A closed output does not end the launcher (which then says why it stops) through SIGPIPE's default action. A
// handler, not SIG_IGN, which COMMAND would inherit: train stops on its closed output (engine/stop_signals.h).
void ignore_closed_output(int) {}

// "stdout" or "stderr" when what read it has gone away (a pipe without a reader: `bertrain launch ... | head`; a
// socket whose peer closed), "" otherwise. COMMAND shares them: restarted, it would meet the same closed output
// (train: SIGPIPE, a checkpoint and exit 75 after its first step) again, every time. A terminal that hung up (an ssh
// session ended under setsid) also polls as an error, but writes to it fail without SIGPIPE and a restart runs:
// only pipes and sockets are asked.
std::string closed_output() {
  for (const int fd : {1, 2}) {
    struct stat st;
    if (::fstat(fd, &st) != 0) continue;
    const short closed = S_ISFIFO(st.st_mode) ? POLLERR : S_ISSOCK(st.st_mode) ? (POLLERR | POLLHUP) : 0;
    pollfd p{fd, 0, 0};
    if (closed != 0 && ::poll(&p, 1, 0) == 1 && (p.revents & closed) != 0) return fd == 1 ? "stdout" : "stderr";
  }
  return "";
}

// bertrain's exit codes: 1 a failure while working, 75 stopped with a checkpoint; a signal (or 128 + its number,
// as a shell or mpirun reports a rank killed by one) is a preemption or a crash. Those are retried. 2 is a usage or
// input error, 3 a training that diverged (resumed, it repeats the same steps to the same end), and anything else
// (127: a shell or launcher in COMMAND did not find its program) cannot be mended by running it again.
bool worth_a_restart(int status) {
  if (WIFSIGNALED(status)) return true;
  if (!WIFEXITED(status)) return false;
  const int code = WEXITSTATUS(status);
  return code == 1 || code == 75 || code > 128;
}

// Runs `argv` with BERTRAIN_RESTARTS=`restarts` in its environment; returns its wait status. A COMMAND that cannot be
// started (not found, not executable) is the user's input: InputError naming it (exit 2), not a child's exit 127.
int run_attempt(const std::vector<std::string>& argv, const std::string& restarts) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The child writes execvp's errno here; a successful exec closes the pipe (O_CLOEXEC) with nothing written.
  int exec_error[2];
  BERTRAIN_CHECK(::pipe2(exec_error, O_CLOEXEC) == 0, "launch: pipe failed: " << std::strerror(errno));
  const pid_t launcher_pid = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(exec_error[0]);
    ::close(exec_error[1]);
    BERTRAIN_FAIL("launch: fork failed: " << std::strerror(errno));
  }
  if (pid == 0) {
    ::close(exec_error[0]);
    ::setpgid(0, 0);  // see forward_signal
    // Out of the terminal's foreground group, COMMAND must not read it (mpirun reads stdin for rank 0: it would be
    // stopped by SIGTTIN); a training reads no standard input.
    if (::isatty(STDIN_FILENO)) {
      const int devnull = ::open("/dev/null", O_RDONLY);
      if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    }
    // launch killed outright (kill -9, the OOM killer) stops COMMAND as a stop signal does, with its checkpoint,
    // rather than leaving it to train on alone holding its run directory.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != launcher_pid) ::_exit(128 + SIGTERM);  // launch died before the line above
    ::setenv("BERTRAIN_RESTARTS", restarts.c_str(), 1);
    ::execvp(args[0], args.data());
    const int error = errno;
    if (::write(exec_error[1], &error, sizeof(error)) < 0) {
      // The parent then sees the exit status 127 alone.
    }
    ::_exit(127);
  }
  ::close(exec_error[1]);
  ::setpgid(pid, pid);  // as the child does: whichever runs first, the group exists before a signal is passed on
  child_pid = pid;
  // A signal that came since the last attempt ended (forward_signal found no child to pass it on to) is passed on
  // now; a copy the child also got itself (a process group's signal) is one request to it (engine/stop_signals.h).
  if (const int sig = launcher_signal.load(); sig != 0) ::kill(pid, sig);
  int error = 0;
  ssize_t got;
  while ((got = ::read(exec_error[0], &error, sizeof(error))) < 0 && errno == EINTR) {
  }
  ::close(exec_error[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    BERTRAIN_CHECK(errno == EINTR, "launch: waitpid failed: " << std::strerror(errno));
  }
  child_pid = 0;
  if (got == static_cast<ssize_t>(sizeof(error))) {
    throw InputError("launch: cannot run '" + argv[0] + "': " + std::strerror(error));
  }
  return status;
}

}  // namespace

int run_launch(const std::vector<std::string>& args) {
  std::vector<std::string> own, command;
  const auto dashes = std::find(args.begin(), args.end(), "--");
  own.assign(args.begin(), dashes);
  if (dashes != args.end()) command.assign(dashes + 1, args.end());
  ArgParser p("launch",
              "Runs COMMAND and, when it fails while working (exit 1), is stopped with a checkpoint (75) or is killed\n"
              "by a signal, runs it again with --resume (added when the run directory of its --out has a checkpoint,\n"
              "last/trainer_state.json; also on the first attempt, for a requeued job, unless COMMAND has\n"
              "--overwrite), up to --max-restarts times; a usage or input error (2), a training that diverged (3),\n"
              "any other exit, or a command whose output is closed (launch | head: it would stop again) is not\n"
              "retried. Each attempt's end and every restart are logged on stderr and recorded in results.json\n"
              "(\"restarts\"). SIGTERM, SIGINT, SIGUSR1 and SIGHUP are passed on to COMMAND, which then ends\n"
              "without a restart (exit 75 when last/ holds a checkpoint to continue from).");
  p.usage("bertrain launch [--max-restarts N] [--restart-delay SECONDS] -- COMMAND [ARGS...]");
  p.epilog(kExitStatusHelp);
  p.option("max-restarts", "3", "how many times COMMAND is run again");
  p.option("restart-delay", "10", "seconds to wait before a restart").value_name("SECONDS");
  p.passes_on(train_arg_parser().option_names(),
              "COMMAND and its flags go after --: bertrain launch [options] -- bertrain train ...");
  if (!p.parse(own)) return 0;
  const int max_restarts = p.get_int("max-restarts");
  const double delay = p.get_double("restart-delay");
  if (max_restarts < 0) throw UsageError("launch: --max-restarts must be >= 0");
  if (!(delay >= 0)) throw UsageError("launch: --restart-delay must be >= 0");
  if (command.empty()) throw UsageError("launch: give the command after --, e.g. bertrain launch -- bertrain train ...");
  const std::string run_dir = option_value_in(command, "out");  // the last one given, as train takes it
  if (run_dir.empty()) throw UsageError("launch: the command has no --out RUN_DIR (needed to resume it)");

  struct sigaction action {};
  action.sa_handler = forward_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (const int sig : kStopSignals) {
    // One ignored on entry (`nohup`: SIGHUP) stays ignored, here and in COMMAND, which inherits it.
    if (!ignored_on_entry(sig)) sigaction(sig, &action, nullptr);
  }
  action.sa_handler = ignore_closed_output;
  if (!ignored_on_entry(SIGPIPE)) sigaction(SIGPIPE, &action, nullptr);
  action.sa_handler = pause_command;
  for (const int sig : {SIGTSTP, SIGCONT}) {
    if (!ignored_on_entry(sig)) sigaction(sig, &action, nullptr);
  }

  nlohmann::json restarts = nlohmann::json::array();
  for (int attempt = 0;; ++attempt) {
    if (const int sig = launcher_signal.load(); sig != 0) {  // during the restart delay: no further attempt
      const bool resumable = file_exists(run_dir + "/last/trainer_state.json");
      const std::string when = attempt == 0 ? "before COMMAND started" : "before restart " + std::to_string(attempt);
      std::fprintf(stderr, "bertrain launch: stopped by %s %s; not restarting%s\n", signal_name(sig).c_str(),
                   when.c_str(), resumable ? " (exit 75: the checkpoint in last/ continues it)" : "");
      return resumable ? kExitCheckpointed : 128 + sig;
    }
    std::vector<std::string> argv = command;
    const bool has_checkpoint = file_exists(run_dir + "/last/trainer_state.json");
    // A checkpoint is resumed: a restart's, and on the first attempt one a requeued job (Slurm) left, unless the
    // command says --overwrite, which asks the first attempt to replace that run. After it the checkpoint is this
    // job's own: --overwrite would refuse to go with --resume.
    const bool overwrite_first = attempt == 0 && std::find(argv.begin(), argv.end(), "--overwrite") != argv.end();
    if (has_checkpoint && !overwrite_first) {
      argv.erase(std::remove(argv.begin(), argv.end(), "--overwrite"), argv.end());
      if (std::find(argv.begin(), argv.end(), "--resume") == argv.end()) argv.push_back("--resume");
    }
    const auto attempt_start = std::filesystem::file_time_type::clock::now();
    const int status = run_attempt(argv, restarts.dump());
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
    const std::string why = describe_wait_status(status);
    // results.json is the last thing a run writes: written during this attempt, the training finished and only
    // a rank's shutdown failed (e.g. one killed inside MPI_Finalize). Running it again would have nothing to do.
    std::error_code ec;
    const auto results_time = std::filesystem::last_write_time(run_dir + "/results.json", ec);
    if (!ec && results_time >= attempt_start && launcher_signal == 0) {
      std::fprintf(stderr, "bertrain launch: %s after the run had finished (%s/results.json written): done\n",
                   why.c_str(), run_dir.c_str());
      return 0;
    }
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (launcher_signal != 0) {
      // Stopped as asked: with a checkpoint to continue from that is 75 ("resume me", what a Slurm script requeues
      // on) whatever status the command ended with; Open MPI's mpirun ends with 1 when SIGTERM stops its ranks.
      const bool resumable = code != 2 && code != kExitDiverged && file_exists(run_dir + "/last/trainer_state.json");
      std::fprintf(stderr, "bertrain launch: stopped by %s: %s; not restarting%s\n",
                   signal_name(launcher_signal.load()).c_str(), why.c_str(),
                   resumable && code != kExitCheckpointed ? " (exit 75: the checkpoint in last/ continues it)" : "");
      return resumable ? kExitCheckpointed : code;
    }
    if (!worth_a_restart(status)) {
      const char* what = code == 2               ? " (a usage or input error)"
                         : code == kExitDiverged ? " (the training diverged: resumed, it would diverge again)"
                                                 : " (not a failure a restart can mend)";
      std::fprintf(stderr, "bertrain launch: %s%s: not restarting\n", why.c_str(), what);
      return code;
    }
    if (const std::string closed = closed_output(); !closed.empty()) {
      std::fprintf(stderr, "bertrain launch: %s; its %s is closed (what read it went away), which a restart would "
                   "meet again: not restarting\n", why.c_str(), closed.c_str());
      return code;
    }
    if (attempt >= max_restarts) {
      std::fprintf(stderr, "bertrain launch: %s; giving up after %s\n", why.c_str(),
                   count_of(max_restarts, "restart").c_str());
      return code;
    }
    restarts.push_back({{"restart", attempt + 1}, {"after", why}});
    std::fprintf(stderr, "bertrain launch: %s; restart %d of %d%s in %g s\n", why.c_str(), attempt + 1, max_restarts,
                 file_exists(run_dir + "/last/trainer_state.json") ? " with --resume" : " (no checkpoint yet)", delay);
    std::fflush(stderr);
    // In slices, so that a stop signal during the delay ends launch now rather than after it (and a restart).
    using Clock = std::chrono::steady_clock;
    const Clock::time_point restart_at =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(delay));
    while (launcher_signal == 0 && Clock::now() < restart_at) {
      std::this_thread::sleep_for(std::min<Clock::duration>(std::chrono::milliseconds(50), restart_at - Clock::now()));
    }
  }
}

}  // namespace bertrain

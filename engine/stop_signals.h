// Preemption: SIGTERM (Slurm's and Kubernetes' stop), SIGINT (Ctrl-C), SIGUSR1 (Slurm's --signal=USR1@T
// warning before the time limit) and SIGHUP (the terminal or ssh session closed) ask a training run to stop at the
// next optimizer step, after writing a checkpoint; a second such signal ends the process at once (the signal's
// default action), except the first one again within kSameSignalWindowS: a signal to every process of a job (a
// scheduler's, `kill -TERM -PGID`) reaches bertrain both itself and through what runs it and passes signals on
// (`bertrain launch`, mpirun), and that is one request.
// A command whose output is only progress (train: its products are files) may also stop on SIGPIPE, when what read
// its stdout or stderr went away (`train ... | head`): with a checkpoint, as on the others, not killed between two.
// While a StopSignals exists the handlers are installed; the previous ones come back when it is destroyed. A signal
// ignored when it is made (SIG_IGN: under `nohup`, SIGHUP) stays ignored.
#pragma once

#include <csignal>
#include <stdexcept>
#include <string>

namespace bertrain {

// The signals that ask a command to stop (see above); serve drains on them, launch passes them on.
inline constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGUSR1, SIGHUP};
// Seconds within which the first stop signal, arriving again, is the same request (see above): passing a signal on
// takes microseconds. To end a command at once, the same signal is sent again after this (or another one at once).
inline constexpr double kSameSignalWindowS = 1.0;

// Whether `sig` is ignored (SIG_IGN), as `nohup` leaves SIGHUP and a shell's background job SIGINT: a command keeps
// such a signal ignored rather than stopping on it.
bool ignored_on_entry(int sig);

// Ends the process by `sig`'s default action, as it would have ended without a StopSignals (after a command has
// said what the signal left behind). Returns 128 + sig, which it never reaches.
int end_by_signal(int sig);

// The exit status of a run that stopped on a signal after writing its checkpoint: "resume me"
// (EX_TEMPFAIL from sysexits.h: a temporary failure, try again).
inline constexpr int kExitCheckpointed = 75;

// "SIGTERM", "SIGINT", "SIGUSR1", "SIGHUP", "SIGPIPE", else "signal N": how every command names the signal that
// stopped it.
inline std::string signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE";
    default: return "signal " + std::to_string(sig);
  }
}

class StopSignals {
 public:
  // What a write to a closed pipe (SIGPIPE) does while it exists: end the process (its default action: a command
  // whose stdout is its product, predict | head), or stop it like the signals above, once; writes after it fail
  // with EPIPE, also after the StopSignals is gone. A stop signal after it takes its place (no second signal).
  enum class ClosedOutput { kEnds, kStops };
  explicit StopSignals(ClosedOutput closed_output = ClosedOutput::kEnds);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The first signal received since construction, 0 when none.
  static int received();
  // Whether a SIGPIPE came since construction (ClosedOutput::kStops): the output has no reader left.
  static bool output_closed();
};

// Thrown on every rank when the run stopped on a signal after its checkpoint; `what()` says where.
class TrainingStopped : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace bertrain

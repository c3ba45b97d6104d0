// The exception types of bertrain and the always-on precondition checks.
// Every failure carries what went wrong and where (file:line); main() prints it on one line.
#pragma once

#include <new>
#include <sstream>
#include <stdexcept>
#include <string>

namespace bertrain {

// A failure while working: main() exits 1, which a launcher may retry (a full disk, a lost peer).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A failure every rank of a data-parallel job meets alike, because a collective made what they check the same (a loss
// summed over ranks that is not finite: DivergedError): under mpirun rank 0 reports it, once, as for an input error.
class SharedError : public Error {
 public:
  using Error::Error;
};

// A training whose loss, gradient or weights are no longer finite (the loss and gradient are summed over ranks, so
// every rank meets it alike; the weights are checked by the rank that writes the checkpoint). Running it again from
// its checkpoint repeats the same steps bit for bit to the same end, so main() exits kExitDiverged and `bertrain
// launch` does not retry it: the settings (a lower --lr) must change, in a new run.
class DivergedError : public SharedError {
 public:
  using SharedError::SharedError;
};
inline constexpr int kExitDiverged = 3;

// A failure in what the user gave: a flag value, a data file, a model or run directory that does not fit the
// command. Running the same command again cannot succeed, so main() exits 2, as for a usage error, and
// `bertrain launch` never retries it.
class InputError : public Error {
 public:
  using Error::Error;
};

// Runs `step`, one that reads and checks the user's inputs; any failure in it but running out of memory or a
// divergence is an InputError with the same message. Commands wrap their loading steps in it instead of marking every
// check in the layers below, which cannot know whether a file they read was the user's input.
template <typename Step>
decltype(auto) input_step(Step&& step) {
  try {
    return step();
  } catch (const InputError&) {
    throw;
  } catch (const DivergedError&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    throw InputError(e.what());
  }
}

// Builds "message [file:line]" and throws Error. Out of line so the macros stay small.
[[noreturn]] void throw_error(const char* file, int line, const std::string& message);

// `what` without the " [file:line]" throw_error ends it with, for messages that leave the machine (an HTTP answer
// tells a client what was wrong with its request, not where in bertrain's source that was found).
std::string without_source_location(const std::string& what);

}  // namespace bertrain

// BERTRAIN_CHECK(cond, a << b << c): throws bertrain::Error with the streamed message when cond is false.
// Always on (never compiled out): these guard user input and shapes, not just programming errors.
#define BERTRAIN_CHECK(cond, message)                                   \
  do {                                                                  \
    if (!(cond)) {                                                      \
      std::ostringstream bertrain_check_os_;                            \
      bertrain_check_os_ << message;                                    \
      ::bertrain::throw_error(__FILE__, __LINE__, bertrain_check_os_.str()); \
    }                                                                   \
  } while (0)

#define BERTRAIN_FAIL(message) BERTRAIN_CHECK(false, message)

#include "tools/wait_status.h"

#include <sys/wait.h>

#include <cstring>

namespace bertrain {

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    return "exit status " + std::to_string(code) + (code == 75 ? " (stopped with a checkpoint)" : "");
  }
  if (WIFSIGNALED(status)) {
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  }
  return "status " + std::to_string(status);
}

}  // namespace bertrain

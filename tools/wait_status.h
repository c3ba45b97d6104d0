// How a child process ended, in words, for the commands that run others (launch, tune).
#pragma once

#include <string>

namespace bertrain {

// A waitpid status as "exit status 2", "exit status 75 (stopped with a checkpoint)", "killed by signal 9 (Killed)".
std::string describe_wait_status(int status);

}  // namespace bertrain

// bertrain subcommands; each takes the arguments after its name and returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace bertrain {

int run_bench(const std::vector<std::string>& args);  // tools/bench_step.cpp

}  // namespace bertrain

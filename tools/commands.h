// bertrain subcommands; each takes the arguments after its name and returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace bertrain {

int run_bench(const std::vector<std::string>& args);     // tools/bench_step.cpp
int run_bench_tokenize(const std::vector<std::string>& args);   // tools/bench_tokenize.cpp
int run_bench_allreduce(const std::vector<std::string>& args);  // tools/bench_allreduce.cpp
// tools/bench_kernels/ with CUDA; without, tools/bench_step.cpp's stub (exit 1, "no CUDA support").
int run_bench_kernels(const std::vector<std::string>& args);
int run_train(const std::vector<std::string>& args);     // tools/train_command.cpp
int run_evaluate(const std::vector<std::string>& args);  // tools/evaluate_command.cpp
int run_predict(const std::vector<std::string>& args);   // tools/predict_command.cpp
int run_tokenize(const std::vector<std::string>& args);  // tools/tokenize_command.cpp
int run_convert(const std::vector<std::string>& args);   // tools/convert_command.cpp
int run_launch(const std::vector<std::string>& args);    // tools/launch_command.cpp
int run_report(const std::vector<std::string>& args);    // tools/report_command.cpp

}  // namespace bertrain

// bertrain subcommands; each takes the arguments after its name and returns the process exit code.
#pragma once

#include <string>
#include <vector>

#include "engine/train_args.h"
#include "tools/args.h"

namespace bertrain {

// The exit statuses a launcher acts on, for bertrain --help and train --help (README: Exit status).
inline constexpr const char kExitStatusHelp[] =
    "exit status:\n"
    "  0   done (also: train --resume of a run that already trained its epochs)\n"
    "  1   a failure while working (a full disk, a lost peer or device): worth a retry\n"
    "  2   a usage or input error (a bad flag value, missing or invalid data, model or run directory): never retried\n"
    "  3   train diverged (a loss, gradient or weights not finite): a retry from its checkpoint would repeat it; start\n"
    "      a new run (another --out, or --overwrite) with a lower --lr\n"
    "  75  train stopped by SIGTERM, SIGINT, SIGUSR1, SIGHUP or SIGPIPE (its output closed) after writing its\n"
    "      checkpoint: run it again with --resume\n"
    "  bertrain launch restarts a command on 1, 75 and death by a signal, never on 2 or 3.\n";

int run_bench(const std::vector<std::string>& args);     // tools/bench_step.cpp
int run_bench_tokenize(const std::vector<std::string>& args);   // tools/bench_tokenize.cpp
int run_bench_allreduce(const std::vector<std::string>& args);  // tools/bench_allreduce.cpp
// tools/bench_kernels/ with CUDA; without, tools/bench_step.cpp's stub (exit 1, "no CUDA support").
int run_bench_kernels(const std::vector<std::string>& args);
int run_train(const std::vector<std::string>& args);     // tools/train_command.cpp
// train's flags, defaults and --help (tools/train_command.cpp): tune checks its TRAIN FLAGS and space against it.
ArgParser train_arg_parser();
// The settings a parsed train command line gives, checked as train checks them before it loads anything: UsageError
// or InputError naming the flag. tune checks its first trial's command with it.
TrainArgs train_args_of(const ArgParser& p);
int run_tune(const std::vector<std::string>& args);      // tools/tune/tune_command.cpp
int run_evaluate(const std::vector<std::string>& args);  // tools/evaluate_command.cpp
int run_predict(const std::vector<std::string>& args);   // tools/predict_command.cpp
int run_tokenize(const std::vector<std::string>& args);  // tools/tokenize_command.cpp
int run_convert(const std::vector<std::string>& args);   // tools/convert_command.cpp
int run_launch(const std::vector<std::string>& args);    // tools/launch_command.cpp
int run_report(const std::vector<std::string>& args);    // tools/report_command.cpp
int run_serve(const std::vector<std::string>& args);     // tools/serve/serve_command.cpp

}  // namespace bertrain

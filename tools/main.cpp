// bertrain: the command-line entry point. Dispatches to subcommands and turns every failure into one line
// on stderr and the exit code a launcher acts on: 2 for usage and input errors and 3 for a training that diverged
// (never worth a retry), 1 for a failure while working (retryable). 75, stopped with a checkpoint, comes from train
// itself.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "core/build_info.h"
#include "core/error.h"
#include "core/utf8.h"
#include "engine/stop_signals.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/near_names.h"

namespace {

const char kUsage[] =
    "usage: bertrain [--version] [--help] COMMAND [options]\n"
    "\n"
    "Fine-tunes BERT-family encoders (BERT, RoBERTa, XLM-R, CamemBERT, Data2VecText, DistilBERT, ELECTRA)\n"
    "for text classification (C++/CUDA, no framework).\n"
    "\n"
    "commands:\n"
    "  train          fine-tune a model directory on a labelled CSV, TSV or JSON Lines file (single- or\n"
    "                 multi-label; best and last checkpoints)\n"
    "  tune           search hyper-parameters: trials of train run in parallel, TPE / random / grid search, ASHA\n"
    "                 early stopping, the best trial's model kept (Made-With-ML's Ray Tune step)\n"
    "  evaluate       precision / recall / F1 (Made-With-ML's, or scikit-learn's multi-label averages) on a file\n"
    "  predict        label probabilities for one text, or for every row of a file (streamed, JSON Lines)\n"
    "  tokenize       token ids of a text or of every row of a file, as the model sees them\n"
    "  serve          an HTTP server for a model: Made-With-ML's, bertrain's and text-embeddings-inference's APIs,\n"
    "                 requests batched by tokens, Prometheus metrics\n"
    "  launch         run a training command again with --resume when it fails or is preempted (--max-restarts)\n"
    "  report         an HTML page of training runs: loss, learning rate, throughput, per-class metrics and\n"
    "                 confusion matrix as charts (several runs overlaid)\n"
    "  convert        write a model directory's pytorch_model.bin as model.safetensors (transformers loads it)\n"
    "  bench step     time training steps (forward + backward + Adam) of a random BERT, CPU or GPU\n"
    "  bench tokenize time text cleaning and tokenization\n"
    "  bench allreduce  gradient allreduce bandwidth across the ranks of an mpirun job\n"
    "  bench kernels  check each CUDA kernel against its CPU twin, then time it (GB/s, TFLOP/s, % of peak)\n"
    "\n"
    "Run 'bertrain COMMAND --help' (or 'bertrain help COMMAND') for the options of a command.\n"
    "\n";

int dispatch(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string& command = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  const auto is_help = [](const std::string& word) { return word == "--help" || word == "-h" || word == "help"; };
  if (is_help(command)) {
    // "bertrain help train" is "bertrain train --help", and "bertrain help bench step" "bertrain bench step --help".
    const std::size_t words = !rest.empty() && rest[0] == "bench" ? 2 : 1;
    if (!rest.empty() && rest.size() <= words && !is_help(rest[0])) {
      std::vector<std::string> asked(rest);
      asked.push_back("--help");
      return dispatch(asked);
    }
    if (rest.size() > words) {
      throw bertrain::UsageError(command + " takes at most one COMMAND (got '" + rest[words] + "')");
    }
    std::fputs(kUsage, stdout);
    std::fputs(bertrain::kExitStatusHelp, stdout);
    return 0;
  }
  if (command == "--version" || command == "version") {
    if (!rest.empty()) throw bertrain::UsageError(command + " takes no arguments (got '" + rest[0] + "')");
    std::fputs(bertrain::build_info().c_str(), stdout);
    return 0;
  }
  if (command == "train") return bertrain::run_train(rest);
  if (command == "tune") return bertrain::run_tune(rest);
  if (command == "evaluate") return bertrain::run_evaluate(rest);
  if (command == "predict") return bertrain::run_predict(rest);
  if (command == "tokenize") return bertrain::run_tokenize(rest);
  if (command == "convert") return bertrain::run_convert(rest);
  if (command == "launch") return bertrain::run_launch(rest);
  if (command == "report") return bertrain::run_report(rest);
  if (command == "serve") return bertrain::run_serve(rest);
  if (command == "bench") return bertrain::run_bench(rest);
  const std::string hint = bertrain::did_you_mean(
      bertrain::near_names(command, {"train", "tune", "evaluate", "predict", "tokenize", "convert", "launch", "report",
                                     "serve", "bench", "help", "version"}),
      "");
  throw bertrain::UsageError("unknown command '" + command + "'" + (hint.empty() ? " (see bertrain --help)" : hint));
}

// Output that did not all reach stdout (a full disk, /dev/full, a file-size limit) is an error, exit 1: a
// redirected `predict` or `tokenize` must not end with status 0 and its output lost.
// A train whose output was closed (SIGPIPE) stopped with a checkpoint or, in its last lines, finished: its products
// are files, and what it printed had no reader left.
int checked_stdout(int rc) {
  std::cout.flush();
  const bool flushed = std::fflush(stdout) == 0;
  const int error = errno;
  if (flushed && !std::ferror(stdout) && std::cout.good()) return rc;
  if (bertrain::StopSignals::output_closed()) return rc;
  std::fprintf(stderr, "bertrain: error: writing to stdout: %s\n",
               flushed ? "an earlier write failed (output is missing)" : std::strerror(error));
  return rc == 0 ? 1 : rc;
}

// Prints an error line after what stdout holds: with both redirected to one file, a line printed before the error
// (resuming from ...) came after it.
// One line of valid UTF-8 whatever the message quotes: a tensor name, a column or a path taken from a file may hold a
// line feed or bytes that are not UTF-8 (escaped as \xHH), which would split the line or break a reader of stderr.
void print_error(const std::string& line) {
  std::cout.flush();
  std::fflush(stdout);
  std::fprintf(stderr, "%s\n", bertrain::escape_for_message(line).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  // A file-size limit (ulimit -f) would kill the process on the write that crosses it; ignored, that write
  // fails with EFBIG and becomes an error naming the file, like a full disk, with the previous checkpoint intact.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    return checked_stdout(dispatch(std::vector<std::string>(argv + 1, argv + argc)));
  } catch (const bertrain::UsageError& e) {
    print_error(std::string("bertrain: ") + e.what());
    return 2;
  } catch (const bertrain::InputError& e) {
    print_error(std::string("bertrain: error: ") + e.what());
    return 2;
  } catch (const bertrain::DivergedError& e) {
    print_error(std::string("bertrain: error: ") + e.what());
    return bertrain::kExitDiverged;
  } catch (const std::bad_alloc&) {
    // A row is read whole before it is cut to --max-length: its field is held about six times while read.
    print_error("bertrain: error: out of memory: what was asked for (a model, batch or sequence size, or a data row "
                "of hundreds of megabytes) does not fit this machine's memory");
    return 1;
  } catch (const std::exception& e) {
    print_error(std::string("bertrain: error: ") + e.what());
    return 1;
  }
}

// The command-line flags shared by train, evaluate and predict: how a dataset file is read (format, columns,
// labels, bad rows, max length) and where inference runs (device, precision, batch size).
#pragma once

#include "data/dataset.h"
#include "engine/predictor.h"
#include "tools/args.h"

namespace bertrain {

// --format, --text-columns, --label-column, --label-separator, --skip-bad-rows, --max-length. With `training`
// the defaults are Made-With-ML's; otherwise an absent flag means "as the model was trained", and --no-clean is
// among them (add_no_clean_flag).
void add_data_flags(ArgParser& p, bool training);
// --no-clean for a command that runs a trained model (evaluate, predict, serve): the text as it is, whatever the
// model's config.json records.
void add_no_clean_flag(ArgParser& p);
// Overrides `options` with the flags given (all of them with `training`; --no-clean where the command has it), and
// lists the dataset flags the command has in options->command_flags.
void apply_data_flags(const ArgParser& p, DatasetOptions* options);
// The dataset flags `p` declares, for DatasetOptions::command_flags: what messages about a file may suggest.
std::vector<std::string> dataset_flags_of(const ArgParser& p);

// --data's file as `command` opens it: "-" is standard input (/dev/stdin), which has no extension to tell its format,
// so --format must be given with it (UsageError otherwise). For predict, tokenize and evaluate, which read their
// data once.
std::string data_file(const ArgParser& p, const std::string& command);

// A text given on the command line (--text, --title, --description) must be UTF-8, as a dataset file's text must:
// throws UsageError naming `flag` and quoting the bytes.
void require_utf8_text(const std::string& text, const std::string& command, const std::string& flag);

// --device, --precision, --batch-size, --threads (evaluate, predict).
void add_inference_flags(ArgParser& p);
InferenceOptions inference_options(const ArgParser& p);

}  // namespace bertrain

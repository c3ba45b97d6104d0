// What a training run keeps in RUN_DIR (layout in engine/trainer.h): finding the run a --resume continues or
// refusing to overwrite one, checkpoints (last/, checkpoints/step-<S>/) and best/ swapped in atomically, the step
// checkpoints kept (--keep / --save-total-limit), the optimizer state kept or dropped (--save-optimizer), the run
// files, and the disk a run uses.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "dist/communicator.h"
#include "engine/trainer.h"
#include "engine/training_backend.h"
#include "model/model_dir.h"

namespace bertrain {

// Where a run reads and writes: RUN_DIR/last and best, and the model directory it starts from.
struct RunDirs {
  std::string last, best;
  std::string source;  // last/ when resuming, else --model (a RUN_DIR given as --model: its best/)
  std::string tokenizer;  // the directory whose tokenizer files are copied into every checkpoint
  std::vector<std::string> to_clear;  // --overwrite: the earlier run's files, removed once the inputs are checked
  bool finished = false;  // --resume of a run that had finished the training asked for (results.json written)
};

// What a run writes into RUN_DIR; a fresh run refuses a RUN_DIR that holds any of them (unless --overwrite).
inline constexpr const char* kRunFiles[] = {"last",         "best",         "checkpoints", "metrics.jsonl",
                                            "results.json", "evaluation.json", "report.html"};

// The entries of kRunFiles that `dir` holds, in that order.
std::vector<std::string> run_files_in(const std::string& dir);

// What reading the model at `path` (a RUN_DIR or a model directory, as resolve_model_dir takes it) must not lose:
// every file of the model directory it reads and, when that is a run's (a RUN_DIR, or its best/), the run's
// checkpoints (last/, best/, checkpoints/), metrics.jsonl and results.json. An output of evaluate or predict may be
// none of them (check_writable_file's inputs); evaluation.json and report.html, which evaluate and report write into
// a run, are not among them.
std::vector<std::string> model_and_run_files(const std::string& path);

// Whether `path` is `folder` or lies inside it, links resolved as far as the paths exist.
bool is_inside(const std::string& path, const std::string& folder);

// The optimizer state's file in a checkpoint directory (engine/checkpoint.h format).
inline constexpr const char* kOptimizerFile = "optimizer.safetensors";

// --save-optimizer: whether checkpoints hold the Adam moments (optimizer.safetensors, twice the model's size).
enum class OptimizerSaving {
  kAlways,  // every checkpoint, kept after the run: --resume with more --epochs / --max-steps continues exactly
  kDuring,  // while training (a stopped or killed run resumes exactly); dropped when the run finishes
  kNever,   // never: a stopped run cannot be resumed, only restarted from its weights
};
OptimizerSaving parse_optimizer_saving(const std::string& text);  // Error naming --save-optimizer
std::string to_string(OptimizerSaving saving);

// Locks RUN_DIR into `lock` and repairs an interrupted checkpoint swap (rank 0), then checks that --resume finds a
// run to continue, or that a fresh run does not overwrite one. Every rank calls it.
RunDirs prepare_run_dir(const TrainArgs& args, Communicator& comm, std::optional<DirectoryLock>* lock);

// DIR/trainer_state.json (a resumable checkpoint's state), its fields' types and signs checked: an Error naming the
// file and the field for a state no checkpoint writes (a damaged or hand-edited file), not a library's type error
// or a run that resumes at a step that never was.
nlohmann::json read_trainer_state(const std::string& dir);

// The folder of RUN_DIR's resumable checkpoint, for a reader that does not repair RUN_DIR: last/, or last.old where a
// crash interrupted a checkpoint swap (prepare_run_dir puts it back when the run next trains).
std::string checkpoint_folder(const std::string& out_dir);

// A path a checkpoint's params recorded as given (--train-data data.csv), as this process finds it: a relative one
// taken from the folder the training ran in (the state's "cwd") when this process runs elsewhere.
std::string recorded_path(const nlohmann::json& state, const std::string& path);

// The folder this process runs in, as a checkpoint records it ("cwd").
std::string working_directory();

// {"vocab.txt": file_fingerprint, ...}: the tokenizer files (model/model_dir.h's tokenizer_file_names()) DIR holds.
// A checkpoint records those it was written with, and --resume compares them: a damaged vocabulary is a valid one
// that tokenizes differently, which nothing else would notice.
nlohmann::json tokenizer_fingerprints(const std::string& dir);

// RUN_DIR/metrics.jsonl (one line per evaluation) and, when given, results.json; each replaced atomically.
void write_run_files(const std::string& out, const nlohmann::json& history, const nlohmann::json* results);

// Replaces last/ (and for a step checkpoint with --keep, writes checkpoints/step-<S>/ and removes the step
// checkpoints beyond the newest --keep) with `weights`, the optimizer state (unless --save-optimizer never) and the
// trainer `state`, each directory swapped in atomically.
void write_checkpoint(const TrainArgs& args, const RunDirs& dirs, const LoadedModel& model, TrainingBackend& engine,
                      const std::vector<float>& weights, const nlohmann::json& state, bool step_checkpoint);
// best/: the model directory of the best evaluation so far, swapped in atomically. `in_last`: last/ holds these
// `weights` (the checkpoint of the same evaluation), whose weights file best/ then shares (a hard link, or a copy
// where the filesystem has none) instead of writing it again.
void save_best(const RunDirs& dirs, const LoadedModel& model, const std::vector<float>& weights, bool in_last);
// --save-optimizer during, once the run in `out_dir` has finished (or tune stopped it for good): removes
// optimizer.safetensors from last/ and the step checkpoints.
void drop_optimizer_state(const std::string& out_dir);

// "184.2 MB in RUN_DIR (best/ 91.1 MB, last/ 91.1 MB, ...)": what the run occupies, its largest parts named.
std::string disk_use_summary(const std::string& out_dir);

}  // namespace bertrain

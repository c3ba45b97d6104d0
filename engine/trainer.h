// The training workflow of `bertrain train`: Made-With-ML's fine-tuning loop (train, validate,
// ReduceLROnPlateau on val_loss, keep the best epoch), with checkpoints that resume bit for bit.
//
// RUN_DIR layout:
//   metrics.jsonl   one JSON object per finished epoch (epoch, lr, train_loss, val_loss, samples_per_s, elapsed_s)
//   results.json    parameters, dataset sizes, per-epoch metrics, best epoch, total time (written at the end)
//   best/           model directory of the epoch with the lowest val_loss so far
//   last/           model directory of the latest checkpoint (an epoch's end, or every --save-steps optimizer
//                   steps) + optimizer.safetensors + trainer_state.json: --resume continues from it, mid-epoch
//                   included, bit for bit
//   checkpoints/    with --keep K: the newest K step checkpoints, step-<S>/ (the same content as last/ had)
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "data/dataset.h"
#include "model/model_dir.h"

namespace bertrain {

struct TrainArgs {
  std::string model_dir;    // Hugging Face BERT directory (config.json, model.safetensors, vocab.txt)
  std::string train_data;   // dataset file (CSV, TSV, JSON Lines) with the text and label columns
  std::string val_data;     // optional; empty: a split of train_data (stratified by label when single-label)
  // How the files are read: format, text and label columns, multi-label, bad rows, max_length (0 in
  // data.max_length: the model's max_position_embeddings). data.clean is `clean` below.
  DatasetOptions data;
  double val_fraction = 0.2;
  std::string out_dir;
  int epochs = 10;
  int batch_size = 256;     // global batch
  double lr = 1e-4;
  double dropout = 0.5;     // classifier dropout
  double lr_factor = 0.8;
  int lr_patience = 3;
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_eps = 1e-8, weight_decay = 0.0;
  bool class_weights = false;  // BCE weights 1 / (training rows of the class)
  int num_samples = 0;         // 0: all rows
  uint64_t seed = 42;          // classifier init, dropout masks, shuffling
  uint64_t split_seed = 1234;  // the train/validation split (the original's)
  bool shuffle = false;        // reshuffle the training batches every epoch (the original keeps one order)
  bool clean = true;           // Made-With-ML's clean_text
  HeadInit head_init = HeadInit::kTorch;  // a new classifier head: nn.Linear's uniform, or Hugging Face's normal
  std::string device = "auto";
  std::string precision = "fp32";
  double collective_timeout_s = 300;  // multi-GPU: a collective slower than this ends the job
  std::string grad_reduce = "fp32";   // multi-GPU: fp32 | bf16 gradients on the wire
  int save_steps = 0;          // > 0: also a resumable checkpoint (last/) every this many optimizer steps
  int keep = 0;                // step checkpoints also kept as RUN_DIR/checkpoints/step-<S>, the newest `keep`
  std::string mlflow_dir;      // non-empty: log the run to this MLflow file store (engine/mlflow_run.h)
  std::string experiment = "bertrain";  // MLflow experiment name
  std::string run_name;        // MLflow run name; empty: RUN_DIR's folder name
  int log_steps = 0;           // > 0: also the MLflow metric step_train_loss every this many batches
  bool resume = false;
  bool overwrite = false;      // a fresh run into a RUN_DIR holding an earlier run's files: remove them first
  int threads = 0;             // OpenMP threads, 0: default
  bool quiet = false;          // no per-epoch log lines
};

class Communicator;

struct TrainingOutcome {
  nlohmann::json results;         // results.json's content
  bool already_finished = false;  // --resume of a run that had trained its --epochs: nothing was done
};

// Runs the training and returns results.json's content. Throws Error on bad input, before writing anything
// when the inputs can be checked up front.
//
// Data parallelism: every rank of `comm` runs this with the same arguments. Rank 0's initial parameters
// are broadcast; each rank takes its slice of every global batch (data/batcher.h); gradients and losses
// are summed over ranks, so all ranks take the same optimizer steps and learning-rate decisions, and N
// ranks compute what one process computes with the same global batch (up to float32 summation order).
// Only rank 0 prints and writes RUN_DIR.
TrainingOutcome run_training(const TrainArgs& args, Communicator& comm);

}  // namespace bertrain

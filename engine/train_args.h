// The settings of `bertrain train` (TrainArgs), checked (validate_train_args) and as recorded in results.json,
// trainer_state.json and MLflow (train_args_json).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "data/dataset.h"
#include "model/model_dir.h"

namespace bertrain {

struct TrainArgs {
  std::string model_dir;    // Hugging Face model directory (config.json, weights, tokenizer.json or vocab.txt)
  std::string train_data;   // dataset file (CSV, TSV, JSON Lines) with the text and label columns
  std::string val_data;     // optional; empty: a split of train_data (stratified by label when single-label)
  // How the files are read: format, text and label columns, multi-label, bad rows, max_length (0 in
  // data.max_length: the model's max_position_embeddings). data.clean is `clean` below.
  DatasetOptions data;
  double val_fraction = 0.2;
  std::string out_dir;
  int epochs = 10;
  int batch_size = 256;     // global batch (of a micro-batch with --grad-accum-steps: an optimizer step takes K of them)
  int grad_accum_steps = 1; // K: micro-batches per optimizer step, their gradients summed (Trainer's gradient accumulation)
  long max_steps = 0;       // > 0: train this many optimizer steps, overriding epochs (Trainer's max_steps)
  double lr = 1e-4;
  std::string lr_scheduler = "plateau";  // plateau (per evaluation, on val_loss) | linear | cosine | constant (per step)
  long warmup_steps = 0;    // linear warmup from 0 over this many steps (step-wise schedules only)
  double warmup_ratio = 0;  // or over this fraction of the training steps (rounded up, as Trainer)
  double dropout = 0.5;     // classifier dropout
  double lr_factor = 0.8;
  int lr_patience = 3;
  long eval_steps = 0;      // > 0: validate every this many optimizer steps (and at the end) instead of every epoch
  std::string metric_for_best = "val_loss";  // val_loss (lower is better) | f1 (weighted) | accuracy: picks best/
  int early_stopping_patience = 0;     // > 0: stop after this many evaluations without improvement (Trainer's)
  double early_stopping_threshold = 0; // an improvement must exceed this to reset the patience
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_eps = 1e-8, weight_decay = 0.0;
  double max_grad_norm = 0;    // > 0: clip the gradient's global L2 norm to this (Trainer's max_grad_norm; 0: off)
  bool gradient_checkpointing = false;  // recompute each layer's activations in backward (Trainer's, of the same name)
  bool class_weights = false;  // BCE weights 1 / (training rows of the class)
  int num_samples = 0;         // 0: all rows
  uint64_t seed = 42;          // classifier init, dropout masks, shuffling
  uint64_t split_seed = 1234;  // the train/validation split (the original's)
  bool shuffle = false;        // reshuffle the training batches every epoch (the original keeps one order)
  bool clean = true;           // Made-With-ML's clean_text
  HeadInit head_init = HeadInit::kTorch;  // a new classifier head: nn.Linear's uniform, or Hugging Face's normal
  std::string device = "auto";
  std::string precision = "fp32";
  double collective_timeout_s = 300;  // several ranks: a collective (NCCL or MPI) waiting longer ends the job
  std::string grad_reduce = "fp32";   // multi-GPU: fp32 | bf16 gradients on the wire
  std::string gpu_collectives = "auto";  // multi-GPU: auto | nccl | mpi (dist/device_communicator.h)
  int save_steps = 0;          // > 0: also a resumable checkpoint (last/) every this many optimizer steps
  int keep = 0;                // step checkpoints also kept as RUN_DIR/checkpoints/step-<S>, the newest `keep`
  int save_total_limit = 0;    // > 0: at most this many checkpoints (last/ + checkpoints/step-<S>): keep = limit - 1
  std::string save_optimizer = "always";  // always | during | never (engine/run_dir.h, OptimizerSaving)
  std::string mlflow_dir;      // non-empty: log the run to this MLflow file store (engine/mlflow_run.h)
  std::string experiment = "bertrain";  // MLflow experiment name
  std::string run_name;        // MLflow run name; empty: RUN_DIR's folder name
  std::string mlflow_parent_run;  // a new MLflow run's mlflow.parentRunId tag (bertrain tune's study run)
  int log_steps = 0;           // > 0: also the MLflow metric step_train_loss (their mean) every this many optimizer steps
  bool resume = false;
  bool overwrite = false;      // a fresh run into a RUN_DIR holding an earlier run's files: remove them first
  int threads = 0;             // OpenMP threads, 0: default
  bool quiet = false;          // no per-epoch log lines
  double progress_interval_s = 30;  // stderr not a terminal: a progress line at most this often (0: none)
};

// Throws Error naming the flag for any setting out of range or combination that cannot run.
void validate_train_args(const TrainArgs& args);

// Every training setting by its name (flags with '-' as '_'): results.json's "params", MLflow params, and what
// --resume compares (engine/resume_check.h). Paths as given; data files' contents are added by the trainer.
nlohmann::json train_args_json(const TrainArgs& args);

}  // namespace bertrain

// The training workflow of `bertrain train`: Made-With-ML's fine-tuning loop (train, validate, ReduceLROnPlateau on
// val_loss, keep the best epoch) with what Hugging Face's Trainer adds (step-wise schedules with warmup, gradient
// accumulation, --max-steps, validation every --eval-steps, --metric-for-best, early stopping), and checkpoints that
// resume bit for bit, refusing a resume whose training settings differ (engine/resume_check.h).
//
// RUN_DIR layout:
//   metrics.jsonl   one JSON object per evaluation (epoch, step, lr, train_loss, val_loss, val_accuracy, val_f1,
//                   val_f1_micro, val_f1_macro, samples_per_s, elapsed_s); every epoch's end unless --eval-steps
//   results.json    parameters, dataset sizes, the metrics, best epoch and step, early stop, resumes, total time
//                   (written at the end)
//   best/           model directory of the evaluation with the best --metric-for-best so far
//   last/           model directory of the latest checkpoint (an evaluation, or every --save-steps optimizer
//                   steps) + optimizer.safetensors (--save-optimizer) + trainer_state.json: --resume continues from
//                   it, mid-epoch included, bit for bit
//   checkpoints/    with --keep K (--save-total-limit K + 1): the newest K step checkpoints, step-<S>/ (the same
//                   content as last/ had)
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/train_args.h"

namespace bertrain {

class Communicator;

struct TrainingOutcome {
  nlohmann::json results;         // results.json's content
  bool already_finished = false;  // --resume of a run that had finished its training: nothing was done
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

// What run_training reads before it trains (--model's config, tokenizer and weights, the data with the flags' columns,
// labels and max_length), read and dropped; throws what run_training would. tune checks its trials' inputs with it
// before a study exists.
void check_training_inputs(const TrainArgs& args);

}  // namespace bertrain

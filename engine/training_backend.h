// What run_training needs from an engine, so one training loop drives the CPU engine and the CUDA engine:
// a step on this rank's slice of a global batch (gradients summed over ranks before the update), evaluation,
// the learning rate, and the state a checkpoint holds.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "engine/classifier_trainer.h"
#include "engine/memory_fit.h"

namespace bertrain {

// Where a micro-batch sits in its optimizer step (gradient accumulation, --grad-accum-steps): the first
// starts the step's gradient, the others add theirs to it; the last sums it over ranks and updates the
// parameters. Without accumulation every batch is both.
struct MicroStep {
  bool first = true;
  bool last = true;
};

class TrainingBackend {
 public:
  virtual ~TrainingBackend() = default;

  // "cpu (2 threads, fp32, OpenBLAS)", "cuda:0 NVIDIA H200, bf16", ... for logs (core/cpu_threads.h).
  virtual std::string description() const = 0;
  // Device memory this engine holds (parameters, gradients, optimizer state, activations, workspaces) in
  // bytes; 0 on the CPU.
  virtual std::size_t device_memory_bytes() const = 0;

  // Forward with training dropout, loss × loss_scale, backward; on the step's last micro-batch the step's
  // gradient is summed over `comm` (once per optimizer step) and one Adam update applied. On a GPU this only
  // enqueues the work: the loss arrives through take_loss(), so the host can prepare the next batch while the
  // device computes. batch and targets are host memory, reusable as soon as this returns. At most two
  // micro-batches may be waiting for take_loss().
  virtual void train_step(const BertBatch& batch, const float* targets, double loss_scale, Communicator& comm,
                          MicroStep micro = {}) = 0;
  // This rank's loss × loss_scale of the oldest micro-batch not taken yet; waits for it to finish.
  virtual double take_loss() = 0;
  // How many micro-batches the training loop leaves untaken while it prepares the next batch: 1 where train_step
  // only enqueues the work (a GPU computes while the host batches), 0 where the work is done when train_step
  // returns (the CPU): a loss taken at once puts each step's progress line, samples/s and ETA at that step's end,
  // where one step late the first line's samples/s was half the true rate.
  virtual int losses_left_pending() const = 0;
  // The L2 norm of the gradient (summed over ranks and micro-batches, as the optimizer saw it) of the last
  // step whose last micro-batch take_loss() returned. Not finite when that step overflowed: run_training stops
  // then.
  virtual double last_gradient_norm() const = 0;
  // Forward without dropout and the mean loss over the batch's rows (0 for 0 rows). Waits for the result.
  // A non-null `logits` receives (=) the batch's logits [B, C] (host, row-major, fp32; a bf16 engine's bf16
  // logits widened exactly), for the validation metrics; the loss is the same either way.
  virtual double evaluate(const BertBatch& batch, const float* targets, float* logits = nullptr) = 0;

  virtual void set_learning_rate(double lr) = 0;
  virtual long optimizer_steps() const = 0;
  // The fp32 (master) parameters in the model's layout, current as of all steps taken.
  virtual const std::vector<float>& parameters() = 0;
  virtual void save_optimizer(const std::string& path) = 0;  // engine/checkpoint.h format
  virtual void load_optimizer(const std::string& path) = 0;
};

struct BackendChoice {
  bool cuda = false;
  int device = 0;       // CUDA device index
  bool bf16 = false;    // --precision bf16 (CUDA only)
};

// Resolves --device (auto | cpu | cuda) and --precision (fp32 | bf16) for a process with this local rank:
// auto picks CUDA when a device is visible; each local rank takes device local_rank mod device count.
// Throws Error naming the flag when the choice cannot run here.
BackendChoice choose_backend(const std::string& device, const std::string& precision, int local_rank);

// The engine for `choice`, owning parameters (initialised from `params`), gradients, optimizer state and
// activations for batches within `limits`. With more than one rank in `comm`, the CUDA engine
// sets up NCCL over it (a collective call: every rank must make it).
std::unique_ptr<TrainingBackend> make_training_backend(const BackendChoice& choice, const BertConfig& config,
                                                       int num_labels, const BatchLimits& limits,
                                                       const std::vector<float>& params,
                                                       const TrainerOptions& options, Communicator& comm);

// The CUDA engine (engine/cuda/gpu_trainer.cpp; builds with CUDA only).
std::unique_ptr<TrainingBackend> make_cuda_backend(int device, bool bf16, const BertConfig& config, int num_labels,
                                                   const BatchLimits& limits, const std::vector<float>& params,
                                                   const TrainerOptions& options, Communicator& comm);
// What make_cuda_backend allocates on `device` for these sizes (engine/memory_fit.h), and the device's free and
// total memory (cudaMemGetInfo); both select `device`. CUDA builds only.
MemoryNeed cuda_training_memory(int device, bool bf16, const BertConfig& config, int num_labels,
                                const BatchLimits& limits, const TrainerOptions& options, int ranks);
void cuda_memory_info(int device, std::size_t* free, std::size_t* total);

}  // namespace bertrain

// One training step of a BERT classifier on the CPU: forward, loss, backward, Adam. Owns the three flat
// buffers (parameters, gradients, and through the optimizer the moments) and the model's activation arena,
// all allocated at construction, so step() allocates nothing.
#pragma once

#include <vector>

#include "dist/device_communicator.h"
#include "engine/adam.h"
#include "kernels/loss.h"
#include "model/bert_classifier.h"

namespace bertrain {

struct TrainerOptions {
  AdamHyper adam;
  LossKind loss = LossKind::kBce;
  std::vector<float> class_weights;  // empty: unweighted
  uint64_t seed = 42;                // dropout masks: stream (seed, optimizer step, site)
  double collective_timeout_s = 300;  // GPU data parallelism: a collective slower than this aborts the job
  bool reduce_bf16 = false;           // GPU data parallelism: send gradients as bf16 (half the traffic)
  GpuCollectives gpu_collectives = GpuCollectives::kAuto;  // GPU data parallelism: NCCL or MPI through host memory
  bool cuda_graphs = true;            // GPU evaluation: replay repeated batch shapes as CUDA graphs
  int accumulation = 1;               // micro-batches per optimizer step (the GPU engine sizes a buffer by it)
  double max_grad_norm = 0;           // > 0: clip the gradient to this global L2 norm before Adam (clip_grad_scale)
  bool recompute_activations = false;  // --gradient-checkpointing: BertUse::kTrainingRecompute (model/bert_classifier.h)
};

// The model's use for a training with `options`: kTrainingRecompute or kTraining.
inline BertUse training_use(const TrainerOptions& options) {
  return options.recompute_activations ? BertUse::kTrainingRecompute : BertUse::kTraining;
}

template <typename T>
class ClassifierTrainer {
 public:
  // `params` has model.layout().total() elements (see load_model_dir / bert_classifier_layout).
  ClassifierTrainer(const BertConfig& config, int num_labels, const BatchLimits& limits, std::vector<T> params,
                    const TrainerOptions& options);

  // Forward with training dropout, loss against targets [B, C], backward, one optimizer update. Returns the
  // loss; gradients() then holds the gradient at the parameters before the update.
  T step(const BertBatch& batch, const T* targets);
  // The two halves of step(), for data parallelism: gradients() = loss_scale · ∂(mean loss of the batch),
  // returning loss_scale · loss (a batch of 0 rows gives zero gradients and 0); the caller may then sum
  // gradients over ranks before apply_update(). loss_scale = local rows / global rows makes the sum over
  // ranks the gradient of the global batch's mean loss.
  T compute_gradients(const BertBatch& batch, const T* targets, double loss_scale);
  // The Adam update from gradients(), clipped to options.max_grad_norm (gradients() itself is left unclipped).
  // Returns the gradient's global L2 norm before clipping.
  double apply_update();
  // Forward without dropout and the loss; no update. model().logits() holds the logits. 0 for 0 rows.
  T evaluate(const BertBatch& batch, const T* targets);

  BertClassifier<T>& model() { return model_; }
  std::vector<T>& parameters() { return params_; }
  const std::vector<T>& gradients() const { return grads_; }
  std::vector<T>& gradients() { return grads_; }  // summed across ranks in place
  AdamOptimizer<T>& optimizer() { return optimizer_; }
  const AdamOptimizer<T>& optimizer() const { return optimizer_; }

 private:
  T loss_and_gradient(const BertBatch& batch, const T* targets, T* dlogits);

  BertClassifier<T> model_;
  std::vector<T> params_, grads_;
  AdamOptimizer<T> optimizer_;
  TrainerOptions options_;
  std::vector<T> class_weights_, dlogits_;
};

}  // namespace bertrain

// The Adam / AdamW optimizer over a flat parameter buffer: owns the two moment buffers and the step count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/param_store.h"
#include "kernels/adam.h"

namespace bertrain {

// The weight-decay mask (kernels/adam.h: decays) of Hugging Face Trainer's parameter groups
// (Trainer.get_decay_parameter_names): every tensor is decayed except those whose lower-cased name contains "bias",
// "layernorm" or "rmsnorm", or has "norm" as a whole dotted part or "_norm" ending one (BERT's LayerNorm, DistilBERT's
// sa_layer_norm). Alignment padding between tensors is not decayed (it stays zero either way).
std::vector<uint32_t> trainer_decay_mask(const ParamLayout& layout);

template <typename T>
class AdamOptimizer {
 public:
  AdamOptimizer(std::size_t size, const AdamHyper& hyper) : hyper_(hyper), m_(size, T(0)), v_(size, T(0)) {}

  // One update of params[0, size) with grads of the same layout, read times grad_scale (gradient clipping:
  // clip_grad_scale); step() counts from 1.
  void step(T* params, const T* grads, T grad_scale = T(1)) {
    adam_update_cpu(params, m_.data(), v_.data(), grads, m_.size(), hyper_, ++step_, grad_scale,
                    decay_mask_.empty() ? nullptr : decay_mask_.data());
  }

  // Weight decay only where `mask` says (trainer_decay_mask); without a mask every element is decayed.
  void set_decay_mask(std::vector<uint32_t> mask) { decay_mask_ = std::move(mask); }

  AdamHyper& hyper() { return hyper_; }  // the learning rate changes with the schedule
  const AdamHyper& hyper() const { return hyper_; }
  long steps_taken() const { return step_; }
  std::vector<T>& first_moment() { return m_; }
  std::vector<T>& second_moment() { return v_; }
  const std::vector<T>& first_moment() const { return m_; }
  const std::vector<T>& second_moment() const { return v_; }
  void set_steps_taken(long steps) { step_ = steps; }

 private:
  AdamHyper hyper_;
  std::vector<T> m_, v_;
  std::vector<uint32_t> decay_mask_;
  long step_ = 0;
};

}  // namespace bertrain

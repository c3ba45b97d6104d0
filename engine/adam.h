// The Adam / AdamW optimizer over a flat parameter buffer: owns the two moment buffers and the step count.
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/adam.h"

namespace bertrain {

template <typename T>
class AdamOptimizer {
 public:
  AdamOptimizer(std::size_t size, const AdamHyper& hyper) : hyper_(hyper), m_(size, T(0)), v_(size, T(0)) {}

  // One update of params[0, size) with grads of the same layout, read times grad_scale (gradient clipping:
  // clip_grad_scale); step() counts from 1.
  void step(T* params, const T* grads, T grad_scale = T(1)) {
    adam_update_cpu(params, m_.data(), v_.data(), grads, m_.size(), hyper_, ++step_, grad_scale);
  }

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
  long step_ = 0;
};

}  // namespace bertrain

#include "engine/classifier_trainer.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/error.h"
#include "kernels/tensor_ops.h"

namespace bertrain {

template <typename T>
ClassifierTrainer<T>::ClassifierTrainer(const BertConfig& config, int num_labels, const BatchLimits& limits,
                                        std::vector<T> params, const TrainerOptions& options)
    : model_(config, num_labels, limits, training_use(options)),
      params_(std::move(params)),
      grads_(params_.size(), T(0)),
      optimizer_(params_.size(), options.adam),
      options_(options),
      class_weights_(options.class_weights.begin(), options.class_weights.end()),
      dlogits_(static_cast<std::size_t>(limits.rows) * num_labels, T(0)) {
  BERTRAIN_CHECK(params_.size() == model_.layout().total(), "parameter buffer has " << params_.size()
                                                                 << " elements, the layout needs "
                                                                 << model_.layout().total());
  BERTRAIN_CHECK(class_weights_.empty() || static_cast<int>(class_weights_.size()) == num_labels,
                 "got " << class_weights_.size() << " class weights for " << num_labels << " labels");
  if (options.adam.weight_decay > 0) optimizer_.set_decay_mask(trainer_decay_mask(model_.layout()));
}

template <typename T>
T ClassifierTrainer<T>::loss_and_gradient(const BertBatch& batch, const T* targets, T* dlogits) {
  return classification_loss_cpu(options_.loss, dlogits, model_.logits(), targets,
                                 class_weights_.empty() ? nullptr : class_weights_.data(), batch.batch,
                                 model_.num_labels());
}

template <typename T>
T ClassifierTrainer<T>::step(const BertBatch& batch, const T* targets) {
  const T loss = compute_gradients(batch, targets, 1.0);
  apply_update();
  return loss;
}

template <typename T>
T ClassifierTrainer<T>::compute_gradients(const BertBatch& batch, const T* targets, double loss_scale) {
  if (batch.batch == 0) {  // this rank's share of a short last batch is empty
    std::fill(grads_.begin(), grads_.end(), T(0));
    return T(0);
  }
  const auto step_index = static_cast<uint32_t>(optimizer_.steps_taken());
  model_.forward(params_.data(), batch, DropoutSetting::training(model_.config(), options_.seed, step_index));
  const T loss = loss_and_gradient(batch, targets, dlogits_.data());
  if (loss_scale != 1.0) {
    const std::size_t n = static_cast<std::size_t>(batch.batch) * model_.num_labels();
    for (std::size_t i = 0; i < n; ++i) dlogits_[i] *= T(loss_scale);
  }
  model_.backward(grads_.data(), params_.data(), dlogits_.data());
  return loss * T(loss_scale);
}

template <typename T>
double ClassifierTrainer<T>::apply_update() {
  double sum_of_squares = 0;
  if constexpr (std::is_same_v<T, float>) {
    sum_of_squares = sum_of_squares_cpu(grads_.data(), grads_.size());
  } else {
    for (const T g : grads_) sum_of_squares += static_cast<double>(g) * static_cast<double>(g);
  }
  const double norm = std::sqrt(sum_of_squares);
  optimizer_.step(params_.data(), grads_.data(), static_cast<T>(clip_grad_scale(options_.max_grad_norm, norm)));
  return norm;
}

template <typename T>
T ClassifierTrainer<T>::evaluate(const BertBatch& batch, const T* targets) {
  if (batch.batch == 0) return T(0);
  model_.forward(params_.data(), batch, DropoutSetting{});
  return loss_and_gradient(batch, targets, nullptr);
}

template class ClassifierTrainer<float>;
template class ClassifierTrainer<double>;

}  // namespace bertrain

// Classification losses on logits [B, C] with target distributions [B, C] (one-hot for hard labels).
#pragma once

#include "core/bf16.h"
#include "core/cuda/gpu_handles.h"

namespace bertrain {

enum class LossKind {
  kBce,                  // BCE with logits on one-hot targets (Made-With-ML's loss)
  kSoftmaxCrossEntropy,  // softmax cross-entropy
};

// Binary cross-entropy with logits, as torch.nn.BCEWithLogitsLoss(weight=class_weights): the element loss
// w_c · (max(x, 0) - x·y + log(1 + exp(-|x|))), averaged over B × C. class_weights [C] may be null.
// Returns the loss; dlogits [B, C] (=) is its gradient (may be null when only the loss is wanted).
template <typename T>
T bce_with_logits_cpu(T* dlogits, const T* logits, const T* targets, const T* class_weights, int batch, int classes);

// Softmax cross-entropy, as torch.nn.CrossEntropyLoss with probability targets: -Σ_c y_c log softmax(x)_c,
// averaged over B. Returns the loss; dlogits (=) may be null.
template <typename T>
T softmax_cross_entropy_cpu(T* dlogits, const T* logits, const T* targets, int batch, int classes);

// Dispatches on `kind`; class_weights (BCE only) may be null. Returns the loss, dlogits (=) may be null.
template <typename T>
T classification_loss_cpu(LossKind kind, T* dlogits, const T* logits, const T* targets, const T* class_weights,
                          int batch, int classes);

// probs [B, C] (=): row-wise softmax (prediction).
template <typename T>
void softmax_cpu(T* probs, const T* logits, int batch, int classes);

// ---- CUDA (kernels/cuda/loss.cu): one block, so the mean is summed in a fixed order.
// loss[0] (=) loss_scale · mean loss; dlogits (=, may be null) loss_scale · its gradient. targets and
// class_weights (may be null) are float.
template <typename T>
void classification_loss_cuda(LossKind kind, float* loss, T* dlogits, const T* logits, const float* targets,
                              const float* class_weights, int batch, int classes, float loss_scale, CudaStream stream);

}  // namespace bertrain

// CUDA classification losses (kernels/loss.h): the CPU twins' formulas (kernels/cpu/loss.cpp) evaluated in
// float by one block, so the mean is a fixed-order sum (deterministic). The sum order differs from the
// CPU's sequential loop and expf / log1pf / logf are CUDA's (within 2 ulp of glibc's), so the loss and
// gradients agree with the CPU to a few float ulps, not bit for bit.
#include "kernels/loss.h"

#include <cstddef>

#include "core/error.h"
#include "kernels/cuda/common.cuh"

namespace bertrain {

namespace {

constexpr int kThreads = 256;

// BCE with logits over the B×C elements, averaged over B·C:
//   loss[0] (=) loss_scale · Σ_i w_c · (max(x, 0) - x·y + log1p(exp(-|x|))) / (B·C),
//   dlogits[i] (=, when not null) loss_scale · w_c · (sigmoid(x) - y) / (B·C), stored as T.
// One block (kThreads threads, grid 1): thread j takes elements j, j + kThreads, ... and the per-thread
// partial sums are combined by block_sum.
template <typename T>
__global__ void bce_with_logits_kernel(float* loss, T* dlogits, const T* logits, const float* targets,
                                       const float* class_weights, int batch, int classes, float loss_scale) {
  __shared__ float shared[32];
  const std::size_t n = static_cast<std::size_t>(batch) * classes;
  const float inv_n = 1.0f / static_cast<float>(n);
  float partial = 0.0f;
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float x = cuda::load(logits + i), y = targets[i];
    const float w = class_weights != nullptr ? class_weights[i % classes] : 1.0f;
    const float relu = x < 0.0f ? 0.0f : x;  // std::max(x, 0.0f), NaN included
    partial += w * (relu - x * y + log1pf(expf(-fabsf(x))));
    if (dlogits != nullptr) {
      const float sigmoid = 1.0f / (1.0f + expf(-x));
      cuda::store(dlogits + i, loss_scale * (w * (sigmoid - y) * inv_n));
    }
  }
  const float total = cuda::block_sum(partial, shared);
  if (threadIdx.x == 0) loss[0] = loss_scale * (total * inv_n);
}

// Softmax cross-entropy with probability targets, averaged over B:
//   loss[0] (=) loss_scale · Σ_b -Σ_c y_bc · log softmax(x_b)_c / B,
//   dlogits[b, c] (=, when not null) loss_scale · (softmax(x_b)_c · Σ_c' y_bc' - y_bc) / B, stored as T.
// One block (kThreads threads, grid 1): thread j takes rows j, j + kThreads, ... (C is a classifier's
// handful of classes, so each row is a short serial loop); block_sum adds the per-thread partial sums.
template <typename T>
__global__ void softmax_cross_entropy_kernel(float* loss, T* dlogits, const T* logits, const float* targets,
                                             int batch, int classes, float loss_scale) {
  __shared__ float shared[32];
  const float inv_b = 1.0f / static_cast<float>(batch);
  float partial = 0.0f;
  for (int b = threadIdx.x; b < batch; b += blockDim.x) {
    const T* x = logits + static_cast<std::size_t>(b) * classes;
    const float* y = targets + static_cast<std::size_t>(b) * classes;
    float mx = cuda::load(x);
    for (int c = 1; c < classes; ++c) {
      const float xc = cuda::load(x + c);
      if (mx < xc) mx = xc;  // std::max_element: the first largest
    }
    float sum = 0.0f;
    for (int c = 0; c < classes; ++c) sum += expf(cuda::load(x + c) - mx);
    const float log_sum = logf(sum) + mx;
    float y_sum = 0.0f;
    for (int c = 0; c < classes; ++c) {
      partial -= y[c] * (cuda::load(x + c) - log_sum);
      y_sum += y[c];
    }
    if (dlogits != nullptr) {
      T* d = dlogits + static_cast<std::size_t>(b) * classes;
      for (int c = 0; c < classes; ++c) {
        cuda::store(d + c, loss_scale * ((expf(cuda::load(x + c) - log_sum) * y_sum - y[c]) * inv_b));
      }
    }
  }
  const float total = cuda::block_sum(partial, shared);
  if (threadIdx.x == 0) loss[0] = loss_scale * (total * inv_b);
}

}  // namespace

template <typename T>
void classification_loss_cuda(LossKind kind, float* loss, T* dlogits, const T* logits, const float* targets,
                              const float* class_weights, int batch, int classes, float loss_scale, CudaStream stream) {
  BERTRAIN_CHECK(batch > 0 && classes > 0, "classification_loss_cuda: batch and classes must be positive, got batch "
                                               << batch << ", classes " << classes);
  BERTRAIN_CHECK(loss != nullptr && logits != nullptr && targets != nullptr,
                 "classification_loss_cuda: null loss, logits or targets");
  if (kind == LossKind::kBce) {
    bce_with_logits_kernel<T><<<1, kThreads, 0, stream>>>(loss, dlogits, logits, targets, class_weights, batch,
                                                          classes, loss_scale);
    BERTRAIN_CUDA_CHECK_LAUNCH("bce_with_logits_kernel");
    return;
  }
  BERTRAIN_CHECK(kind == LossKind::kSoftmaxCrossEntropy, "classification_loss_cuda: unknown loss kind");
  BERTRAIN_CHECK(class_weights == nullptr, "class weights are supported with the BCE loss only");
  softmax_cross_entropy_kernel<T><<<1, kThreads, 0, stream>>>(loss, dlogits, logits, targets, batch, classes,
                                                              loss_scale);
  BERTRAIN_CUDA_CHECK_LAUNCH("softmax_cross_entropy_kernel");
}

template void classification_loss_cuda<float>(LossKind, float*, float*, const float*, const float*, const float*, int,
                                              int, float, CudaStream);
template void classification_loss_cuda<bf16>(LossKind, float*, bf16*, const bf16*, const float*, const float*, int,
                                             int, float, CudaStream);

}  // namespace bertrain

// LayerNorm over the last dimension, fused with the residual add that precedes every LayerNorm in BERT:
// z = x + residual, y = (z - mean) · rstd · gamma + beta, rstd = 1 / sqrt(var + eps) (biased variance).
#pragma once

#include "core/bf16.h"
#include "core/cuda/gpu_handles.h"

namespace bertrain {

// y[rows, cols] (=), mean[rows] (=), rstd[rows] (=). residual may be null (z = x). y may alias x.
template <typename T>
void layernorm_forward_cpu(T* y, T* mean, T* rstd, const T* x, const T* residual, const T* gamma, const T* beta,
                           int rows, int cols, T eps);

// dz[rows, cols] (=): the gradient of z, i.e. of x and of residual alike. dgamma[cols], dbeta[cols] (=).
// Recomputes z from the saved x and residual; dz may alias dy. Column sums run in a fixed order, so the
// result does not depend on the thread count.
template <typename T>
void layernorm_backward_cpu(T* dz, T* dgamma, T* dbeta, const T* dy, const T* x, const T* residual, const T* mean,
                            const T* rstd, const T* gamma, int rows, int cols);

// ---- CUDA (kernels/cuda/layernorm.cu). Statistics mean/rstd are float whatever T is (mixed precision keeps
// normalisation statistics in fp32); parameter gradients are float (the fp32 gradient buffer).
// Forward: one warp per row; y may alias x.
template <typename T>
void layernorm_forward_cuda(T* y, float* mean, float* rstd, const T* x, const T* residual, const T* gamma,
                            const T* beta, int rows, int cols, float eps, CudaStream stream);
// Backward: dz (=) one warp per row; dgamma, dbeta (=) by a deterministic two-pass column reduction through
// handles.workspace (needs gpu_reduction_workspace_elements(cols)). dz may alias dy.
template <typename T>
void layernorm_backward_cuda(const GpuHandles& handles, T* dz, float* dgamma, float* dbeta, const T* dy, const T* x,
                             const T* residual, const float* mean, const float* rstd, const T* gamma, int rows,
                             int cols);

}  // namespace bertrain

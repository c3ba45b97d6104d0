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

// ---- CUDA, mixed precision: the residual stream in float. Under torch.autocast(bfloat16) BERT's LayerNorm
// runs in fp32 and returns fp32, so the residual stream (every LayerNorm output, the next LayerNorm's residual)
// and its gradient stay fp32 while the linear layers read a bf16 copy. The CPU twins are the float functions
// above, with x (and gamma, beta) the T values read as float and T outputs rounded once.
// Forward: z = x (T, the sublayer output) + residual (float, may be null). y[rows, cols] (=) float, the new
// residual stream; y_copy[rows, cols] (=) the same values rounded to T, the input of the next GEMMs (one
// kernel, two stores). y_copy may be null (not wanted); for T = float it may be y itself (stored once).
// mean, rstd (=) float. One warp per row; y may alias residual and y_copy may alias x (each element is read
// and written by one thread).
template <typename T>
void layernorm_forward_cuda(float* y, T* y_copy, float* mean, float* rstd, const T* x, const float* residual,
                            const T* gamma, const T* beta, int rows, int cols, float eps, CudaStream stream);
// Backward from the float residual-stream gradient: dz[rows, cols] (=) float (the gradient of x and of the
// residual alike, added into the float stream gradient in fp32), dgamma, dbeta (=) as above; x is the bf16
// sublayer output, residual the float stream (may be null). dz may alias dy. Not a template: for T = float
// the all-float instantiation of the template above is this function (and calls with float arguments
// resolve to it), so generic code calls layernorm_backward_cuda(handles, float*, ..., const float* dy,
// const T* x, const float* residual, ...) for either T.
void layernorm_backward_cuda(const GpuHandles& handles, float* dz, float* dgamma, float* dbeta, const float* dy,
                             const bf16* x, const float* residual, const float* mean, const float* rstd,
                             const bf16* gamma, int rows, int cols);

}  // namespace bertrain

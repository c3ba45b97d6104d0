// LayerNorm over the last dimension, fused with the residual add that precedes every LayerNorm in BERT:
// z = x + residual, y = (z - mean) · rstd · gamma + beta, rstd = 1 / sqrt(var + eps) (biased variance).
#pragma once

#include <cstddef>

#include "core/bf16.h"
#include "core/cuda/gpu_handles.h"
#include "core/philox.h"
#include "kernels/dropout.h"

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

// ---- Dropout + residual add + LayerNorm, fused: every LayerNorm inside a BERT layer (after the attention output
// and after the feed-forward output). z = dropout(x) + residual, y = (z - mean) · rstd · gamma + beta, with the mask
// of kernels/dropout.h: element (r, c) has logical index dropout_index(layout, layout_cols, r · cols + c), where
// layout_cols = layout.cols (0: rows · cols, one flat row), and is kept iff its Philox uniform is >= p, kept values
// scaled by 1 / (1 - p); p == 0 draws nothing (z = x + residual). So the fused op equals dropout_forward_cpu
// followed by layernorm_forward_cpu (and backward: layernorm_backward_cpu, then dropout_backward_cpu on dz) with the
// same key and layout. Preconditions checked when p > 0 (as dropout's): first_sample >= 0, rows · cols a multiple
// of layout_cols, and layout_cols a multiple of cols (a row never straddles two logical rows, so a row's indices are
// consecutive).

// The layout's row width when a mask is drawn (p > 0), after the checks above (first_sample >= 0, rows · cols a
// multiple of it, it a multiple of cols); shared by the CPU twins and the CUDA launchers. Throws Error starting with
// `what`.
std::size_t dropout_residual_layout_cols(const DropoutLayout& layout, int rows, int cols, const char* what);

// CPU twin. y[rows, cols] (=), mean[rows] (=), rstd[rows] (=). residual is required. y may alias x or residual
// (y holds z until the row is normalised; each row is read before it is written). Row statistics are sums in
// eight interleaved partial sums (vectorisable): within rounding of the unfused composition, independent of the
// thread count. No heap allocation. p in [0, 1].
template <typename T>
void dropout_residual_layernorm_forward_cpu(T* y, T* mean, T* rstd, const T* x, const T* residual, const T* gamma,
                                            const T* beta, int rows, int cols, T eps, float p, const RandomKey& key,
                                            const DropoutLayout& layout);

// dz[rows, cols] (=) the gradient of z (= of the residual); dx[rows, cols] (=) dropout'(dz), the gradient of x;
// dgamma[cols], dbeta[cols] (=). z is recomputed from x, residual and the regenerated mask. dz may alias dy; dx
// aliases nothing (it holds the row's mask until dz is known). Column sums: rows in fixed chunks of 16, each
// chunk's sum in row order, chunks added in order, so the result does not depend on the thread count. Allocates
// only the first time a calling thread needs a larger chunk-partial buffer (thread_local, reused).
template <typename T>
void dropout_residual_layernorm_backward_cpu(T* dz, T* dx, T* dgamma, T* dbeta, const T* dy, const T* x,
                                             const T* residual, const T* mean, const T* rstd, const T* gamma, int rows,
                                             int cols, float p, const RandomKey& key, const DropoutLayout& layout);

// CUDA, mixed precision (the float residual stream of the float-stream layernorm_forward_cuda overload above): x
// (the sublayer output), gamma and beta in T (float or bf16), the residual, y, dy, dz and the statistics in float.
// layout.token_slots is a device pointer. The CPU twins are the float functions above on x read as float, T outputs
// rounded once. Statistics in fp32, two passes over registers (mean, then squared deviations), as
// layernorm_forward_cuda.
// Forward: y (=) float, the new residual stream; y_copy (=) the same values rounded to T (may be null; for
// T = float it may be y itself: stored once); mean, rstd (=). y may alias residual and y_copy may alias x.
// Launch: one warp per row, 8 rows per 256-thread block. A lane owns 16-byte units of the row (4 float or 8 bf16
// columns; float4 / 8 x bf16 loads and stores) when cols is a multiple of the unit and every pointer is 16-byte
// aligned, else single columns; either way a row of up to 1024 columns stays in registers (one read of x and
// residual), wider rows are re-read (any cols works). Philox: one call per 4 consecutive logical indices when a
// row's first index is a multiple of 4 (cols and layout_cols multiples of 4), else one call per element.
template <typename T>
void dropout_residual_layernorm_forward_cuda(float* y, T* y_copy, float* mean, float* rstd, const T* x,
                                             const float* residual, const T* gamma, const T* beta, int rows, int cols,
                                             float eps, float p, const RandomKey& key, const DropoutLayout& layout,
                                             CudaStream stream);

// Backward: dz (=) float; dx (=) dropout'(dz) rounded once to T; dgamma, dbeta (=) float. dz may alias dy; dx
// aliases nothing. One pass: warps as in the forward, blocks of 8 warps over contiguous row ranges (at most
// kRowPartialBlocks blocks, partition fixed by rows alone), each block writing its column partial sums of
// dgamma and dbeta into handles.workspace in the same pass; then one small pass adds the partials in block order
// (no atomics: deterministic, and the same on every device). Workspace: dropout_residual_layernorm_workspace_elements
// (cols) floats, which gpu_reduction_workspace_elements(cols) covers.
template <typename T>
void dropout_residual_layernorm_backward_cuda(const GpuHandles& handles, float* dz, T* dx, float* dgamma,
                                              float* dbeta, const float* dy, const T* x, const float* residual,
                                              const float* mean, const float* rstd, const T* gamma, int rows, int cols,
                                              float p, const RandomKey& key, const DropoutLayout& layout);

// ---- LayerNorm, then dropout, fused: the embeddings' LayerNorm (no residual; BERT drops out its output, the first
// residual stream). y = dropout(LayerNorm(x)) with kernels/dropout.h's mask and the layout rules above; CPU twin:
// layernorm_forward_cpu (no residual) followed by dropout_forward_cpu, and backward dropout_backward_cpu followed by
// layernorm_backward_cpu, on x read as float, T outputs rounded once. The preconditions (and errors) are
// dropout_residual_layernorm_forward_cuda's. Types as the mixed-precision functions above: x, gamma, beta in T; y,
// dy, dz and the statistics in float.
// Forward: y (=) float; y_copy (=) the same values rounded to T (may be null; for T = float it may be y itself);
// mean, rstd (=) float, of the LayerNorm's input. y may alias x (T = float) and y_copy x. When cols is a multiple of
// a 16-byte unit (4 float or 8 bf16 columns), at most 1024, and every pointer 16-byte aligned (BERT's embedding
// widths), one kernel: dropout_residual_layernorm_forward_cuda's with the mask on its output; otherwise the two
// kernels of the composition.
template <typename T>
void layernorm_dropout_forward_cuda(float* y, T* y_copy, float* mean, float* rstd, const T* x, const T* gamma,
                                    const T* beta, int rows, int cols, float eps, float p, const RandomKey& key,
                                    const DropoutLayout& layout, CudaStream stream);
// Backward from the float gradient of y: dz (=) float, the gradient of x; dgamma, dbeta (=) float. dz may alias dy.
// Under the same conditions one pass, dropout_residual_layernorm_backward_cuda's (dy masked as it is read, no dx),
// with its workspace (dropout_residual_layernorm_workspace_elements); otherwise dropout_backward_cuda into dz, then
// layernorm_backward_cuda in place (gpu_reduction_workspace_elements).
template <typename T>
void layernorm_dropout_backward_cuda(const GpuHandles& handles, float* dz, float* dgamma, float* dbeta,
                                     const float* dy, const T* x, const float* mean, const float* rstd, const T* gamma,
                                     int rows, int cols, float p, const RandomKey& key, const DropoutLayout& layout);

// Floats of handles.workspace dropout_residual_layernorm_backward_cuda needs at most, for any rows: dgamma and dbeta
// partials of up to kRowPartialBlocks blocks (core/cuda/gpu_handles.h).
inline std::size_t dropout_residual_layernorm_workspace_elements(int cols) {
  return 2 * static_cast<std::size_t>(kRowPartialBlocks) * static_cast<std::size_t>(cols);
}

}  // namespace bertrain

// Fully connected layer in Hugging Face layout: W is [out, in], y = x · Wᵀ + b.
#pragma once

#include "core/bf16.h"
#include "core/cuda/gpu_handles.h"

namespace bertrain {

// y[rows, out] = x[rows, in] · Wᵀ + b (b may be null). Written (=).
template <typename T>
void linear_forward_cpu(T* y, const T* x, const T* w, const T* b, int rows, int in, int out);

// dx[rows, in] = dy · W, written (=) or accumulated (+=) when accumulate_dx; dx may be null (not needed).
// dw[out, in] = dyᵀ · x and db[out] = Σ_rows dy, both written (=); db may be null.
template <typename T>
void linear_backward_cpu(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, int rows, int in, int out,
                         bool accumulate_dx);

// ---- CUDA (kernels/cuda/linear.cu): cuBLAS GEMMs with fp32 accumulation (T float: full fp32, no TF32;
// T bf16: bf16 inputs, fp32 compute). Weight gradients are float (the fp32 gradient buffer).
// y[rows, out] (=) x · Wᵀ + b (b may be null).
template <typename T>
void linear_forward_cuda(const GpuHandles& handles, T* y, const T* x, const T* w, const T* b, int rows, int in,
                         int out);
// dx[rows, in] (= or += when accumulate_dx; may be null) = dy · W; dw[out, in] (=) dyᵀ · x; db[out] (=) Σ_rows dy
// (may be null), deterministic two-pass reduction through handles.workspace.
template <typename T>
void linear_backward_cuda(const GpuHandles& handles, T* dx, float* dw, float* db, const T* dy, const T* x, const T* w,
                          int rows, int in, int out, bool accumulate_dx);
// Mixed precision (the residual-stream gradient in float, as torch.autocast keeps it): the same, with dx[rows, in]
// (= or +=) float: bf16 dy and W, fp32 accumulation and an fp32 C, so that the gradients of the branches that read
// the residual stream (Q, K, V; the intermediate dense) add up in fp32 instead of being rounded to bf16 at every
// accumulation. CPU twin: linear_backward_cpu<float> on the bf16 values. Not a template: for T = float the
// all-float instantiation above is this function, so generic code calls linear_backward_cuda(handles, float* dx,
// ..., const T* dy, const T* x, const T* w, ...) for either T.
void linear_backward_cuda(const GpuHandles& handles, float* dx, float* dw, float* db, const bf16* dy, const bf16* x,
                          const bf16* w, int rows, int in, int out, bool accumulate_dx);
// y[rows, cols] += b[cols].
template <typename T>
void bias_add_cuda(T* y, const T* b, int rows, int cols, CudaStream stream);
// out[cols] (=) Σ_rows x[rows, cols] in a fixed order: kReductionChunks partial sums in handles.workspace,
// then one pass adding them in chunk order.
template <typename T>
void column_sum_cuda(const GpuHandles& handles, float* out, const T* x, int rows, int cols);

}  // namespace bertrain

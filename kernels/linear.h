// Fully connected layer in Hugging Face layout: W is [out, in], y = x · Wᵀ + b.
#pragma once

#include <cstdint>

#include "core/bf16.h"
#include "core/cuda/gpu_handles.h"
#include "kernels/activation.h"

namespace bertrain {

// y[rows, out] = x[rows, in] · Wᵀ + b (b may be null). Written (=).
template <typename T>
void linear_forward_cpu(T* y, const T* x, const T* w, const T* b, int rows, int in, int out);

// dx[rows, in] = dy · W, written (=) or accumulated (+=) when accumulate_dx; dx may be null (not needed).
// dw[out, in] = dyᵀ · x and db[out] = Σ_rows dy, both written (=); db may be null.
template <typename T>
void linear_backward_cpu(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, int rows, int in, int out,
                         bool accumulate_dx);

// A linear layer followed by its activation (the feed-forward's intermediate dense): pre[rows, out] (=) x · Wᵀ + b
// (b may be null), kept for backward, and y[rows, out] (=) act(pre). y must not overlap pre.
template <typename T>
void linear_activation_forward_cpu(T* y, T* pre, const T* x, const T* w, const T* b, int rows, int in, int out,
                                   Activation act);

// The gradient that reaches the pre-activation of that layer from the dense after it (the feed-forward's
// output dense, W[out, in], whose input was act(pre)): dpre[rows, in] (=) (dy[rows, out] · W) ∘ act'(pre[rows, in]),
// and dbias[in] (=) Σ_rows dpre, the gradient of the first dense's bias (may be null). dpre must not overlap
// dy, W or pre.
template <typename T>
void linear_activation_backward_data_cpu(T* dpre, T* dbias, const T* dy, const T* w, const T* pre, int rows, int in,
                                         int out, Activation act);

// ---- CUDA (kernels/cuda/linear.cu): cuBLASLt GEMMs with fp32 accumulation (T float: full fp32, no TF32;
// T bf16: bf16 inputs, fp32 compute), with the bias, the tanh GELU and bias gradients fused into the GEMM's
// epilogue where cuBLASLt has an algorithm for that GEMM (shape, types, pointer alignment), else the same results
// from cublasGemmEx plus the element-wise kernels. One algorithm per GEMM key, chosen on first use and cached.
// Weight gradients are float (the fp32 gradient buffer). Results are deterministic: every reduction runs in a
// fixed order (no split-K with a bias-gradient epilogue, split-K partials reduced in fp32 in a separate pass).
// y[rows, out] (=) x · Wᵀ + b (b may be null); with the bias epilogue, y is rounded to T once, after the bias.
template <typename T>
void linear_forward_cuda(const GpuHandles& handles, T* y, const T* x, const T* w, const T* b, int rows, int in,
                         int out);
// pre[rows, out] (=) x · Wᵀ + b (b may be null), y[rows, out] (=) act(pre); y must not overlap pre.
// Activation::kGeluTanh: one GEMM with cuBLASLt's GELU epilogue (the tanh form) writing y and pre, when out is
// a multiple of 8 (the epilogue's pre-activation leading dimension must be). Other activations (kGelu, BERT's
// exact erf GELU; kRelu; kTanh): GEMM with the bias epilogue into pre, then activation_forward_cuda.
template <typename T>
void linear_activation_forward_cuda(const GpuHandles& handles, T* y, T* pre, const T* x, const T* w, const T* b,
                                    int rows, int in, int out, Activation act);
// The CPU twin's dpre[rows, in] (=) (dy[rows, out] · W[out, in]) ∘ act'(pre[rows, in]) and dbias[in] (=) Σ_rows
// dpre (fp32; may be null). dpre must not overlap dy, W or pre. GEMM, activation_backward_cuda and column_sum_cuda
// (cuBLASLt's DGELU(_BGRAD) epilogue is off: kFuseDGeluEpilogue in kernels/cuda/linear.cu).
template <typename T>
void linear_activation_backward_data_cuda(const GpuHandles& handles, T* dpre, float* dbias, const T* dy, const T* w,
                                          const T* pre, int rows, int in, int out, Activation act);
// dx[rows, in] (= or += when accumulate_dx; may be null) = dy · W; dw[out, in] (=) dyᵀ · x; db[out] (=) Σ_rows dy
// (may be null): fused into the dw GEMM (cuBLASLt's BGRADB epilogue) when an algorithm without split-K exists,
// else the deterministic two-pass column_sum_cuda through handles.workspace.
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
// out[cols] (=) Σ_rows x[rows, cols] in a fixed order: kReductionChunks partial sums in handles.workspace,
// then one pass adding them in chunk order.
template <typename T>
void column_sum_cuda(const GpuHandles& handles, float* out, const T* x, int rows, int cols);

// Which paths the CUDA linear launchers took since the process started (all threads; for tests that
// must know whether a fused epilogue ran or its fallback did).
struct LinearPathCounts {
  std::uint64_t lt_matmuls = 0;           // cublasLtMatmul calls, any epilogue
  std::uint64_t gemm_ex_fallbacks = 0;    // GEMMs run by cublasGemmEx: no cuBLASLt algorithm for them
  std::uint64_t bias_epilogues = 0;       // BIAS: the forward bias added in the GEMM's epilogue
  std::uint64_t gelu_epilogues = 0;       // GELU_AUX(_BIAS): y and pre from one GEMM
  std::uint64_t dgelu_epilogues = 0;      // DGELU(_BGRAD): dpre (and dbias) from one GEMM
  std::uint64_t bgrad_epilogues = 0;      // bias gradients fused into a GEMM (DGELU_BGRAD, BGRADB)
  std::uint64_t column_sum_fallbacks = 0; // bias gradients reduced by column_sum_cuda instead
};
LinearPathCounts linear_path_counts_cuda();

}  // namespace bertrain

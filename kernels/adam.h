// One Adam / AdamW update over a flat parameter buffer, bit-for-bit the arithmetic of torch.optim.Adam
// and torch.optim.AdamW (single-tensor path): bias-corrected moments, eps added outside the square root.
#pragma once

#include <cstddef>

#include "core/bf16.h"
#include "core/cuda/gpu_handles.h"

namespace bertrain {

struct AdamHyper {
  // double, as torch holds them: the derived scalars (1 - beta2, lr / bias correction) are computed in
  // double and only then rounded to the parameter type.
  double lr = 1e-4;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // > 0: decoupled (AdamW): param *= 1 - lr · weight_decay before the update
};

// param, m, v (+= in place, n elements) updated with grad for optimizer step `step` (1-based).
template <typename T>
void adam_update_cpu(T* param, T* m, T* v, const T* grad, std::size_t n, const AdamHyper& hyper, long step);

// ---- CUDA (kernels/cuda/adam.cu): one launch over the flat buffer, the CPU's arithmetic in float.
// param, m, v (fp32) updated in place; param_copy (may be null) (=) the new parameters rounded to bf16 (the
// compute copy of --precision bf16).
void adam_update_cuda(float* param, float* m, float* v, const float* grad, bf16* param_copy, std::size_t n,
                      const AdamHyper& hyper, long step, CudaStream stream);

}  // namespace bertrain

// One Adam / AdamW update over a flat parameter buffer, bit-for-bit the arithmetic of torch.optim.Adam
// and torch.optim.AdamW (single-tensor path): bias-corrected moments, eps added outside the square root.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/bf16.h"
#include "core/host_device.h"
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

// Clipping by the gradient's global L2 norm, as torch.nn.utils.clip_grad_norm_ (Trainer's max_grad_norm): the
// factor every gradient is multiplied by before Adam reads it, min(1, max_norm / (norm + 1e-6)) in float as torch
// computes it for float gradients. 1 (no change) when max_norm is 0 (no clipping) or the norm is within it.
inline float clip_grad_scale(double max_norm, double norm) {
  if (max_norm <= 0) return 1.0f;
  const float coef = static_cast<float>(max_norm) / (static_cast<float>(norm) + 1e-6f);
  return coef < 1.0f ? coef : 1.0f;
}

// Which elements weight decay applies to: element i when bit i % 32 of decay_mask[i / 32] is set (Hugging Face
// Trainer leaves biases and LayerNorm weights out: engine/adam.h's trainer_decay_mask). A null mask decays every
// element, as torch.optim.AdamW over all parameters.
BERTRAIN_HOST_DEVICE bool decays(const uint32_t* decay_mask, std::size_t i) {
  return decay_mask == nullptr || ((decay_mask[i / 32] >> (i % 32)) & 1u) != 0;
}

// param, m, v (+= in place, n elements) updated with grad · grad_scale for optimizer step `step` (1-based);
// grad itself is left as it is. grad_scale 1 is exactly the unscaled update. Weight decay (hyper.weight_decay > 0)
// applies to the elements decay_mask selects (above).
template <typename T>
void adam_update_cpu(T* param, T* m, T* v, const T* grad, std::size_t n, const AdamHyper& hyper, long step,
                     T grad_scale = T(1), const uint32_t* decay_mask = nullptr);

// ---- CUDA (kernels/cuda/adam.cu): one launch over the flat buffer, the CPU's arithmetic in float.

// Clipping whose norm stays on the device: sum_of_squares points at the step's Σ g² (sum_of_squares_cuda), and each
// thread derives clip_grad_scale(max_norm, sqrt(Σ g²)) from it, so the step needs no host sync. Null: no clipping.
struct DeviceGradClip {
  const float* sum_of_squares = nullptr;
  float max_norm = 0;
};

// param, m, v (fp32) updated in place with grad times clip's factor; param_copy (may be null) (=) the new
// parameters rounded to bf16 (the compute copy of --precision bf16). decay_mask: a device copy of the CPU's mask
// (ceil(n / 32) words), or null to decay every element.
void adam_update_cuda(float* param, float* m, float* v, const float* grad, bf16* param_copy, std::size_t n,
                      const AdamHyper& hyper, long step, const DeviceGradClip& clip, const uint32_t* decay_mask,
                      CudaStream stream);

}  // namespace bertrain

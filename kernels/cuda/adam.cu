// CUDA Adam / AdamW (kernels/adam.h): adam_update_cpu<float>'s arithmetic (kernels/cpu/adam.cpp), one thread
// per element over a grid-stride loop. The host derives the scalars in double exactly as the CPU does and
// rounds them to float; the kernel then performs the CPU's float operations in the CPU's order, each one
// an explicitly rounded IEEE operation (__fmul_rn, __fadd_rn, __fsub_rn, __fdiv_rn, __fsqrt_rn), which nvcc
// never contracts into an FMA.
//
// Bit-identity with the CPU twin depends on how the host compiler built kernels/cpu/adam.cpp. Our flags
// (build/compile_commands.json: g++ 12 -O3 -march=native -std=c++17) leave GCC at its C++ default
// -ffp-contract=fast: unlike -std=c11 for C, an ISO -std=c++17 does NOT switch contraction off, and
// -march=native enables FMA on any recent x86, so GCC fuses e.g. m + (1-b1)·(g - m) and p - step·(m/denom)
// into FMAs (checked: `float f(a,b,c){return a*b+c;}` compiles to vfmadd132ss with these flags). This
// kernel is therefore bit-identical to the uncontracted arithmetic (what adam_update_cpu computes with
// -ffp-contract=off or without FMA hardware, and what the test's reference computes) and within a couple
// of float ulps per step of the contracted CPU build (one rounding of a product more or less per
// operation; the CPU's double 1 - lr·weight_decay may be fused too, which changes the float decay only in
// the rare case the double result sits on a float rounding boundary); the test
// tests/cuda/test_cuda_embedding_loss_adam.cpp checks both, with the bound it derives.
#include "kernels/adam.h"

#include <cmath>
#include <cstddef>

#include "core/error.h"
#include "kernels/cuda/common.cuh"

namespace bertrain {

namespace {

constexpr int kThreads = 256;

// The per-step scalars, rounded to float from double as adam_update_cpu<float> rounds them.
struct AdamScalars {
  float step_size;              // lr / (1 - beta1^step)
  float bias_correction2_sqrt;  // sqrt(1 - beta2^step)
  float beta2;
  float eps;
  float one_minus_beta1;
  float one_minus_beta2;
  float decay;     // 1 - lr · weight_decay
  bool decoupled;  // weight_decay > 0
};

// For each i < n: param[i], m[i], v[i] (=, in place) the Adam update of step `step` with grad[i], decayed where
// decay_mask says (kernels/adam.h: decays); param_copy[i] (=, when not null) the new param[i] rounded to bf16. One
// thread per element, grid-stride.
__global__ void adam_update_kernel(float* param, float* m, float* v, const float* grad, bf16* param_copy,
                                   std::size_t n, AdamScalars k, DeviceGradClip clip, const uint32_t* decay_mask) {
  // clip_grad_scale's arithmetic (kernels/adam.h) on the device's Σ g²: every thread reads the same word.
  float grad_scale = 1.0f;
  if (clip.sum_of_squares != nullptr) {
    const float coef = __fdiv_rn(clip.max_norm, __fadd_rn(__fsqrt_rn(*clip.sum_of_squares), 1e-6f));
    grad_scale = coef < 1.0f ? coef : 1.0f;
  }
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    float p = param[i];
    if (k.decoupled && decays(decay_mask, i)) p = __fmul_rn(p, k.decay);
    const float g = __fmul_rn(grad[i], grad_scale);  // exact when grad_scale is 1
    const float m_old = m[i];
    // mi = m + (1 - beta1) · (g - m)
    const float mi = __fadd_rn(m_old, __fmul_rn(k.one_minus_beta1, __fsub_rn(g, m_old)));
    // vi = v · beta2 + (1 - beta2) · g · g   (the CPU's left-to-right ((1 - beta2) · g) · g)
    const float vi = __fadd_rn(__fmul_rn(v[i], k.beta2), __fmul_rn(__fmul_rn(k.one_minus_beta2, g), g));
    // denom = sqrt(vi) / sqrt(bias_correction2) + eps
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), k.bias_correction2_sqrt), k.eps);
    // param = p - step_size · (mi / denom)
    const float updated = __fsub_rn(p, __fmul_rn(k.step_size, __fdiv_rn(mi, denom)));
    param[i] = updated;
    m[i] = mi;
    v[i] = vi;
    if (param_copy != nullptr) cuda::store(param_copy + i, updated);
  }
}

}  // namespace

void adam_update_cuda(float* param, float* m, float* v, const float* grad, bf16* param_copy, std::size_t n,
                      const AdamHyper& hyper, long step, const DeviceGradClip& clip, const uint32_t* decay_mask,
                      CudaStream stream) {
  BERTRAIN_CHECK(step >= 1, "Adam step must start at 1, got " << step);
  if (n == 0) return;
  BERTRAIN_CHECK(param != nullptr && m != nullptr && v != nullptr && grad != nullptr,
                 "adam_update_cuda: null parameter, moment or gradient buffer");
  // The CPU twin's scalar arithmetic, statement for statement.
  const double bias_correction1 = 1.0 - std::pow(hyper.beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(hyper.beta2, static_cast<double>(step));
  AdamScalars k;
  k.step_size = static_cast<float>(hyper.lr / bias_correction1);
  k.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  k.beta2 = static_cast<float>(hyper.beta2);
  k.eps = static_cast<float>(hyper.eps);
  k.one_minus_beta1 = static_cast<float>(1.0 - hyper.beta1);
  k.one_minus_beta2 = static_cast<float>(1.0 - hyper.beta2);
  // volatile: the product is rounded to double before the subtraction even if this host code is ever built
  // with FMA contraction (nvcc's host pass does not get -march=native today), so the scalar is the
  // uncontracted one the test's reference computes.
  const volatile double lr_times_decay = hyper.lr * hyper.weight_decay;
  k.decay = static_cast<float>(1.0 - lr_times_decay);
  k.decoupled = hyper.weight_decay > 0.0;
  // max_norm 0 is no clipping, as clip_grad_scale says, wherever the Σ g² is.
  const DeviceGradClip device_clip = clip.max_norm > 0 ? clip : DeviceGradClip{};

  adam_update_kernel<<<cuda::elementwise_blocks(n, kThreads), kThreads, 0, stream>>>(param, m, v, grad, param_copy,
                                                                                     n, k, device_clip, decay_mask);
  BERTRAIN_CUDA_CHECK_LAUNCH("adam_update_kernel");
}

}  // namespace bertrain

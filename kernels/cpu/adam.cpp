#include "kernels/adam.h"

#include <cmath>

#include "core/error.h"

namespace bertrain {

template <typename T>
void adam_update_cpu(T* param, T* m, T* v, const T* grad, std::size_t n, const AdamHyper& hyper, long step,
                     T grad_scale, const uint32_t* decay_mask) {
  BERTRAIN_CHECK(step >= 1, "Adam step must start at 1, got " << step);
  // Scalars are computed as torch computes them: in double, then rounded to T.
  const double bias_correction1 = 1.0 - std::pow(hyper.beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(hyper.beta2, static_cast<double>(step));
  const T step_size = T(hyper.lr / bias_correction1);
  const T bias_correction2_sqrt = T(std::sqrt(bias_correction2));
  const T beta2 = T(hyper.beta2), eps = T(hyper.eps);
  const T one_minus_beta1 = T(1.0 - hyper.beta1), one_minus_beta2 = T(1.0 - hyper.beta2);
  const T decay = T(1.0 - hyper.lr * hyper.weight_decay);
  const bool decoupled = hyper.weight_decay > 0.0;
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for schedule(static) if (count > 65536)
  for (std::ptrdiff_t i = 0; i < count; ++i) {
    T p = param[i];
    if (decoupled && decays(decay_mask, static_cast<std::size_t>(i))) p *= decay;
    const T g = grad[i] * grad_scale;  // clip_grad_norm_'s grads.mul_(clip_coef); exact when grad_scale is 1
    // torch: exp_avg.lerp_(grad, 1 - beta1); exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    const T mi = m[i] + one_minus_beta1 * (g - m[i]);
    const T vi = v[i] * beta2 + one_minus_beta2 * g * g;
    const T denom = std::sqrt(vi) / bias_correction2_sqrt + eps;
    param[i] = p - step_size * (mi / denom);
    m[i] = mi;
    v[i] = vi;
  }
}

template void adam_update_cpu<float>(float*, float*, float*, const float*, std::size_t, const AdamHyper&, long, float,
                                     const uint32_t*);
template void adam_update_cpu<double>(double*, double*, double*, const double*, std::size_t, const AdamHyper&, long,
                                      double, const uint32_t*);

}  // namespace bertrain

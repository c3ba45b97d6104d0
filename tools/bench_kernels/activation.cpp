// `bench kernels` benchmarks of the feed-forward activation: bias + GELU of the intermediate layer, and GELU
// alone forward and backward.
#include <cstddef>
#include <vector>

#include "kernels/activation.h"
#include "tools/bench_kernels/benchmarks.h"
#include "tools/bench_kernels/harness.h"

namespace bertrain::bench {

template <typename T>
void bench_bias_activation_forward(Runner& r) {
  const Shape& s = r.options().shape;
  if (!r.select("bias_activation_forward")) return;
  const int rows = s.tokens(), cols = s.intermediate;
  const std::size_t n = sz(rows) * sz(cols);
  T* x = r.take<T>(n);
  T* bias = r.take<T>(sz(cols));
  T* y = r.take<T>(n);
  if (r.sizing()) return;
  const std::vector<float> hx = r.random<T>(n, 50, -3.0f, 3.0f), hb = r.random<T>(sz(cols), 51);
  r.upload(x, hx);
  r.upload(bias, hb);
  // bytes = x T·I·e + b I·e (read) + x (+= b, kept for backward) T·I·e + y T·I·e (written).
  Measure m{"bias_activation_forward", label("T=%lld I=%lld, gelu", rows, cols), (3.0 * n + cols) * elem<T>()};
  // x += b on every run: the values drift by one bias per run, which does not change the work.
  r.measure(m, [&] { bias_activation_forward_cuda<T>(y, x, bias, rows, cols, Activation::kGelu, r.stream()); },
            [&](Checker& c) {
              // The twin of x += b is linear's bias (a row-wise add); of y = gelu(x) activation_forward_cpu.
              std::vector<float> rx(n), ry(n);
              for (std::size_t i = 0; i < n; ++i) rx[i] = hx[i] + hb[i % sz(cols)];
              make_representable<T>(rx);
              activation_forward_cpu<float>(ry.data(), rx.data(), n, Activation::kGelu);
              make_representable<T>(ry);
              c.compare("x (pre-activation)", r.download(x, n), rx);
              c.compare("y", r.download(y, n), ry);
            });
}

template <typename T>
void bench_activation(Runner& r, bool forward) {
  const Shape& s = r.options().shape;
  const char* name = forward ? "activation_forward" : "activation_backward";
  if (!r.select(name)) return;
  const std::size_t n = sz(s.tokens()) * sz(s.intermediate);
  T* x = r.take<T>(n);
  T* dy = r.take<T>(n);
  T* out = r.take<T>(n);
  if (r.sizing()) return;
  const std::vector<float> hx = r.random<T>(n, 60, -3.0f, 3.0f), hdy = r.random<T>(n, 61);
  r.upload(x, hx);
  r.upload(dy, hdy);
  // bytes: forward x T·I·e (read) + y T·I·e (written); backward dy, x 2·T·I·e (read) + dx T·I·e (written).
  Measure m{name, label("n=T*I=%lld, gelu", static_cast<long long>(n)), (forward ? 2.0 : 3.0) * n * elem<T>()};
  r.measure(m,
            [&] {
              if (forward) activation_forward_cuda<T>(out, x, n, Activation::kGelu, r.stream());
              else activation_backward_cuda<T>(out, dy, x, n, Activation::kGelu, r.stream());
            },
            [&](Checker& c) {
              std::vector<float> ref(n);
              if (forward) activation_forward_cpu<float>(ref.data(), hx.data(), n, Activation::kGelu);
              else activation_backward_cpu<float>(ref.data(), hdy.data(), hx.data(), n, Activation::kGelu);
              make_representable<T>(ref);
              c.compare(forward ? "y" : "dx", r.download(out, n), ref);
            });
}

template void bench_bias_activation_forward<float>(Runner&);
template void bench_bias_activation_forward<bf16>(Runner&);
template void bench_activation<float>(Runner&, bool);
template void bench_activation<bf16>(Runner&, bool);

}  // namespace bertrain::bench

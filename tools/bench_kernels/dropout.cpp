// `bench kernels` benchmark of hidden-state dropout (forward and backward) over the token slots of the packed
// batch of harness.h: the mask is regenerated from the counter-based generator, never stored.
#include <cstdint>
#include <vector>

#include "kernels/dropout.h"
#include "tools/bench_kernels/benchmarks.h"
#include "tools/bench_kernels/harness.h"

namespace bertrain::bench {

template <typename T>
void bench_dropout(Runner& r, bool forward) {
  const Shape& s = r.options().shape;
  const char* name = forward ? "dropout_forward" : "dropout_backward";
  if (!r.select(name)) return;
  const std::size_t n = sz(s.tokens()) * sz(s.hidden);
  T* x = r.take<T>(n);
  T* y = r.take<T>(n);
  int64_t* slots = r.take<int64_t>(sz(s.tokens()));
  if (r.sizing()) return;
  const std::vector<float> hx = r.random<T>(n, 20);
  r.upload(x, hx);
  const HostBatch hb = make_batch(s, r.options().seed);
  r.copy_in(slots, hb.slots);
  const RandomKey key = dropout_key(r.options(), 20);
  // The launchers read the device slots, the CPU twin the host's: the same logical rows.
  const DropoutLayout layout = token_layout(s, slots), host_layout = token_layout(s, hb.slots.data());
  // bytes = x T·H·e + slots 8·T (read) + y T·H·e (written); the mask is regenerated, never stored.
  Measure m{name, label("T=%lld H=%lld, p=0.1", s.tokens(), s.hidden), 2.0 * n * elem<T>() + 8.0 * s.tokens()};
  r.measure(m,
            [&] {
              if (forward) dropout_forward_cuda<T>(y, x, n, kDropout, key, layout, r.stream());
              else dropout_backward_cuda<T>(y, x, n, kDropout, key, layout, r.stream());
            },
            [&](Checker& c) {
              std::vector<float> ref(n);
              if (forward) dropout_forward_cpu<float>(ref.data(), hx.data(), n, kDropout, key, host_layout);
              else dropout_backward_cpu<float>(ref.data(), hx.data(), n, kDropout, key, host_layout);
              make_representable<T>(ref);
              c.compare("y", r.download(y, n), ref);
            });
}

template void bench_dropout<float>(Runner&, bool);
template void bench_dropout<bf16>(Runner&, bool);

}  // namespace bertrain::bench

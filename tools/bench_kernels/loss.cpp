// `bench kernels` benchmark of the classification loss (BCE over the C logits of each row) and its gradient.
#include <algorithm>
#include <vector>

#include "kernels/loss.h"
#include "tools/bench_kernels/benchmarks.h"
#include "tools/bench_kernels/harness.h"

namespace bertrain::bench {

template <typename T>
void bench_loss(Runner& r) {
  const Shape& s = r.options().shape;
  if (!r.select("classification_loss")) return;
  const std::size_t n = sz(s.batch) * sz(s.classes);
  T* logits = r.take<T>(n);
  float* targets = r.take<float>(n);
  float* loss = r.take<float>(1);
  T* dlogits = r.take<T>(n);
  if (r.sizing()) return;
  const std::vector<float> hlogits = r.random<T>(n, 70, -3.0f, 3.0f), pick = r.random<float>(sz(s.batch), 71, 0.0f, 1.0f);
  std::vector<float> htargets(n, 0.0f);
  for (int b = 0; b < s.batch; ++b) htargets[sz(b) * sz(s.classes) + sz(std::min(s.classes - 1, static_cast<int>(pick[sz(b)] * s.classes)))] = 1.0f;
  r.upload(logits, hlogits);
  r.copy_in(targets, htargets);
  // bytes = logits B·C·e + targets 4·B·C (read) + dlogits B·C·e + loss 4 (written). One block: this line shows
  // launch latency more than bandwidth.
  Measure m{"classification_loss", label("B=%lld C=%lld, BCE", s.batch, s.classes), 2.0 * n * elem<T>() + 4.0 * n + 4.0};
  r.measure(m,
            [&] {
              classification_loss_cuda<T>(LossKind::kBce, loss, dlogits, logits, targets, nullptr, s.batch, s.classes,
                                          1.0f, r.stream());
            },
            [&](Checker& c) {
              std::vector<float> rd(n);
              const float rloss = classification_loss_cpu<float>(LossKind::kBce, rd.data(), hlogits.data(),
                                                                 htargets.data(), nullptr, s.batch, s.classes);
              make_representable<T>(rd);
              c.compare("loss", r.download(loss, 1), {rloss}, kFp32Tolerance);
              c.compare("dlogits", r.download(dlogits, n), rd);
            });
}

template void bench_loss<float>(Runner&);
template void bench_loss<bf16>(Runner&);

}  // namespace bertrain::bench

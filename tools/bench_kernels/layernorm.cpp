// `bench kernels` benchmarks of LayerNorm: the residual add + normalisation (forward) and its input and
// parameter gradients (backward); the fused dropout + residual add + LayerNorm of every BERT layer, and the
// embeddings' LayerNorm + dropout (forward and backward, the float residual stream with a T copy), over the token
// slots of the packed batch of harness.h.
#include <cstdint>
#include <vector>

#include "kernels/dropout.h"
#include "kernels/layernorm.h"
#include "tools/bench_kernels/benchmarks.h"
#include "tools/bench_kernels/harness.h"

namespace bertrain::bench {

namespace {

constexpr float kLayerNormEps = 1e-12f;

}  // namespace

template <typename T>
void bench_layernorm_forward(Runner& r) {
  const Shape& s = r.options().shape;
  if (!r.select("layernorm_forward")) return;
  const int rows = s.tokens(), cols = s.hidden;
  const std::size_t n = sz(rows) * sz(cols);
  T* x = r.take<T>(n);
  T* residual = r.take<T>(n);
  T* gamma = r.take<T>(sz(cols));
  T* beta = r.take<T>(sz(cols));
  T* y = r.take<T>(n);
  float* mean = r.take<float>(sz(rows));
  float* rstd = r.take<float>(sz(rows));
  if (r.sizing()) return;
  const std::vector<float> hx = r.random<T>(n, 10), hres = r.random<T>(n, 11), hg = r.random<T>(sz(cols), 12, 0.5f, 1.5f),
                           hb = r.random<T>(sz(cols), 13);
  r.upload(x, hx);
  r.upload(residual, hres);
  r.upload(gamma, hg);
  r.upload(beta, hb);
  // bytes = x, residual 2·T·H·e + gamma, beta 2·H·e (read) + y T·H·e + mean, rstd 2·4·T (written).
  Measure m{"layernorm_forward", label("T=%lld H=%lld, +residual", rows, cols),
            (3.0 * n + 2.0 * cols) * elem<T>() + 8.0 * rows};
  r.measure(m, [&] { layernorm_forward_cuda<T>(y, mean, rstd, x, residual, gamma, beta, rows, cols, kLayerNormEps, r.stream()); },
            [&](Checker& c) {
              std::vector<float> ry(n), rmean(sz(rows)), rrstd(sz(rows));
              layernorm_forward_cpu<float>(ry.data(), rmean.data(), rrstd.data(), hx.data(), hres.data(), hg.data(),
                                           hb.data(), rows, cols, kLayerNormEps);
              make_representable<T>(ry);
              c.compare("y", r.download(y, n), ry);
              c.compare("mean", r.download(mean, sz(rows)), rmean);
              c.compare("rstd", r.download(rstd, sz(rows)), rrstd);
            });
}

template <typename T>
void bench_layernorm_backward(Runner& r) {
  const Shape& s = r.options().shape;
  if (!r.select("layernorm_backward")) return;
  const int rows = s.tokens(), cols = s.hidden;
  const std::size_t n = sz(rows) * sz(cols);
  T *dy = r.take<T>(n), *x = r.take<T>(n), *residual = r.take<T>(n), *gamma = r.take<T>(sz(cols)), *dz = r.take<T>(n);
  float *mean = r.take<float>(sz(rows)), *rstd = r.take<float>(sz(rows));
  float *dgamma = r.take<float>(sz(cols)), *dbeta = r.take<float>(sz(cols));
  if (r.sizing()) return;
  const std::vector<float> hdy = r.random<T>(n, 100), hx = r.random<T>(n, 101), hres = r.random<T>(n, 102),
                           hg = r.random<T>(sz(cols), 103, 0.5f, 1.5f), hbeta(sz(cols), 0.0f);
  // The saved statistics come from the CPU forward of the same x + residual.
  std::vector<float> hy(n), hmean(sz(rows)), hrstd(sz(rows));
  layernorm_forward_cpu<float>(hy.data(), hmean.data(), hrstd.data(), hx.data(), hres.data(), hg.data(), hbeta.data(),
                               rows, cols, kLayerNormEps);
  r.upload(dy, hdy);
  r.upload(x, hx);
  r.upload(residual, hres);
  r.upload(gamma, hg);
  r.copy_in(mean, hmean);
  r.copy_in(rstd, hrstd);
  // bytes = dy, x, residual 3·T·H·e + gamma H·e + mean, rstd 2·4·T (read) + dz T·H·e + dgamma, dbeta 2·4·H
  // (written).
  Measure m{"layernorm_backward", label("T=%lld H=%lld, +residual", rows, cols),
            (4.0 * n + cols) * elem<T>() + 8.0 * rows + 8.0 * cols};
  r.measure(m,
            [&] {
              layernorm_backward_cuda<T>(r.handles(), dz, dgamma, dbeta, dy, x, residual, mean, rstd, gamma, rows, cols);
            },
            [&](Checker& c) {
              std::vector<float> rdz(n), rdg(sz(cols)), rdb(sz(cols));
              layernorm_backward_cpu<float>(rdz.data(), rdg.data(), rdb.data(), hdy.data(), hx.data(), hres.data(),
                                            hmean.data(), hrstd.data(), hg.data(), rows, cols);
              make_representable<T>(rdz);
              c.compare("dz", r.download(dz, n), rdz);
              c.compare("dgamma", r.download(dgamma, sz(cols)), rdg);
              c.compare("dbeta", r.download(dbeta, sz(cols)), rdb);
            });
}

// The fused kernels with their mask. residual: every layer's dropout + residual add + LayerNorm (rows
// dropout_residual_layernorm_*); else the embeddings' LayerNorm + dropout, no residual (rows layernorm_dropout_*).
template <typename T>
void bench_fused_layernorm_forward(Runner& r, bool residual) {
  const Shape& s = r.options().shape;
  const char* name = residual ? "dropout_residual_layernorm_forward" : "layernorm_dropout_forward";
  if (!r.select(name)) return;
  const int rows = s.tokens(), cols = s.hidden;
  const std::size_t n = sz(rows) * sz(cols);
  T* x = r.take<T>(n);
  float* res = residual ? r.take<float>(n) : nullptr;
  T* gamma = r.take<T>(sz(cols));
  T* beta = r.take<T>(sz(cols));
  float* y = r.take<float>(n);
  T* y_copy = r.take<T>(n);
  float* mean = r.take<float>(sz(rows));
  float* rstd = r.take<float>(sz(rows));
  int64_t* slots = r.take<int64_t>(sz(rows));
  if (r.sizing()) return;
  const std::vector<float> hx = r.random<T>(n, 40), hres = residual ? r.random<float>(n, 41) : std::vector<float>(),
                           hg = r.random<T>(sz(cols), 42, 0.5f, 1.5f), hb = r.random<T>(sz(cols), 43);
  r.upload(x, hx);
  if (residual) r.upload(res, hres);
  r.upload(gamma, hg);
  r.upload(beta, hb);
  const HostBatch batch = make_batch(s, r.options().seed);
  r.copy_in(slots, batch.slots);
  const RandomKey key = dropout_key(r.options(), residual ? 40 : 42);
  const DropoutLayout layout = token_layout(s, slots), host_layout = token_layout(s, batch.slots.data());
  // bytes = x T·H·e + [residual 4·T·H] + gamma, beta 2·H·e + slots 8·T (read) + y 4·T·H + y_copy T·H·e + mean, rstd
  // 2·4·T (written). The mask is regenerated, never stored.
  Measure m{name, label("T=%lld H=%lld, p=0.1", rows, cols),
            (2.0 * n + 2.0 * cols) * elem<T>() + (residual ? 8.0 : 4.0) * n + 16.0 * rows};
  r.measure(m,
            [&] {
              if (residual) {
                dropout_residual_layernorm_forward_cuda<T>(y, y_copy, mean, rstd, x, res, gamma, beta, rows, cols,
                                                           kLayerNormEps, kDropout, key, layout, r.stream());
              } else {
                layernorm_dropout_forward_cuda<T>(y, y_copy, mean, rstd, x, gamma, beta, rows, cols, kLayerNormEps,
                                                  kDropout, key, layout, r.stream());
              }
            },
            [&](Checker& c) {
              std::vector<float> ry(n), rmean(sz(rows)), rrstd(sz(rows));
              if (residual) {
                dropout_residual_layernorm_forward_cpu<float>(ry.data(), rmean.data(), rrstd.data(), hx.data(),
                                                              hres.data(), hg.data(), hb.data(), rows, cols,
                                                              kLayerNormEps, kDropout, key, host_layout);
              } else {
                layernorm_forward_cpu<float>(ry.data(), rmean.data(), rrstd.data(), hx.data(), nullptr, hg.data(),
                                             hb.data(), rows, cols, kLayerNormEps);
                dropout_forward_cpu(ry.data(), ry.data(), n, kDropout, key, host_layout);
              }
              c.compare("y", r.download(y, n), ry, kFp32Tolerance);  // the float stream, whatever T is
              c.compare("mean", r.download(mean, sz(rows)), rmean, kFp32Tolerance);
              c.compare("rstd", r.download(rstd, sz(rows)), rrstd, kFp32Tolerance);
              make_representable<T>(ry);
              c.compare("y_copy", r.download(y_copy, n), ry);
            });
}

template <typename T>
void bench_fused_layernorm_backward(Runner& r, bool residual) {
  const Shape& s = r.options().shape;
  const char* name = residual ? "dropout_residual_layernorm_backward" : "layernorm_dropout_backward";
  if (!r.select(name)) return;
  const int rows = s.tokens(), cols = s.hidden;
  const std::size_t n = sz(rows) * sz(cols);
  float *dy = r.take<float>(n), *res = residual ? r.take<float>(n) : nullptr, *dz = r.take<float>(n);
  T *x = r.take<T>(n), *gamma = r.take<T>(sz(cols)), *dx = residual ? r.take<T>(n) : nullptr;
  float *mean = r.take<float>(sz(rows)), *rstd = r.take<float>(sz(rows));
  float *dgamma = r.take<float>(sz(cols)), *dbeta = r.take<float>(sz(cols));
  int64_t* slots = r.take<int64_t>(sz(rows));
  if (r.sizing()) return;
  const std::vector<float> hdy = r.random<float>(n, 140), hx = r.random<T>(n, 141),
                           hres = residual ? r.random<float>(n, 142) : std::vector<float>(),
                           hg = r.random<T>(sz(cols), 143, 0.5f, 1.5f), hbeta(sz(cols), 0.0f);
  const HostBatch batch = make_batch(s, r.options().seed);
  const RandomKey key = dropout_key(r.options(), residual ? 41 : 43);
  const DropoutLayout layout = token_layout(s, slots), host_layout = token_layout(s, batch.slots.data());
  // The saved statistics come from the CPU forward of the same x, residual and mask.
  std::vector<float> hy(n), hmean(sz(rows)), hrstd(sz(rows));
  if (residual) {
    dropout_residual_layernorm_forward_cpu<float>(hy.data(), hmean.data(), hrstd.data(), hx.data(), hres.data(),
                                                  hg.data(), hbeta.data(), rows, cols, kLayerNormEps, kDropout, key,
                                                  host_layout);
  } else {
    layernorm_forward_cpu<float>(hy.data(), hmean.data(), hrstd.data(), hx.data(), nullptr, hg.data(), hbeta.data(),
                                 rows, cols, kLayerNormEps);
  }
  r.upload(dy, hdy);
  r.upload(x, hx);
  if (residual) r.upload(res, hres);
  r.upload(gamma, hg);
  r.copy_in(mean, hmean);
  r.copy_in(rstd, hrstd);
  r.copy_in(slots, batch.slots);
  // bytes = dy 4·T·H + x T·H·e + [residual 4·T·H] + gamma H·e + mean, rstd 2·4·T + slots 8·T (read) + dz 4·T·H +
  // [dx T·H·e] + dgamma, dbeta 2·4·H (written). The per-block partials of dgamma and dbeta (2 · 256 · H floats
  // written and read back) are implementation traffic.
  Measure m{name, label("T=%lld H=%lld, p=0.1", rows, cols),
            ((residual ? 2.0 : 1.0) * n + cols) * elem<T>() + (residual ? 12.0 : 8.0) * n + 16.0 * rows + 8.0 * cols};
  r.measure(m,
            [&] {
              if (residual) {
                dropout_residual_layernorm_backward_cuda<T>(r.handles(), dz, dx, dgamma, dbeta, dy, x, res, mean,
                                                            rstd, gamma, rows, cols, kDropout, key, layout);
              } else {
                layernorm_dropout_backward_cuda<T>(r.handles(), dz, dgamma, dbeta, dy, x, mean, rstd, gamma, rows,
                                                   cols, kDropout, key, layout);
              }
            },
            [&](Checker& c) {
              std::vector<float> rdz(n), rdx(residual ? n : 0), rdg(sz(cols)), rdb(sz(cols));
              if (residual) {
                dropout_residual_layernorm_backward_cpu<float>(rdz.data(), rdx.data(), rdg.data(), rdb.data(),
                                                               hdy.data(), hx.data(), hres.data(), hmean.data(),
                                                               hrstd.data(), hg.data(), rows, cols, kDropout, key,
                                                               host_layout);
              } else {
                dropout_backward_cpu(rdz.data(), hdy.data(), n, kDropout, key, host_layout);
                layernorm_backward_cpu<float>(rdz.data(), rdg.data(), rdb.data(), rdz.data(), hx.data(), nullptr,
                                              hmean.data(), hrstd.data(), hg.data(), rows, cols);
              }
              c.compare("dz", r.download(dz, n), rdz, kFp32Tolerance);  // float whatever T is
              if (residual) {
                make_representable<T>(rdx);
                c.compare("dx", r.download(dx, n), rdx);
              }
              c.compare("dgamma", r.download(dgamma, sz(cols)), rdg, kFp32Tolerance);
              c.compare("dbeta", r.download(dbeta, sz(cols)), rdb, kFp32Tolerance);
            });
}

template void bench_layernorm_forward<float>(Runner&);
template void bench_layernorm_forward<bf16>(Runner&);
template void bench_layernorm_backward<float>(Runner&);
template void bench_layernorm_backward<bf16>(Runner&);
template void bench_fused_layernorm_forward<float>(Runner&, bool);
template void bench_fused_layernorm_forward<bf16>(Runner&, bool);
template void bench_fused_layernorm_backward<float>(Runner&, bool);
template void bench_fused_layernorm_backward<bf16>(Runner&, bool);

}  // namespace bertrain::bench

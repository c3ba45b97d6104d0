// `bench kernels` benchmarks of the linear layers: the three GEMM shapes of a BERT layer forward and backward,
// the feed-forward's GEMMs with their activation (forward: intermediate dense + activation; backward: output
// dense's dx through the activation's derivative, with the intermediate bias gradient), and the reductions and
// adds around them (column sums of bias gradients, the residual add). The GEMMs are checked on their first and
// last rows (harness.h: rows_to_verify).
#include <string>
#include <vector>

#include "kernels/activation.h"
#include "kernels/linear.h"
#include "kernels/tensor_ops.h"
#include "tools/bench_kernels/benchmarks.h"
#include "tools/bench_kernels/harness.h"

namespace bertrain::bench {

namespace {

struct LinearCase {
  int in, out;
  bool bias;
};

// The three GEMM shapes of a BERT layer: Q/K/V and attention output (H -> H, with bias), intermediate
// (H -> I, bias added by bias_activation_forward as in the model) and output (I -> H, with bias).
std::vector<LinearCase> linear_cases(const Shape& s) {
  return {{s.hidden, s.hidden, true}, {s.hidden, s.intermediate, false}, {s.intermediate, s.hidden, true}};
}

// Twin of a column sum: linear_backward_cpu's bias gradient db = Σ_rows dy (in a fixed row order), with a
// one-column x so that its dw costs nothing.
std::vector<float> column_sums_cpu(const std::vector<float>& x, int rows, int cols) {
  std::vector<float> ones_x(sz(rows), 1.0f), ones_w(sz(cols), 1.0f), dw(sz(cols)), db(sz(cols));
  linear_backward_cpu<float>(nullptr, dw.data(), db.data(), x.data(), ones_x.data(), ones_w.data(), rows, 1, cols, false);
  return db;
}

}  // namespace

template <typename T>
void bench_linear_forward(Runner& r) {
  const Shape& s = r.options().shape;
  for (const LinearCase& lc : linear_cases(s)) {
    if (!r.select("linear_forward")) return;
    const int rows = s.tokens();
    const std::size_t nx = sz(rows) * sz(lc.in), nw = sz(lc.out) * sz(lc.in), ny = sz(rows) * sz(lc.out);
    T* x = r.take<T>(nx);
    T* w = r.take<T>(nw);
    T* b = r.take<T>(sz(lc.out));
    T* y = r.take<T>(ny);
    if (r.sizing()) continue;
    const std::vector<float> hx = r.random<T>(nx, 30), hw = r.random<T>(nw, 31), hb = r.random<T>(sz(lc.out), 32);
    r.upload(x, hx);
    r.upload(w, hw);
    r.upload(b, hb);
    T* bias = lc.bias ? b : nullptr;
    // flops = 2·T·in·out (bias ignored). bytes = x T·in·e + W out·in·e + b out·e (read) + y T·out·e (written).
    Measure m{"linear_forward", label(lc.bias ? "T=%lld: %lld -> %lld" : "T=%lld: %lld -> %lld, no bias", rows, lc.in, lc.out),
              (static_cast<double>(nx) + nw + (lc.bias ? lc.out : 0) + ny) * elem<T>(), 2.0 * rows * lc.in * lc.out};
    r.measure(m, [&] { linear_forward_cuda<T>(r.handles(), y, x, w, bias, rows, lc.in, lc.out); },
              [&](Checker& c) {
                // y on the first and the last rows, the twin run on those rows of x.
                const RowSample sample = rows_to_verify(rows, 2.0 * lc.in * lc.out);
                for (const RowSpan& span : sample.spans) {
                  std::vector<float> ref(sz(span.count) * sz(lc.out));
                  linear_forward_cpu<float>(ref.data(), hx.data() + sz(span.first) * sz(lc.in), hw.data(),
                                            lc.bias ? hb.data() : nullptr, span.count, lc.in, lc.out);
                  make_representable<T>(ref);
                  const std::size_t first = sz(span.first) * sz(lc.out);
                  c.compare_at("y", first, r.download(y + first, ref.size()), ref);
                }
                c.coverage = sample.coverage("rows");
              });
  }
}

template <typename T>
void bench_linear_backward(Runner& r) {
  const Shape& s = r.options().shape;
  for (const LinearCase& lc : linear_cases(s)) {
    if (!r.select("linear_backward")) return;
    const int rows = s.tokens();
    const std::size_t nx = sz(rows) * sz(lc.in), nw = sz(lc.out) * sz(lc.in), ny = sz(rows) * sz(lc.out);
    T* dy = r.take<T>(ny);
    T* x = r.take<T>(nx);
    T* w = r.take<T>(nw);
    T* dx = r.take<T>(nx);
    float* dw = r.take<float>(nw);
    float* db = r.take<float>(sz(lc.out));
    if (r.sizing()) continue;
    const std::vector<float> hdy = r.random<T>(ny, 80), hx = r.random<T>(nx, 81), hw = r.random<T>(nw, 82);
    r.upload(dy, hdy);
    r.upload(x, hx);
    r.upload(w, hw);
    // flops = 4·T·in·out (dx = dy·W and dW = dyᵀ·x; db's T·out adds ignored). bytes = dy T·out·e, x T·in·e,
    // W out·in·e (read) + dx T·in·e + dW 4·out·in + db 4·out (written).
    Measure m{"linear_backward", label("T=%lld: %lld -> %lld", rows, lc.in, lc.out),
              (static_cast<double>(ny) + 2.0 * nx + nw) * elem<T>() + 4.0 * (static_cast<double>(nw) + lc.out),
              4.0 * rows * lc.in * lc.out};
    r.measure(m, [&] { linear_backward_cuda<T>(r.handles(), dx, dw, db, dy, x, w, rows, lc.in, lc.out, false); },
              [&](Checker& c) {
                // dx on the first and the last rows (the twin also computes a dW of those rows, discarded).
                const RowSample dx_sample = rows_to_verify(rows, 4.0 * lc.in * lc.out);
                std::vector<float> scratch_dw(nw);
                for (const RowSpan& span : dx_sample.spans) {
                  std::vector<float> rdx(sz(span.count) * sz(lc.in));
                  linear_backward_cpu<float>(rdx.data(), scratch_dw.data(), nullptr,
                                             hdy.data() + sz(span.first) * sz(lc.out),
                                             hx.data() + sz(span.first) * sz(lc.in), hw.data(), span.count, lc.in,
                                             lc.out, false);
                  make_representable<T>(rdx);
                  const std::size_t first = sz(span.first) * sz(lc.in);
                  c.compare_at("dx", first, r.download(dx + first, rdx.size()), rdx);
                }
                // dW sums over all T rows: check its first and last output rows, i.e. the twin on those columns
                // of dy.
                const RowSample dw_sample = rows_to_verify(lc.out, 2.0 * rows * lc.in);
                for (const RowSpan& span : dw_sample.spans) {
                  std::vector<float> dy_cols(sz(rows) * sz(span.count));
                  for (int t = 0; t < rows; ++t) {
                    for (int j = 0; j < span.count; ++j) {
                      dy_cols[sz(t) * sz(span.count) + sz(j)] = hdy[sz(t) * sz(lc.out) + sz(span.first + j)];
                    }
                  }
                  std::vector<float> rdw(sz(span.count) * sz(lc.in));
                  linear_backward_cpu<float>(nullptr, rdw.data(), nullptr, dy_cols.data(), hx.data(), hw.data(), rows,
                                             lc.in, span.count, false);
                  const std::size_t first = sz(span.first) * sz(lc.in);
                  c.compare_at("dW", first, r.download(dw + first, rdw.size()), rdw);
                }
                // db in full (cheap).
                c.compare("db", r.download(db, sz(lc.out)), column_sums_cpu(hdy, rows, lc.out));
                c.coverage = dx_sample.full() && dw_sample.full()
                                 ? std::string("full")
                                 : dx_sample.coverage("dx rows") + ", " + dw_sample.coverage("dW rows") + ", db full";
              });
  }
}

// The intermediate dense of the feed-forward with its activation, H -> I with bias: BERT's exact GELU (bias
// epilogue, then the activation kernel) and the tanh GELU (one GEMM with cuBLASLt's GELU epilogue).
template <typename T>
void bench_linear_activation_forward(Runner& r) {
  const Shape& s = r.options().shape;
  for (Activation act : {Activation::kGelu, Activation::kGeluTanh}) {
    if (!r.select("linear_activation_forward")) return;
    const int rows = s.tokens(), in = s.hidden, out = s.intermediate;
    const std::size_t nx = sz(rows) * sz(in), nw = sz(out) * sz(in), ny = sz(rows) * sz(out);
    T* x = r.take<T>(nx);
    T* w = r.take<T>(nw);
    T* b = r.take<T>(sz(out));
    T* y = r.take<T>(ny);
    T* pre = r.take<T>(ny);
    if (r.sizing()) continue;
    const std::vector<float> hx = r.random<T>(nx, 90), hw = r.random<T>(nw, 91), hb = r.random<T>(sz(out), 92);
    r.upload(x, hx);
    r.upload(w, hw);
    r.upload(b, hb);
    const bool tanh_form = act == Activation::kGeluTanh;
    // flops = 2·T·in·out (bias and activation ignored). bytes = x T·in·e + W out·in·e + b out·e (read) + y and pre
    // 2·T·out·e (written).
    Measure m{"linear_activation_forward",
              label("T=%lld: %lld -> %lld, ", rows, in, out) + (tanh_form ? "gelu_tanh" : "gelu (erf)"),
              (static_cast<double>(nx) + nw + out + 2.0 * ny) * elem<T>(), 2.0 * rows * in * out};
    r.measure(m, [&] { linear_activation_forward_cuda<T>(r.handles(), y, pre, x, w, b, rows, in, out, act); },
              [&](Checker& c) {
                // pre and y on the first and the last rows, the twin run on those rows of x.
                const RowSample sample = rows_to_verify(rows, 2.0 * in * out);
                for (const RowSpan& span : sample.spans) {
                  const std::size_t n = sz(span.count) * sz(out), first = sz(span.first) * sz(out);
                  std::vector<float> rpre(n), ry(n);
                  linear_forward_cpu<float>(rpre.data(), hx.data() + sz(span.first) * sz(in), hw.data(), hb.data(),
                                            span.count, in, out);
                  make_representable<T>(rpre);
                  activation_forward_cpu<float>(ry.data(), rpre.data(), n, act);
                  make_representable<T>(ry);
                  c.compare_at("pre", first, r.download(pre + first, n), rpre);
                  c.compare_at("y", first, r.download(y + first, n), ry);
                }
                c.coverage = sample.coverage("rows");
              });
  }
}

// The feed-forward's output dense backward into the intermediate pre-activation, I -> H: dpre[T, I] =
// (dy[T, H] · W[H, I]) ∘ act'(pre) and the intermediate bias gradient dbias[I] = Σ_T dpre. Exact GELU: GEMM,
// activation kernel and column sum, for the tanh GELU too (cuBLASLt's DGELU epilogue is off, kernels/cuda/linear.cu).
template <typename T>
void bench_linear_activation_backward_data(Runner& r) {
  const Shape& s = r.options().shape;
  for (Activation act : {Activation::kGelu, Activation::kGeluTanh}) {
    if (!r.select("linear_activation_backward_data")) return;
    const int rows = s.tokens(), in = s.intermediate, out = s.hidden;
    const std::size_t nd = sz(rows) * sz(in), nw = sz(out) * sz(in), ny = sz(rows) * sz(out);
    T* dy = r.take<T>(ny);
    T* w = r.take<T>(nw);
    T* pre = r.take<T>(nd);
    T* dpre = r.take<T>(nd);
    float* dbias = r.take<float>(sz(in));
    if (r.sizing()) continue;
    const std::vector<float> hdy = r.random<T>(ny, 100), hw = r.random<T>(nw, 101),
                             hpre = r.random<T>(nd, 102, -3.0f, 3.0f);
    r.upload(dy, hdy);
    r.upload(w, hw);
    r.upload(pre, hpre);
    const bool tanh_form = act == Activation::kGeluTanh;
    // flops = 2·T·in·out (derivative and bias-gradient adds ignored). bytes = dy T·out·e + W out·in·e + pre T·in·e
    // (read) + dpre T·in·e + dbias 4·in (written).
    Measure m{"linear_activation_backward_data",
              label("T=%lld: %lld <- %lld, ", rows, in, out) +
                  (tanh_form ? "gelu_tanh" : "gelu (erf)"),
              (static_cast<double>(ny) + nw + 2.0 * nd) * elem<T>() + 4.0 * in, 2.0 * rows * in * out};
    r.measure(m,
              [&] {
                linear_activation_backward_data_cuda<T>(r.handles(), dpre, dbias, dy, w, pre, rows, in, out, act);
              },
              [&](Checker& c) {
                // dpre on the first and the last rows, the twin run on those rows of dy and pre.
                const RowSample sample = rows_to_verify(rows, 2.0 * in * out);
                for (const RowSpan& span : sample.spans) {
                  const std::size_t n = sz(span.count) * sz(in), first = sz(span.first) * sz(in);
                  std::vector<float> rd(n);
                  linear_activation_backward_data_cpu<float>(rd.data(), nullptr, hdy.data() + sz(span.first) * sz(out),
                                                             hw.data(), hpre.data() + first, span.count, in, out, act);
                  make_representable<T>(rd);
                  c.compare_at("dpre", first, r.download(dpre + first, n), rd);
                }
                // dbias in full, as the column sums of the device's own dpre (checked above on its sampled rows).
                c.compare("dbias", r.download(dbias, sz(in)), column_sums_cpu(r.download(dpre, nd), rows, in));
                c.coverage = sample.full() ? std::string("full") : sample.coverage("dpre rows") + ", dbias full";
              });
  }
}

template <typename T>
void bench_column_sum(Runner& r) {
  const Shape& s = r.options().shape;
  for (int cols : {s.hidden, s.intermediate}) {
    if (!r.select("column_sum")) return;
    const int rows = s.tokens();
    const std::size_t n = sz(rows) * sz(cols);
    T* x = r.take<T>(n);
    float* out = r.take<float>(sz(cols));
    if (r.sizing()) continue;
    const std::vector<float> hx = r.random<T>(n, 110);
    r.upload(x, hx);
    // bytes = x rows·cols·e (read) + out 4·cols (written); the partial sums' round trip through the workspace
    // (64·cols floats) is implementation traffic.
    Measure m{"column_sum", label("%lld x %lld", rows, cols), static_cast<double>(n) * elem<T>() + 4.0 * cols};
    r.measure(m, [&] { column_sum_cuda<T>(r.handles(), out, x, rows, cols); },
              [&](Checker& c) { c.compare("out", r.download(out, sz(cols)), column_sums_cpu(hx, rows, cols)); });
  }
}

template <typename T>
void bench_add_inplace(Runner& r) {
  const Shape& s = r.options().shape;
  if (!r.select("add_inplace")) return;
  const std::size_t n = sz(s.tokens()) * sz(s.hidden);
  T *y = r.take<T>(n), *x = r.take<T>(n);
  if (r.sizing()) return;
  const std::vector<float> hy = r.random<T>(n, 120), hx = r.random<T>(n, 121);
  r.upload(y, hy);
  r.upload(x, hx);
  // bytes = y, x 2·n·e (read) + y n·e (written). y grows by x on every timed run; the work does not change.
  Measure m{"add_inplace", label("n=T*H=%lld", static_cast<long long>(n)), 3.0 * n * elem<T>()};
  r.measure(m, [&] { add_inplace_cuda<T>(y, x, n, r.stream()); },
            [&](Checker& c) {
              std::vector<float> ref = hy;
              add_inplace_cpu<float>(ref.data(), hx.data(), n);
              make_representable<T>(ref);
              c.compare("y", r.download(y, n), ref);
            });
}

template void bench_linear_forward<float>(Runner&);
template void bench_linear_forward<bf16>(Runner&);
template void bench_linear_backward<float>(Runner&);
template void bench_linear_backward<bf16>(Runner&);
template void bench_linear_activation_forward<float>(Runner&);
template void bench_linear_activation_forward<bf16>(Runner&);
template void bench_linear_activation_backward_data<float>(Runner&);
template void bench_linear_activation_backward_data<bf16>(Runner&);
template void bench_column_sum<float>(Runner&);
template void bench_column_sum<bf16>(Runner&);
template void bench_add_inplace<float>(Runner&);
template void bench_add_inplace<bf16>(Runner&);

}  // namespace bertrain::bench

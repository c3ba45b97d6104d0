// `bench kernels` benchmarks of the optimizer step over the flat parameter buffer: Adam (with the bf16 compute
// copy in bf16 mode), the fp32 <-> bf16 casts and the sum of squares behind gradient clipping.
#include <cstddef>
#include <vector>

#include "core/bf16.h"
#include "kernels/adam.h"
#include "kernels/tensor_ops.h"
#include "model/bert_config.h"
#include "model/bert_params.h"
#include "tools/bench_kernels/benchmarks.h"
#include "tools/bench_kernels/harness.h"

namespace bertrain::bench {

std::size_t parameter_elements(const Shape& s) {
  BertConfig config;
  config.vocab_size = s.vocab;
  config.hidden_size = s.hidden;
  config.num_hidden_layers = s.layers;
  config.num_attention_heads = s.heads;
  config.intermediate_size = s.intermediate;
  config.max_position_embeddings = s.max_pos;
  config.type_vocab_size = s.type_vocab;
  return bert_classifier_layout(config, s.classes).total();
}

void bench_adam(Runner& r, bool bf16_copy) {
  const Shape& s = r.options().shape;
  if (!r.select("adam_update")) return;
  const std::size_t n = parameter_elements(s);
  float *param = r.take<float>(n), *m1 = r.take<float>(n), *m2 = r.take<float>(n), *grad = r.take<float>(n);
  bf16* copy = r.take<bf16>(n);
  if (r.sizing()) return;
  std::vector<float> hp = r.random<float>(n, 140, -0.1f, 0.1f), hm = r.random<float>(n, 141, -1e-3f, 1e-3f),
                     hv = r.random<float>(n, 142, 0.0f, 1e-5f), hg = r.random<float>(n, 143, -1e-2f, 1e-2f);
  r.copy_in(param, hp);
  r.copy_in(m1, hm);
  r.copy_in(m2, hv);
  r.copy_in(grad, hg);
  AdamHyper hyper;
  hyper.lr = 1e-4;
  const long step = 10;  // bias corrections away from 1
  bf16* param_copy = bf16_copy ? copy : nullptr;
  // bytes = param, m, v, grad 4·4·N (read) + param, m, v 3·4·N (written) + the bf16 compute copy 2·N (bf16 only).
  Measure m{"adam_update", label(bf16_copy ? "N=%lld, + bf16 copy" : "N=%lld", static_cast<long long>(n)),
            28.0 * n + (bf16_copy ? 2.0 * n : 0.0)};
  // Every timed run is another optimizer step on the same state; the work does not change.
  r.measure(m, [&] { adam_update_cuda(param, m1, m2, grad, param_copy, n, hyper, step, {}, nullptr, r.stream()); },
            [&](Checker& c) {
              adam_update_cpu<float>(hp.data(), hm.data(), hv.data(), hg.data(), n, hyper, step);
              c.compare("param", r.download(param, n), hp, kFp32Tolerance);
              c.compare("m", r.download(m1, n), hm, kFp32Tolerance);
              c.compare("v", r.download(m2, n), hv, kFp32Tolerance);
              if (param_copy != nullptr) {
                make_representable<bf16>(hp);
                c.compare("bf16 copy", r.download(copy, n), hp, kBf16Tolerance);
              }
            });
}

void bench_cast(Runner& r, bool to_bf16) {
  const Shape& s = r.options().shape;
  const char* name = to_bf16 ? "cast_fp32_to_bf16" : "cast_bf16_to_fp32";
  if (!r.select(name)) return;
  const std::size_t n = parameter_elements(s);
  float* f = r.take<float>(n);
  bf16* h = r.take<bf16>(n);
  if (r.sizing()) return;
  const std::vector<float> hf = r.random<float>(n, 150);
  if (to_bf16) r.copy_in(f, hf);
  else r.upload(h, hf);  // rounded to bf16 on the way
  // bytes = 4·N + 2·N (one read, one write).
  Measure m{name, label("N=%lld", static_cast<long long>(n)), 6.0 * n};
  r.measure(m,
            [&] {
              if (to_bf16) cast_cuda(h, f, n, r.stream());
              else cast_cuda(f, h, n, r.stream());
            },
            [&](Checker& c) {
              // Both directions are exact functions (round to nearest even; widening): compared bit-for-bit.
              if (to_bf16) {
                std::vector<bf16> rb(n);
                cast_cpu(rb.data(), hf.data(), n);
                std::vector<float> ref(n);
                for (std::size_t i = 0; i < n; ++i) ref[i] = bf16_to_float(rb[i]);
                c.compare("y", r.download(h, n), ref, kExact);
              } else {
                std::vector<bf16> hb(n);
                for (std::size_t i = 0; i < n; ++i) hb[i] = float_to_bf16(hf[i]);
                std::vector<float> ref(n);
                cast_cpu(ref.data(), hb.data(), n);
                c.compare("y", r.download(f, n), ref, kExact);
              }
            });
}

void bench_sum_of_squares(Runner& r) {
  const Shape& s = r.options().shape;
  if (!r.select("sum_of_squares")) return;
  const std::size_t n = parameter_elements(s);
  float* x = r.take<float>(n);
  float* out = r.take<float>(1);
  if (r.sizing()) return;
  const std::vector<float> hx = r.random<float>(n, 160);
  r.copy_in(x, hx);
  // bytes = x 4·N (read) + 4 (written).
  Measure m{"sum_of_squares", label("N=%lld", static_cast<long long>(n)), 4.0 * n + 4.0};
  r.measure(m, [&] { sum_of_squares_cuda(r.handles(), out, x, n); },
            [&](Checker& c) {
              const float ref = static_cast<float>(sum_of_squares_cpu(hx.data(), n));
              c.compare("sum", r.download(out, 1), {ref}, kFp32Tolerance);
            });
}

}  // namespace bertrain::bench

// `bench kernels` benchmarks of self-attention (scores, softmax over each row's keys, dropout, context) forward and
// backward, on the packed batch of harness.h (B rows of S tokens: the padded GPU internals hold no padding, so the
// timing is the GEMMs' best case). Checked on the first and the last rows of the batch (harness.h: rows_to_verify):
// the CPU twin at full size would cost tens of GFLOP.
#include <omp.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "tools/bench_kernels/benchmarks.h"
#include "tools/bench_kernels/harness.h"

namespace bertrain::bench {

namespace {

// Rows [span.first, span.first + span.count) of the batch, as the CPU twin is run on them: where they start and
// how long they are in the packed [T, H] tensors (q, k, v, ctx, their gradients) and in probs, their row offsets
// (host, from 0), and the dropout layout that gives their elements the same dropout indices as in the whole batch.
// Every row has S tokens, so the CPU's ragged probability blocks (NH·Σ_{b' < b} L_b'² + h·L_b²) lie exactly where
// the GPU's padded [B, NH, S, S] ones do, and the two are compared element for element.
struct SequenceSpan {
  std::size_t first, count;      // elements of a [T, H] tensor
  std::size_t first_p, count_p;  // elements of probs
  std::vector<int32_t> cu_seqlens;
  DropoutLayout layout;
};

SequenceSpan sequence_span(const Shape& s, const RowSpan& span, const DropoutLayout& layout) {
  const std::size_t token_elements = sz(s.seq) * sz(s.hidden), prob_elements = sz(s.heads) * sz(s.seq) * sz(s.seq);
  SequenceSpan out{sz(span.first) * token_elements, sz(span.count) * token_elements, sz(span.first) * prob_elements,
                   sz(span.count) * prob_elements, std::vector<int32_t>(sz(span.count) + 1), layout};
  for (int b = 0; b <= span.count; ++b) out.cu_seqlens[sz(b)] = b * s.seq;
  out.layout.first_sample += span.first;
  return out;
}

}  // namespace

template <typename T>
void bench_attention_forward(Runner& r) {
  const Shape& s = r.options().shape;
  if (!r.select("attention_forward")) return;
  const int B = s.batch, S = s.seq, NH = s.heads, HD = s.head_dim();
  const std::size_t n = sz(s.tokens()) * sz(s.hidden), np = sz(B) * sz(NH) * sz(S) * sz(S);
  T *q = r.take<T>(n), *k = r.take<T>(n), *v = r.take<T>(n);
  int32_t* cu_seqlens = r.take<int32_t>(sz(B) + 1);
  T *ctx = r.take<T>(n), *probs = r.take<T>(np), *qh = r.take<T>(n), *kh = r.take<T>(n), *vh = r.take<T>(n);
  T* workspace = r.take<T>(attention_workspace_elements_cuda(B, S, NH, HD));
  if (r.sizing()) return;
  const HostBatch hb = make_batch(s, r.options().seed);
  const std::vector<float> hq = r.random<T>(n, 40), hk = r.random<T>(n, 41), hv = r.random<T>(n, 42);
  r.upload(q, hq);
  r.upload(k, hk);
  r.upload(v, hv);
  r.copy_in(cu_seqlens, hb.cu_seqlens);
  const RandomKey key = dropout_key(r.options(), 40);
  const DropoutLayout layout = attention_layout(s);
  // flops = 4·B·NH·S²·HD (Q·Kᵀ and P·V). bytes = q, k, v 3·T·H·e + cu_seqlens 4·(B + 1) (read) + ctx, qh, kh, vh
  // 4·T·H·e + probs B·NH·S²·e (written); the head-major context and the dropped probabilities in the workspace are
  // traffic of this implementation, not of the op.
  Measure m{"attention_forward", label("B=%lld S=%lld NH=%lld, p=0.1", B, S, NH),
            (7.0 * n + static_cast<double>(np)) * elem<T>() + 4.0 * (B + 1),
            4.0 * B * NH * static_cast<double>(S) * S * HD};
  r.measure(m,
            [&] {
              attention_forward_cuda<T>(r.handles(), ctx, probs, qh, kh, vh, q, k, v, cu_seqlens, B, s.tokens(), S, NH,
                                        HD, kDropout, key, layout, workspace);
            },
            [&](Checker& c) {
              const RowSample sample = rows_to_verify(B, 4.0 * NH * static_cast<double>(S) * S * HD);
              std::vector<float> scratch(attention_scratch_elements(S, omp_get_max_threads()));
              for (const RowSpan& span : sample.spans) {
                const SequenceSpan seqs = sequence_span(s, span, layout);
                std::vector<float> rctx(seqs.count), rprobs(seqs.count_p);
                attention_forward_cpu<float>(rctx.data(), rprobs.data(), hq.data() + seqs.first,
                                             hk.data() + seqs.first, hv.data() + seqs.first, seqs.cu_seqlens.data(),
                                             span.count, NH, HD, kDropout, key, scratch.data(), seqs.layout);
                make_representable<T>(rctx);
                make_representable<T>(rprobs);
                c.compare_at("ctx", seqs.first, r.download(ctx + seqs.first, seqs.count), rctx);
                c.compare_at("probs", seqs.first_p, r.download(probs + seqs.first_p, seqs.count_p), rprobs);
              }
              c.coverage = sample.coverage("sequences");
            });
}

template <typename T>
void bench_attention_backward(Runner& r) {
  const Shape& s = r.options().shape;
  if (!r.select("attention_backward")) return;
  const int B = s.batch, S = s.seq, NH = s.heads, HD = s.head_dim();
  const std::size_t n = sz(s.tokens()) * sz(s.hidden), np = sz(B) * sz(NH) * sz(S) * sz(S);
  T *q = r.take<T>(n), *k = r.take<T>(n), *v = r.take<T>(n);
  int32_t* cu_seqlens = r.take<int32_t>(sz(B) + 1);
  T *ctx = r.take<T>(n), *probs = r.take<T>(np), *qh = r.take<T>(n), *kh = r.take<T>(n), *vh = r.take<T>(n);
  T *dctx = r.take<T>(n), *dq = r.take<T>(n), *dk = r.take<T>(n), *dv = r.take<T>(n);
  T* workspace = r.take<T>(attention_workspace_elements_cuda(B, S, NH, HD));
  if (r.sizing()) return;
  const HostBatch hb = make_batch(s, r.options().seed);
  const std::vector<float> hq = r.random<T>(n, 90), hk = r.random<T>(n, 91), hv = r.random<T>(n, 92),
                           hdctx = r.random<T>(n, 93);
  r.upload(q, hq);
  r.upload(k, hk);
  r.upload(v, hv);
  r.upload(dctx, hdctx);
  r.copy_in(cu_seqlens, hb.cu_seqlens);
  const RandomKey key = dropout_key(r.options(), 90);
  const DropoutLayout layout = attention_layout(s);
  // What backward reads: the forward's probabilities and head-major Q, K, V.
  attention_forward_cuda<T>(r.handles(), ctx, probs, qh, kh, vh, q, k, v, cu_seqlens, B, s.tokens(), S, NH, HD,
                            kDropout, key, layout, workspace);
  // flops = 8·B·NH·S²·HD (dV = Pᵀ·dctx, dP = dctx·Vᵀ, dQ = dS·K, dK = dSᵀ·Q). bytes = dctx, qh, kh, vh 4·T·H·e
  // + probs B·NH·S²·e + cu_seqlens 4·(B + 1) (read) + dq, dk, dv 3·T·H·e (written).
  Measure m{"attention_backward", label("B=%lld S=%lld NH=%lld, p=0.1", B, S, NH),
            (7.0 * n + static_cast<double>(np)) * elem<T>() + 4.0 * (B + 1),
            8.0 * B * NH * static_cast<double>(S) * S * HD};
  r.measure(m,
            [&] {
              attention_backward_cuda<T>(r.handles(), dq, dk, dv, dctx, probs, qh, kh, vh, cu_seqlens, B, s.tokens(), S,
                                         NH, HD, kDropout, key, layout, workspace);
            },
            [&](Checker& c) {
              // The twin gets the device's probabilities (bf16 ones in bf16 mode), so only backward is compared.
              const RowSample sample = rows_to_verify(B, 8.0 * NH * static_cast<double>(S) * S * HD);
              std::vector<float> scratch(attention_scratch_elements(S, omp_get_max_threads()));
              for (const RowSpan& span : sample.spans) {
                const SequenceSpan seqs = sequence_span(s, span, layout);
                const std::size_t first = seqs.first, nc = seqs.count;
                const std::vector<float> dprobs = r.download(probs + seqs.first_p, seqs.count_p);
                std::vector<float> rdq(nc), rdk(nc), rdv(nc);
                attention_backward_cpu<float>(rdq.data(), rdk.data(), rdv.data(), hdctx.data() + first, dprobs.data(),
                                              hq.data() + first, hk.data() + first, hv.data() + first,
                                              seqs.cu_seqlens.data(), span.count, NH, HD, kDropout, key,
                                              scratch.data(), seqs.layout);
                make_representable<T>(rdq);
                make_representable<T>(rdk);
                make_representable<T>(rdv);
                c.compare_at("dq", first, r.download(dq + first, nc), rdq);
                c.compare_at("dk", first, r.download(dk + first, nc), rdk);
                c.compare_at("dv", first, r.download(dv + first, nc), rdv);
              }
              c.coverage = sample.coverage("sequences");
            });
}

template void bench_attention_forward<float>(Runner&);
template void bench_attention_forward<bf16>(Runner&);
template void bench_attention_backward<float>(Runner&);
template void bench_attention_backward<bf16>(Runner&);

}  // namespace bertrain::bench

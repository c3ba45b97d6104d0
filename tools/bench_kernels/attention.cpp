// `bench kernels` benchmarks of the fused self-attention kernels (kernels/cuda/attention.cu) forward and backward, on
// the packed batch of harness.h (B rows of S tokens, qkv [T, 3H] as the QKV GEMM writes it). Checked on the first and
// the last rows of the batch (harness.h: rows_to_verify): the CPU twin at full size would cost tens of GFLOP.
#include <omp.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "tools/bench_kernels/benchmarks.h"
#include "tools/bench_kernels/harness.h"

namespace bertrain::bench {

namespace {

// Rows [span.first, span.first + span.count) of the batch, as the CPU twin is run on them: their first token and
// token count, their row offsets (host, from 0), and the dropout layout that gives their probabilities the same
// dropout indices as in the whole batch (first_sample shifted by span.first; P is max(max_pos, S) for both).
struct SequenceSpan {
  std::size_t token0, tokens;
  std::vector<int32_t> cu_seqlens;
  DropoutLayout layout;
};

SequenceSpan sequence_span(const Shape& s, const RowSpan& span, const DropoutLayout& layout) {
  SequenceSpan out{sz(span.first) * sz(s.seq), sz(span.count) * sz(s.seq), std::vector<int32_t>(sz(span.count) + 1),
                   layout};
  for (int b = 0; b <= span.count; ++b) out.cu_seqlens[sz(b)] = b * s.seq;
  out.layout.first_sample += span.first;
  return out;
}

// The span's entries of an [NH, T] device array (lse), as the span's own [NH, T_span].
std::vector<float> span_rows_of_heads(Runner& r, const float* device, const Shape& s, const SequenceSpan& seqs) {
  std::vector<float> out;
  out.reserve(sz(s.heads) * seqs.tokens);
  for (int h = 0; h < s.heads; ++h) {
    const std::vector<float> part = r.download(device + sz(h) * sz(s.tokens()) + seqs.token0, seqs.tokens);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

// Flops of the forward: Q·Kᵀ and P·V, 2·L_b²·HD each per (row, head): 4·NH·Σ_b L_b²·HD = 4·B·NH·S²·HD here.
double forward_flops(const Shape& s, int rows) {
  return 4.0 * rows * s.heads * static_cast<double>(s.seq) * s.seq * s.head_dim();
}

}  // namespace

template <typename T>
void bench_attention_forward(Runner& r) {
  const Shape& s = r.options().shape;
  if (!r.select("attention_forward")) return;
  const int B = s.batch, S = s.seq, NH = s.heads, HD = s.head_dim();
  const std::size_t n = sz(s.tokens()) * sz(s.hidden), nl = sz(s.tokens()) * sz(NH);  // T·H, NH·T
  T* qkv = r.take<T>(3 * n);
  int32_t* cu_seqlens = r.take<int32_t>(sz(B) + 1);
  T* ctx = r.take<T>(n);
  float* lse = r.take<float>(nl);
  uint32_t* mask = r.take<uint32_t>(attention_dropout_mask_words_cuda(s.tokens(), NH, S));
  if (r.sizing()) return;
  const HostBatch hb = make_batch(s, r.options().seed);
  const std::vector<float> hqkv = r.random<T>(3 * n, 40);
  r.upload(qkv, hqkv);
  r.copy_in(cu_seqlens, hb.cu_seqlens);
  const RandomKey key = dropout_key(r.options(), 40);
  const DropoutLayout layout = attention_layout(s);
  // flops = 4·NH·Σ_b L_b²·HD (Q·Kᵀ and P·V). bytes = what the op must move: qkv 3·T·H·e and cu_seqlens 4·(B + 1)
  // read, ctx T·H·e and lse 4·NH·T written (each K/V tile is read once per query tile of its row, from L2 mostly;
  // that re-reading is this implementation's traffic, not the op's, as is the dropout mask the tensor-core kernels
  // keep for the backward, as the model has them do: 4·NH·T·ceil(S / 32) bytes).
  Measure m{"attention_forward", label("B=%lld S=%lld NH=%lld, p=0.1", B, S, NH),
            4.0 * static_cast<double>(n) * elem<T>() + 4.0 * static_cast<double>(nl) + 4.0 * (B + 1),
            forward_flops(s, B)};
  r.measure(m,
            [&] {
              attention_forward_cuda<T>(ctx, lse, qkv, cu_seqlens, B, s.tokens(), S, NH, HD, kDropout, key, layout,
                                        r.stream(), mask);
            },
            [&](Checker& c) {
              const RowSample sample = rows_to_verify(B, forward_flops(s, 1));
              std::vector<float> scratch(attention_scratch_elements(S, omp_get_max_threads()));
              for (const RowSpan& span : sample.spans) {
                const SequenceSpan seqs = sequence_span(s, span, layout);
                const std::size_t first = seqs.token0 * sz(s.hidden), count = seqs.tokens * sz(s.hidden);
                std::vector<float> rctx(count), rlse(sz(NH) * seqs.tokens);
                attention_forward_cpu<float>(rctx.data(), rlse.data(), hqkv.data() + 3 * first, seqs.cu_seqlens.data(),
                                             span.count, NH, HD, kDropout, key, scratch.data(), seqs.layout);
                make_representable<T>(rctx);  // the device stores ctx in T; lse is fp32 for every T
                c.compare_at("ctx", first, r.download(ctx + first, count), rctx);
                c.compare("lse (rows of the span, head-major)", span_rows_of_heads(r, lse, s, seqs), rlse);
              }
              c.coverage = sample.coverage("sequences");
            });
}

template <typename T>
void bench_attention_backward(Runner& r) {
  const Shape& s = r.options().shape;
  if (!r.select("attention_backward")) return;
  const int B = s.batch, S = s.seq, NH = s.heads, HD = s.head_dim();
  const std::size_t n = sz(s.tokens()) * sz(s.hidden), nl = sz(s.tokens()) * sz(NH);  // T·H, NH·T
  T* qkv = r.take<T>(3 * n);
  int32_t* cu_seqlens = r.take<int32_t>(sz(B) + 1);
  T* ctx = r.take<T>(n);
  float* lse = r.take<float>(nl);
  T* dctx = r.take<T>(n);
  T* dqkv = r.take<T>(3 * n);
  float* workspace = r.take<float>(attention_workspace_floats_cuda(s.tokens(), NH, S));
  uint32_t* mask = r.take<uint32_t>(attention_dropout_mask_words_cuda(s.tokens(), NH, S));
  if (r.sizing()) return;
  const HostBatch hb = make_batch(s, r.options().seed);
  const std::vector<float> hqkv = r.random<T>(3 * n, 90), hdctx = r.random<T>(n, 93);
  r.upload(qkv, hqkv);
  r.upload(dctx, hdctx);
  r.copy_in(cu_seqlens, hb.cu_seqlens);
  const RandomKey key = dropout_key(r.options(), 90);
  const DropoutLayout layout = attention_layout(s);
  // What backward reads: the forward's ctx and lse, and the dropout mask the tensor-core forward keeps (the model's
  // way; without it the backward draws the mask first).
  attention_forward_cuda<T>(ctx, lse, qkv, cu_seqlens, B, s.tokens(), S, NH, HD, kDropout, key, layout, r.stream(),
                            mask);
  // flops = 2.5 × the forward's, as FlashAttention reports it: five L_b × L_b × HD products (S recomputed, dP, dV,
  // dK, dQ) = 10·NH·Σ_b L_b²·HD. This implementation runs seven (the dK/dV and the dQ kernels each recompute S and
  // dP, so that no two blocks add into one output), so its achieved rate is 7/5 of the one printed.
  // bytes = qkv 3·T·H·e, ctx and dctx 2·T·H·e, lse 4·NH·T, cu_seqlens 4·(B + 1) (read) + dqkv 3·T·H·e (written);
  // D [NH, T] in the workspace is this implementation's traffic.
  Measure m{"attention_backward", label("B=%lld S=%lld NH=%lld, p=0.1", B, S, NH),
            8.0 * static_cast<double>(n) * elem<T>() + 4.0 * static_cast<double>(nl) + 4.0 * (B + 1),
            2.5 * forward_flops(s, B)};
  r.measure(m,
            [&] {
              attention_backward_cuda<T>(dqkv, dctx, ctx, lse, qkv, cu_seqlens, B, s.tokens(), S, NH, HD, kDropout, key,
                                         layout, workspace, r.stream(), mask);
            },
            [&](Checker& c) {
              // The twin gets the device's ctx and lse (bf16 ctx in bf16 mode), so only backward is compared.
              const RowSample sample = rows_to_verify(B, 2.5 * forward_flops(s, 1));
              std::vector<float> scratch(attention_scratch_elements(S, omp_get_max_threads()));
              for (const RowSpan& span : sample.spans) {
                const SequenceSpan seqs = sequence_span(s, span, layout);
                const std::size_t first = seqs.token0 * sz(s.hidden), count = seqs.tokens * sz(s.hidden);
                const std::vector<float> dev_ctx = r.download(ctx + first, count);
                const std::vector<float> dev_lse = span_rows_of_heads(r, lse, s, seqs);
                std::vector<float> rdqkv(3 * count);
                attention_backward_cpu<float>(rdqkv.data(), hdctx.data() + first, dev_ctx.data(), dev_lse.data(),
                                              hqkv.data() + 3 * first, seqs.cu_seqlens.data(), span.count, NH, HD,
                                              kDropout, key, scratch.data(), seqs.layout);
                make_representable<T>(rdqkv);
                c.compare_at("dqkv", 3 * first, r.download(dqkv + 3 * first, 3 * count), rdqkv);
              }
              c.coverage = sample.coverage("sequences");
            });
}

template void bench_attention_forward<float>(Runner&);
template void bench_attention_forward<bf16>(Runner&);
template void bench_attention_backward<float>(Runner&);
template void bench_attention_backward<bf16>(Runner&);

}  // namespace bertrain::bench

// `bench kernels` benchmarks of the embedding kernels on the packed batch of harness.h: the gather of word +
// position + type rows (forward) and the scatter of their gradients into the three tables (backward).
#include <cstdint>
#include <vector>

#include "kernels/embedding.h"
#include "tools/bench_kernels/benchmarks.h"
#include "tools/bench_kernels/harness.h"

namespace bertrain::bench {

template <typename T>
void bench_embedding_forward(Runner& r) {
  const Shape& s = r.options().shape;
  if (!r.select("embedding_forward")) return;
  const std::size_t tokens = sz(s.tokens()), th = tokens * sz(s.hidden);
  int32_t* ids = r.take<int32_t>(tokens);
  int32_t* positions = r.take<int32_t>(tokens);
  T* word = r.take<T>(sz(s.vocab) * sz(s.hidden));
  T* pos = r.take<T>(sz(s.max_pos) * sz(s.hidden));
  T* type = r.take<T>(sz(s.type_vocab) * sz(s.hidden));
  T* out = r.take<T>(th);
  if (r.sizing()) return;
  const HostBatch hb = make_batch(s, r.options().seed);
  const std::vector<float> hword = r.random<T>(sz(s.vocab) * sz(s.hidden), 1), hpos = r.random<T>(sz(s.max_pos) * sz(s.hidden), 2),
                           htype = r.random<T>(sz(s.type_vocab) * sz(s.hidden), 3);
  r.copy_in(ids, hb.ids);
  r.copy_in(positions, hb.positions);
  r.upload(word, hword);
  r.upload(pos, hpos);
  r.upload(type, htype);
  // bytes = ids, positions 2·4·T + word rows T·H·e (one gathered row per token) + position rows S·H·e + type row 0
  //       H·e + out T·H·e (written).
  Measure m{"embedding_forward", label("T=%lld H=%lld", s.tokens(), s.hidden),
            8.0 * tokens + (2.0 * th + static_cast<double>(s.seq) * s.hidden + s.hidden) * elem<T>()};
  r.measure(m,
            [&] {
              embedding_forward_cuda<T>(out, ids, positions, nullptr, word, pos, type, s.tokens(), s.hidden,
                                        r.stream());
            },
            [&](Checker& c) {
              std::vector<float> ref(th);
              embedding_forward_cpu<float>(ref.data(), hb.ids.data(), hb.positions.data(), nullptr, hword.data(),
                                           hpos.data(), htype.data(), s.tokens(), s.hidden, s.vocab, s.max_pos,
                                           s.type_vocab);
              make_representable<T>(ref);
              c.compare("out", r.download(out, th), ref);
            });
}

template <typename T>
void bench_embedding_backward(Runner& r) {
  const Shape& s = r.options().shape;
  if (!r.select("embedding_backward")) return;
  const std::size_t tokens = sz(s.tokens()), th = tokens * sz(s.hidden);
  const std::size_t nword = sz(s.vocab) * sz(s.hidden), npos = sz(s.max_pos) * sz(s.hidden),
                    ntype = sz(s.type_vocab) * sz(s.hidden);
  const std::size_t scratch_bytes = embedding_backward_scratch_bytes(s.tokens(), s.hidden);
  T* dout = r.take<T>(th);
  int32_t* ids = r.take<int32_t>(tokens);
  int32_t* positions = r.take<int32_t>(tokens);
  float *dword = r.take<float>(nword), *dpos = r.take<float>(npos), *dtype = r.take<float>(ntype);
  unsigned char* scratch = r.take<unsigned char>(scratch_bytes);
  if (r.sizing()) return;
  const HostBatch hb = make_batch(s, r.options().seed);
  const std::vector<float> hdout = r.random<T>(th, 130);
  r.upload(dout, hdout);
  r.copy_in(ids, hb.ids);
  r.copy_in(positions, hb.positions);
  // bytes = dout T·H·e + ids and positions 2·4·T (read) + dword, dpos, dtype 4·(V + max_pos + type_vocab)·H
  // (written: every row, used or not). Implementation traffic, not counted: the key sort (CUB radix sort of 3·T
  // (key, token) pairs), dout read once per table (3·T·H·e in all) and the partial rows of long segments.
  Measure m{"embedding_backward", label("T=%lld H=%lld V=%lld", s.tokens(), s.hidden, s.vocab),
            static_cast<double>(th) * elem<T>() + 8.0 * tokens +
                4.0 * (static_cast<double>(nword) + npos + ntype)};
  r.measure(m,
            [&] {
              embedding_backward_cuda<T>(dword, dpos, dtype, dout, ids, positions, nullptr, s.tokens(), s.hidden,
                                         s.vocab, s.max_pos, s.type_vocab, -1, -1, scratch, scratch_bytes, r.stream());
            },
            [&](Checker& c) {
              std::vector<float> rword(nword), rpos(npos), rtype(ntype);
              embedding_backward_cpu<float>(rword.data(), rpos.data(), rtype.data(), hdout.data(), hb.ids.data(),
                                            hb.positions.data(), nullptr, s.tokens(), s.hidden, s.vocab, s.max_pos,
                                            s.type_vocab, -1, -1);
              c.compare("dword", r.download(dword, nword), rword);
              c.compare("dpos", r.download(dpos, npos), rpos);
              c.compare("dtype", r.download(dtype, ntype), rtype);
            });
}

template void bench_embedding_forward<float>(Runner&);
template void bench_embedding_forward<bf16>(Runner&);
template void bench_embedding_backward<float>(Runner&);
template void bench_embedding_backward<bf16>(Runner&);

}  // namespace bertrain::bench

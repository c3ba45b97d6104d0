// Tensor-core self-attention over packed rows, bf16 at head dim 64, after FlashAttention-2: every product is a
// warp's mma.sync m16n8k16 (kernels/cuda/warp_mma.cuh) with its accumulators in registers; a warp's score tile
// becomes the next product's operand in registers (no score, probability or accumulator round trip through shared
// memory); tiles arrive by cp.async, the next one while the current one is used (two stages); softmax in base 2.
// The maths, layouts and dropout indices are kernels/attention.h's, the same as the general kernels'
// (kernels/cuda/attention.cu), which run every other case (fp32, other head dims).
//
// Launch grids: blocks of 128 threads (4 warps) own 64 tokens of one row and head, 16 per warp.
//   attention_forward_mma_kernel      (ceil(S / 64), NH, B): block (x, h, b) owns queries 64x.. of row b, head h;
//                                     walks the row's keys 64 at a time with an online softmax; ctx and lse (=).
//   attention_backward_dkdv_mma_kernel  (ceil(S / 64), NH, B): block owns keys 64x..; walks the row's queries 64 at a
//                                     time: Sᵀ = K Qᵀ, P = exp(s·scale − lse), dV += P̃ᵀ dctx, dPᵀ = V dctxᵀ,
//                                     dS = P ∘ (mask ∘ dP / (1 − p) − D), dK += dSᵀ Q; dK and dV of its keys (=).
//   attention_backward_dq_mma_kernel  (ceil(S / 64), NH, B): block owns queries 64x..; walks the row's keys:
//                                     S, P, dP = dctx Vᵀ, dS as above, dQ += dS K; dQ of its queries (=).
//   attention_backward_dkdv_mma_kernel<true>, alone where S <= 64 (the fused backward): the block owns the row's
//                                     every key, so after dK and dV it holds the row's whole dS (kept in shared
//                                     memory in bf16, as the dQ kernel rounds it), and each warp adds dQ = dS K for
//                                     16 queries: five products where the two kernels take seven (S and dP made
//                                     once), one launch instead of two, the same bits (below).
//                                     BERTRAIN_ATTENTION_FUSED_BACKWARD=0 runs the two kernels there too.
//   attention_dropout_mask_kernel     (ceil(S·W / 128), NH, B), with dropout, before the two: the mask as bits (W words
//                                     per head and query) in the caller's workspace, so that the backward draws it
//                                     once; the forward draws its own. Not launched when the forward was given a
//                                     mask buffer: it stores the words it drew, and the backward reads those.
//                                     (attention_forward_cuda launches it into that buffer when a misaligned ctx
//                                     sends the forward to the general kernels.)
// D = rowsum(dctx ∘ ctx) comes from attention.cu's D kernels. Blocks whose tile starts at or beyond L_b return at
// once. Every output element is computed by one lane in a fixed order, without atomics, so results
// are run-to-run identical.
//
// Numerics, against the general kernels: the same products (bf16 operands, fp32 accumulation; P and dS rounded to
// bf16 before their products, as SDPA under autocast), the same fp32 softmax statistics and mask, but scores are
// taken to base 2 (s · scale · log2 e, then exp2f), FlashAttention's form: a rounding-level difference.
// lse = m₂ · ln 2 + log l.
//
// Rows past L_b inside a block's tile are zero-filled by the copies (finite scores, nothing written); keys past L_b
// are masked to −inf in the forward and dQ kernels; in the dK/dV kernel their zero-filled K rows give scores of 0
// and so P > 0 and rows of dK, dV that are not zero but never written (and, in the fused kernel, dS rows it sets
// to zero before dQ reads them).
#include "kernels/cuda/attention_mma.h"

#include <cuda_bf16.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/warp_mma.cuh"

namespace bertrain {
namespace cuda_attention {

namespace {

constexpr int kD = kMmaHeadDim;
constexpr int kTile = 64;     // tokens a block owns, and tokens a walked tile holds
constexpr int kThreads = 128;  // 4 warps × 16 tokens
// Shared tiles are [64][kLd] bf16: rows of 144 bytes, so the eight 16-byte rows one ldmatrix matrix reads start in
// eight different 4-bank groups (144 / 4 = 36 ≡ 4 mod 32).
constexpr int kLd = kD + 8;
constexpr int kTileElems = kTile * kLd;
constexpr std::size_t kTileBytes = kTileElems * sizeof(bf16);
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr unsigned kFullWarp = 0xffffffffu;

// Dynamic shared memory of each kernel: forward Q, K[2], V[2]; dQ Q, dctx, K[2], V[2]; dK/dV K, V, Q[2], dctx[2]
// and lse·log2 e, D of the walked queries [2][64] fp32; the fused backward also dS [64 keys][kLd].
constexpr std::size_t kForwardSmem = 5 * kTileBytes;
constexpr std::size_t kDqSmem = 6 * kTileBytes;
constexpr std::size_t kDkdvSmem = 6 * kTileBytes + 4 * kTile * sizeof(float);
constexpr std::size_t kFusedBackwardSmem = kDkdvSmem + kTileBytes;

// dst[64][kLd] (=) the 64 token rows of src (row r at src + r·stride, 64 columns); rows at or beyond `valid` are
// zero. The whole block issues 16-byte cp.async copies (512 of them, 4 per thread); the caller commits and waits.
__device__ __forceinline__ void load_tile_async(bf16* dst, const bf16* src, std::size_t stride, int valid) {
  for (int e = threadIdx.x; e < kTile * (kD / 8); e += kThreads) {
    const int r = e >> 3, c = (e & 7) * 8;
    const bool copy = r < valid;
    cuda::cp_async_16(dst + r * kLd + c, copy ? src + static_cast<std::size_t>(r) * stride + c : src, copy);
  }
}

// Stage `stage` of the K and V tiles (=) keys k_first.. of the block's row and head (the forward and dQ kernels walk
// them); the caller commits.
__device__ __forceinline__ void load_key_value_tiles(bf16* ks, bf16* vs, int stage, const RowHead<bf16>& rh,
                                                     int k_first) {
  const std::size_t offset = static_cast<std::size_t>(k_first) * rh.stride;
  load_tile_async(ks + stage * kTileElems, rh.k + offset, rh.stride, min(kTile, rh.len - k_first));
  load_tile_async(vs + stage * kTileElems, rh.v + offset, rh.stride, min(kTile, rh.len - k_first));
}

// Stage `stage` of the Q and dctx tiles (=) queries q_first.. of the block's row and head (the dQ kernel owns them,
// the dK/dV kernel walks them); dctx_head is the head's first column of the row's first token in dctx [T, H]. The
// caller commits.
__device__ __forceinline__ void load_query_tiles(bf16* qs, bf16* dos, int stage, const RowHead<bf16>& rh,
                                                 const bf16* dctx_head, int hidden, int q_first) {
  const int valid = min(kTile, rh.len - q_first);
  load_tile_async(qs + stage * kTileElems, rh.q + static_cast<std::size_t>(q_first) * rh.stride, rh.stride, valid);
  load_tile_async(dos + stage * kTileElems, dctx_head + static_cast<std::size_t>(q_first) * hidden, hidden, valid);
}

// Lane addresses for ldmatrix_x4 over a 16 × 16 block of a shared tile at (row0, col0). a_address: matrices
// (rows +0, cols +0), (+8, +0), (+0, +8), (+8, +8): an A operand, or with .trans a B operand [k][n] for n-tiles
// col0 and col0 + 8 ({r0, r1} and {r2, r3}). b_address: matrices (+0, +0), (+0, +8), (+8, +0), (+8, +8): a B operand
// whose n runs down the tile's rows (B = tileᵀ) for n-tiles row0 and row0 + 8 ({r0, r1} and {r2, r3}).
__device__ __forceinline__ const bf16* a_address(const bf16* tile, int row0, int col0, int lane) {
  return tile + (row0 + (lane & 7) + 8 * ((lane >> 3) & 1)) * kLd + col0 + 8 * (lane >> 4);
}
__device__ __forceinline__ const bf16* b_address(const bf16* tile, int row0, int col0, int lane) {
  return tile + (row0 + (lane & 7) + 8 * (lane >> 4)) * kLd + col0 + 8 * ((lane >> 3) & 1);
}

// A operand of 16 rows × 64 (four k-steps of 16) from a shared tile: a[kk] covers columns 16kk..16kk + 15.
__device__ __forceinline__ void load_a(uint32_t (&a)[4][4], const bf16* tile, int row0, int lane) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) cuda::ldmatrix_x4(a[kk], a_address(tile, row0, 16 * kk, lane));
}

// A operand from a 16 × 64 fp32 accumulator (eight n-tiles), rounded to bf16: the accumulator layout of n-tiles 2kk
// and 2kk + 1 is the A layout of k-step kk.
__device__ __forceinline__ void to_a(uint32_t (&a)[4][4], const float (&c)[8][4]) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    a[kk][0] = cuda::pack_bf16x2(c[2 * kk][0], c[2 * kk][1]);
    a[kk][1] = cuda::pack_bf16x2(c[2 * kk][2], c[2 * kk][3]);
    a[kk][2] = cuda::pack_bf16x2(c[2 * kk + 1][0], c[2 * kk + 1][1]);
    a[kk][3] = cuda::pack_bf16x2(c[2 * kk + 1][2], c[2 * kk + 1][3]);
  }
}

__device__ __forceinline__ void mma_pair(float (&c0)[4], float (&c1)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[4]) {
  const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
  cuda::mma_m16n8k16_bf16(c0, a, b0);
  cuda::mma_m16n8k16_bf16(c1, a, b1);
}

// acc[16 × 64] (+=) A · tileᵀ: A is 16 × 64 (k = the tile's 64 columns), n = the tile's 64 rows.
__device__ __forceinline__ void mma_a_tile_t(float (&acc)[8][4], const uint32_t (&a)[4][4], const bf16* tile,
                                             int lane) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t b[4];
      cuda::ldmatrix_x4(b, b_address(tile, 16 * np, 16 * kk, lane));
      mma_pair(acc[2 * np], acc[2 * np + 1], a[kk], b);
    }
  }
}

// acc[16 × 64] (+=) A · tile: A is 16 × 64 (k = the tile's 64 rows), n = the tile's 64 columns.
__device__ __forceinline__ void mma_a_tile(float (&acc)[8][4], const uint32_t (&a)[4][4], const bf16* tile,
                                           int lane) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t b[4];
      cuda::ldmatrix_x4_trans(b, a_address(tile, 16 * kk, 16 * np, lane));
      mma_pair(acc[2 * np], acc[2 * np + 1], a[kk], b);
    }
  }
}

// The dropout mask of one accumulator n-tile whose rows are queries (row_g, row_g8: row_index of the lane's rows g
// and g + 8) and whose columns are keys key0 + 2t, + 1: bit e set when d[e]'s element is kept. Lanes t and t ^ 1
// draw the Philox groups of keys key0 + 4·(t / 2) + [0, 4) for row g (even t) and row g + 8 (odd t) and swap them,
// so each lane draws one group per tile, as many as the mask has.
__device__ __forceinline__ unsigned keep_bits_query_rows(const AttentionDropout& d, uint64_t row_g, uint64_t row_g8,
                                                         int key0, int t) {
  const bool odd = (t & 1) != 0;
  const unsigned mine = keep4(d, (odd ? row_g8 : row_g) + static_cast<uint64_t>(key0 + 4 * (t >> 1)));
  const unsigned other = __shfl_xor_sync(kFullWarp, mine, 1);
  const int shift = 2 * (t & 1);
  const unsigned g_bits = ((odd ? other : mine) >> shift) & 3u;
  const unsigned g8_bits = ((odd ? mine : other) >> shift) & 3u;
  return g_bits | g8_bits << 2;
}

// A word of the backward's dropout mask (attention_dropout_mask_kernel), or all kept where the query is not in the
// row or the word lies wholly past it (those words are never written, and their elements never used).
__device__ __forceinline__ uint32_t mask_word(const uint32_t* mask, std::size_t query_words, int query, int word,
                                              int len) {
  return query < len && 32 * word < len ? __ldg(mask + query_words + static_cast<std::size_t>(word)) : 0xffffffffu;
}

// to_a of the accumulator with its dropped elements zeroed (n-tile n's bits are keep[n]), leaving the accumulator as
// it is.
__device__ __forceinline__ void to_a_kept(uint32_t (&a)[4][4], const float (&c)[8][4], const unsigned (&keep)[8]) {
  const auto kept = [&](int n, int e) { return (keep[n] >> e) & 1u ? c[n][e] : 0.0f; };
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    a[kk][0] = cuda::pack_bf16x2(kept(2 * kk, 0), kept(2 * kk, 1));
    a[kk][1] = cuda::pack_bf16x2(kept(2 * kk, 2), kept(2 * kk, 3));
    a[kk][2] = cuda::pack_bf16x2(kept(2 * kk + 1, 0), kept(2 * kk + 1, 1));
    a[kk][3] = cuda::pack_bf16x2(kept(2 * kk + 1, 2), kept(2 * kk + 1, 3));
  }
}

// Two adjacent values of a token row, rounded to bf16 (4 bytes at an even column: aligned).
__device__ __forceinline__ void store_pair(bf16* dst, float lo, float hi) {
  *reinterpret_cast<uint32_t*>(dst) = cuda::pack_bf16x2(lo, hi);
}

// The forward's keep bits of one 64-key tile (keys k0.., n-tile n's bits keep[n] as keep_bits_query_rows gives them)
// as the mask words attention_dropout_mask_kernel writes: words k0 / 32 and k0 / 32 + 1 of the lane's queries i0 and
// i0 + 8. Each lane holds two keys per n-tile and row, so the quad ORs its four parts; then lane t stores one of the
// four words (t & 1: which word, t & 2: which query), where the query is in the row and the word not wholly past it
// (the words the mask kernel writes). row_words: the mask's first word of query 0 of the block's row and head.
__device__ __forceinline__ void store_mask_words(uint32_t* row_words, int words, const unsigned (&keep)[8], int i0,
                                                 int k0, int len, int t) {
  uint32_t w[2][2] = {};  // [query i0, i0 + 8][word]
#pragma unroll
  for (int n = 0; n < 8; ++n) {
    const int shift = 8 * (n & 3) + 2 * t;  // key 8n + 2t of the tile is bit shift of its word
    w[0][n >> 2] |= (keep[n] & 3u) << shift;
    w[1][n >> 2] |= ((keep[n] >> 2) & 3u) << shift;
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      w[r][half] |= __shfl_xor_sync(kFullWarp, w[r][half], 1);
      w[r][half] |= __shfl_xor_sync(kFullWarp, w[r][half], 2);
    }
  }
  const int r = t >> 1, half = t & 1;
  const int i = i0 + 8 * r, c = k0 / 32 + half;
  // Selected, not indexed by the lane's r and half: a dynamic index would put w in local memory (16 bytes of stack).
  const uint32_t word = r != 0 ? (half != 0 ? w[1][1] : w[1][0]) : (half != 0 ? w[0][1] : w[0][0]);
  if (i < len && 32 * c < len) row_words[static_cast<std::size_t>(i) * words + c] = word;
}

// mask[(h·T + first + i)·W + c] (=) the dropout mask of query i of row b, head h: bit u set when key 32c + u is kept
// (W = dropout_mask_words(longest)). Grid (ceil(longest·W / 128), NH, B), one word (eight Philox groups) per
// thread; words wholly past the row are not written.
__global__ void __launch_bounds__(kThreads)
    attention_dropout_mask_kernel(uint32_t* mask, AttentionArgs args, int words) {
  const int b = blockIdx.z, h = blockIdx.y;
  const int first = args.cu_seqlens[b], len = args.cu_seqlens[b + 1] - first;
  const int at = blockIdx.x * kThreads + threadIdx.x;
  const int i = at / words, c = at - i * words;
  if (i >= len || 32 * c >= len) return;
  const uint64_t index = args.dropout.row_index(b, h, i) + 32 * static_cast<uint64_t>(c);
  uint32_t word = 0;
#pragma unroll
  for (int u = 0; u < 8; ++u) word |= keep4(args.dropout, index + 4 * u) << (4 * u);
  mask[(static_cast<std::size_t>(h) * args.tokens + first + i) * words + c] = word;
}

// mask: null, or where the drawn dropout mask is stored (attention_dropout_mask_kernel's layout) for the backward.
__global__ void __launch_bounds__(kThreads)
    attention_forward_mma_kernel(bf16* ctx, float* lse, uint32_t* mask, const bf16* qkv, AttentionArgs args) {
  const RowHead<bf16> rh = row_head(qkv, args);
  const int len = rh.len, q0 = blockIdx.x * kTile;
  if (q0 >= len) return;

  extern __shared__ __align__(128) unsigned char smem[];
  bf16* qs = reinterpret_cast<bf16*>(smem);
  bf16* ks = qs + kTileElems;      // two stages
  bf16* vs = ks + 2 * kTileElems;  // two stages
  const std::size_t stride = rh.stride;
  const int tiles = (len + kTile - 1) / kTile;
  load_tile_async(qs, rh.q + static_cast<std::size_t>(q0) * stride, stride, min(kTile, len - q0));
  load_key_value_tiles(ks, vs, 0, rh, 0);
  cuda::cp_async_commit();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int i0 = q0 + warp * 16 + g;  // the lane's rows: queries i0 and i0 + 8
  const bool drop = args.dropout.p > 0.0f;
  const uint64_t drop_g = drop ? args.dropout.row_index(rh.b, rh.h, i0) : 0;
  const uint64_t drop_g8 = drop ? args.dropout.row_index(rh.b, rh.h, i0 + 8) : 0;
  const int mask_words = dropout_mask_words(args.longest);
  uint32_t* row_mask =
      drop && mask != nullptr
          ? mask + (static_cast<std::size_t>(rh.h) * args.tokens + rh.first) * static_cast<std::size_t>(mask_words)
          : nullptr;
  const float scale2 = args.scale * kLog2e;

  float o[8][4] = {};
  float m[2] = {-INFINITY, -INFINITY};  // running max of s · scale · log2 e, rows g and g + 8 (same in the quad)
  float l[2] = {0.0f, 0.0f};            // this lane's part of the running sum of the undropped probabilities
  uint32_t qa[4][4];
  for (int j = 0; j < tiles; ++j) {
    const int stage = j & 1;
    // The next K and V into the other stage, which every warp left at the end of tile j - 1.
    if (j + 1 < tiles) load_key_value_tiles(ks, vs, stage ^ 1, rh, (j + 1) * kTile);
    cuda::cp_async_commit();
    cuda::cp_async_wait<1>();  // everything but the group just committed: tile j (and Q) have landed
    __syncthreads();
    if (j == 0) load_a(qa, qs, warp * 16, lane);
    const bf16* kt = ks + stage * kTileElems;
    const bf16* vt = vs + stage * kTileElems;

    float s[8][4] = {};
    mma_a_tile_t(s, qa, kt, lane);  // S = Q Kᵀ

    const int k0 = j * kTile, nk = min(kTile, len - k0);
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int n = 0; n < 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float x = 8 * n + 2 * t + (e & 1) < nk ? s[n][e] * scale2 : -INFINITY;
        s[n][e] = x;
        mx[e >> 1] = fmaxf(mx[e >> 1], x);
      }
    }
    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // Key k0 is valid and some lane of the quad holds it, so the quad's max is finite.
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(kFullWarp, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(kFullWarp, mx[r], 2));
      alpha[r] = exp2f(m[r] - mx[r]);  // 0 on the first tile (m = −inf)
      l[r] *= alpha[r];
      m[r] = mx[r];
    }
#pragma unroll
    for (int n = 0; n < 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = exp2f(s[n][e] - m[e >> 1]);  // masked keys: exp2f(−inf) = 0
        l[e >> 1] += p;  // the undropped softmax: lse and the normalisation ignore the mask
        s[n][e] = p;
      }
      o[n][0] *= alpha[0];
      o[n][1] *= alpha[0];
      o[n][2] *= alpha[1];
      o[n][3] *= alpha[1];
    }
    uint32_t pa[4][4];
    if (drop) {
      unsigned keep[8];
#pragma unroll
      for (int n = 0; n < 8; ++n) keep[n] = keep_bits_query_rows(args.dropout, drop_g, drop_g8, k0 + 8 * n, t);
      to_a_kept(pa, s, keep);
      if (row_mask != nullptr) store_mask_words(row_mask, mask_words, keep, i0, k0, len, t);
    } else {
      to_a(pa, s);
    }
    mma_a_tile(o, pa, vt, lane);  // O += dropout(P) V (mask only; 1 / (1 − p) at the end)
    __syncthreads();              // every warp is done with this stage before it is refilled
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {  // the quad's four parts of each row's sum
    l[r] += __shfl_xor_sync(kFullWarp, l[r], 1);
    l[r] += __shfl_xor_sync(kFullWarp, l[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = i0 + 8 * r;
    if (i >= len) continue;
    const float factor = args.dropout.scale / l[r];
    if (t == 0) lse[static_cast<std::size_t>(rh.h) * args.tokens + rh.first + i] = m[r] * kLn2 + logf(l[r]);
    bf16* dst = ctx + static_cast<std::size_t>(rh.first + i) * args.hidden + rh.head_col + 2 * t;
#pragma unroll
    for (int n = 0; n < 8; ++n) store_pair(dst + 8 * n, o[n][2 * r] * factor, o[n][2 * r + 1] * factor);
  }
}

// dQ of queries i0 and i0 + 8 (the lane's accumulator rows; those past the row are not written) times the softmax
// scale, into the q part of dqkv.
__device__ __forceinline__ void store_dq(bf16* dqkv, const float (&dq)[8][4], const RowHead<bf16>& rh,
                                         const AttentionArgs& args, int i0, int t) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = i0 + 8 * r;
    if (i >= rh.len) continue;
    bf16* dst = dqkv + static_cast<std::size_t>(rh.first + i) * rh.stride + rh.head_col + 2 * t;
#pragma unroll
    for (int n = 0; n < 8; ++n) store_pair(dst + 8 * n, dq[n][2 * r] * args.scale, dq[n][2 * r + 1] * args.scale);
  }
}

// kWithDq: the fused backward, for rows of at most 64 tokens (one block, keys 0..63, and one query tile). The dS it
// keeps is the dQ kernel's to the bit: S and dP here are Sᵀ and dPᵀ, the same products of the same bf16 values, and a
// mma adds an element's 16 products in an order fixed by their position k, whichever operand is A.
template <bool kWithDq>
__global__ void __launch_bounds__(kThreads)
    attention_backward_dkdv_mma_kernel(bf16* dqkv, const bf16* dctx, const float* lse, const float* dvec,
                                       const uint32_t* mask, const bf16* qkv, AttentionArgs args) {
  const RowHead<bf16> rh = row_head(qkv, args);
  const int len = rh.len, k0 = blockIdx.x * kTile;
  if (k0 >= len) return;

  extern __shared__ __align__(128) unsigned char smem[];
  bf16* kts = reinterpret_cast<bf16*>(smem);
  bf16* vts = kts + kTileElems;
  bf16* qs = vts + kTileElems;      // two stages
  bf16* dos = qs + 2 * kTileElems;  // two stages
  float* lse2_s = reinterpret_cast<float*>(dos + 2 * kTileElems);  // [2][64]: lse · log2 e of the walked queries
  float* d_s = lse2_s + 2 * kTile;                                 // [2][64]: their D
  bf16* ds_s = reinterpret_cast<bf16*>(d_s + 2 * kTile);           // kWithDq: [64 keys][kLd], dS in bf16
  const std::size_t stride = rh.stride;
  const bf16* dctx_head = dctx + static_cast<std::size_t>(rh.first) * args.hidden + rh.head_col;
  const std::size_t stat0 = static_cast<std::size_t>(rh.h) * args.tokens + rh.first;
  const int tiles = (len + kTile - 1) / kTile;

  // lse and D are not 16-byte aligned in general: plain loads into the stage, ordered by the barrier after the wait.
  const auto load_stats = [&](int stage, int q_first) {
    for (int e = threadIdx.x; e < kTile; e += kThreads) {
      const bool valid = q_first + e < len;
      lse2_s[stage * kTile + e] = valid ? lse[stat0 + q_first + e] * kLog2e : 0.0f;
      d_s[stage * kTile + e] = valid ? dvec[stat0 + q_first + e] : 0.0f;
    }
  };
  load_key_value_tiles(kts, vts, 0, rh, k0);
  load_query_tiles(qs, dos, 0, rh, dctx_head, args.hidden, 0);
  load_stats(0, 0);
  cuda::cp_async_commit();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int key0 = k0 + warp * 16;  // the warp's keys key0 + g and key0 + g + 8
  const bool drop = args.dropout.p > 0.0f;
  const float scale2 = args.scale * kLog2e;
  const int words = dropout_mask_words(args.longest);
  const int key_word = key0 / 32, key_bit = key0 % 32 + g;  // where the lane's keys lie in a query's mask words

  float dk[8][4] = {}, dv[8][4] = {};
  for (int j = 0; j < tiles; ++j) {
    const int stage = j & 1, q_first = j * kTile, nq = min(kTile, len - q_first);
    if (j + 1 < tiles) {
      load_query_tiles(qs, dos, stage ^ 1, rh, dctx_head, args.hidden, (j + 1) * kTile);
      load_stats(stage ^ 1, (j + 1) * kTile);
    }
    cuda::cp_async_commit();
    cuda::cp_async_wait<1>();
    __syncthreads();
    const bf16* qt = qs + stage * kTileElems;
    const bf16* dot = dos + stage * kTileElems;
    const float* lse2 = lse2_s + stage * kTile;
    const float* dd = d_s + stage * kTile;

    uint32_t a[4][4];
    load_a(a, kts, warp * 16, lane);
    float p[8][4] = {};
    mma_a_tile_t(p, a, qt, lane);  // Sᵀ = K Qᵀ: rows the warp's keys, columns the tile's queries
#pragma unroll
    for (int n = 0; n < 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int q = 8 * n + 2 * t + (e & 1);
        p[n][e] = q < nq ? exp2f(p[n][e] * scale2 - lse2[q]) : 0.0f;
      }
    }
    unsigned keep[8] = {0xfu, 0xfu, 0xfu, 0xfu, 0xfu, 0xfu, 0xfu, 0xfu};
    if (drop) {
#pragma unroll
      for (int n = 0; n < 8; ++n) {  // d[e] is (key key0 + g + 8·(e / 2), query 8n + 2t + e % 2)
        unsigned bits = 0;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int q = q_first + 8 * n + 2 * t + e;
          const uint32_t w = mask_word(mask, (stat0 + q) * words, q, key_word, len);
          bits |= ((w >> key_bit) & 1u) << e | ((w >> (key_bit + 8)) & 1u) << (e + 2);
        }
        keep[n] = bits;
      }
      to_a_kept(a, p, keep);  // P̃ = mask ∘ P; P itself is needed for dS below
    } else {
      to_a(a, p);
    }
    mma_a_tile(dv, a, dot, lane);  // dV += P̃ᵀ dctx

    load_a(a, vts, warp * 16, lane);
    float ds[8][4] = {};
    mma_a_tile_t(ds, a, dot, lane);  // dPᵀ = V dctxᵀ
#pragma unroll
    for (int n = 0; n < 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float gsum = ds[n][e];
        if (drop) gsum = (keep[n] >> e) & 1u ? gsum * args.dropout.scale : 0.0f;
        ds[n][e] = p[n][e] * (gsum - dd[8 * n + 2 * t + (e & 1)]);
      }
    }
    to_a(a, ds);
    if constexpr (kWithDq) {
      // dS of the warp's keys into ds_s [key][query], rounded as the operand just made; rows of keys past the row are
      // zeros (their scores came from zero-filled K rows), as the dQ kernel masks them. The barrier below publishes
      // them.
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int key = key0 + g + 8 * r;
        const bool in_row = key < len;
        bf16* dst = ds_s + key * kLd + 2 * t;
#pragma unroll
        for (int n = 0; n < 8; ++n) {
          store_pair(dst + 8 * n, in_row ? ds[n][2 * r] : 0.0f, in_row ? ds[n][2 * r + 1] : 0.0f);
        }
      }
    }
    mma_a_tile(dk, a, qt, lane);  // dK += dSᵀ Q
    __syncthreads();
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = key0 + g + 8 * r;
    if (key >= len) continue;
    bf16* dk_dst = dqkv + static_cast<std::size_t>(rh.first + key) * stride + args.hidden + rh.head_col + 2 * t;
    bf16* dv_dst = dk_dst + args.hidden;
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      store_pair(dk_dst + 8 * n, dk[n][2 * r] * args.scale, dk[n][2 * r + 1] * args.scale);
      store_pair(dv_dst + 8 * n, dv[n][2 * r] * args.dropout.scale, dv[n][2 * r + 1] * args.dropout.scale);
    }
  }

  if constexpr (kWithDq) {
    // dQ = dS K for the warp's 16 queries: the A operand read transposed from ds_s [key][query], the dQ kernel's
    // product on the same values.
    const int i0 = warp * 16;
    if (i0 >= len) return;
    uint32_t a[4][4];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) cuda::ldmatrix_x4_trans(a[kk], b_address(ds_s, 16 * kk, i0, lane));
    float dq[8][4] = {};
    mma_a_tile(dq, a, kts, lane);
    store_dq(dqkv, dq, rh, args, i0 + g, t);
  }
}

__global__ void __launch_bounds__(kThreads)
    attention_backward_dq_mma_kernel(bf16* dqkv, const bf16* dctx, const float* lse, const float* dvec,
                                     const uint32_t* mask, const bf16* qkv, AttentionArgs args) {
  const RowHead<bf16> rh = row_head(qkv, args);
  const int len = rh.len, q0 = blockIdx.x * kTile;
  if (q0 >= len) return;

  extern __shared__ __align__(128) unsigned char smem[];
  bf16* qs = reinterpret_cast<bf16*>(smem);
  bf16* dos = qs + kTileElems;
  bf16* ks = dos + kTileElems;     // two stages
  bf16* vs = ks + 2 * kTileElems;  // two stages
  const int tiles = (len + kTile - 1) / kTile;
  load_query_tiles(qs, dos, 0, rh, dctx + static_cast<std::size_t>(rh.first) * args.hidden + rh.head_col, args.hidden,
                   q0);
  load_key_value_tiles(ks, vs, 0, rh, 0);
  cuda::cp_async_commit();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int i0 = q0 + warp * 16 + g;
  float lse2[2], dd[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const bool valid = i0 + 8 * r < len;
    const std::size_t stat = static_cast<std::size_t>(rh.h) * args.tokens + rh.first + i0 + 8 * r;
    lse2[r] = valid ? lse[stat] * kLog2e : 0.0f;
    dd[r] = valid ? dvec[stat] : 0.0f;
  }
  const bool drop = args.dropout.p > 0.0f;
  const int words = dropout_mask_words(args.longest);
  const std::size_t stat0 = static_cast<std::size_t>(rh.h) * args.tokens + rh.first;
  const float scale2 = args.scale * kLog2e;

  float dq[8][4] = {};
  for (int j = 0; j < tiles; ++j) {
    const int stage = j & 1;
    if (j + 1 < tiles) load_key_value_tiles(ks, vs, stage ^ 1, rh, (j + 1) * kTile);
    cuda::cp_async_commit();
    cuda::cp_async_wait<1>();
    __syncthreads();
    const bf16* kt = ks + stage * kTileElems;
    const bf16* vt = vs + stage * kTileElems;
    const int k0 = j * kTile, nk = min(kTile, len - k0);

    uint32_t a[4][4];
    load_a(a, qs, warp * 16, lane);
    float p[8][4] = {};
    mma_a_tile_t(p, a, kt, lane);  // S = Q Kᵀ
#pragma unroll
    for (int n = 0; n < 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        p[n][e] = 8 * n + 2 * t + (e & 1) < nk ? exp2f(p[n][e] * scale2 - lse2[e >> 1]) : 0.0f;
      }
    }
    load_a(a, dos, warp * 16, lane);
    float ds[8][4] = {};
    mma_a_tile_t(ds, a, vt, lane);  // dP = dctx Vᵀ
    uint32_t w[2][2] = {{0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}};  // [row g, g + 8][keys k0 + 32·half..]
    if (drop) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          w[r][half] = mask_word(mask, (stat0 + i0 + 8 * r) * words, i0 + 8 * r, k0 / 32 + half, len);
        }
      }
    }
#pragma unroll
    for (int n = 0; n < 8; ++n) {  // d[e] is (query i0 + 8·(e / 2), key k0 + 8n + 2t + e % 2)
      const int bit = 8 * (n & 3) + 2 * t;
      const unsigned keep = ((w[0][n >> 2] >> bit) & 3u) | ((w[1][n >> 2] >> bit) & 3u) << 2;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float gsum = ds[n][e];
        if (drop) gsum = (keep >> e) & 1u ? gsum * args.dropout.scale : 0.0f;
        ds[n][e] = p[n][e] * (gsum - dd[e >> 1]);
      }
    }
    to_a(a, ds);
    mma_a_tile(dq, a, kt, lane);  // dQ += dS K
    __syncthreads();
  }

  store_dq(dqkv, dq, rh, args, i0, t);
}

dim3 grid_of(const AttentionArgs& args, int batch, int longest) {
  return dim3(static_cast<unsigned>((longest + kTile - 1) / kTile), static_cast<unsigned>(args.heads),
              static_cast<unsigned>(batch));
}

// The fused backward where every row fits one block (at most 64 tokens) and the device has its shared memory, unless
// BERTRAIN_ATTENTION_FUSED_BACKWARD=0 (read at every call, as BERTRAIN_ATTENTION_MMA, so that one process can time
// or test both).
bool fused_backward_applies(int longest, const DeviceFacts& dev) {
  const char* env = std::getenv("BERTRAIN_ATTENTION_FUSED_BACKWARD");
  if (env != nullptr && std::strcmp(env, "0") == 0) return false;
  return longest <= kTile && static_cast<std::size_t>(dev.max_smem) >= kFusedBackwardSmem;
}

}  // namespace

bool tensor_core_attention_applies(int head_dim, bool vec, const DeviceFacts& dev) {
  const char* env = std::getenv("BERTRAIN_ATTENTION_MMA");  // at every call: a test may change it between calls
  if (env != nullptr && std::strcmp(env, "0") == 0) return false;
  return head_dim == kMmaHeadDim && vec && dev.major >= 8 &&
         static_cast<std::size_t>(dev.max_smem) >= kDkdvSmem;
}

void attention_dropout_mask_mma(uint32_t* mask, const AttentionArgs& args, int batch, int longest,
                                CudaStream stream) {
  const int words = dropout_mask_words(longest);
  const dim3 grid(static_cast<unsigned>((static_cast<long long>(longest) * words + kThreads - 1) / kThreads),
                  static_cast<unsigned>(args.heads), static_cast<unsigned>(batch));
  attention_dropout_mask_kernel<<<grid, kThreads, 0, stream>>>(mask, args, words);
  BERTRAIN_CUDA_CHECK_LAUNCH("attention_dropout_mask_kernel");
}

void attention_forward_mma(bf16* ctx, float* lse, uint32_t* mask, const bf16* qkv, const AttentionArgs& args,
                           int batch, int longest, const DeviceFacts& dev, CudaStream stream) {
  allow_shared_memory(attention_forward_mma_kernel, kForwardSmem, dev);
  attention_forward_mma_kernel<<<grid_of(args, batch, longest), kThreads, kForwardSmem, stream>>>(ctx, lse, mask,
                                                                                                   qkv, args);
  BERTRAIN_CUDA_CHECK_LAUNCH("attention_forward_mma_kernel");
}

void attention_backward_mma(bf16* dqkv, const bf16* dctx, const float* lse, const float* dvec,
                            const uint32_t* saved_mask, uint32_t* mask, const bf16* qkv, const AttentionArgs& args,
                            int batch, int longest, const DeviceFacts& dev, CudaStream stream) {
  if (args.dropout.p > 0.0f && saved_mask == nullptr) attention_dropout_mask_mma(mask, args, batch, longest, stream);
  const uint32_t* bits = saved_mask != nullptr ? saved_mask : mask;
  if (fused_backward_applies(longest, dev)) {
    allow_shared_memory(attention_backward_dkdv_mma_kernel<true>, kFusedBackwardSmem, dev);
    attention_backward_dkdv_mma_kernel<true><<<grid_of(args, batch, longest), kThreads, kFusedBackwardSmem, stream>>>(
        dqkv, dctx, lse, dvec, bits, qkv, args);
    BERTRAIN_CUDA_CHECK_LAUNCH("attention_backward_dkdv_mma_kernel<true>");
    return;
  }
  allow_shared_memory(attention_backward_dkdv_mma_kernel<false>, kDkdvSmem, dev);
  attention_backward_dkdv_mma_kernel<false><<<grid_of(args, batch, longest), kThreads, kDkdvSmem, stream>>>(
      dqkv, dctx, lse, dvec, bits, qkv, args);
  BERTRAIN_CUDA_CHECK_LAUNCH("attention_backward_dkdv_mma_kernel");
  allow_shared_memory(attention_backward_dq_mma_kernel, kDqSmem, dev);
  attention_backward_dq_mma_kernel<<<grid_of(args, batch, longest), kThreads, kDqSmem, stream>>>(dqkv, dctx, lse,
                                                                                                 dvec, bits, qkv, args);
  BERTRAIN_CUDA_CHECK_LAUNCH("attention_backward_dq_mma_kernel");
}

}  // namespace cuda_attention
}  // namespace bertrain

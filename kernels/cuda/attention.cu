// Fused self-attention over packed rows on the GPU, flash-attention-2 style (the maths, layouts and dropout
// indices are in kernels/attention.h): each block keeps its tiles of Q, K, V (and dctx) in shared memory and never
// writes a score or probability matrix to global memory. Forward saves only ctx and the fp32 log-sum-exp; backward
// recomputes the probabilities from lse.
//
// Two kernel families share this file's launchers (attention_forward_cuda, attention_backward_cuda): bf16 at head
// dim 64, every BERT's, runs the tensor-core kernels of kernels/cuda/attention_mma.cu (register accumulators,
// mma.sync, ldmatrix, cp.async; about 3× faster on an H100); everything else, and bf16 under
// BERTRAIN_ATTENTION_MMA=0, runs the general kernels below. D = rowsum(dctx ∘ ctx) is computed here for both.
//
// Launch grids (tile = kTile tokens: 64 for head dims up to 64, 32 up to 128, else 16, or smaller when the device's
// shared memory needs it; see choose_tile). Every block has 2·kTile threads, i.e. one warp per 16 tokens of its tile.
//   attention_forward_kernel        (ceil(S / tile), NH, B): block (x, h, b) owns query tile x of row b, head h; each
//                                   warp owns 16 of its queries and walks the row's key tiles with an online softmax.
//   attention_backward_d_kernel     one warp per (token, head), kDThreads / 32 per block: D = rowsum(dctx ∘ ctx) into
//                                   the workspace [NH, T]; attention_backward_d_packed_kernel the same with 16-byte
//                                   loads, HD / kPack lanes per (token, head), where HD and alignment allow.
//   attention_backward_dkdv_kernel  (ceil(S / tile), NH, B): block owns key tile x, each warp 16 of its keys; walks the
//                                   row's query tiles and writes dK and dV of its keys (=).
//   attention_backward_dq_kernel    (ceil(S / tile), NH, B): block owns query tile x, each warp 16 of its queries;
//                                   walks the row's key tiles and writes dQ of its queries (=).
// Blocks whose tile starts at or beyond L_b return at once. Every output element is computed by one warp in a fixed
// order (no atomics), so results are run-to-run identical.
//
// Inside a block the only block-wide barriers are around the loads of the shared tiles; everything else is
// warp-private: a warp's 16 own tokens give it private 16-row score, probability and accumulator tiles, so the
// softmax and its backward are done by the warp's lanes on shared memory with __syncwarp between phases.
//
// The tile products are warp-level GEMMs on shared memory with fp32 results in shared memory (warp_gemm_nt /
// warp_gemm_nn): tensor cores for T = bf16 (nvcuda::wmma 16×16×16, bf16 inputs, fp32 accumulation; the operands of
// the second product of each pair, P and dS, are rounded to bf16 first, as SDPA under autocast), plain fp32 FMAs for
// T = float (no TF32), so fp32 mode matches the CPU twin up to summation order. The accumulators (O, dQ, dK, dV) live
// in shared memory, not in wmma fragments, because the online softmax rescales O row by row and the layout of a
// wmma accumulator fragment is unspecified.
//
// Numerics shared with the CPU twin: s = (q·k) · (1 / sqrt(HD)) with 1 / sqrt(HD) computed on the host in float as
// the CPU's T(1) / std::sqrt(T(HD)); for HD = 16, 64, 256 (sqrt a power of two) this equals the division s = q·k /
// sqrt(HD) exactly, otherwise it may differ from the division in the last bit. Softmax statistics in fp32 with expf
// (not the fast __expf); lse = m + logf(l). Dropout: kept iff philox_uniform(key, idx) >= p, kept values scaled by
// the float 1 / (1 − p); forward and dK/dV fold that scale into the final per-row factor instead of scaling each
// probability (a rounding-level difference).
//
// Head dims: any HD whose tiles fit in the device's shared memory (HD is padded to HDP = a multiple of 16 with zero
// columns inside shared memory; nothing outside [0, HD) is read or written in global memory). HD = 64 with 64-token
// tiles is compiled with the head dim fixed (the fast path); every other head dim runs the same code with runtime
// loops.
#include "kernels/attention.h"

#include <cuda_bf16.h>
#include <mma.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/error.h"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_mma.h"
#include "kernels/cuda/common.cuh"

namespace bertrain {

namespace {

using namespace cuda_attention;  // NOLINT(google-build-using-namespace): this file's own helpers

constexpr int kFastHeadDim = 64;  // head dim of BERT-base/large and SciBERT
constexpr int kDThreads = 256;    // attention_backward_d_kernel: 8 warps, 8 (token, head) pairs per block

// ---- Shared-memory layouts (the same arithmetic on the host, which sizes the launch, and on the device) ------------

__host__ __device__ constexpr std::size_t align128(std::size_t n) { return (n + 127) / 128 * 128; }

// HD rounded up to a multiple of 16 (the wmma tile edge); columns [HD, HDP) of the shared tiles are zero.
constexpr int padded_head_dim(int head_dim) { return (head_dim + 15) / 16 * 16; }

// Leading dimensions, in elements. Operand tiles [tile][HDP] of T get 16 bytes of padding per row (wmma wants
// multiples of 16 bytes; the shift spreads the rows over the banks); fp32 accumulators [tile][HDP] 16 bytes too.
template <typename T>
__host__ __device__ constexpr int operand_ld(int hdp) {
  return hdp + 16 / static_cast<int>(sizeof(T));
}
__host__ __device__ constexpr int acc_ld(int hdp) { return hdp + 4; }
// A warp's row-major score tile [16][tile] (fp32, and the T tile of P or dS): tile + 8 makes the lanes' float4 reads
// of the softmax phase (two lanes per row, alternating 4-column chunks) conflict-free.
__host__ __device__ constexpr int score_ld(int tile) { return tile + 8; }
// dK/dV kernel: a warp's transposed tiles [tile queries][16 keys]. fp32: 16 (conflict-free float4 reads, 4 key
// groups × 8 query lanes). T: 24 for bf16 (rows 48 bytes apart, so wmma's col-major loads spread over the banks),
// 16 for float.
constexpr int kTransposedLd = 16;
template <typename T>
__host__ __device__ constexpr int transposed_t_ld() {
  return std::is_same<T, float>::value ? 16 : 24;
}

struct SmemCursor {
  std::size_t bytes = 0;
  __host__ __device__ std::size_t take(std::size_t n) {
    const std::size_t at = bytes;
    bytes = align128(bytes + n);
    return at;
  }
};

template <typename T>
__host__ __device__ std::size_t operand_bytes(int tile, int hdp) {
  return static_cast<std::size_t>(tile) * operand_ld<T>(hdp) * sizeof(T);
}
__host__ __device__ inline std::size_t acc_bytes(int tile, int hdp) {
  return static_cast<std::size_t>(tile) * acc_ld(hdp) * sizeof(float);
}

// Forward: Q (own), K, V (walked) [tile][HDP] T; per warp S [16][tile] fp32 and P [16][tile] T; O [tile][HDP] fp32.
template <typename T>
struct ForwardSmem {
  std::size_t q, k, v, s, p, o, bytes;
  __host__ __device__ ForwardSmem(int tile, int hdp) {
    SmemCursor c;
    q = c.take(operand_bytes<T>(tile, hdp));
    k = c.take(operand_bytes<T>(tile, hdp));
    v = c.take(operand_bytes<T>(tile, hdp));
    s = c.take(static_cast<std::size_t>(tile) * score_ld(tile) * sizeof(float));
    p = c.take(static_cast<std::size_t>(tile) * score_ld(tile) * sizeof(T));
    o = c.take(acc_bytes(tile, hdp));
    bytes = c.bytes;
  }
};

// dQ: Q, dctx (own), K, V (walked) [tile][HDP] T; per warp S then dP [16][tile] fp32 and dS [16][tile] T;
// dQ [tile][HDP] fp32.
template <typename T>
struct DqSmem {
  std::size_t q, dout, k, v, s, ds, acc, bytes;
  __host__ __device__ DqSmem(int tile, int hdp) {
    SmemCursor c;
    q = c.take(operand_bytes<T>(tile, hdp));
    dout = c.take(operand_bytes<T>(tile, hdp));
    k = c.take(operand_bytes<T>(tile, hdp));
    v = c.take(operand_bytes<T>(tile, hdp));
    s = c.take(static_cast<std::size_t>(tile) * score_ld(tile) * sizeof(float));
    ds = c.take(static_cast<std::size_t>(tile) * score_ld(tile) * sizeof(T));
    acc = c.take(acc_bytes(tile, hdp));
    bytes = c.bytes;
  }
};

// dK/dV: K, V (own), Q, dctx (walked) [tile][HDP] T; lse and D of the walked queries [tile] fp32; per warp Sᵀ then
// dPᵀ [tile][16] fp32 and P̃ᵀ then dSᵀ [tile][16] T (stored query-major: element (key r, query c) at c·ld + r);
// dK, dV [tile][HDP] fp32.
template <typename T>
struct DkdvSmem {
  std::size_t k, v, q, dout, lse, d, s, t, dk, dv, bytes;
  __host__ __device__ DkdvSmem(int tile, int hdp) {
    SmemCursor c;
    const int warps = tile / 16;
    k = c.take(operand_bytes<T>(tile, hdp));
    v = c.take(operand_bytes<T>(tile, hdp));
    q = c.take(operand_bytes<T>(tile, hdp));
    dout = c.take(operand_bytes<T>(tile, hdp));
    lse = c.take(static_cast<std::size_t>(tile) * sizeof(float));
    d = c.take(static_cast<std::size_t>(tile) * sizeof(float));
    s = c.take(static_cast<std::size_t>(warps) * tile * kTransposedLd * sizeof(float));
    t = c.take(static_cast<std::size_t>(warps) * tile * transposed_t_ld<T>() * sizeof(T));
    dk = c.take(acc_bytes(tile, hdp));
    dv = c.take(acc_bytes(tile, hdp));
    bytes = c.bytes;
  }
};

// ---- Shared-memory helpers --------------------------------------------------------------------------------------

// dst[rows][ld] (=) `rows` token rows of a token-major tensor, row r at src + r·stride, columns [0, hd); rows at or
// beyond `valid` and columns [hd, hdp) are zero (zeros add nothing to the tile products and keep every score of a
// padded row finite). The whole block cooperates. `vec`: 16-byte copies (hd a multiple of 16 / sizeof(T) and src
// 16-byte aligned, checked on the host).
template <typename T>
__device__ __forceinline__ void load_tile(T* dst, int ld, const T* src, std::size_t stride, int valid, int rows,
                                          int hd, int hdp, bool vec) {
  if (vec) {
    constexpr int kPer = 16 / static_cast<int>(sizeof(T));
    const int per_row = hdp / kPer;
    for (int e = threadIdx.x; e < rows * per_row; e += blockDim.x) {
      const int r = e / per_row, c = (e - r * per_row) * kPer;
      uint4 x = make_uint4(0u, 0u, 0u, 0u);
      if (r < valid && c < hd) x = *reinterpret_cast<const uint4*>(src + static_cast<std::size_t>(r) * stride + c);
      *reinterpret_cast<uint4*>(dst + r * ld + c) = x;
    }
  } else {
    for (int e = threadIdx.x; e < rows * hdp; e += blockDim.x) {
      const int r = e / hdp, c = e - r * hdp;
      T x{};  // +0 for float and bf16
      if (r < valid && c < hd) x = src[static_cast<std::size_t>(r) * stride + c];
      dst[r * ld + c] = x;
    }
  }
}

__device__ __forceinline__ void zero_floats(float* p, int n) {
  for (int e = threadIdx.x; e < n; e += blockDim.x) p[e] = 0.0f;
}

__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }

// Four consecutive elements of a T tile from fp32 values (bf16: rounded to nearest even, as cuda::store).
__device__ __forceinline__ void store4(float* dst, const float (&v)[4]) {
  *reinterpret_cast<float4*>(dst) = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 x = __floats2bfloat162_rn(lo, hi);  // .x (lower address) = lo
  return *reinterpret_cast<const uint32_t*>(&x);
}
__device__ __forceinline__ void store4(bf16* dst, const float (&v)[4]) {
  *reinterpret_cast<uint2*>(dst) = make_uint2(pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3]));
}

// O[rows 16][hdp] *= factor, where `row` is the lane's row: the two lanes of a row take alternate float4 columns.
__device__ __forceinline__ void scale_row(float* row, int hdp, int half, float factor) {
  for (int c4 = half; c4 < hdp / 4; c4 += 2) {
    float4 x = load4(row + 4 * c4);
    x.x *= factor;
    x.y *= factor;
    x.z *= factor;
    x.w *= factor;
    *reinterpret_cast<float4*>(row + 4 * c4) = x;
  }
}

// ---- Warp GEMMs on shared memory: 16 output rows per warp, fp32 results --------------------------------------------
// warp_gemm_nt: C[16 × n] (=) A[16 × k] · Bᵀ with A row-major (lda) and B stored [n][k] row-major (ldb); C row-major
// (ldc) or, when kTransposedC, column-major (element (r, c) at c·ldc + r).
// warp_gemm_nn: C[16 × n] (+=) A[16 × k] · B with A row-major (lda) or, when kTransposedA, column-major (element
// (r, kk) at kk·lda + r), B [k][n] row-major (ldb), C row-major (ldc).
// n and k are multiples of 16; every pointer and leading dimension meets wmma's rules (32-byte aligned tiles,
// leading dimensions of 16 bytes) by construction of the layouts above. The whole warp calls them convergently.
// Output columns go in chunks of 64 (four 16×16 tiles) to bound the registers a chunk holds.

// fp32 (SIMT): lane (r = lane / 2, half = lane % 2) owns row r and, per 64-column chunk, columns 8g + 4·half + [0, 4)
// for g < 8. Each output is a plain fp32 sum over k in ascending order.
template <bool kTransposedC>
__device__ __forceinline__ void warp_gemm_nt(float* c, int ldc, const float* a, int lda, const float* b, int ldb, int n,
                                             int k) {
  const int lane = threadIdx.x & 31, r = lane >> 1, half = lane & 1;
  for (int n0 = 0; n0 < n; n0 += 64) {
    const int width = min(64, n - n0);
    float acc[8][4];
#pragma unroll
    for (int g = 0; g < 8; ++g) {
#pragma unroll
      for (int t = 0; t < 4; ++t) acc[g][t] = 0.0f;
    }
    for (int kk = 0; kk < k; kk += 4) {
      const float4 av = load4(a + r * lda + kk);
#pragma unroll
      for (int g = 0; g < 8; ++g) {
        if (8 * g < width) {
#pragma unroll
          for (int t = 0; t < 4; ++t) {
            const float4 bv = load4(b + (n0 + 8 * g + 4 * half + t) * ldb + kk);
            float x = acc[g][t];
            x = fmaf(av.x, bv.x, x);
            x = fmaf(av.y, bv.y, x);
            x = fmaf(av.z, bv.z, x);
            x = fmaf(av.w, bv.w, x);
            acc[g][t] = x;
          }
        }
      }
    }
#pragma unroll
    for (int g = 0; g < 8; ++g) {
      if (8 * g < width) {
        const int col = n0 + 8 * g + 4 * half;
        if (kTransposedC) {
#pragma unroll
          for (int t = 0; t < 4; ++t) c[(col + t) * ldc + r] = acc[g][t];
        } else {
          *reinterpret_cast<float4*>(c + r * ldc + col) = make_float4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]);
        }
      }
    }
  }
}

template <bool kTransposedA>
__device__ __forceinline__ void warp_gemm_nn(float* c, int ldc, const float* a, int lda, const float* b, int ldb, int n,
                                             int k) {
  const int lane = threadIdx.x & 31, r = lane >> 1, half = lane & 1;
  for (int n0 = 0; n0 < n; n0 += 64) {
    const int width = min(64, n - n0);
    float4 acc[8];
#pragma unroll
    for (int g = 0; g < 8; ++g) {
      acc[g] = 8 * g < width ? load4(c + r * ldc + n0 + 8 * g + 4 * half) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    for (int kk = 0; kk < k; kk += 4) {
      float av[4];
      if (kTransposedA) {
#pragma unroll
        for (int t = 0; t < 4; ++t) av[t] = a[(kk + t) * lda + r];
      } else {
        const float4 x = load4(a + r * lda + kk);
        av[0] = x.x, av[1] = x.y, av[2] = x.z, av[3] = x.w;
      }
#pragma unroll
      for (int t = 0; t < 4; ++t) {
#pragma unroll
        for (int g = 0; g < 8; ++g) {
          if (8 * g < width) {
            const float4 bv = load4(b + (kk + t) * ldb + n0 + 8 * g + 4 * half);
            acc[g].x = fmaf(av[t], bv.x, acc[g].x);
            acc[g].y = fmaf(av[t], bv.y, acc[g].y);
            acc[g].z = fmaf(av[t], bv.z, acc[g].z);
            acc[g].w = fmaf(av[t], bv.w, acc[g].w);
          }
        }
      }
    }
#pragma unroll
    for (int g = 0; g < 8; ++g) {
      if (8 * g < width) *reinterpret_cast<float4*>(c + r * ldc + n0 + 8 * g + 4 * half) = acc[g];
    }
  }
}

// bf16 (tensor cores): nvcuda::wmma 16×16×16 with fp32 accumulation. bf16 wmma needs sm_80; the project builds for
// 80 and 90 (CMAKE_CUDA_ARCHITECTURES), and the launcher refuses older devices, so the fallback only traps.
namespace wmma = nvcuda::wmma;

template <bool kTransposedC>
__device__ __forceinline__ void warp_gemm_nt(float* c, int ldc, const bf16* a, int lda, const bf16* b, int ldb, int n,
                                             int k) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  const __nv_bfloat16* a16 = reinterpret_cast<const __nv_bfloat16*>(a);
  const __nv_bfloat16* b16 = reinterpret_cast<const __nv_bfloat16*>(b);
  for (int n0 = 0; n0 < n; n0 += 64) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4];
#pragma unroll
    for (int f = 0; f < 4; ++f) wmma::fill_fragment(acc[f], 0.0f);
    for (int kk = 0; kk < k; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
      wmma::load_matrix_sync(fa, a16 + kk, static_cast<unsigned>(lda));
#pragma unroll
      for (int f = 0; f < 4; ++f) {
        if (n0 + 16 * f < n) {
          // Bᵀ's (kk, col) is B[col][kk]: B stored [n][k] row-major is the k × n operand in column-major order.
          wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
          wmma::load_matrix_sync(fb, b16 + (n0 + 16 * f) * ldb + kk, static_cast<unsigned>(ldb));
          wmma::mma_sync(acc[f], fa, fb, acc[f]);
        }
      }
    }
#pragma unroll
    for (int f = 0; f < 4; ++f) {
      if (n0 + 16 * f < n) {
        if (kTransposedC) {
          wmma::store_matrix_sync(c + (n0 + 16 * f) * ldc, acc[f], static_cast<unsigned>(ldc), wmma::mem_col_major);
        } else {
          wmma::store_matrix_sync(c + n0 + 16 * f, acc[f], static_cast<unsigned>(ldc), wmma::mem_row_major);
        }
      }
    }
  }
#else
  __trap();
#endif
}

template <bool kTransposedA>
__device__ __forceinline__ void warp_gemm_nn(float* c, int ldc, const bf16* a, int lda, const bf16* b, int ldb, int n,
                                             int k) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  using ALayout = typename std::conditional<kTransposedA, wmma::col_major, wmma::row_major>::type;
  const __nv_bfloat16* a16 = reinterpret_cast<const __nv_bfloat16*>(a);
  const __nv_bfloat16* b16 = reinterpret_cast<const __nv_bfloat16*>(b);
  for (int n0 = 0; n0 < n; n0 += 64) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4];
#pragma unroll
    for (int f = 0; f < 4; ++f) {
      if (n0 + 16 * f < n) wmma::load_matrix_sync(acc[f], c + n0 + 16 * f, static_cast<unsigned>(ldc), wmma::mem_row_major);
    }
    for (int kk = 0; kk < k; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, ALayout> fa;
      // Column-major A: element (r, kk) at kk·lda + r, so the k-block starting at kk starts at row kk of memory.
      wmma::load_matrix_sync(fa, kTransposedA ? a16 + kk * lda : a16 + kk, static_cast<unsigned>(lda));
#pragma unroll
      for (int f = 0; f < 4; ++f) {
        if (n0 + 16 * f < n) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
          wmma::load_matrix_sync(fb, b16 + kk * ldb + n0 + 16 * f, static_cast<unsigned>(ldb));
          wmma::mma_sync(acc[f], fa, fb, acc[f]);
        }
      }
    }
#pragma unroll
    for (int f = 0; f < 4; ++f) {
      if (n0 + 16 * f < n) wmma::store_matrix_sync(c + n0 + 16 * f, acc[f], static_cast<unsigned>(ldc), wmma::mem_row_major);
    }
  }
#else
  __trap();
#endif
}

// ---- Kernels ------------------------------------------------------------------------------------------------------

// ctx[T, H] (=), lse[NH, T] (=). Grid (ceil(S / kTile), NH, B), 2·kTile threads; warp w owns queries
// q0 + 16w + [0, 16) of the block's tile. Lane (r = lane / 2, half = lane % 2) does the softmax of query row r over
// the 4-key chunks 2u + half of each key tile, keeping the row's running max m (same in both lanes) and its own part
// of the running sum l (the two parts are added at the end).
template <typename T, int kTile, int kHdp>
__global__ void __launch_bounds__(2 * kTile)
    attention_forward_kernel(T* ctx, float* lse, const T* qkv, AttentionArgs args) {
  constexpr int kChunks = kTile / 8;  // 4-key chunks per lane per key tile
  constexpr int lds = score_ld(kTile);
  const int hdp = kHdp > 0 ? kHdp : args.hdp;
  const RowHead<T> rh = row_head(qkv, args);
  const int b = rh.b, h = rh.h, first = rh.first, len = rh.len;
  const int q0 = blockIdx.x * kTile;
  if (q0 >= len) return;  // the whole block: this row has no query tile x

  extern __shared__ __align__(128) unsigned char smem[];
  const ForwardSmem<T> plan(kTile, hdp);
  T* qs = reinterpret_cast<T*>(smem + plan.q);
  T* ks = reinterpret_cast<T*>(smem + plan.k);
  T* vs = reinterpret_cast<T*>(smem + plan.v);
  float* ss = reinterpret_cast<float*>(smem + plan.s);
  T* ps = reinterpret_cast<T*>(smem + plan.p);
  float* os = reinterpret_cast<float*>(smem + plan.o);
  const int ld = operand_ld<T>(hdp), lda = acc_ld(hdp);

  const std::size_t stride = rh.stride;
  const T *q_src = rh.q, *k_src = rh.k, *v_src = rh.v;
  load_tile(qs, ld, q_src + static_cast<std::size_t>(q0) * stride, stride, min(kTile, len - q0), kTile, args.head_dim,
            hdp, args.vec);
  zero_floats(os, kTile * lda);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int r = lane >> 1, half = lane & 1;
  const T* q_w = qs + warp * 16 * ld;
  float* s_w = ss + warp * 16 * lds;
  T* p_w = ps + warp * 16 * lds;
  float* o_w = os + warp * 16 * lda;
  const int i = q0 + warp * 16 + r;  // this lane's query, within the row
  const bool row_valid = i < len;    // rows past L_b have zero Q: finite scores, never written
  const bool drop = args.dropout.p > 0.0f && row_valid;
  const uint64_t drop_row = drop ? args.dropout.row_index(b, h, i) : 0;

  float m = -INFINITY, l = 0.0f;
  for (int k0 = 0; k0 < len; k0 += kTile) {
    const int nk = min(kTile, len - k0);  // valid keys of this tile (>= 1)
    __syncthreads();                      // every warp is done with the previous K and V
    load_tile(ks, ld, k_src + static_cast<std::size_t>(k0) * stride, stride, nk, kTile, args.head_dim, hdp, args.vec);
    load_tile(vs, ld, v_src + static_cast<std::size_t>(k0) * stride, stride, nk, kTile, args.head_dim, hdp, args.vec);
    __syncthreads();

    warp_gemm_nt<false>(s_w, lds, q_w, ld, ks, ld, kTile, hdp);  // S = Q Kᵀ (unscaled)
    __syncwarp();

    float x[kChunks][4];
    float tile_max = -INFINITY;
#pragma unroll
    for (int u = 0; u < kChunks; ++u) {
      const int c = 2 * u + half;
      const float4 v = load4(s_w + r * lds + 4 * c);
      x[u][0] = v.x * args.scale;
      x[u][1] = v.y * args.scale;
      x[u][2] = v.z * args.scale;
      x[u][3] = v.w * args.scale;
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        if (4 * c + t < nk) tile_max = fmaxf(tile_max, x[u][t]);
      }
    }
    // Key k0 is valid and lies in chunk 0 (half 0), so the pair's max is finite.
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    const float m_new = fmaxf(m, tile_max);
    const float alpha = expf(m - m_new);  // 0 on the first tile (m = −inf)
    l *= alpha;
#pragma unroll
    for (int u = 0; u < kChunks; ++u) {
      const int c = 2 * u + half;
      const unsigned keep = drop ? keep4(args.dropout, drop_row + static_cast<uint64_t>(k0 + 4 * c)) : 0xfu;
      float pv[4];
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        float p = 0.0f;
        if (4 * c + t < nk) {
          p = expf(x[u][t] - m_new);
          l += p;  // the undropped softmax: lse and the normalisation ignore the mask
        }
        pv[t] = (keep >> t) & 1u ? p : 0.0f;
      }
      store4(p_w + r * lds + 4 * c, pv);
    }
    m = m_new;
    scale_row(o_w + r * lda, hdp, half, alpha);
    __syncwarp();
    warp_gemm_nn<false>(o_w, lda, p_w, lds, vs, ld, hdp, kTile);  // O += dropout(P) V (mask only; scale at the end)
  }
  __syncwarp();

  l += __shfl_xor_sync(0xffffffffu, l, 1);
  const float factor = row_valid ? args.dropout.scale / l : 0.0f;
  if (half == 0 && row_valid) lse[static_cast<std::size_t>(h) * args.tokens + first + i] = m + logf(l);
  scale_row(o_w + r * lda, hdp, half, factor);
  __syncwarp();
  for (int rr = 0; rr < 16; ++rr) {
    const int ii = q0 + warp * 16 + rr;
    if (ii >= len) break;
    T* dst = ctx + static_cast<std::size_t>(first + ii) * args.hidden + static_cast<std::size_t>(h) * args.head_dim;
    const float* src = o_w + rr * lda;
    for (int d = lane; d < args.head_dim; d += 32) cuda::store(dst + d, src[d]);
  }
}

// dvec[NH, T] (=) D of each (token, head): Σ_d dctx·ctx over the head's HD columns, in fp32. One warp per
// (token, head), consecutive warps taking consecutive heads of a token (contiguous reads).
template <typename T>
__global__ void __launch_bounds__(kDThreads)
    attention_backward_d_kernel(float* dvec, const T* dctx, const T* ctx, int tokens, int heads, int head_dim) {
  const std::size_t pair = (static_cast<std::size_t>(blockIdx.x) * kDThreads + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (pair >= static_cast<std::size_t>(tokens) * heads) return;  // whole warps
  const std::size_t t = pair / heads, h = pair % heads;
  const std::size_t base = pair * head_dim;  // (t·NH + h)·HD = t·H + h·HD
  float sum = 0.0f;
  for (int d = lane; d < head_dim; d += 32) sum += cuda::load(dctx + base + d) * cuda::load(ctx + base + d);
  sum = cuda::warp_sum(sum);
  if (lane == 0) dvec[h * tokens + t] = sum;
}

// The same with 16-byte loads, when HD is `group` packs of kPack<T> elements (group a power of two ≤ 32) and the
// tensors are 16-byte aligned: `group` consecutive lanes own a (token, head), each one pack of dctx and of ctx, and
// add their parts with group-wide shuffles (xor offsets below `group` stay inside the group). BERT's HD = 64 in bf16
// is 8 lanes, 4 pairs per warp: every thread moves 32 bytes in two loads instead of 4 bytes in two.
template <typename T>
__global__ void __launch_bounds__(kDThreads)
    attention_backward_d_packed_kernel(float* dvec, const T* dctx, const T* ctx, int tokens, int heads, int group) {
  constexpr int kP = cuda::kPack<T>;
  const std::size_t thread = static_cast<std::size_t>(blockIdx.x) * kDThreads + threadIdx.x;
  const std::size_t pair = thread / static_cast<std::size_t>(group), pairs = static_cast<std::size_t>(tokens) * heads;
  float sum = 0.0f;
  if (pair < pairs) {  // no early return: every lane takes part in the shuffles
    float a[kP], c[kP];
    cuda::load_pack(dctx + thread * kP, a);  // (pair·group + part)·kPack = pair·HD + part·kPack
    cuda::load_pack(ctx + thread * kP, c);
#pragma unroll
    for (int k = 0; k < kP; ++k) sum += a[k] * c[k];
  }
  for (int offset = group / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (pair < pairs && thread % static_cast<std::size_t>(group) == 0) dvec[(pair % heads) * tokens + pair / heads] = sum;
}

// dqkv's K and V columns (=) for the block's keys. Grid (ceil(S / kTile), NH, B), 2·kTile threads; warp w owns keys
// k0 + 16w + [0, 16). Per query tile, each warp computes Sᵀ = K Qᵀ and dPᵀ = V dctxᵀ for its keys, stored
// query-major so that lane (c = lane % 4, qi = lane / 4) reads its 4 consecutive keys 4c + [0, 4) of queries
// qi + 8u as one float4 and draws their mask with one Philox call:
//   P = exp(s·scale − lse), P̃ = mask ∘ P, dV += P̃ᵀ dctx, dS = P ∘ (mask ∘ dP / (1 − p) − D), dK += dSᵀ Q,
// and at the end dK ·= 1/sqrt(HD), dV ·= 1/(1 − p).
template <typename T, int kTile, int kHdp>
__global__ void __launch_bounds__(2 * kTile)
    attention_backward_dkdv_kernel(T* dqkv, const T* dctx, const float* lse, const float* dvec, const T* qkv,
                                   AttentionArgs args) {
  constexpr int kQueries = kTile / 8;  // queries per lane per query tile
  constexpr int ldt = transposed_t_ld<T>();
  const int hdp = kHdp > 0 ? kHdp : args.hdp;
  const RowHead<T> rh = row_head(qkv, args);
  const int b = rh.b, h = rh.h, first = rh.first, len = rh.len;
  const int k0 = blockIdx.x * kTile;
  if (k0 >= len) return;

  extern __shared__ __align__(128) unsigned char smem[];
  const DkdvSmem<T> plan(kTile, hdp);
  T* ks = reinterpret_cast<T*>(smem + plan.k);
  T* vs = reinterpret_cast<T*>(smem + plan.v);
  T* qs = reinterpret_cast<T*>(smem + plan.q);
  T* dos = reinterpret_cast<T*>(smem + plan.dout);
  float* lse_s = reinterpret_cast<float*>(smem + plan.lse);
  float* d_s = reinterpret_cast<float*>(smem + plan.d);
  float* ss = reinterpret_cast<float*>(smem + plan.s);
  T* ts = reinterpret_cast<T*>(smem + plan.t);
  float* dks = reinterpret_cast<float*>(smem + plan.dk);
  float* dvs = reinterpret_cast<float*>(smem + plan.dv);
  const int ld = operand_ld<T>(hdp), lda = acc_ld(hdp);

  const std::size_t stride = rh.stride, head_col = rh.head_col;
  const T *q_src = rh.q, *k_src = rh.k, *v_src = rh.v;
  const T* do_src = dctx + static_cast<std::size_t>(first) * args.hidden + head_col;
  const int nk = min(kTile, len - k0);
  load_tile(ks, ld, k_src + static_cast<std::size_t>(k0) * stride, stride, nk, kTile, args.head_dim, hdp, args.vec);
  load_tile(vs, ld, v_src + static_cast<std::size_t>(k0) * stride, stride, nk, kTile, args.head_dim, hdp, args.vec);
  zero_floats(dks, kTile * lda);
  zero_floats(dvs, kTile * lda);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int c = lane & 3, qi = lane >> 2;
  const T* k_w = ks + warp * 16 * ld;
  const T* v_w = vs + warp * 16 * ld;
  float* s_w = ss + warp * kTile * kTransposedLd;
  T* t_w = ts + warp * kTile * ldt;
  float* dk_w = dks + warp * 16 * lda;
  float* dv_w = dvs + warp * 16 * lda;
  const int j0 = k0 + warp * 16 + 4 * c;  // the first of this lane's four keys, within the row
  const int keys_left = len - j0;         // key j0 + t is valid iff t < keys_left
  const bool dropout_on = args.dropout.p > 0.0f;
  const std::size_t lse_row = static_cast<std::size_t>(h) * args.tokens + first;

  for (int q0 = 0; q0 < len; q0 += kTile) {
    const int nq = min(kTile, len - q0);
    __syncthreads();  // every warp is done with the previous Q, dctx, lse and D
    load_tile(qs, ld, q_src + static_cast<std::size_t>(q0) * stride, stride, nq, kTile, args.head_dim, hdp, args.vec);
    load_tile(dos, ld, do_src + static_cast<std::size_t>(q0) * args.hidden, args.hidden, nq, kTile, args.head_dim, hdp,
              args.vec);
    for (int e = threadIdx.x; e < kTile; e += blockDim.x) {
      lse_s[e] = e < nq ? lse[lse_row + q0 + e] : 0.0f;
      d_s[e] = e < nq ? dvec[lse_row + q0 + e] : 0.0f;
    }
    __syncthreads();

    warp_gemm_nt<true>(s_w, kTransposedLd, k_w, ld, qs, ld, kTile, hdp);  // Sᵀ, stored [query][key]
    __syncwarp();
    float p[kQueries][4];
    unsigned keep_bits = 0;
#pragma unroll
    for (int u = 0; u < kQueries; ++u) {
      const int q = qi + 8 * u;
      const bool query_valid = q < nq;
      const float4 sv = load4(s_w + q * kTransposedLd + 4 * c);
      const float s4[4] = {sv.x, sv.y, sv.z, sv.w};
      const unsigned keep =
          dropout_on && query_valid ? keep4(args.dropout, args.dropout.row_index(b, h, q0 + q) + j0) : 0xfu;
      keep_bits |= keep << (4 * u);
      const float row_lse = lse_s[q];
      float pd[4];
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        p[u][t] = query_valid && t < keys_left ? expf(s4[t] * args.scale - row_lse) : 0.0f;
        pd[t] = (keep >> t) & 1u ? p[u][t] : 0.0f;
      }
      store4(t_w + q * ldt + 4 * c, pd);
    }
    __syncwarp();
    warp_gemm_nn<true>(dv_w, lda, t_w, ldt, dos, ld, hdp, kTile);         // dV += P̃ᵀ dctx
    warp_gemm_nt<true>(s_w, kTransposedLd, v_w, ld, dos, ld, kTile, hdp);  // dPᵀ = V dctxᵀ, over Sᵀ (read above)
    __syncwarp();
#pragma unroll
    for (int u = 0; u < kQueries; ++u) {
      const int q = qi + 8 * u;
      const float4 gv = load4(s_w + q * kTransposedLd + 4 * c);
      const float g4[4] = {gv.x, gv.y, gv.z, gv.w};
      const float row_d = d_s[q];
      float ds[4];
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        float g = g4[t];
        if (dropout_on) g = (keep_bits >> (4 * u + t)) & 1u ? g * args.dropout.scale : 0.0f;
        ds[t] = p[u][t] * (g - row_d);
      }
      store4(t_w + q * ldt + 4 * c, ds);  // over P̃ᵀ, which the dV product above has consumed
    }
    __syncwarp();
    warp_gemm_nn<true>(dk_w, lda, t_w, ldt, qs, ld, hdp, kTile);  // dK += dSᵀ Q
  }
  __syncwarp();

  for (int rr = 0; rr < 16; ++rr) {
    const int jj = k0 + warp * 16 + rr;
    if (jj >= len) break;
    T* dk_dst = dqkv + static_cast<std::size_t>(first + jj) * stride + args.hidden + head_col;
    T* dv_dst = dk_dst + args.hidden;
    const float* dk_src = dk_w + rr * lda;
    const float* dv_src = dv_w + rr * lda;
    for (int d = lane; d < args.head_dim; d += 32) {
      cuda::store(dk_dst + d, dk_src[d] * args.scale);
      cuda::store(dv_dst + d, dv_src[d] * args.dropout.scale);
    }
  }
}

// dqkv's Q columns (=) for the block's queries. Grid (ceil(S / kTile), NH, B), 2·kTile threads; warp w owns queries
// q0 + 16w + [0, 16), lanes as in the forward. Per key tile: S = Q Kᵀ, P = exp(s·scale − lse) kept in registers,
// dP = dctx Vᵀ over S's tile, dS = P ∘ (mask ∘ dP / (1 − p) − D), dQ += dS K; at the end dQ ·= 1/sqrt(HD).
template <typename T, int kTile, int kHdp>
__global__ void __launch_bounds__(2 * kTile)
    attention_backward_dq_kernel(T* dqkv, const T* dctx, const float* lse, const float* dvec, const T* qkv,
                                 AttentionArgs args) {
  constexpr int kChunks = kTile / 8;
  constexpr int lds = score_ld(kTile);
  const int hdp = kHdp > 0 ? kHdp : args.hdp;
  const RowHead<T> rh = row_head(qkv, args);
  const int b = rh.b, h = rh.h, first = rh.first, len = rh.len;
  const int q0 = blockIdx.x * kTile;
  if (q0 >= len) return;

  extern __shared__ __align__(128) unsigned char smem[];
  const DqSmem<T> plan(kTile, hdp);
  T* qs = reinterpret_cast<T*>(smem + plan.q);
  T* dos = reinterpret_cast<T*>(smem + plan.dout);
  T* ks = reinterpret_cast<T*>(smem + plan.k);
  T* vs = reinterpret_cast<T*>(smem + plan.v);
  float* ss = reinterpret_cast<float*>(smem + plan.s);
  T* dss = reinterpret_cast<T*>(smem + plan.ds);
  float* accs = reinterpret_cast<float*>(smem + plan.acc);
  const int ld = operand_ld<T>(hdp), lda = acc_ld(hdp);

  const std::size_t stride = rh.stride, head_col = rh.head_col;
  const T *q_src = rh.q, *k_src = rh.k, *v_src = rh.v;
  const T* do_src = dctx + static_cast<std::size_t>(first) * args.hidden + head_col;
  const int nq = min(kTile, len - q0);
  load_tile(qs, ld, q_src + static_cast<std::size_t>(q0) * stride, stride, nq, kTile, args.head_dim, hdp, args.vec);
  load_tile(dos, ld, do_src + static_cast<std::size_t>(q0) * args.hidden, args.hidden, nq, kTile, args.head_dim, hdp,
            args.vec);
  zero_floats(accs, kTile * lda);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int r = lane >> 1, half = lane & 1;
  const T* q_w = qs + warp * 16 * ld;
  const T* do_w = dos + warp * 16 * ld;
  float* s_w = ss + warp * 16 * lds;
  T* ds_w = dss + warp * 16 * lds;
  float* acc_w = accs + warp * 16 * lda;
  const int i = q0 + warp * 16 + r;
  const bool row_valid = i < len;
  const std::size_t stat = static_cast<std::size_t>(h) * args.tokens + first + i;
  const float row_lse = row_valid ? lse[stat] : 0.0f;
  const float row_d = row_valid ? dvec[stat] : 0.0f;
  const bool drop = args.dropout.p > 0.0f && row_valid;
  const uint64_t drop_row = drop ? args.dropout.row_index(b, h, i) : 0;

  for (int k0 = 0; k0 < len; k0 += kTile) {
    const int nk = min(kTile, len - k0);
    __syncthreads();
    load_tile(ks, ld, k_src + static_cast<std::size_t>(k0) * stride, stride, nk, kTile, args.head_dim, hdp, args.vec);
    load_tile(vs, ld, v_src + static_cast<std::size_t>(k0) * stride, stride, nk, kTile, args.head_dim, hdp, args.vec);
    __syncthreads();

    warp_gemm_nt<false>(s_w, lds, q_w, ld, ks, ld, kTile, hdp);  // S = Q Kᵀ
    __syncwarp();
    float p[kChunks][4];
#pragma unroll
    for (int u = 0; u < kChunks; ++u) {
      const int c = 2 * u + half;
      const float4 sv = load4(s_w + r * lds + 4 * c);
      const float s4[4] = {sv.x, sv.y, sv.z, sv.w};
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        p[u][t] = row_valid && 4 * c + t < nk ? expf(s4[t] * args.scale - row_lse) : 0.0f;
      }
    }
    __syncwarp();                                                  // every lane has read S before dP overwrites it
    warp_gemm_nt<false>(s_w, lds, do_w, ld, vs, ld, kTile, hdp);  // dP = dctx Vᵀ
    __syncwarp();
#pragma unroll
    for (int u = 0; u < kChunks; ++u) {
      const int c = 2 * u + half;
      const float4 gv = load4(s_w + r * lds + 4 * c);
      const float g4[4] = {gv.x, gv.y, gv.z, gv.w};
      const unsigned keep = drop ? keep4(args.dropout, drop_row + static_cast<uint64_t>(k0 + 4 * c)) : 0xfu;
      float ds[4];
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        float g = g4[t];
        if (drop) g = (keep >> t) & 1u ? g * args.dropout.scale : 0.0f;
        ds[t] = p[u][t] * (g - row_d);
      }
      store4(ds_w + r * lds + 4 * c, ds);
    }
    __syncwarp();
    warp_gemm_nn<false>(acc_w, lda, ds_w, lds, ks, ld, hdp, kTile);  // dQ += dS K
  }
  __syncwarp();

  for (int rr = 0; rr < 16; ++rr) {
    const int ii = q0 + warp * 16 + rr;
    if (ii >= len) break;
    T* dst = dqkv + static_cast<std::size_t>(first + ii) * stride + head_col;
    const float* src = acc_w + rr * lda;
    for (int d = lane; d < args.head_dim; d += 32) cuda::store(dst + d, src[d] * args.scale);
  }
}

// ---- Host side ----------------------------------------------------------------------------------------------------

// Checks the arguments both directions share.
void check_shape(const char* what, int batch, int tokens, int longest, int heads, int head_dim, float dropout_p,
                 const DropoutLayout& layout) {
  BERTRAIN_CHECK(batch > 0 && heads > 0 && head_dim > 0 && longest > 0,
                 what << ": batch " << batch << ", heads " << heads << ", head_dim " << head_dim << ", longest "
                      << longest);
  BERTRAIN_CHECK(tokens >= batch && static_cast<long long>(tokens) <= static_cast<long long>(batch) * longest,
                 what << ": " << tokens << " tokens in " << batch << " rows of at most " << longest);
  // Grid y and z are NH and B; the qkv row 3H and the D grid must fit in int.
  BERTRAIN_CHECK(batch <= 65535 && heads <= 65535,
                 what << ": batch " << batch << " and heads " << heads << " must be at most 65535 (grid limits)");
  BERTRAIN_CHECK(3LL * heads * head_dim <= INT_MAX && static_cast<long long>(tokens) * heads <= INT_MAX,
                 what << ": " << tokens << " tokens × " << heads << " heads × " << head_dim << " too large");
  BERTRAIN_CHECK(dropout_p >= 0.0f && dropout_p < 1.0f,
                 what << ": attention dropout must be in [0, 1), got " << dropout_p);
  BERTRAIN_CHECK(dropout_p == 0.0f || layout.first_sample >= 0,
                 what << ": dropout layout first_sample " << layout.first_sample);
}

// True when the byte ranges [a, a + a_bytes) and [b, b + b_bytes) share a byte.
bool overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto a0 = reinterpret_cast<std::uintptr_t>(a), b0 = reinterpret_cast<std::uintptr_t>(b);
  return a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

struct Named {
  const char* name;
  const void* p;
  std::size_t bytes;
};

// Throws naming the pair when an output overlaps an input or another output.
void check_no_overlap(const char* what, std::initializer_list<Named> outputs, std::initializer_list<Named> inputs) {
  for (auto o = outputs.begin(); o != outputs.end(); ++o) {
    for (auto other = o + 1; other != outputs.end(); ++other) {
      BERTRAIN_CHECK(!overlap(o->p, o->bytes, other->p, other->bytes),
                     what << ": " << o->name << " and " << other->name << " overlap");
    }
    for (const Named& in : inputs) {
      BERTRAIN_CHECK(!overlap(o->p, o->bytes, in.p, in.bytes), what << ": " << o->name << " overlaps " << in.name);
    }
  }
}

AttentionDropout make_dropout(float p, const RandomKey& key, const DropoutLayout& layout, int longest, int heads) {
  AttentionDropout d;
  d.p = p;
  d.scale = p > 0.0f ? 1.0f / (1.0f - p) : 1.0f;
  d.key = key;
  d.first_sample = static_cast<uint64_t>(std::max<int64_t>(layout.first_sample, 0));
  d.positions = static_cast<uint64_t>(std::max(layout.max_positions, longest));
  d.heads = heads;
  return d;
}

// 16-byte tile loads when every row of every tensor read starts 16-byte aligned: HD (hence H and 3H) a multiple of
// 16 / sizeof(T) elements and each base pointer aligned.
template <typename T>
bool vectorizable(int head_dim, std::initializer_list<const void*> pointers) {
  if (head_dim % (16 / static_cast<int>(sizeof(T))) != 0) return false;
  for (const void* p : pointers) {
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

// The preferred tile for a padded head dim (shared memory grows with tile·HDP), shrunk until the kernel's
// shared memory fits the device; 0 when not even 16 fits.
template <template <typename> class Smem, typename T>
int choose_tile(int hdp, const DeviceFacts& dev) {
  for (int tile = hdp <= 64 ? 64 : hdp <= 128 ? 32 : 16; tile >= 16; tile /= 2) {
    if (Smem<T>(tile, hdp).bytes <= static_cast<std::size_t>(dev.max_smem)) return tile;
  }
  return 0;
}

template <template <typename> class Smem, typename T>
int checked_tile(const char* what, int head_dim, int hdp, const DeviceFacts& dev) {
  if (std::is_same<T, bf16>::value) {
    BERTRAIN_CHECK(dev.major >= 8, what << ": bf16 tensor-core tiles need compute capability 8.0 or newer (device "
                                        << dev.device << " is " << dev.major << ".x)");
  }
  const int tile = choose_tile<Smem, T>(hdp, dev);
  BERTRAIN_CHECK(tile > 0, what << ": head_dim " << head_dim << " needs " << Smem<T>(16, hdp).bytes
                                << " bytes of shared memory per block even with 16-token tiles; device " << dev.device
                                << " allows " << dev.max_smem);
  return tile;
}

template <typename T, int kTile, int kHdp>
void launch_forward_tile(T* ctx, float* lse, const T* qkv, const AttentionArgs& args, int batch, int longest,
                         const DeviceFacts& dev, CudaStream stream) {
  const std::size_t bytes = ForwardSmem<T>(kTile, args.hdp).bytes;
  allow_shared_memory(attention_forward_kernel<T, kTile, kHdp>, bytes, dev);
  const dim3 grid(static_cast<unsigned>((longest + kTile - 1) / kTile), static_cast<unsigned>(args.heads),
                  static_cast<unsigned>(batch));
  attention_forward_kernel<T, kTile, kHdp><<<grid, 2 * kTile, bytes, stream>>>(ctx, lse, qkv, args);
  BERTRAIN_CUDA_CHECK_LAUNCH("attention_forward_kernel");
}

template <typename T, int kTile, int kHdp>
void launch_backward_tile_dkdv(T* dqkv, const T* dctx, const float* lse, const float* dvec, const T* qkv,
                               const AttentionArgs& args, int batch, int longest, const DeviceFacts& dev,
                               CudaStream stream) {
  const std::size_t bytes = DkdvSmem<T>(kTile, args.hdp).bytes;
  allow_shared_memory(attention_backward_dkdv_kernel<T, kTile, kHdp>, bytes, dev);
  const dim3 grid(static_cast<unsigned>((longest + kTile - 1) / kTile), static_cast<unsigned>(args.heads),
                  static_cast<unsigned>(batch));
  attention_backward_dkdv_kernel<T, kTile, kHdp><<<grid, 2 * kTile, bytes, stream>>>(dqkv, dctx, lse, dvec, qkv, args);
  BERTRAIN_CUDA_CHECK_LAUNCH("attention_backward_dkdv_kernel");
}

template <typename T, int kTile, int kHdp>
void launch_backward_tile_dq(T* dqkv, const T* dctx, const float* lse, const float* dvec, const T* qkv,
                             const AttentionArgs& args, int batch, int longest, const DeviceFacts& dev,
                             CudaStream stream) {
  const std::size_t bytes = DqSmem<T>(kTile, args.hdp).bytes;
  allow_shared_memory(attention_backward_dq_kernel<T, kTile, kHdp>, bytes, dev);
  const dim3 grid(static_cast<unsigned>((longest + kTile - 1) / kTile), static_cast<unsigned>(args.heads),
                  static_cast<unsigned>(batch));
  attention_backward_dq_kernel<T, kTile, kHdp><<<grid, 2 * kTile, bytes, stream>>>(dqkv, dctx, lse, dvec, qkv, args);
  BERTRAIN_CUDA_CHECK_LAUNCH("attention_backward_dq_kernel");
}

AttentionArgs make_args(const int32_t* cu_seqlens, int tokens, int heads, int head_dim, float dropout_p,
                        const RandomKey& key, const DropoutLayout& layout, int longest, bool vec) {
  AttentionArgs a;
  a.cu_seqlens = cu_seqlens;
  a.tokens = tokens;
  a.heads = heads;
  a.head_dim = head_dim;
  a.hidden = heads * head_dim;
  a.hdp = padded_head_dim(head_dim);
  // The CPU's T(1) / std::sqrt(T(HD)) for T = float.
  a.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  a.dropout = make_dropout(dropout_p, key, layout, longest, heads);
  a.longest = longest;
  a.vec = vec;
  return a;
}

// Bytes of a kept dropout mask for the overlap checks: none when there is no buffer.
std::size_t kept_mask_bytes(const uint32_t* mask, int tokens, int heads, int longest) {
  return mask != nullptr ? attention_dropout_mask_words_cuda(tokens, heads, longest) * sizeof(uint32_t) : 0;
}

}  // namespace

std::size_t attention_workspace_floats_cuda(int tokens, int heads, int longest) {
  BERTRAIN_CHECK(tokens > 0 && heads > 0 && longest > 0,
                 "attention_workspace_floats_cuda: tokens " << tokens << ", heads " << heads << ", longest " << longest);
  const std::size_t pairs = static_cast<std::size_t>(tokens) * static_cast<std::size_t>(heads);  // NH·T
  static_assert(sizeof(uint32_t) == sizeof(float), "a mask word takes one float of the workspace");
  return pairs + attention_dropout_mask_words_cuda(tokens, heads, longest);
}

std::size_t attention_dropout_mask_words_cuda(int tokens, int heads, int longest) {
  BERTRAIN_CHECK(tokens > 0 && heads > 0 && longest > 0, "attention_dropout_mask_words_cuda: tokens "
                                                             << tokens << ", heads " << heads << ", longest " << longest);
  return static_cast<std::size_t>(tokens) * static_cast<std::size_t>(heads) *
         static_cast<std::size_t>(dropout_mask_words(longest));
}

template <typename T>
void attention_forward_cuda(T* ctx, float* lse, const T* qkv, const int32_t* cu_seqlens, int batch, int tokens,
                            int longest, int heads, int head_dim, float dropout_p, const RandomKey& key,
                            const DropoutLayout& layout, CudaStream stream, uint32_t* dropout_mask) {
  const char* what = "attention_forward_cuda";
  check_shape(what, batch, tokens, longest, heads, head_dim, dropout_p, layout);
  BERTRAIN_CHECK(ctx != nullptr && lse != nullptr && qkv != nullptr && cu_seqlens != nullptr,
                 what << ": null pointer argument");
  const std::size_t n = static_cast<std::size_t>(tokens) * heads * head_dim;  // T·H
  const std::size_t nl = static_cast<std::size_t>(tokens) * heads;            // NH·T
  check_no_overlap(what,
                   {{"ctx", ctx, n * sizeof(T)},
                    {"lse", lse, nl * sizeof(float)},
                    {"dropout_mask", dropout_mask, kept_mask_bytes(dropout_mask, tokens, heads, longest)}},
                   {{"qkv", qkv, 3 * n * sizeof(T)}});

  const DeviceFacts dev = current_device_facts();
  const int hdp = padded_head_dim(head_dim);
  const int tile = checked_tile<ForwardSmem, T>(what, head_dim, hdp, dev);
  const AttentionArgs args = make_args(cu_seqlens, tokens, heads, head_dim, dropout_p, key, layout, longest,
                                       vectorizable<T>(head_dim, {qkv}));
  if constexpr (std::is_same<T, bf16>::value) {
    if (tensor_core_attention_applies(head_dim, args.vec, dev)) {
      if (pair_stores_aligned(ctx)) {
        attention_forward_mma(ctx, lse, dropout_mask, qkv, args, batch, longest, dev, stream);
        return;
      }
      // The general kernels write this ctx, and leave a mask buffer alone; the backward decides from its own
      // pointers and may still take the tensor-core kernels, which would read the buffer: it gets the mask here.
      if (dropout_mask != nullptr && dropout_p > 0.0f) {
        attention_dropout_mask_mma(dropout_mask, args, batch, longest, stream);
      }
    }
  }
  if (tile == 64 && hdp == kFastHeadDim) {
    launch_forward_tile<T, 64, kFastHeadDim>(ctx, lse, qkv, args, batch, longest, dev, stream);
  } else if (tile == 64) {
    launch_forward_tile<T, 64, 0>(ctx, lse, qkv, args, batch, longest, dev, stream);
  } else if (tile == 32) {
    launch_forward_tile<T, 32, 0>(ctx, lse, qkv, args, batch, longest, dev, stream);
  } else {
    launch_forward_tile<T, 16, 0>(ctx, lse, qkv, args, batch, longest, dev, stream);
  }
}

template <typename T>
void attention_backward_cuda(T* dqkv, const T* dctx, const T* ctx, const float* lse, const T* qkv,
                             const int32_t* cu_seqlens, int batch, int tokens, int longest, int heads, int head_dim,
                             float dropout_p, const RandomKey& key, const DropoutLayout& layout, float* workspace,
                             CudaStream stream, const uint32_t* dropout_mask) {
  const char* what = "attention_backward_cuda";
  check_shape(what, batch, tokens, longest, heads, head_dim, dropout_p, layout);
  BERTRAIN_CHECK(dqkv != nullptr && dctx != nullptr && ctx != nullptr && lse != nullptr && qkv != nullptr &&
                     cu_seqlens != nullptr && workspace != nullptr,
                 what << ": null pointer argument");
  const std::size_t n = static_cast<std::size_t>(tokens) * heads * head_dim;  // T·H
  const std::size_t nl = static_cast<std::size_t>(tokens) * heads;            // NH·T
  // The dK/dV kernel writes dqkv while the dQ kernel, later, still reads qkv, dctx, lse and D: no aliasing at all.
  const std::size_t workspace_bytes = attention_workspace_floats_cuda(tokens, heads, longest) * sizeof(float);
  check_no_overlap(what, {{"dqkv", dqkv, 3 * n * sizeof(T)}, {"workspace", workspace, workspace_bytes}},
                   {{"dctx", dctx, n * sizeof(T)},
                    {"ctx", ctx, n * sizeof(T)},
                    {"lse", lse, nl * sizeof(float)},
                    {"qkv", qkv, 3 * n * sizeof(T)},
                    {"dropout_mask", dropout_mask, kept_mask_bytes(dropout_mask, tokens, heads, longest)}});

  const DeviceFacts dev = current_device_facts();
  const int hdp = padded_head_dim(head_dim);
  const int tile_dkdv = checked_tile<DkdvSmem, T>(what, head_dim, hdp, dev);
  const int tile_dq = checked_tile<DqSmem, T>(what, head_dim, hdp, dev);
  const AttentionArgs args = make_args(cu_seqlens, tokens, heads, head_dim, dropout_p, key, layout, longest,
                                       vectorizable<T>(head_dim, {qkv, dctx}));

  // D = rowsum(dctx ∘ ctx) into the workspace [NH, T].
  const int group = head_dim % cuda::kPack<T> == 0 ? head_dim / cuda::kPack<T> : 0;  // lanes per (token, head)
  if (group > 0 && group <= 32 && (group & (group - 1)) == 0 && cuda::aligned16(dctx, ctx)) {
    const std::size_t d_blocks = (nl * static_cast<std::size_t>(group) + kDThreads - 1) / kDThreads;
    attention_backward_d_packed_kernel<T>
        <<<static_cast<unsigned>(d_blocks), kDThreads, 0, stream>>>(workspace, dctx, ctx, tokens, heads, group);
    BERTRAIN_CUDA_CHECK_LAUNCH("attention_backward_d_packed_kernel");
  } else {
    const std::size_t d_blocks = (nl + kDThreads / 32 - 1) / (kDThreads / 32);
    attention_backward_d_kernel<T>
        <<<static_cast<unsigned>(d_blocks), kDThreads, 0, stream>>>(workspace, dctx, ctx, tokens, heads, head_dim);
    BERTRAIN_CUDA_CHECK_LAUNCH("attention_backward_d_kernel");
  }

  if constexpr (std::is_same<T, bf16>::value) {
    // A dqkv not 4-byte aligned takes the general kernels below, which draw the mask themselves: the forward's bits.
    if (tensor_core_attention_applies(head_dim, args.vec, dev) && pair_stores_aligned(dqkv)) {
      attention_backward_mma(dqkv, dctx, lse, workspace, dropout_mask, reinterpret_cast<uint32_t*>(workspace + nl), qkv,
                             args, batch, longest, dev, stream);
      return;
    }
  }

  if (tile_dkdv == 64 && hdp == kFastHeadDim) {
    launch_backward_tile_dkdv<T, 64, kFastHeadDim>(dqkv, dctx, lse, workspace, qkv, args, batch, longest, dev, stream);
  } else if (tile_dkdv == 64) {
    launch_backward_tile_dkdv<T, 64, 0>(dqkv, dctx, lse, workspace, qkv, args, batch, longest, dev, stream);
  } else if (tile_dkdv == 32) {
    launch_backward_tile_dkdv<T, 32, 0>(dqkv, dctx, lse, workspace, qkv, args, batch, longest, dev, stream);
  } else {
    launch_backward_tile_dkdv<T, 16, 0>(dqkv, dctx, lse, workspace, qkv, args, batch, longest, dev, stream);
  }

  if (tile_dq == 64 && hdp == kFastHeadDim) {
    launch_backward_tile_dq<T, 64, kFastHeadDim>(dqkv, dctx, lse, workspace, qkv, args, batch, longest, dev, stream);
  } else if (tile_dq == 64) {
    launch_backward_tile_dq<T, 64, 0>(dqkv, dctx, lse, workspace, qkv, args, batch, longest, dev, stream);
  } else if (tile_dq == 32) {
    launch_backward_tile_dq<T, 32, 0>(dqkv, dctx, lse, workspace, qkv, args, batch, longest, dev, stream);
  } else {
    launch_backward_tile_dq<T, 16, 0>(dqkv, dctx, lse, workspace, qkv, args, batch, longest, dev, stream);
  }
}

template void attention_forward_cuda<float>(float*, float*, const float*, const int32_t*, int, int, int, int, int,
                                            float, const RandomKey&, const DropoutLayout&, CudaStream, uint32_t*);
template void attention_forward_cuda<bf16>(bf16*, float*, const bf16*, const int32_t*, int, int, int, int, int, float,
                                           const RandomKey&, const DropoutLayout&, CudaStream, uint32_t*);
template void attention_backward_cuda<float>(float*, const float*, const float*, const float*, const float*,
                                             const int32_t*, int, int, int, int, int, float, const RandomKey&,
                                             const DropoutLayout&, float*, CudaStream, const uint32_t*);
template void attention_backward_cuda<bf16>(bf16*, const bf16*, const bf16*, const float*, const bf16*,
                                            const int32_t*, int, int, int, int, int, float, const RandomKey&,
                                            const DropoutLayout&, float*, CudaStream, const uint32_t*);

}  // namespace bertrain

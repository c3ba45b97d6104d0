// What the fused attention kernels share (kernels/cuda/attention.cu, the general kernels, and
// kernels/cuda/attention_mma.cu, the tensor-core kernels of head dim 64): their arguments, where a block's row and
// head lie in the packed tensors, and the dropout mask (kernels/attention.h: the indices). Included by those two only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "kernels/attention.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/device_facts.cuh"

namespace bertrain {
namespace cuda_attention {

// ---- Dropout ----------------------------------------------------------------------------------------------------

// What the kernels need to draw the mask: probability (i, j) of block (b, h) has logical index
// row_index(b, h, i) + j = (((first_sample + b)·NH + h)·P + i)·P + j (kernels/attention.h).
struct AttentionDropout {
  float p = 0.0f;      // 0: no dropout, and no Philox call at all
  float scale = 1.0f;  // 1 / (1 − p) in float (the CPU's dropout_span<float>); 1 when p == 0
  RandomKey key;
  uint64_t first_sample = 0;
  uint64_t positions = 1;  // P = max(max_positions, S)
  int heads = 1;
  __device__ __forceinline__ uint64_t row_index(int b, int h, int i) const {
    return (((first_sample + static_cast<uint64_t>(b)) * static_cast<uint64_t>(heads) + static_cast<uint64_t>(h)) *
                positions +
            static_cast<uint64_t>(i)) *
           positions;
  }
};

// Bit t set when the element with logical index idx + t is kept (t < 4): one Philox group when idx is a multiple of 4
// (always, when P and the tile offsets are multiples of 4), else the two groups the four indices straddle.
__device__ __forceinline__ unsigned keep4(const AttentionDropout& d, uint64_t idx) {
  const uint64_t group = idx >> 2;
  const unsigned offset = static_cast<unsigned>(idx & 3u);
  const Philox4 a = philox_group(d.key, group);
  uint32_t w0 = a.v[0], w1 = a.v[1], w2 = a.v[2], w3 = a.v[3];
  if (offset != 0) {
    const Philox4 n = philox_group(d.key, group + 1);
    // Draws 4·group + [offset, offset + 4): the tail of a, then the head of n (selects, not a dynamic index, so that
    // nothing goes to local memory).
    w0 = offset == 1 ? a.v[1] : offset == 2 ? a.v[2] : a.v[3];
    w1 = offset == 1 ? a.v[2] : offset == 2 ? a.v[3] : n.v[0];
    w2 = offset == 1 ? a.v[3] : offset == 2 ? n.v[0] : n.v[1];
    w3 = offset == 1 ? n.v[0] : offset == 2 ? n.v[1] : n.v[2];
  }
  return (uniform_from_bits(w0) >= d.p ? 1u : 0u) | (uniform_from_bits(w1) >= d.p ? 2u : 0u) |
         (uniform_from_bits(w2) >= d.p ? 4u : 0u) | (uniform_from_bits(w3) >= d.p ? 8u : 0u);
}

// Arguments every fused kernel shares. cu_seqlens: device [B + 1]; tokens T; hidden H = NH·HD; hdp = HDP (ignored
// by the kernels compiled for a fixed head dim); scale = 1 / sqrt(HD); vec: 16-byte tile loads allowed.
struct AttentionArgs {
  const int32_t* cu_seqlens;
  int tokens, heads, head_dim, hidden, hdp;
  int longest;  // S: the longest row (sizes the dropout mask words)
  float scale;
  AttentionDropout dropout;
  bool vec;
};

// Block (x, h, b)'s row and head in the packed tensors: the row's first token and length, and the head's columns
// of the row's first token in qkv (q; k and v follow at + H and + 2H, every token 3H further) and in a [T, H] tensor
// such as dctx.
template <typename T>
struct RowHead {
  int b, h, first, len;
  std::size_t stride;  // 3H: one token's qkv row
  const T *q, *k, *v;
  std::size_t head_col;  // h · HD: the head's first column in a [T, H] tensor
};

template <typename T>
__device__ __forceinline__ RowHead<T> row_head(const T* qkv, const AttentionArgs& args) {
  RowHead<T> r;
  r.b = blockIdx.z;
  r.h = blockIdx.y;
  r.first = args.cu_seqlens[r.b];
  r.len = args.cu_seqlens[r.b + 1] - r.first;
  r.stride = 3 * static_cast<std::size_t>(args.hidden);
  r.head_col = static_cast<std::size_t>(r.h) * args.head_dim;
  r.q = qkv + static_cast<std::size_t>(r.first) * r.stride + r.head_col;
  r.k = r.q + args.hidden;
  r.v = r.q + 2 * static_cast<std::size_t>(args.hidden);
  return r;
}

// 32-bit words of one (head, query)'s dropout mask over rows of at most `longest` keys: bit u of word c is key 32c + u.
__host__ __device__ constexpr int dropout_mask_words(int longest) { return (longest + 31) / 32; }

// ---- Host side ----------------------------------------------------------------------------------------------------

using cuda::allow_shared_memory;
using cuda::current_device_facts;
using cuda::DeviceFacts;

}  // namespace cuda_attention
}  // namespace bertrain

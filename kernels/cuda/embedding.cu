// CUDA BERT input embeddings (kernels/embedding.h): the forward sum word + position + type, and a backward that is
// deterministic without float atomics and parallel over every table row, however many tokens share it.
//
// Backward as segmented sums. Each token t contributes its dout row to three table rows, named by one key each:
// ids[t] (dword), vocab + positions[t] (dpos) and vocab + max_pos + type (dtype); a padding row's key is the
// skip key, which sorts last and is never written. The 3T (key, token) pairs are radix-sorted by key (CUB, stable:
// within a key, tokens ascend), so every table row is a segment of consecutive sorted entries in token order: the
// CPU twin's order (kernels/cpu/embedding.cpp). A
// segment is cut into chunks of kEmbeddingGradientChunk (K) entries counted from its start. The sorted entries are
// cut into tiles of K; the block of tile j sums, column by column and in entry order, every chunk that starts in
// tile j (at most K + K - 1 entries, its window). A chunk that is its segment's only one is stored straight into
// the table row, so a row of at most K tokens is the CPU's sum bit for bit (the same float additions from +0 in
// the same order). Otherwise the chunk is stored as a partial row of tile j: slot 1 for a segment's first chunk,
// slot 0 for a later one; a segment's chunk i starts in tile j + i, so its partials are slot 1 of tile j and slot
// 0 of tiles j + 1 .. j + m - 1. A second kernel adds them for each long segment in a fixed order (8 warps over
// contiguous runs of chunks, then the 8 sums in warp order): the same result on every run and device, within fp32
// summation-order rounding of the CPU's sequential sum. Tables rows no token uses are zeroed first.
#include "kernels/embedding.h"

#include <cub/device/device_radix_sort.cuh>

#include <climits>
#include <cstdint>

#include "core/error.h"
#include "kernels/cuda/common.cuh"

namespace bertrain {

namespace {

constexpr int kMaxThreads = 256;
constexpr std::size_t kScratchAlign = 256;
constexpr int kChunk = kEmbeddingGradientChunk;  // K: entries per tile and per chunk
// Rows loaded before they are added (in order): independent loads in flight hide memory latency without changing
// the order of the additions.
constexpr int kRowBatch = 8;
constexpr int kCombineWarps = 8;    // warps of a combine block, each adding a contiguous run of a segment's chunks
constexpr int kCombineColumns = 128;  // columns of a combine block: 4 per lane

// Threads over H: a multiple of 32, at most kMaxThreads; columns beyond blockDim.x are looped over.
int threads_for(int hidden) { return hidden >= kMaxThreads ? kMaxThreads : ((hidden + 31) / 32) * 32; }

std::size_t align_up(std::size_t bytes) { return (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign; }

// Bits of the largest key, `keys` - 1 (at least 1: CUB takes a copy path for an empty bit range).
int key_bits(uint32_t keys) {
  int bits = 0;
  for (uint32_t v = keys - 1; v != 0; v >>= 1) ++bits;
  return bits > 0 ? bits : 1;
}

// CUB's temporary storage for sorting `n` (key, value) pairs on bits [0, end_bit) of the key. Needs the CUDA
// runtime (it reads the device's architecture) but no device memory. The size is non-decreasing in n and in end_bit
// (dispatch_radix_sort.cuh), so a query at (n, 32) covers any smaller call.
std::size_t sort_temp_bytes(int n, int end_bit) {
  std::size_t bytes = 0;
  BERTRAIN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const uint32_t*>(nullptr),
                                                      static_cast<uint32_t*>(nullptr),
                                                      static_cast<const int32_t*>(nullptr),
                                                      static_cast<int32_t*>(nullptr), n, 0, end_bit));
  return bytes;
}

// Sorted entries of `tokens` tokens (three per token) and their tiles.
int entries_for(int tokens) { return 3 * tokens; }
int tiles_for(int entries) { return (entries + kChunk - 1) / kChunk; }

// The scratch of embedding_backward_cuda after up to kScratchAlign bytes of slack that align its start, in this
// order, each part kScratchAlign-aligned.
struct BackwardScratch {
  uint32_t* keys;         // [3T] keys in: ids, then vocab + position, then vocab + max_pos + type
  uint32_t* sorted_keys;  // [3T] keys out, ascending
  int32_t* tokens;        // [3T] values in: 0 .. T-1, three times
  int32_t* sorted_tokens;  // [3T] values out: tokens in ascending (key, token) order
  int32_t* long_start;    // [tiles] start of the multi-chunk segment whose first chunk starts in the tile, or -1
  float* partial;         // [tiles, 2, H] chunk sums of multi-chunk segments (slot 0 later chunk, slot 1 first)
  void* sort_temp;        // CUB temporary storage
};

std::size_t fixed_scratch_bytes(int tokens, int hidden) {
  const std::size_t entries = static_cast<std::size_t>(entries_for(tokens));
  const std::size_t tiles = static_cast<std::size_t>(tiles_for(entries_for(tokens)));
  return 4 * align_up(entries * sizeof(int32_t)) + align_up(tiles * sizeof(int32_t)) +
         align_up(2 * tiles * static_cast<std::size_t>(hidden) * sizeof(float));
}

constexpr int kPositionThreads = 128;

// embedding_positions_cpu for row b = blockIdx.x. With a padding_idx the row is walked in chunks of the block's
// width: each token counts the tokens before it in the chunk that are not padding (its warp's by ballot, earlier
// warps' from shared memory) and adds the count of the chunks before.
__global__ void __launch_bounds__(kPositionThreads)
    embedding_positions_kernel(int32_t* positions, const int32_t* ids, const int32_t* cu_seqlens, int padding_idx) {
  const int begin = cu_seqlens[blockIdx.x], end = cu_seqlens[blockIdx.x + 1];
  if (padding_idx < 0) {
    for (int t = begin + static_cast<int>(threadIdx.x); t < end; t += blockDim.x) positions[t] = t - begin;
    return;
  }
  __shared__ int warp_real[kPositionThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int before_chunk = 0;  // tokens of the row before this chunk that are not padding
  for (int chunk = begin; chunk < end; chunk += kPositionThreads) {  // the same trip count for every thread
    const int t = chunk + static_cast<int>(threadIdx.x);
    const bool real = t < end && ids[t] != padding_idx;
    const unsigned ballot = __ballot_sync(0xffffffffu, real);
    if (lane == 0) warp_real[warp] = __popc(ballot);
    __syncthreads();
    int before = before_chunk + __popc(ballot & ((1u << lane) - 1u));
    for (int w = 0; w < warp; ++w) before += warp_real[w];
    for (int w = 0; w < kPositionThreads / 32; ++w) before_chunk += warp_real[w];
    if (t < end) positions[t] = real ? padding_idx + 1 + before : padding_idx;
    __syncthreads();  // every warp has read warp_real before the next chunk writes it
  }
}

// out[t, :] (=) word[ids[t], :] + pos[positions[t], :] + type[token_types[t] (0 when null), :], added in that
// order in float and stored as T. One block per token t (grid T), threads over the H columns.
template <typename T>
__global__ void embedding_forward_kernel(T* out, const int32_t* ids, const int32_t* positions,
                                         const int32_t* token_types, const T* word, const T* pos, const T* type,
                                         int hidden) {
  const int t = blockIdx.x;
  const T* w = word + static_cast<std::size_t>(ids[t]) * hidden;
  const T* p = pos + static_cast<std::size_t>(positions[t]) * hidden;
  T* o = out + static_cast<std::size_t>(t) * hidden;
  if (type == nullptr) {  // no token-type table (DistilBERT)
    for (int c = threadIdx.x; c < hidden; c += blockDim.x) cuda::store(o + c, __fadd_rn(cuda::load(w + c), cuda::load(p + c)));
    return;
  }
  const T* ty = type + static_cast<std::size_t>(token_types != nullptr ? token_types[t] : 0) * hidden;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
    const float sum = __fadd_rn(__fadd_rn(cuda::load(w + c), cuda::load(p + c)), cuda::load(ty + c));
    cuda::store(o + c, sum);
  }
}

// The three tables' gradients and how keys name their rows: key k < vocab is dword row k, k < vocab + max_pos dpos
// row k - vocab, k < skip dtype row k - vocab - max_pos; skip (= vocab + max_pos + type_vocab) marks an input
// outside its table (a broken precondition: never written).
struct Tables {
  float* dword;
  float* dpos;
  float* dtype;
  int hidden, vocab, max_pos;
  uint32_t skip;
  __device__ float* row(uint32_t key) const {
    const std::size_t h = static_cast<std::size_t>(hidden);
    if (key < static_cast<uint32_t>(vocab)) return dword + key * h;
    key -= static_cast<uint32_t>(vocab);
    if (key < static_cast<uint32_t>(max_pos)) return dpos + key * h;
    return dtype + (key - static_cast<uint32_t>(max_pos)) * h;
  }
};

// keys[t], keys[T + t], keys[2T + t] (=) the word, position and type keys of token t (Tables), tokens[...] (=) t;
// with no type table (type_vocab 0) every type key is skip, and so are the padding rows' keys (no gradient).
// Grid-stride, one thread per token.
__global__ void embedding_keys_kernel(uint32_t* keys, int32_t* tokens_out, const int32_t* ids,
                                      const int32_t* positions, const int32_t* token_types, int tokens, int vocab,
                                      int max_pos, int type_vocab, int word_padding_idx, int position_padding_idx) {
  const uint32_t skip = static_cast<uint32_t>(vocab + max_pos + type_vocab);
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < tokens; t += gridDim.x * blockDim.x) {
    const int id = ids[t], position = positions[t];
    const int type = token_types != nullptr ? token_types[t] : 0;
    keys[t] = id >= 0 && id < vocab && id != word_padding_idx ? static_cast<uint32_t>(id) : skip;
    keys[tokens + t] = position >= 0 && position < max_pos && position != position_padding_idx
                           ? static_cast<uint32_t>(vocab + position)
                           : skip;
    keys[2 * tokens + t] = type >= 0 && type < type_vocab ? static_cast<uint32_t>(vocab + max_pos + type) : skip;
    tokens_out[t] = tokens_out[tokens + t] = tokens_out[2 * tokens + t] = t;
  }
}

// The first index in [lo, hi] whose key is >= target (keys ascending; key[hi] >= target is known, or hi is the
// end), found by one warp probing 32 points per step. Every lane returns it.
__device__ int warp_lower_bound(const uint32_t* keys, int lo, int hi, uint32_t target) {
  const int lane = threadIdx.x & 31;
  while (lo < hi) {
    const int step = (hi - lo + 31) / 32;
    const int probe = lo + lane * step;
    const bool below = probe < hi && keys[probe] < target;
    const unsigned mask = __ballot_sync(0xffffffffu, below);
    const int count = __popc(mask);  // the probes below target are a prefix (keys ascend)
    if (count == 0) return lo;
    const int last = lo + (count - 1) * step;
    const int next = lo + count * step;
    lo = last + 1;
    hi = next < hi ? next : hi;
  }
  return lo;
}

// V consecutive dout values at p as float (V == 4: one 16-byte float load, or 8 bytes of bf16).
template <int V>
__device__ __forceinline__ void load_row(const float* p, float (&v)[V]) {
  if constexpr (V == 4) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
    v[0] = *p;
  }
}
template <int V>
__device__ __forceinline__ void load_row(const bf16* p, float (&v)[V]) {
  if constexpr (V == 4) {
    const uint2 q = *reinterpret_cast<const uint2*>(p);
    v[0] = __uint_as_float(q.x << 16), v[1] = __uint_as_float(q.x & 0xffff0000u);
    v[2] = __uint_as_float(q.y << 16), v[3] = __uint_as_float(q.y & 0xffff0000u);
  } else {
    v[0] = cuda::load(p);
  }
}
template <int V>
__device__ __forceinline__ void store_row(float* p, const float (&v)[V]) {
  if constexpr (V == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    *p = v[0];
  }
}

// Where a chunk's sum goes (kept per chunk-end entry): a table row (the key, >= 0) or a partial slot of the tile.
constexpr int kToSlot0 = -1, kToSlot1 = -2, kToNowhere = -3;

// The chunk sums of tile blockIdx.x (see the top of this file). Threads over columns, V at a time (V = 4 when H % 4
// == 0 and the pointers allow 16-byte float / 8-byte bf16 accesses). long_start[tile] (=) the start of the
// multi-chunk segment whose first chunk starts in this tile, or -1.
template <typename T, int V>
__global__ void __launch_bounds__(kMaxThreads)
    embedding_backward_chunks_kernel(Tables tables, float* partial, int32_t* long_start, const T* dout,
                                     const uint32_t* sorted_keys, const int32_t* sorted_tokens, int entries) {
  __shared__ uint32_t key[2 * kChunk];
  __shared__ int32_t token[2 * kChunk];
  __shared__ int32_t target[2 * kChunk];  // for chunk-end entries: a table row's key or kTo*; else unused
  __shared__ unsigned char chunk_end[2 * kChunk];
  __shared__ int segment_start0, first_owned, end_owned, long_segment;

  const int tile = blockIdx.x;
  const int t0 = tile * kChunk;
  const int t1 = min(entries, t0 + kChunk);
  const int window = min(2 * kChunk, entries - t0);
  for (int i = threadIdx.x; i < window; i += blockDim.x) {
    key[i] = sorted_keys[t0 + i];
    token[i] = sorted_tokens[t0 + i];
  }
  if (threadIdx.x == 0) {
    first_owned = 2 * kChunk;
    end_owned = 0;
    long_segment = -1;
  }
  // The start of the segment holding entry t0: t0 itself, or (when it continues from the tile before) found by
  // warp 0's search over the entries before.
  if (threadIdx.x < 32) {
    const uint32_t k0 = sorted_keys[t0];
    const bool continues = t0 > 0 && sorted_keys[t0 - 1] == k0;
    const int start = continues ? warp_lower_bound(sorted_keys, 0, t0 - 1, k0) : t0;
    if (threadIdx.x == 0) segment_start0 = start;
  }
  __syncthreads();

  // Per entry of the window: its segment's start, its chunk's start, whether the tile owns the chunk (the chunk
  // starts in [t0, t1)), whether it ends the chunk, and where a chunk it ends goes.
  for (int i = threadIdx.x; i < window; i += blockDim.x) {
    const int g = t0 + i;
    int start;
    if (key[i] == key[0]) {
      start = segment_start0;
    } else {  // the segment starts inside the window: the first window entry with this key
      int lo = 0, hi = i;
      while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (key[mid] < key[i]) lo = mid + 1;
        else hi = mid;
      }
      start = t0 + lo;
    }
    const int chunk_start = start + (g - start) / kChunk * kChunk;
    const bool owned = chunk_start >= t0 && chunk_start < t1;
    const bool segment_ends = g + 1 == entries || (i + 1 < window && key[i + 1] != key[i]);
    // Entries an owned chunk reaches lie in the window (g < t1 + kChunk - 1), so key[i + 1] is known there.
    const bool ends = segment_ends || (g + 1 - start) % kChunk == 0;
    chunk_end[i] = ends;
    if (owned) {
      atomicMin(&first_owned, i);  // integer min / max: order-independent
      atomicMax(&end_owned, i + 1);
      if (ends) {
        const bool first_chunk = chunk_start == start;
        if (key[i] >= tables.skip) target[i] = kToNowhere;
        else if (first_chunk && segment_ends) target[i] = static_cast<int>(key[i]);
        else target[i] = first_chunk ? kToSlot1 : kToSlot0;
        if (first_chunk && !segment_ends && key[i] < tables.skip) long_segment = start;  // at most one per tile
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) long_start[tile] = long_segment;
  const int a = first_owned, b = end_owned;
  const std::size_t h = static_cast<std::size_t>(tables.hidden);

  for (int col = threadIdx.x * V; col < tables.hidden; col += blockDim.x * V) {
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = 0.0f;
    for (int q = a; q < b; q += kRowBatch) {
      float g[kRowBatch][V];
#pragma unroll
      for (int k = 0; k < kRowBatch; ++k) {
        if (q + k < b) load_row<V>(dout + static_cast<std::size_t>(token[q + k]) * h + col, g[k]);
      }
#pragma unroll
      for (int k = 0; k < kRowBatch; ++k) {
        if (q + k < b) {
#pragma unroll
          for (int v = 0; v < V; ++v) acc[v] = __fadd_rn(acc[v], g[k][v]);
          if (chunk_end[q + k]) {
            const int to = target[q + k];
            float* dst = to >= 0 ? tables.row(static_cast<uint32_t>(to))
                                 : partial + (2 * static_cast<std::size_t>(tile) + (to == kToSlot1 ? 1 : 0)) * h;
            if (to != kToNowhere) store_row<V>(dst + col, acc);
#pragma unroll
            for (int v = 0; v < V; ++v) acc[v] = 0.0f;
          }
        }
      }
    }
  }
}

// The table row of every multi-chunk segment: block (tile j, column group) adds the partial rows of the segment
// whose first chunk starts in tile j (long_start[j] >= 0; other blocks return at once): slot 1 of tile j, then
// slot 0 of tiles j + 1 .. j + m - 1, m = ceil(length / K). Warp w adds chunks [w·m/8, (w+1)·m/8) in order for
// kCombineColumns / 32 columns per lane, then the warps' sums are added in warp order.
__global__ void __launch_bounds__(32 * kCombineWarps)
    embedding_backward_combine_kernel(Tables tables, const float* partial, const int32_t* long_start,
                                      const uint32_t* sorted_keys, int entries) {
  __shared__ float sums[kCombineWarps][kCombineColumns];
  __shared__ int chunks;
  const int tile = blockIdx.x;
  const int start = long_start[tile];
  if (start < 0) return;  // the whole block leaves together
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = threadIdx.x & 31;
  const uint32_t k = sorted_keys[start];
  if (warp == 0) {
    // The segment's end: the first entry with a larger key (or the end).
    const int end = warp_lower_bound(sorted_keys, start, entries, k + 1);  // k < skip: k + 1 does not wrap
    if (lane == 0) chunks = (end - start + kChunk - 1) / kChunk;
  }
  __syncthreads();
  const int m = chunks;
  const std::size_t h = static_cast<std::size_t>(tables.hidden);
  const int c0 = blockIdx.y * kCombineColumns;
  const int i0 = warp * m / kCombineWarps, i1 = (warp + 1) * m / kCombineWarps;
  float acc[kCombineColumns / 32];
#pragma unroll
  for (int j = 0; j < kCombineColumns / 32; ++j) acc[j] = 0.0f;
  for (int i = i0; i < i1; ++i) {
    const float* row = partial + (2 * static_cast<std::size_t>(tile + i) + (i == 0 ? 1 : 0)) * h;
#pragma unroll
    for (int j = 0; j < kCombineColumns / 32; ++j) {
      const int c = c0 + lane + 32 * j;
      if (c < tables.hidden) acc[j] = __fadd_rn(acc[j], row[c]);
    }
  }
#pragma unroll
  for (int j = 0; j < kCombineColumns / 32; ++j) sums[warp][lane + 32 * j] = acc[j];
  __syncthreads();
  float* dst = tables.row(k);
  for (int c = threadIdx.x; c < kCombineColumns; c += blockDim.x) {
    if (c0 + c >= tables.hidden) continue;
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kCombineWarps; ++w) total = __fadd_rn(total, sums[w][c]);
    dst[c0 + c] = total;
  }
}

void check_tokens(int tokens) {
  BERTRAIN_CHECK(tokens > 0, "embedding: the batch must have tokens, got " << tokens);
}

bool aligned(const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

template <typename T, int V>
void launch_chunks(const Tables& tables, const BackwardScratch& s, const T* dout, int entries, CudaStream stream) {
  const int columns = (tables.hidden + V - 1) / V;
  const int threads = columns >= kMaxThreads ? kMaxThreads : (columns + 31) / 32 * 32;
  embedding_backward_chunks_kernel<T, V><<<tiles_for(entries), threads, 0, stream>>>(
      tables, s.partial, s.long_start, dout, s.sorted_keys, s.sorted_tokens, entries);
  BERTRAIN_CUDA_CHECK_LAUNCH("embedding_backward_chunks_kernel");
}

}  // namespace

void embedding_positions_cuda(int32_t* positions, const int32_t* ids, const int32_t* cu_seqlens, int batch,
                              int padding_idx, CudaStream stream) {
  BERTRAIN_CHECK(batch > 0, "embedding_positions_cuda: " << batch << " rows");
  BERTRAIN_CHECK(positions != nullptr && ids != nullptr && cu_seqlens != nullptr,
                 "embedding_positions_cuda: null pointer");
  embedding_positions_kernel<<<batch, kPositionThreads, 0, stream>>>(positions, ids, cu_seqlens, padding_idx);
  BERTRAIN_CUDA_CHECK_LAUNCH("embedding_positions_kernel");
}

template <typename T>
void embedding_forward_cuda(T* out, const int32_t* ids, const int32_t* positions, const int32_t* token_types,
                            const T* word, const T* pos, const T* type, int tokens, int hidden, CudaStream stream) {
  check_tokens(tokens);
  BERTRAIN_CHECK(hidden > 0, "embedding_forward_cuda: hidden must be positive, got " << hidden);
  BERTRAIN_CHECK(out != nullptr && ids != nullptr && positions != nullptr && word != nullptr && pos != nullptr,
                 "embedding_forward_cuda: null input or output");
  embedding_forward_kernel<T><<<tokens, threads_for(hidden), 0, stream>>>(out, ids, positions, token_types, word, pos,
                                                                          type, hidden);
  BERTRAIN_CUDA_CHECK_LAUNCH("embedding_forward_kernel");
}

std::size_t embedding_backward_scratch_bytes(int tokens, int hidden) {
  BERTRAIN_CHECK(tokens > 0 && tokens <= INT_MAX / 3, "embedding_backward_scratch_bytes: tokens must be in [1, "
                                                          << INT_MAX / 3 << "], got " << tokens);
  BERTRAIN_CHECK(hidden > 0, "embedding_backward_scratch_bytes: hidden must be positive, got " << hidden);
  return kScratchAlign + fixed_scratch_bytes(tokens, hidden) + align_up(sort_temp_bytes(entries_for(tokens), 32));
}

template <typename T>
void embedding_backward_cuda(float* dword, float* dpos, float* dtype, const T* dout, const int32_t* ids,
                             const int32_t* positions, const int32_t* token_types, int tokens, int hidden, int vocab,
                             int max_pos, int type_vocab, int word_padding_idx, int position_padding_idx,
                             void* scratch, std::size_t scratch_bytes, CudaStream stream) {
  check_tokens(tokens);
  BERTRAIN_CHECK(tokens <= INT_MAX / 3, "embedding_backward_cuda: " << tokens << " tokens, at most " << INT_MAX / 3);
  BERTRAIN_CHECK(hidden > 0 && vocab > 0 && type_vocab >= 0 && max_pos > 0,
                 "embedding_backward_cuda: hidden, vocab and max_pos must be positive and type_vocab not negative, got "
                 "hidden " << hidden << ", vocab " << vocab << ", max_pos " << max_pos << ", type_vocab " << type_vocab);
  BERTRAIN_CHECK((dtype == nullptr) == (type_vocab == 0),
                 "embedding_backward_cuda: a token-type table needs type_vocab > 0, and none type_vocab 0");
  BERTRAIN_CHECK(static_cast<long long>(vocab) + max_pos + type_vocab < INT_MAX,
                 "embedding_backward_cuda: vocab + max_pos + type_vocab must fit an int");
  BERTRAIN_CHECK(dword != nullptr && dpos != nullptr && dout != nullptr && ids != nullptr && positions != nullptr,
                 "embedding_backward_cuda: null input or output");
  const int entries = entries_for(tokens), tiles = tiles_for(entries);
  const uint32_t skip = static_cast<uint32_t>(vocab + max_pos + type_vocab);  // the largest key (Tables)
  const int end_bit = key_bits(skip + 1);

  // Carve the scratch (layout of BackwardScratch) and make sure CUB's part is large enough for this call.
  // The scratch may start anywhere: its first kScratchAlign bytes are slack for aligning the start.
  BERTRAIN_CHECK(scratch != nullptr, "embedding_backward_cuda: null scratch");
  const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(scratch);
  const std::size_t slack = align_up(address) - address;
  const std::size_t fixed = slack + fixed_scratch_bytes(tokens, hidden);
  BERTRAIN_CHECK(scratch_bytes >= fixed, "embedding_backward_cuda: scratch of " << scratch_bytes << " bytes, "
                                             << tokens << " tokens of " << hidden
                                             << " need embedding_backward_scratch_bytes(" << tokens << ", " << hidden
                                             << ")");
  char* base = static_cast<char*>(scratch) + slack;
  const std::size_t part = align_up(static_cast<std::size_t>(entries) * sizeof(int32_t));
  BackwardScratch s;
  s.keys = reinterpret_cast<uint32_t*>(base);
  s.sorted_keys = reinterpret_cast<uint32_t*>(base + part);
  s.tokens = reinterpret_cast<int32_t*>(base + 2 * part);
  s.sorted_tokens = reinterpret_cast<int32_t*>(base + 3 * part);
  s.long_start = reinterpret_cast<int32_t*>(base + 4 * part);
  s.partial = reinterpret_cast<float*>(base + 4 * part + align_up(static_cast<std::size_t>(tiles) * sizeof(int32_t)));
  s.sort_temp = static_cast<char*>(scratch) + fixed;
  std::size_t temp_bytes = sort_temp_bytes(entries, end_bit);
  BERTRAIN_CHECK(scratch_bytes - fixed >= temp_bytes,
                 "embedding_backward_cuda: scratch of " << scratch_bytes << " bytes is too small for " << tokens
                                                        << " tokens (need " << fixed + temp_bytes
                                                        << "; size it with embedding_backward_scratch_bytes)");

  // Rows no token uses stay zero; every used row is stored (=) once below.
  const std::size_t h = static_cast<std::size_t>(hidden);
  BERTRAIN_CUDA_CHECK(cudaMemsetAsync(dword, 0, static_cast<std::size_t>(vocab) * h * sizeof(float), stream));
  BERTRAIN_CUDA_CHECK(cudaMemsetAsync(dpos, 0, static_cast<std::size_t>(max_pos) * h * sizeof(float), stream));
  if (dtype != nullptr) {
    BERTRAIN_CUDA_CHECK(cudaMemsetAsync(dtype, 0, static_cast<std::size_t>(type_vocab) * h * sizeof(float), stream));
  }

  embedding_keys_kernel<<<cuda::elementwise_blocks(static_cast<std::size_t>(tokens), kMaxThreads), kMaxThreads, 0,
                          stream>>>(s.keys, s.tokens, ids, positions, token_types, tokens, vocab, max_pos, type_vocab,
                                    word_padding_idx, position_padding_idx);
  BERTRAIN_CUDA_CHECK_LAUNCH("embedding_keys_kernel");

  // Keys are below 2^end_bit; radix sort is stable, so equal keys keep ascending token order.
  BERTRAIN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(s.sort_temp, temp_bytes, static_cast<const uint32_t*>(s.keys),
                                                      s.sorted_keys, static_cast<const int32_t*>(s.tokens),
                                                      s.sorted_tokens, entries, 0, end_bit, stream));

  const Tables tables{dword, dpos, dtype, hidden, vocab, max_pos, skip};
  // 4 columns per thread when every access of 4 columns is aligned: 16 bytes of float (the tables, the partials,
  // float dout), 8 bytes of bf16 dout.
  const bool vector = hidden % 4 == 0 && aligned(dout, 4 * sizeof(T)) && aligned(dword, 16) && aligned(dpos, 16) &&
                      aligned(dtype, 16);
  if (vector) {
    launch_chunks<T, 4>(tables, s, dout, entries, stream);
  } else {
    launch_chunks<T, 1>(tables, s, dout, entries, stream);
  }
  const dim3 combine_grid(static_cast<unsigned>(tiles), static_cast<unsigned>((hidden + kCombineColumns - 1) /
                                                                                kCombineColumns));
  embedding_backward_combine_kernel<<<combine_grid, 32 * kCombineWarps, 0, stream>>>(tables, s.partial, s.long_start,
                                                                                      s.sorted_keys, entries);
  BERTRAIN_CUDA_CHECK_LAUNCH("embedding_backward_combine_kernel");
}

template void embedding_forward_cuda<float>(float*, const int32_t*, const int32_t*, const int32_t*, const float*,
                                            const float*, const float*, int, int, CudaStream);
template void embedding_forward_cuda<bf16>(bf16*, const int32_t*, const int32_t*, const int32_t*, const bf16*,
                                           const bf16*, const bf16*, int, int, CudaStream);
template void embedding_backward_cuda<float>(float*, float*, float*, const float*, const int32_t*, const int32_t*,
                                             const int32_t*, int, int, int, int, int, int, int, void*, std::size_t,
                                             CudaStream);
template void embedding_backward_cuda<bf16>(float*, float*, float*, const bf16*, const int32_t*, const int32_t*,
                                            const int32_t*, int, int, int, int, int, int, int, void*, std::size_t,
                                            CudaStream);

}  // namespace bertrain

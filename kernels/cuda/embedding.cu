// CUDA BERT input embeddings (kernels/embedding.h): the forward sum word + position + type, and a backward
// that is deterministic without float atomics and adds in the CPU twin's order (kernels/cpu/embedding.cpp),
// so fp32 gradients are bit-identical to embedding_backward_cpu<float>:
//   - dword: token indices are radix-sorted by id (CUB, stable: equal ids keep ascending token order) and
//     the block at the start of each run of equal ids adds that run's dout rows in token order, from 0;
//   - dpos[s]: the tokens at position s (one per row longer than s) added in row order, from 0;
//   - dtype[k]: the rows of the tokens of type k added in token order, from 0.
// Only additions are involved (no products to contract into FMAs), each starts from +0 like the CPU's
// std::fill, so every element is the same sequence of IEEE float additions as on the CPU.
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
// Rows loaded before they are added (in order): independent loads in flight hide memory latency on
// long runs (the padding id can cover most of a batch) without changing the order of the additions.
constexpr int kRowBatch = 8;

// Threads over H: a multiple of 32, at most kMaxThreads; columns beyond blockDim.x are looped over.
int threads_for(int hidden) { return hidden >= kMaxThreads ? kMaxThreads : ((hidden + 31) / 32) * 32; }

std::size_t align_up(std::size_t bytes) { return (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign; }

// Bits of the largest id, vocab - 1 (at least 1: CUB takes a copy path for an empty bit range).
int id_bits(int vocab) {
  int bits = 0;
  for (unsigned v = static_cast<unsigned>(vocab - 1); v != 0; v >>= 1) ++bits;
  return bits > 0 ? bits : 1;
}

// CUB's temporary storage for sorting `tokens` (key, value) pairs on bits [0, end_bit) of the key. Needs
// the CUDA runtime (it reads the device's architecture) but no device memory. The size is non-decreasing
// in tokens and in end_bit (dispatch_radix_sort.cuh), so a query at (tokens, 32) covers any smaller call.
std::size_t sort_temp_bytes(int tokens, int end_bit) {
  std::size_t bytes = 0;
  BERTRAIN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const uint32_t*>(nullptr),
                                                      static_cast<uint32_t*>(nullptr),
                                                      static_cast<const int32_t*>(nullptr),
                                                      static_cast<int32_t*>(nullptr), tokens, 0, end_bit));
  return bytes;
}

// The scratch of embedding_backward_cuda after up to kScratchAlign bytes of slack that align its start, in
// this order, each part 256-byte aligned.
struct BackwardScratch {
  uint32_t* sorted_ids;    // [T] keys out
  int32_t* token_index;    // [T] values in: 0, 1, ..., T-1
  int32_t* sorted_tokens;  // [T] values out: token indices in ascending (id, token) order
  void* sort_temp;         // CUB temporary storage
  std::size_t sort_temp_bytes;
};

std::size_t fixed_scratch_bytes(int tokens) {
  return 3 * align_up(static_cast<std::size_t>(tokens) * sizeof(int32_t));
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
  const T* ty = type + static_cast<std::size_t>(token_types != nullptr ? token_types[t] : 0) * hidden;
  T* o = out + static_cast<std::size_t>(t) * hidden;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
    const float sum = __fadd_rn(__fadd_rn(cuda::load(w + c), cuda::load(p + c)), cuda::load(ty + c));
    cuda::store(o + c, sum);
  }
}

// token_index[t] (=) t for t < T. Grid-stride, one thread per token.
__global__ void embedding_token_index_kernel(int32_t* token_index, int tokens) {
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < tokens; t += gridDim.x * blockDim.x) token_index[t] = t;
}

// dword[id, :] (=) Σ dout[t, :] over the tokens t with ids[t] == id, in ascending t, for every id that
// occurs (the caller zeroed dword, so ids that do not occur stay 0). sorted_ids / sorted_tokens: the
// stable sort of (ids, 0..T-1) by id. One block per sorted position p (grid T), threads over H: the block
// at the start of a run of equal ids sums the run, every other block returns at once.
template <typename T>
__global__ void embedding_backward_word_kernel(float* dword, const T* dout, const uint32_t* sorted_ids,
                                               const int32_t* sorted_tokens, int tokens, int hidden, int vocab) {
  const int p = blockIdx.x;
  const uint32_t id = sorted_ids[p];
  // Both conditions are the same for every thread of the block, so the whole block leaves together.
  if (p > 0 && sorted_ids[p - 1] == id) return;
  if (id >= static_cast<uint32_t>(vocab)) return;  // out-of-range id (a broken precondition): never write

  // The run is [p, end): end is the first sorted position after p with another id (keys ascend), or T.
  // The block scans blockDim.x keys at a time; __syncthreads_or makes the exit decision uniform.
  __shared__ int run_end;
  if (threadIdx.x == 0) run_end = tokens;
  __syncthreads();
  for (int base = p + 1; base < tokens; base += blockDim.x) {
    const int q = base + threadIdx.x;
    const bool differs = q < tokens && sorted_ids[q] != id;
    if (__syncthreads_or(differs)) {
      if (differs) atomicMin(&run_end, q);  // integer minimum: order-independent
      break;
    }
  }
  __syncthreads();
  const int end = run_end;

  float* dst = dword + static_cast<std::size_t>(id) * hidden;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
    const T* column = dout + c;
    float acc = 0.0f;
    int q = p;
    for (; q + kRowBatch <= end; q += kRowBatch) {
      float g[kRowBatch];
#pragma unroll
      for (int k = 0; k < kRowBatch; ++k) {
        g[k] = cuda::load(column + static_cast<std::size_t>(sorted_tokens[q + k]) * hidden);
      }
#pragma unroll
      for (int k = 0; k < kRowBatch; ++k) acc = __fadd_rn(acc, g[k]);
    }
    for (; q < end; ++q) acc = __fadd_rn(acc, cuda::load(column + static_cast<std::size_t>(sorted_tokens[q]) * hidden));
    dst[c] = acc;
  }
}

// dpos[s, c] (=) Σ_b dout[cu_seqlens[b] + s, c] over the rows b longer than s, in row (= token) order; 0 for
// positions no row reaches. One thread per element of dpos [max_pos, H] (grid-stride), looping over the B rows.
template <typename T>
__global__ void embedding_backward_pos_kernel(float* dpos, const T* dout, const int32_t* cu_seqlens, int batch,
                                              int hidden, int max_pos) {
  const std::size_t n = static_cast<std::size_t>(max_pos) * hidden;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int s = static_cast<int>(i / hidden), c = static_cast<int>(i % hidden);
    float acc = 0.0f;
    for (int b = 0; b < batch; ++b) {
      const int t = cu_seqlens[b] + s;
      if (t < cu_seqlens[b + 1]) acc = __fadd_rn(acc, cuda::load(dout + static_cast<std::size_t>(t) * hidden + c));
    }
    dpos[i] = acc;
  }
}

// dtype[k, c] (=) Σ dout[t, c] over the tokens t of type k (all tokens are type 0 when token_types is
// null), in token order; 0 for types no token has. One thread per element of dtype [type_vocab, H]
// (grid-stride), looping over all T tokens (type_vocab is 2 for BERT, so there are few such threads; rows
// are loaded kRowBatch at a time and added in token order).
template <typename T>
__global__ void embedding_backward_type_kernel(float* dtype, const T* dout, const int32_t* token_types, int tokens,
                                               int hidden, int type_vocab) {
  const std::size_t n = static_cast<std::size_t>(type_vocab) * hidden;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int k = static_cast<int>(i / hidden), c = static_cast<int>(i % hidden);
    float acc = 0.0f;
    if (token_types != nullptr || k == 0) {
      int t = 0;
      for (; t + kRowBatch <= tokens; t += kRowBatch) {
        float g[kRowBatch];
        bool mine[kRowBatch];
#pragma unroll
        for (int j = 0; j < kRowBatch; ++j) {
          mine[j] = token_types == nullptr || token_types[t + j] == k;
          g[j] = mine[j] ? cuda::load(dout + static_cast<std::size_t>(t + j) * hidden + c) : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < kRowBatch; ++j) {
          if (mine[j]) acc = __fadd_rn(acc, g[j]);
        }
      }
      for (; t < tokens; ++t) {
        if (token_types == nullptr || token_types[t] == k) {
          acc = __fadd_rn(acc, cuda::load(dout + static_cast<std::size_t>(t) * hidden + c));
        }
      }
    }
    dtype[i] = acc;
  }
}

void check_tokens(int tokens) {
  BERTRAIN_CHECK(tokens > 0, "embedding: the batch must have tokens, got " << tokens);
}

}  // namespace

template <typename T>
void embedding_forward_cuda(T* out, const int32_t* ids, const int32_t* positions, const int32_t* token_types,
                            const T* word, const T* pos, const T* type, int tokens, int hidden, CudaStream stream) {
  check_tokens(tokens);
  BERTRAIN_CHECK(hidden > 0, "embedding_forward_cuda: hidden must be positive, got " << hidden);
  BERTRAIN_CHECK(out != nullptr && ids != nullptr && positions != nullptr && word != nullptr && pos != nullptr &&
                     type != nullptr,
                 "embedding_forward_cuda: null input or output");
  embedding_forward_kernel<T><<<tokens, threads_for(hidden), 0, stream>>>(out, ids, positions, token_types, word, pos,
                                                                          type, hidden);
  BERTRAIN_CUDA_CHECK_LAUNCH("embedding_forward_kernel");
}

std::size_t embedding_backward_scratch_bytes(int tokens) {
  BERTRAIN_CHECK(tokens > 0, "embedding_backward_scratch_bytes: tokens must be positive, got " << tokens);
  return kScratchAlign + fixed_scratch_bytes(tokens) + align_up(sort_temp_bytes(tokens, 32));
}

template <typename T>
void embedding_backward_cuda(float* dword, float* dpos, float* dtype, const T* dout, const int32_t* ids,
                             const int32_t* cu_seqlens, const int32_t* token_types, int batch, int tokens, int hidden,
                             int vocab, int max_pos, int type_vocab, void* scratch, std::size_t scratch_bytes,
                             CudaStream stream) {
  check_tokens(tokens);
  BERTRAIN_CHECK(batch > 0 && batch <= tokens, "embedding_backward_cuda: " << batch << " rows for " << tokens
                                                                            << " tokens");
  BERTRAIN_CHECK(hidden > 0 && vocab > 0 && type_vocab > 0 && max_pos > 0,
                 "embedding_backward_cuda: hidden, vocab, max_pos and type_vocab must be positive, got hidden "
                     << hidden << ", vocab " << vocab << ", max_pos " << max_pos << ", type_vocab " << type_vocab);
  BERTRAIN_CHECK(dword != nullptr && dpos != nullptr && dtype != nullptr && dout != nullptr && ids != nullptr &&
                     cu_seqlens != nullptr,
                 "embedding_backward_cuda: null input or output");
  const int end_bit = id_bits(vocab);

  // Carve the scratch (layout of BackwardScratch) and make sure CUB's part is large enough for this call.
  // The scratch may start anywhere: its first kScratchAlign bytes are slack for aligning the start.
  BERTRAIN_CHECK(scratch != nullptr, "embedding_backward_cuda: null scratch");
  const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(scratch);
  const std::size_t skip = align_up(address) - address;
  const std::size_t fixed = skip + fixed_scratch_bytes(tokens);
  BERTRAIN_CHECK(scratch_bytes >= fixed, "embedding_backward_cuda: scratch of " << scratch_bytes << " bytes, "
                                             << tokens << " tokens need embedding_backward_scratch_bytes("
                                             << tokens << ")");
  char* base = static_cast<char*>(scratch) + skip;
  const std::size_t part = align_up(static_cast<std::size_t>(tokens) * sizeof(int32_t));
  BackwardScratch s;
  s.sorted_ids = reinterpret_cast<uint32_t*>(base);
  s.token_index = reinterpret_cast<int32_t*>(base + part);
  s.sorted_tokens = reinterpret_cast<int32_t*>(base + 2 * part);
  s.sort_temp = static_cast<char*>(scratch) + fixed;
  s.sort_temp_bytes = sort_temp_bytes(tokens, end_bit);
  BERTRAIN_CHECK(scratch_bytes - fixed >= s.sort_temp_bytes,
                 "embedding_backward_cuda: scratch of " << scratch_bytes << " bytes is too small for " << tokens
                                                        << " tokens (need " << fixed + s.sort_temp_bytes
                                                        << "; size it with embedding_backward_scratch_bytes)");

  const std::size_t word_bytes = static_cast<std::size_t>(vocab) * hidden * sizeof(float);
  BERTRAIN_CUDA_CHECK(cudaMemsetAsync(dword, 0, word_bytes, stream));

  embedding_token_index_kernel<<<cuda::elementwise_blocks(tokens, kMaxThreads), kMaxThreads, 0, stream>>>(
      s.token_index, tokens);
  BERTRAIN_CUDA_CHECK_LAUNCH("embedding_token_index_kernel");

  // Ids are non-negative (checked on the host before upload), so their uint32 bit patterns sort like the
  // ids, and bits [0, end_bit) hold all of them. Radix sort is stable: equal ids keep ascending token order.
  std::size_t temp_bytes = s.sort_temp_bytes;
  BERTRAIN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(s.sort_temp, temp_bytes, reinterpret_cast<const uint32_t*>(ids),
                                                      s.sorted_ids, static_cast<const int32_t*>(s.token_index),
                                                      s.sorted_tokens, tokens, 0, end_bit, stream));

  embedding_backward_word_kernel<T><<<tokens, threads_for(hidden), 0, stream>>>(dword, dout, s.sorted_ids,
                                                                                 s.sorted_tokens, tokens, hidden,
                                                                                 vocab);
  BERTRAIN_CUDA_CHECK_LAUNCH("embedding_backward_word_kernel");

  const std::size_t pos_elements = static_cast<std::size_t>(max_pos) * hidden;
  embedding_backward_pos_kernel<T><<<cuda::elementwise_blocks(pos_elements, kMaxThreads), kMaxThreads, 0, stream>>>(
      dpos, dout, cu_seqlens, batch, hidden, max_pos);
  BERTRAIN_CUDA_CHECK_LAUNCH("embedding_backward_pos_kernel");

  const std::size_t type_elements = static_cast<std::size_t>(type_vocab) * hidden;
  embedding_backward_type_kernel<T>
      <<<cuda::elementwise_blocks(type_elements, kMaxThreads), kMaxThreads, 0, stream>>>(dtype, dout, token_types,
                                                                                          tokens, hidden, type_vocab);
  BERTRAIN_CUDA_CHECK_LAUNCH("embedding_backward_type_kernel");
}

template void embedding_forward_cuda<float>(float*, const int32_t*, const int32_t*, const int32_t*, const float*,
                                            const float*, const float*, int, int, CudaStream);
template void embedding_forward_cuda<bf16>(bf16*, const int32_t*, const int32_t*, const int32_t*, const bf16*,
                                           const bf16*, const bf16*, int, int, CudaStream);
template void embedding_backward_cuda<float>(float*, float*, float*, const float*, const int32_t*, const int32_t*,
                                             const int32_t*, int, int, int, int, int, int, void*, std::size_t,
                                             CudaStream);
template void embedding_backward_cuda<bf16>(float*, float*, float*, const bf16*, const int32_t*, const int32_t*,
                                            const int32_t*, int, int, int, int, int, int, void*, std::size_t,
                                            CudaStream);

}  // namespace bertrain

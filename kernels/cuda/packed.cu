// CUDA twins of kernels/cpu/packed.cpp: the tokens' dropout rows from the row offsets, and the [CLS]
// rows in and out of the packed tokens.
#include "kernels/packed.h"

#include "core/error.h"
#include "kernels/cuda/common.cuh"

namespace bertrain {
namespace {

constexpr int kThreads = 256;
constexpr int kRowThreads = 128;

// slots[t] (=) (first_sample + b) · max_positions + (t − cu_seqlens[b]). One block per row b, threads over its
// tokens.
__global__ void dropout_slots_kernel(int64_t* slots, const int32_t* cu_seqlens, int64_t first_sample,
                                     int max_positions) {
  const int b = blockIdx.x;
  const int begin = cu_seqlens[b], end = cu_seqlens[b + 1];
  for (int t = begin + static_cast<int>(threadIdx.x); t < end; t += blockDim.x) {
    slots[t] = (first_sample + b) * max_positions + (t - begin);
  }
}

// cls[b, c] (=) tokens[cu_seqlens[b], c]. Grid-stride over B·H.
template <typename T>
__global__ void gather_first_tokens_forward_kernel(T* cls, const T* tokens, const int32_t* cu_seqlens, std::size_t n,
                                                   int hidden) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t h = static_cast<std::size_t>(hidden);
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const std::size_t b = i / h, c = i % h;
    cls[i] = tokens[static_cast<std::size_t>(cu_seqlens[b]) * h + c];
  }
}

// dtokens[t, c] (=) dcls[b, c] when t is row b's first token, else 0. Grid-stride over T·H; the row of a first
// token is found by a binary search over the B + 1 offsets (only for tokens whose position is 0 is it used).
template <typename T>
__global__ void scatter_first_tokens_backward_kernel(T* dtokens, const T* dcls, const int32_t* cu_seqlens, int batch,
                                                     std::size_t n, int hidden) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t h = static_cast<std::size_t>(hidden);
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int t = static_cast<int>(i / h);
    // The last row b with cu_seqlens[b] <= t.
    int lo = 0, hi = batch - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (cu_seqlens[mid] <= t) lo = mid; else hi = mid - 1;
    }
    cuda::store(dtokens + i, cu_seqlens[lo] == t ? cuda::load(dcls + static_cast<std::size_t>(lo) * h + i % h) : 0.0f);
  }
}

void check_rows(const char* what, int batch, int hidden) {
  BERTRAIN_CHECK(batch > 0 && hidden > 0, what << ": batch " << batch << ", hidden " << hidden);
}

}  // namespace

void dropout_slots_cuda(int64_t* slots, const int32_t* cu_seqlens, int batch, int64_t first_sample, int max_positions,
                        CudaStream stream) {
  check_rows("dropout_slots_cuda", batch, 1);
  BERTRAIN_CHECK(cu_seqlens != nullptr && slots != nullptr, "dropout_slots_cuda: null row offsets or slots");
  dropout_slots_kernel<<<batch, kRowThreads, 0, stream>>>(slots, cu_seqlens, first_sample, max_positions);
  BERTRAIN_CUDA_CHECK_LAUNCH("dropout_slots_kernel");
}

template <typename T>
void gather_first_tokens_cuda(T* cls, const T* tokens, const int32_t* cu_seqlens, int batch, int hidden,
                              CudaStream stream) {
  check_rows("gather_first_tokens_cuda", batch, hidden);
  BERTRAIN_CHECK(cls != nullptr && tokens != nullptr && cu_seqlens != nullptr, "gather_first_tokens_cuda: null pointer");
  const std::size_t n = static_cast<std::size_t>(batch) * static_cast<std::size_t>(hidden);
  gather_first_tokens_forward_kernel<T>
      <<<cuda::elementwise_blocks(n, kThreads), kThreads, 0, stream>>>(cls, tokens, cu_seqlens, n, hidden);
  BERTRAIN_CUDA_CHECK_LAUNCH("gather_first_tokens_forward_kernel");
}

template <typename T>
void scatter_first_tokens_cuda(T* dtokens, const T* dcls, const int32_t* cu_seqlens, int batch, int tokens, int hidden,
                               CudaStream stream) {
  check_rows("scatter_first_tokens_cuda", batch, hidden);
  BERTRAIN_CHECK(tokens >= batch, "scatter_first_tokens_cuda: " << tokens << " tokens for " << batch << " rows");
  BERTRAIN_CHECK(dtokens != nullptr && dcls != nullptr && cu_seqlens != nullptr,
                 "scatter_first_tokens_cuda: null pointer");
  const std::size_t n = static_cast<std::size_t>(tokens) * static_cast<std::size_t>(hidden);
  scatter_first_tokens_backward_kernel<T>
      <<<cuda::elementwise_blocks(n, kThreads), kThreads, 0, stream>>>(dtokens, dcls, cu_seqlens, batch, n, hidden);
  BERTRAIN_CUDA_CHECK_LAUNCH("scatter_first_tokens_backward_kernel");
}

template void gather_first_tokens_cuda<float>(float*, const float*, const int32_t*, int, int, CudaStream);
template void gather_first_tokens_cuda<bf16>(bf16*, const bf16*, const int32_t*, int, int, CudaStream);
template void scatter_first_tokens_cuda<float>(float*, const float*, const int32_t*, int, int, int, CudaStream);
template void scatter_first_tokens_cuda<bf16>(bf16*, const bf16*, const int32_t*, int, int, int, CudaStream);

}  // namespace bertrain

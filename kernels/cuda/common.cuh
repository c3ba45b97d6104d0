// Device helpers shared by the CUDA kernels: float <-> storage conversion (float or bf16, always computed
// in float), warp and block reductions, grid sizing. Included by kernels/cuda/*.cu only.
#pragma once

#include <cuda_bf16.h>
#include <library_types.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/bf16.h"
#include "core/cuda/cuda_check.h"
#include "core/error.h"

namespace bertrain {
namespace cuda {

// Loads and stores in float whatever the storage type. bf16 stores round to nearest even, as
// float_to_bf16 on the host.
__device__ __forceinline__ float load(const float* p) { return *p; }
__device__ __forceinline__ float load(const bf16* p) { return __uint_as_float(static_cast<uint32_t>(p->bits) << 16); }
__device__ __forceinline__ void store(float* p, float x) { *p = x; }
__device__ __forceinline__ void store(bf16* p, float x) {
  const __nv_bfloat16 r = __float2bfloat16_rn(x);
  p->bits = *reinterpret_cast<const uint16_t*>(&r);
}

// Two fp32 values as a bf16 pair (round to nearest even, as store() rounds), `lo` in the low half: the element at the
// lower address of a 4-byte store, or an mma A-operand register (kernels/cuda/warp_mma.cuh).
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 x = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&x);
}

// 16-byte packs for element-wise kernels: kPack<T> elements (8 bf16 or 4 floats) per load and store, each in
// float, rounded on store as store() rounds. The pointers must be 16-byte aligned (aligned16).
template <typename T>
constexpr int kPack = 16 / static_cast<int>(sizeof(T));

template <typename... P>
__host__ __device__ __forceinline__ bool aligned16(const P*... p) {
  return ((reinterpret_cast<std::uintptr_t>(p) % 16 == 0) && ...);
}

__device__ __forceinline__ void load_pack(const float* p, float (&v)[4]) {
  const float4 q = *reinterpret_cast<const float4*>(p);
  v[0] = q.x;
  v[1] = q.y;
  v[2] = q.z;
  v[3] = q.w;
}
__device__ __forceinline__ void load_pack(const bf16* p, float (&v)[8]) {
  const uint4 q = *reinterpret_cast<const uint4*>(p);
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {  // the element at the lower address is the word's low half
    v[2 * k] = __uint_as_float(w[k] << 16);
    v[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
  }
}
__device__ __forceinline__ void store_pack(float* p, const float (&v)[4]) {
  *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void store_pack(bf16* p, const float (&v)[8]) {
  *reinterpret_cast<uint4*>(p) = make_uint4(pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3]), pack_bf16x2(v[4], v[5]),
                                            pack_bf16x2(v[6], v[7]));
}

// cuBLAS's name for a storage type (cublasGemmEx and friends).
template <typename T>
struct CudaDataType;
template <>
struct CudaDataType<float> {
  static constexpr cudaDataType_t value = CUDA_R_32F;
};
template <>
struct CudaDataType<bf16> {
  static constexpr cudaDataType_t value = CUDA_R_16BF;
};

__device__ __forceinline__ float warp_sum(float x) {
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// Sum over the whole block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `shared` holds at least 32 floats. The order of additions is fixed, so results are deterministic.
__device__ __forceinline__ float block_sum(float x, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  x = warp_sum(x);
  __syncthreads();  // `shared` may still be read by a previous call
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  x = lane < warps ? shared[lane] : 0.0f;
  return warp_sum(x);
}

// Blocks for an element-wise grid-stride kernel over n elements (capped: the loop covers the rest).
inline unsigned elementwise_blocks(std::size_t n, int threads) {
  const std::size_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

// The T copy a mixed-precision forward stores beside its float output y (the next GEMMs' input): y_copy, or null when
// it is y itself (T = float: the stream is its own copy, stored once). For bf16 the two must be distinct buffers;
// `what` names the launcher in the error.
template <typename T>
T* separate_copy(const float* y, T* y_copy, const char* what) {
  if (static_cast<const void*>(y_copy) != static_cast<const void*>(y)) return y_copy;
  BERTRAIN_CHECK((std::is_same_v<T, float>), what << ": the bf16 copy is the float output");
  return nullptr;
}

}  // namespace cuda
}  // namespace bertrain

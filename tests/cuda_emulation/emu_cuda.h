// CPU emulation of the subset of CUDA that bertrain's kernels use, so that a kernel file (run through
// transform.py) and its real GPU test can be built with g++ and run on a machine without a GPU. A developer tool
// (tests/cuda_emulation/README.md says what it proves and what it cannot); never part of the bertrain build.
//
// Why it looks the way it does:
//  - Every CUDA thread of a block is a cooperative fibre (emu_runtime.cpp). A fibre runs until it reaches a barrier
//    (__syncthreads, __syncwarp, a shuffle or ballot) or ends; between barriers the scheduler resumes the threads in
//    a random order, so a missing barrier shows up as stale or NaN data instead of passing by luck of lockstep.
//  - Shared memory and fresh device memory start as 0xff bytes (NaN in fp32 and bf16), so a read of something no
//    thread wrote poisons the result; guard bytes around device allocations and dynamic shared memory catch writes
//    past either end.
//  - wmma fragments are replicated: each lane loads and multiplies whole 16×16 tiles, but stores only the elements
//    it "owns" (element e of the tile by lane e % 32), and no wmma call is a barrier, so a lane that reads another
//    lane's part of a stored tile without a __syncwarp in between can see stale data, as on the hardware (whose
//    fragment layout is unspecified).
//  - The code is compiled as nvcc's host pass sees it: __CUDA_ARCH__ is not defined.
// Only what the emulated kernels need is here; a missing intrinsic is a compile error, never a silent no-op.
#pragma once

// Kernel code that uses PTX (inline asm, which g++ cannot take) has a second implementation for the emulation,
// selected by this macro (kernels/cuda/warp_mma.cuh).
#define BERTRAIN_CUDA_EMULATION 1

#include <math.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

// ---- Qualifiers. __shared__ is deliberately left undefined: transform.py rewrites every declaration, and one it
// missed must not compile as a per-thread local. ------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __restrict__ __restrict

// ---- Vector types ------------------------------------------------------------------------------------------------
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) int2 { int x, y; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
inline float2 make_float2(float a, float b) { return {a, b}; }
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline int2 make_int2(int a, int b) { return {a, b}; }
inline int4 make_int4(int a, int b, int c, int d) { return {a, b, c, d}; }
inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }

// ---- Runtime API types (cuda_runtime_api.h, library_types.h, cublas_v2.h) ---------------------------------------
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorStreamCaptureUnsupported = 900,
};
struct CUstream_st;
typedef CUstream_st* cudaStream_t;
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};
enum cudaDeviceAttr {
  cudaDevAttrMaxSharedMemoryPerBlock,
  cudaDevAttrComputeCapabilityMajor,
  cudaDevAttrComputeCapabilityMinor,
  cudaDevAttrMultiProcessorCount,
  cudaDevAttrMaxSharedMemoryPerBlockOptin,
  cudaDevAttrMemoryClockRate,
  cudaDevAttrGlobalMemoryBusWidth,
  cudaDevAttrClockRate,
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize };
constexpr unsigned cudaStreamDefault = 0, cudaStreamNonBlocking = 1;
constexpr unsigned cudaEventDefault = 0, cudaEventDisableTiming = 2;
struct CUevent_st;
typedef CUevent_st* cudaEvent_t;
struct CUgraph_st;
typedef CUgraph_st* cudaGraph_t;
struct CUgraphExec_st;
typedef CUgraphExec_st* cudaGraphExec_t;
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2
};
struct cudaDeviceProp {
  char name[256];
  std::size_t totalGlobalMem;
  std::size_t sharedMemPerBlock;
  std::size_t sharedMemPerBlockOptin;
  int major, minor, multiProcessorCount, warpSize, maxThreadsPerBlock;
  int l2CacheSize;  // 0: no cache is emulated
};
typedef enum { CUDA_R_32F = 0, CUDA_R_16BF = 14 } cudaDataType_t;
typedef cudaDataType_t cudaDataType;

struct cublasContext;
typedef cublasContext* cublasHandle_t;
typedef enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
  CUBLAS_STATUS_LICENSE_ERROR = 16
} cublasStatus_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16 } cublasMath_t;

// ---- The emulator's interface (emu_runtime.cpp) -----------------------------------------------------------------
namespace emu {
extern uint3 thread_idx, block_idx;  // of the fibre running now (one host thread runs every kernel)
extern dim3 block_dim, grid_dim;
void syncthreads();
void syncwarp(unsigned mask);
uint64_t exchange(uint64_t bits, unsigned mask, int source_lane);  // a warp collective: lane source_lane's bits
// A collective of the whole (32-lane) warp: all[l] = lane l's `bytes` bytes at `mine`, for every l, as one barrier.
void warp_gather(const void* mine, std::size_t bytes, void* all);
unsigned ballot(unsigned mask, bool predicate);
int lane_id();
unsigned char* dynamic_shared(std::size_t alignment);
unsigned char* static_shared(const void* site, std::size_t bytes, std::size_t alignment);
[[noreturn]] void fail(const char* what);
int max_dynamic_shared_bytes();
void allow_dynamic_shared(const void* kernel, int bytes);  // cudaFuncAttributeMaxDynamicSharedMemorySize
bool in_device_allocation(const void* p, std::size_t bytes);  // [p, p + bytes) inside one cudaMalloc'd block

// Runs `work` (a launch, copy, memset or GEMM enqueued on `stream`) now, or, while `stream` is being captured
// (cudaStreamBeginCapture), appends it to the graph being built; a graph launch runs its list in order.
void enqueue(cudaStream_t stream, std::function<void()> work);

// Runs the grid (blocks in a random order, one at a time); `body` runs the kernel once for the current thread.
void run_grid(const char* kernel_name, const char* file, int line, const void* kernel, dim3 grid, dim3 block,
              std::size_t shared_bytes, const std::function<void()>& body);

// The emulated <<<grid, block, shared_bytes, stream>>>(args...): the arguments are converted to the kernel's
// parameter types once, as CUDA copies them into the launch's parameter buffer (a captured launch keeps that copy
// for every replay), and every thread gets a copy. Outside a capture, a launch runs to completion before it
// returns, whatever the stream.
template <typename... P, typename... A>
void launch(const char* kernel_name, const char* file, int line, void (*kernel)(P...), dim3 grid, dim3 block,
            std::size_t shared_bytes, cudaStream_t stream, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "kernel launched with the wrong number of arguments");
  const std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
  enqueue(stream, [=] {
    run_grid(kernel_name, file, line, reinterpret_cast<const void*>(kernel), grid, block, shared_bytes,
             [&] { std::apply(kernel, params); });
  });
}

template <typename T>
T& shared_variable(const void* site, std::size_t alignment) {
  static_assert(std::is_trivially_default_constructible<T>::value, "__shared__ variables have no constructors");
  return *reinterpret_cast<T*>(static_shared(site, sizeof(T), alignment > alignof(T) ? alignment : alignof(T)));
}

template <typename T>
T shuffle(unsigned mask, T value, int source_lane) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffles move at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = exchange(bits, mask, source_lane);
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}
}  // namespace emu

#define threadIdx ::emu::thread_idx
#define blockIdx ::emu::block_idx
#define blockDim ::emu::block_dim
#define gridDim ::emu::grid_dim
constexpr int warpSize = 32;

// ---- Device intrinsics ------------------------------------------------------------------------------------------
inline void __syncthreads() { emu::syncthreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { emu::syncwarp(mask); }
template <typename T>
T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32) {
  if (width != 32) emu::fail("shuffles with width != 32 are not emulated");
  return emu::shuffle(mask, v, src_lane & 31);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  if (width != 32) emu::fail("shuffles with width != 32 are not emulated");
  return emu::shuffle(mask, v, emu::lane_id() ^ (lane_mask & 31));
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  if (width != 32) emu::fail("shuffles with width != 32 are not emulated");
  const int src = emu::lane_id() + static_cast<int>(delta);
  return emu::shuffle(mask, v, src < 32 ? src : emu::lane_id());  // lanes past the end keep their own value
}
inline unsigned __ballot_sync(unsigned mask, int predicate) { return emu::ballot(mask, predicate != 0); }
// A load through the read-only data cache: a plain load here.
template <typename T>
T __ldg(const T* p) {
  return *p;
}
// Integer atomics. A fibre is never interrupted between barriers, so a plain read-modify-write is atomic here; the
// old value is returned, as CUDA's atomics return it. Which thread's update lands first is still the scheduler's
// random order, so a result that depends on it differs between seeds. Float atomics (order-dependent sums) are
// deliberately absent: bertrain's kernels must not use them (DESIGN.md, "Numerics").
namespace emu {
template <typename T, typename Op>
T atomic_update(T* address, T value, Op op) {
  static_assert(std::is_same<T, int>::value || std::is_same<T, unsigned>::value, "only int and unsigned atomics");
  const T old = *address;
  *address = op(old, value);
  return old;
}
}  // namespace emu
inline int atomicMin(int* a, int v) { return emu::atomic_update(a, v, [](int x, int y) { return y < x ? y : x; }); }
inline int atomicMax(int* a, int v) { return emu::atomic_update(a, v, [](int x, int y) { return y > x ? y : x; }); }
inline unsigned atomicMin(unsigned* a, unsigned v) {
  return emu::atomic_update(a, v, [](unsigned x, unsigned y) { return y < x ? y : x; });
}
inline unsigned atomicMax(unsigned* a, unsigned v) {
  return emu::atomic_update(a, v, [](unsigned x, unsigned y) { return y > x ? y : x; });
}
[[noreturn]] inline void __trap() { emu::fail("__trap() called"); }

inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
// IEEE round-to-nearest operations: the host's float arithmetic is exactly that (x86-64 SSE; the emulated files
// are compiled without FMA contraction, see CMakeLists.txt).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
// The fast approximations are computed exactly here: the emulation cannot say how far the GPU's are off.
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

// CUDA's device min/max overloads (the same-type ones; a mixed call is ambiguous here, which is a compile error).
inline int min(int a, int b) { return a < b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float max(float a, float b) { return fmaxf(a, b); }

// ---- bfloat16 (cuda_bf16.h) --------------------------------------------------------------------------------------
struct __nv_bfloat16 {
  uint16_t bits;
};
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
// Round to nearest even; NaN becomes the canonical NaN 0x7fff, as the toolkit's conversion does.
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {0x7fffu};
  u += 0x7fffu + ((u >> 16) & 1u);
  return {static_cast<uint16_t>(u >> 16)};
}
inline float __bfloat162float(__nv_bfloat16 h) { return __uint_as_float(static_cast<uint32_t>(h.bits) << 16); }
inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) {
  return {__float2bfloat16_rn(lo), __float2bfloat16_rn(hi)};
}

// ---- Runtime API functions (emu_runtime.cpp). Memory is host memory; copies and launches are synchronous. ------
const char* cudaGetErrorString(cudaError_t error);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaRuntimeGetVersion(int* version);
cudaError_t cudaDriverGetVersion(int* version);
cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes);
cudaError_t cudaMalloc(void** p, std::size_t bytes);
cudaError_t cudaFree(void* p);
cudaError_t cudaMallocHost(void** p, std::size_t bytes);
cudaError_t cudaFreeHost(void* p);
cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* p, int value, std::size_t bytes);
cudaError_t cudaMemsetAsync(void* p, int value, std::size_t bytes, cudaStream_t stream = nullptr);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
// Events: every operation completes when enqueued, so a recorded event is complete at once.
cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
// The host time between two recordings (the work between them ran on the host, in between): a duration of the
// emulation, nothing like the GPU's.
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags = 0);
// Graphs: a capture records the work enqueued on the captured stream instead of running it (emu::enqueue); an
// instantiated graph replays that list. Synchronising calls during a capture fail, as in CUDA.
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
// Only the opt-in to more than 48 KiB of dynamic shared memory exists; launches are checked against it.
template <typename Kernel>
cudaError_t cudaFuncSetAttribute(Kernel* kernel, cudaFuncAttribute, int value) {
  if (value < 0 || value > emu::max_dynamic_shared_bytes()) return cudaErrorInvalidValue;
  emu::allow_dynamic_shared(reinterpret_cast<const void*>(kernel), value);
  return cudaSuccess;
}

// cuBLAS handles (emu_cublas.cpp; the handle keeps its stream). The GEMMs of the fake cuBLAS are in emu_cublas.h.
cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, std::size_t bytes);

// ---- wmma (mma.h): m16n16k16, bf16 operands, fp32 accumulators ---------------------------------------------------
namespace nvcuda {
namespace wmma {
struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };

// The whole 16×16 tile in every lane: element (r, c) at v[16·r + c]. Code that indexes a fragment's elements
// (frag.x[i]) depends on the unspecified hardware layout and does not compile here.
template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "only m16n16k16 fragments are emulated");
  static_assert(std::is_same<Use, accumulator>::value ? std::is_same<T, float>::value
                                                      : std::is_same<T, __nv_bfloat16>::value,
                "only bf16 operand and fp32 accumulator fragments are emulated");
  float v[256];
};

// wmma's rules: 256-bit aligned pointers, ldm a multiple of 16 bytes.
inline void check_tile_address(const void* p, unsigned ldm, std::size_t element_bytes) {
  if (reinterpret_cast<std::uintptr_t>(p) % 32 != 0) emu::fail("wmma: tile pointer not 32-byte aligned");
  if (ldm * element_bytes % 16 != 0) emu::fail("wmma: ldm not a multiple of 16 bytes");
}

template <typename Use, typename L>
void load_matrix_sync(fragment<Use, 16, 16, 16, __nv_bfloat16, L>& f, const __nv_bfloat16* p, unsigned ldm) {
  static_assert(!std::is_same<L, void>::value, "operand fragments need a layout");
  check_tile_address(p, ldm, 2);
  constexpr bool col = std::is_same<L, col_major>::value;
  for (int r = 0; r < 16; ++r) {
    for (int c = 0; c < 16; ++c) f.v[16 * r + c] = __bfloat162float(col ? p[c * ldm + r] : p[r * ldm + c]);
  }
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p, unsigned ldm, layout_t l) {
  check_tile_address(p, ldm, 4);
  for (int r = 0; r < 16; ++r) {
    for (int c = 0; c < 16; ++c) f.v[16 * r + c] = l == mem_col_major ? p[c * ldm + r] : p[r * ldm + c];
  }
}

// Each lane stores only its own elements: see the file comment.
inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm,
                              layout_t l) {
  check_tile_address(p, ldm, 4);
  for (int e = emu::lane_id(); e < 256; e += 32) {
    const int r = e / 16, c = e % 16;
    (l == mem_col_major ? p[c * ldm + r] : p[r * ldm + c]) = f.v[e];
  }
}

inline void fill_fragment(fragment<accumulator, 16, 16, 16, float>& f, float x) {
  for (float& e : f.v) e = x;
}

// d = a·b + c in fp32; products of bf16 values are exact in fp32, the sum runs over k in ascending order (the
// tensor cores' order is unspecified).
template <typename LA, typename LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LA>& a,
              const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LB>& b,
              const fragment<accumulator, 16, 16, 16, float>& c) {
  float out[256];
  for (int r = 0; r < 16; ++r) {
    for (int n = 0; n < 16; ++n) {
      float s = c.v[16 * r + n];
      for (int k = 0; k < 16; ++k) s += a.v[16 * r + k] * b.v[16 * k + n];
      out[16 * r + n] = s;
    }
  }
  std::memcpy(d.v, out, sizeof out);
}
}  // namespace wmma
}  // namespace nvcuda

// ---- PTX warp instructions (kernels/cuda/warp_mma.cuh): mma.sync m16n8k16 bf16, ldmatrix, cp.async -------------
// Each is a collective of the whole warp here, as on the hardware, with the PTX ISA's fragment layouts (lane =
// 4g + t): a lane gathers the warp's registers or addresses (one barrier) and computes its own part.
namespace emu {
inline float bf16_half(uint32_t word, int high) {
  return __uint_as_float(high ? word & 0xffff0000u : word << 16);
}

// d[4] += A[16×16] · B[16×8]; a and b are the lane's fragments. Products of bf16 values are exact in fp32; the sum
// runs over k in ascending order (the tensor cores' order is unspecified).
inline void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  struct Fragments {
    uint32_t a[4], b[2];
  };
  const Fragments mine{{a[0], a[1], a[2], a[3]}, {b[0], b[1]}};
  Fragments all[32];
  warp_gather(&mine, sizeof mine, all);
  // A (r, k): lane 4·(r % 8) + (k % 8) / 2, register (r ≥ 8) + 2·(k ≥ 8), half k % 2. B (k, n): lane 4n + (k % 8) / 2,
  // register (k ≥ 8), half k % 2.
  const auto a_at = [&](int r, int k) {
    return bf16_half(all[4 * (r % 8) + (k % 8) / 2].a[(r >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], k % 2);
  };
  const auto b_at = [&](int k, int n) { return bf16_half(all[4 * n + (k % 8) / 2].b[k >= 8 ? 1 : 0], k % 2); };
  const int g = lane_id() / 4, t = lane_id() % 4;
  for (int e = 0; e < 4; ++e) {  // d[e] is element (g + 8·(e / 2), 2t + e % 2)
    const int r = g + 8 * (e / 2), n = 2 * t + e % 2;
    float s = d[e];
    for (int k = 0; k < 16; ++k) s += a_at(r, k) * b_at(k, n);
    d[e] = s;
  }
}

// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lane l gives the address of row l % 8 of matrix l / 8 (16-byte
// aligned rows of 8 b16 values); r[i] = matrix i's (row g, columns 2t, 2t + 1), or with trans (rows 2t, 2t + 1,
// column g), the lower column or row in the low half.
inline void ldmatrix_x4(uint32_t (&r)[4], const void* row, bool trans) {
  if (reinterpret_cast<std::uintptr_t>(row) % 16 != 0) fail("ldmatrix: row address not 16-byte aligned");
  const unsigned char* rows[32];
  warp_gather(&row, sizeof row, rows);
  const int g = lane_id() / 4, t = lane_id() % 4;
  for (int i = 0; i < 4; ++i) {
    if (trans) {
      uint16_t lo, hi;
      std::memcpy(&lo, rows[8 * i + 2 * t] + 2 * g, 2);
      std::memcpy(&hi, rows[8 * i + 2 * t + 1] + 2 * g, 2);
      r[i] = static_cast<uint32_t>(lo) | static_cast<uint32_t>(hi) << 16;
    } else {
      std::memcpy(&r[i], rows[8 * i + g] + 4 * t, 4);
    }
  }
}

// cp.async.cg.shared.global with a source size of 16 (copy) or 0 (zero fill). The copy lands at once; the kernels'
// cp.async.wait_group + __syncthreads order it for the other threads as on the hardware.
inline void cp_async_16(void* shared_dst, const void* global_src, bool copy) {
  if (reinterpret_cast<std::uintptr_t>(shared_dst) % 16 != 0 || reinterpret_cast<std::uintptr_t>(global_src) % 16 != 0) {
    fail("cp.async: address not 16-byte aligned");
  }
  if (copy && !in_device_allocation(global_src, 16)) fail("cp.async: source outside every device allocation");
  if (copy) {
    std::memcpy(shared_dst, global_src, 16);
  } else {
    std::memset(shared_dst, 0, 16);
  }
}
}  // namespace emu

// CUDA LayerNorm fused with the residual add, the CPU twin's formulas (kernels/cpu/layernorm.cpp) in float:
// z = x + residual, mean = Σz / cols, var = Σ(z - mean)² / cols (biased), rstd = 1 / sqrtf(var + eps).
// Rows are handled one warp each; lane l owns columns l, l + 32, ..., so every element of a row is read and
// written by one thread only (which is what makes y == x and dz == dy safe).
//
// The kernels are templated on each operand's storage type separately: the all-T launchers and the mixed
// ones (x in T, the residual stream, its gradient and dz in float) share them, so for T = float both compute
// the same float expressions.
//
// Workspace: layernorm_backward_cuda needs handles.workspace_elements >= 2 · kReductionChunks · cols (gamma
// and beta partial sums side by side); gpu_reduction_workspace_elements(cols) provides it.
//
// The fused dropout + residual + LayerNorm (second half of this file) draws kernels/dropout.h's masks: element
// (r, c) has logical index first(r) + c, first(r) = dropout_index(layout, layout_cols, r · cols), kept iff its
// Philox uniform is >= p, kept values x · scale with the host's float scale = 1 / (1 - p), as dropout.cu. Its
// backward writes the parameter gradients' per-block partials in the same pass as dz and dx: 2 · blocks · cols
// floats of handles.workspace, blocks <= kRowPartialBlocks (dropout_residual_layernorm_workspace_elements). The
// same kernels, with the mask moved to the LayerNorm's output (DropoutAt::kOutput), are the embeddings' LayerNorm
// then dropout (layernorm_dropout_forward_cuda / _backward_cuda).
#include "kernels/layernorm.h"

#include <cstdint>

#include "core/error.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/device_facts.cuh"

namespace bertrain {
namespace {

constexpr int kRowThreads = 256;  // 8 warps, 8 rows per block
constexpr int kRowsPerBlock = kRowThreads / 32;
constexpr int kColumnThreads = 128;  // column-reduction blocks: 128 consecutive columns

template <typename X, typename R>
__device__ __forceinline__ float input_at(const X* x, const R* residual, std::size_t index) {
  return residual != nullptr ? cuda::load(x + index) + cuda::load(residual + index) : cuda::load(x + index);
}

// y[rows, cols] (=), y_copy[rows, cols] (=, the same value in y_copy's type; skipped when null), mean[rows] (=),
// rstd[rows] (=). One warp per row, kRowsPerBlock rows per block; three passes over the row (sum, squared
// deviations, output). y and y_copy may alias x or residual element for element (same type).
template <typename Y, typename C, typename T, typename R>
__global__ void layernorm_forward_kernel(Y* y, C* y_copy, float* mean, float* rstd, const T* x, const R* residual,
                                         const T* gamma, const T* beta, int rows, int cols, float eps) {
  const int row = blockIdx.x * kRowsPerBlock + static_cast<int>(threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;  // the whole warp leaves together: warp_sum below sees all 32 lanes
  const std::size_t base = static_cast<std::size_t>(row) * static_cast<std::size_t>(cols);

  float sum = 0.0f;
  for (int c = lane; c < cols; c += 32) sum += input_at(x, residual, base + c);
  const float mu = cuda::warp_sum(sum) / static_cast<float>(cols);

  float sq = 0.0f;
  for (int c = lane; c < cols; c += 32) {
    const float d = input_at(x, residual, base + c) - mu;
    sq += d * d;
  }
  const float inv = 1.0f / sqrtf(cuda::warp_sum(sq) / static_cast<float>(cols) + eps);

  for (int c = lane; c < cols; c += 32) {
    const float z = input_at(x, residual, base + c);
    const float out = (z - mu) * inv * cuda::load(gamma + c) + cuda::load(beta + c);
    cuda::store(y + base + c, out);
    if (y_copy != nullptr) cuda::store(y_copy + base + c, out);  // rounded once, from the float value
  }
  if (lane == 0) {
    mean[row] = mu;
    rstd[row] = inv;
  }
}

// First pass of the parameter gradients: for column col and row chunk k (blockIdx.y),
//   partial[k · cols + col] (=) Σ_rows-of-chunk dy · xhat      (dgamma)
//   partial[(kReductionChunks + k) · cols + col] (=) Σ dy      (dbeta)
// Grid (ceil(cols / kColumnThreads), kReductionChunks), one thread per column; rows in ascending order.
template <typename DY, typename X, typename R>
__global__ void layernorm_param_partials_kernel(float* partial, const DY* dy, const X* x, const R* residual,
                                                const float* mean, const float* rstd, int rows, int cols) {
  const int col = blockIdx.x * kColumnThreads + threadIdx.x;
  if (col >= cols) return;
  const int chunk = blockIdx.y;
  const int chunk_rows = (rows + kReductionChunks - 1) / kReductionChunks;
  const int r0 = chunk * chunk_rows;
  const int r1 = min(rows, r0 + chunk_rows);
  float g = 0.0f, b = 0.0f;
  for (int r = r0; r < r1; ++r) {
    const std::size_t index = static_cast<std::size_t>(r) * static_cast<std::size_t>(cols) + col;
    const float xhat = (input_at(x, residual, index) - mean[r]) * rstd[r];
    const float d = cuda::load(dy + index);
    g += d * xhat;
    b += d;
  }
  partial[static_cast<std::size_t>(chunk) * cols + col] = g;
  partial[static_cast<std::size_t>(kReductionChunks + chunk) * cols + col] = b;
}

// Second pass: dgamma[col], dbeta[col] (=) the kReductionChunks partials of column col added in chunk order.
// Grid-stride over columns, one thread per column.
__global__ void layernorm_param_finish_kernel(float* dgamma, float* dbeta, const float* partial, int cols) {
  const int stride = gridDim.x * blockDim.x;
  for (int col = blockIdx.x * blockDim.x + threadIdx.x; col < cols; col += stride) {
    float g = 0.0f, b = 0.0f;
    for (int k = 0; k < kReductionChunks; ++k) {
      g += partial[static_cast<std::size_t>(k) * cols + col];
      b += partial[static_cast<std::size_t>(kReductionChunks + k) * cols + col];
    }
    dgamma[col] = g;
    dbeta[col] = b;
  }
}

// dz[rows, cols] (=) rstd · (dxhat - mean(dxhat) - xhat · mean(dxhat · xhat)), dxhat = dy · gamma. One warp
// per row, kRowsPerBlock rows per block; dz may alias dy (lane l reads dy[c] before writing dz[c], and no
// other lane touches column c).
template <typename DZ, typename DY, typename X, typename R>
__global__ void layernorm_backward_kernel(DZ* dz, const DY* dy, const X* x, const R* residual, const float* mean,
                                          const float* rstd, const X* gamma, int rows, int cols) {
  const int row = blockIdx.x * kRowsPerBlock + static_cast<int>(threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const std::size_t base = static_cast<std::size_t>(row) * static_cast<std::size_t>(cols);
  const float mu = mean[row], inv = rstd[row];

  float sum_dxhat = 0.0f, sum_dxhat_xhat = 0.0f;
  for (int c = lane; c < cols; c += 32) {
    const float xhat = (input_at(x, residual, base + c) - mu) * inv;
    const float dxhat = cuda::load(dy + base + c) * cuda::load(gamma + c);
    sum_dxhat += dxhat;
    sum_dxhat_xhat += dxhat * xhat;
  }
  const float mean_dxhat = cuda::warp_sum(sum_dxhat) / static_cast<float>(cols);
  const float mean_dxhat_xhat = cuda::warp_sum(sum_dxhat_xhat) / static_cast<float>(cols);

  for (int c = lane; c < cols; c += 32) {
    const float xhat = (input_at(x, residual, base + c) - mu) * inv;
    const float dxhat = cuda::load(dy + base + c) * cuda::load(gamma + c);
    cuda::store(dz + base + c, inv * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat));
  }
}

// The forward launch behind both forward launchers (y_copy already null when not wanted).
template <typename Y, typename C, typename T, typename R>
void launch_layernorm_forward(Y* y, C* y_copy, float* mean, float* rstd, const T* x, const R* residual,
                              const T* gamma, const T* beta, int rows, int cols, float eps, CudaStream stream) {
  BERTRAIN_CHECK(rows > 0 && cols > 0, "layernorm_forward_cuda: rows " << rows << ", cols " << cols);
  BERTRAIN_CHECK(eps >= 0.0f, "layernorm_forward_cuda: eps " << eps);
  BERTRAIN_CHECK(y != nullptr && mean != nullptr && rstd != nullptr && x != nullptr && gamma != nullptr &&
                     beta != nullptr,
                 "layernorm_forward_cuda: null pointer (only residual and y_copy may be null)");
  const unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  layernorm_forward_kernel<Y, C, T, R>
      <<<blocks, kRowThreads, 0, stream>>>(y, y_copy, mean, rstd, x, residual, gamma, beta, rows, cols, eps);
  BERTRAIN_CUDA_CHECK_LAUNCH("layernorm_forward_kernel");
}

// The plain backward's workspace: 2 · kReductionChunks · cols floats (gamma and beta partial sums side by side).
void check_layernorm_workspace(const GpuHandles& handles, int cols, const char* what) {
  const std::size_t needed = 2 * static_cast<std::size_t>(kReductionChunks) * static_cast<std::size_t>(cols);
  BERTRAIN_CHECK(handles.workspace != nullptr && handles.workspace_elements >= needed,
                 what << ": reduction workspace of " << handles.workspace_elements << " floats, needs " << needed
                      << " for " << cols << " columns");
}

// The backward launches behind both backward launchers: parameter gradients, then dz.
template <typename DZ, typename DY, typename X, typename R>
void launch_layernorm_backward(const GpuHandles& handles, DZ* dz, float* dgamma, float* dbeta, const DY* dy,
                               const X* x, const R* residual, const float* mean, const float* rstd, const X* gamma,
                               int rows, int cols) {
  BERTRAIN_CHECK(rows > 0 && cols > 0, "layernorm_backward_cuda: rows " << rows << ", cols " << cols);
  BERTRAIN_CHECK(dz != nullptr && dgamma != nullptr && dbeta != nullptr && dy != nullptr && x != nullptr &&
                     mean != nullptr && rstd != nullptr && gamma != nullptr,
                 "layernorm_backward_cuda: null pointer (only residual may be null)");
  check_layernorm_workspace(handles, cols, "layernorm_backward_cuda");
  CudaStream stream = handles.stream;

  // Parameter gradients first: dz may alias dy, and all three launches run in order on one stream.
  const dim3 partial_grid(static_cast<unsigned>((cols + kColumnThreads - 1) / kColumnThreads), kReductionChunks);
  layernorm_param_partials_kernel<DY, X, R>
      <<<partial_grid, kColumnThreads, 0, stream>>>(handles.workspace, dy, x, residual, mean, rstd, rows, cols);
  BERTRAIN_CUDA_CHECK_LAUNCH("layernorm_param_partials_kernel");
  layernorm_param_finish_kernel<<<cuda::elementwise_blocks(static_cast<std::size_t>(cols), kColumnThreads),
                                  kColumnThreads, 0, stream>>>(dgamma, dbeta, handles.workspace, cols);
  BERTRAIN_CUDA_CHECK_LAUNCH("layernorm_param_finish_kernel");

  const unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  layernorm_backward_kernel<DZ, DY, X, R>
      <<<blocks, kRowThreads, 0, stream>>>(dz, dy, x, residual, mean, rstd, gamma, rows, cols);
  BERTRAIN_CUDA_CHECK_LAUNCH("layernorm_backward_kernel");
}

// ---- Fused dropout + residual add + LayerNorm -------------------------------------------------------------------
//
// Row geometry: one warp per row. A lane owns the row's units u = lane + 32·k, k < kUnits, each unit W consecutive
// columns: W = 16 / sizeof(T) (4 float or 8 bf16 columns, so x, gamma, beta and y_copy move as one 16-byte vector and
// the float residual, y, dy, dz as W / 4 float4) when cols % W == 0 and every pointer is 16-byte aligned, else
// W = 1. Unit k of every lane sits in registers between the passes over the row: kUnits is the smallest size class
// holding cols / W / 32 units (so registers follow the width), up to 1024 columns; wider rows take the uncached
// kernels, which re-read the row from global memory (any cols).

constexpr int kFusedWarps = 8;  // warps per block: 8 rows per block in the forward
constexpr int kFusedThreads = 32 * kFusedWarps;
constexpr int kMaxCachedCols = 1024;  // the widest row the cached kernels hold (BERT-large's H)

// Where the fused kernels apply the dropout mask. kInput: on the sublayer output before the residual add, every
// LayerNorm inside a layer (z = dropout(x) + residual, y = LayerNorm(z); backward dz, and dx = dropout'(dz)).
// kOutput: on the LayerNorm's output, the embeddings' (z = x, no residual; y = dropout(LayerNorm(z)); backward dz
// from dropout'(dy), no dx).
enum class DropoutAt { kInput, kOutput };

// Arguments shared by the fused kernels (by value: a kernel parameter block).
template <typename T>
struct FusedArgs {
  float* y;           // forward: [rows, cols] float stream (=)
  T* y_copy;          // forward: [rows, cols] T copy (=), or null
  float* mean;        // forward: [rows] (=)
  float* rstd;        // forward: [rows] (=)
  const float* saved_mean;  // backward: [rows], the forward's statistics
  const float* saved_rstd;  // backward: [rows]
  float* dz;          // backward: [rows, cols] (=), may be dy
  T* dx;              // backward: [rows, cols] (=); unused for DropoutAt::kOutput
  float* partial;     // backward: [2, blocks, cols] (=): dgamma then dbeta partials of each block
  const float* dy;    // backward: [rows, cols]
  const T* x;         // [rows, cols] the sublayer output
  const float* residual;  // [rows, cols]; unused for DropoutAt::kOutput
  const T* gamma;     // [cols]
  const T* beta;      // [cols]
  int rows, cols;
  int rows_per_block;  // backward: contiguous rows of one block
  float eps, p, scale;  // scale = 1 / (1 - p) (1 for p == 0: x · 1 is x)
  RandomKey key;
  DropoutLayout layout;  // token_slots on the device
  std::size_t layout_cols;
};

// W consecutive values at p as float: W == 1 one element, else W / kPack<T> 16-byte packs (common.cuh's load_pack /
// store_pack, rounded as cuda::store rounds): a bf16 unit of 8 columns is one pack of T and two of the float stream.
template <int W, typename T>
__device__ __forceinline__ void load_cols(const T* p, float (&v)[W]) {
  if constexpr (W == 1) {
    v[0] = cuda::load(p);
  } else {
    constexpr int kP = cuda::kPack<T>;
    static_assert(W % kP == 0, "vector units are whole 16-byte packs");
#pragma unroll
    for (int i = 0; i < W / kP; ++i) {
      float pack[kP];
      cuda::load_pack(p + i * kP, pack);
#pragma unroll
      for (int e = 0; e < kP; ++e) v[i * kP + e] = pack[e];
    }
  }
}

template <int W, typename T>
__device__ __forceinline__ void store_cols(T* p, const float (&v)[W]) {
  if constexpr (W == 1) {
    cuda::store(p, v[0]);
  } else {
    constexpr int kP = cuda::kPack<T>;
    static_assert(W % kP == 0, "vector units are whole 16-byte packs");
#pragma unroll
    for (int i = 0; i < W / kP; ++i) {
      float pack[kP];
#pragma unroll
      for (int e = 0; e < kP; ++e) pack[e] = v[i * kP + e];
      cuda::store_pack(p + i * kP, pack);
    }
  }
}

// Bit e (e < W) set when logical index first + e is kept. One Philox call serves four indices when first is a
// multiple of 4 (then first + 4g .. first + 4g + 3 are one group); otherwise each index draws its own group.
template <int W>
__device__ __forceinline__ uint32_t keep_bits(const RandomKey& key, uint64_t first, float p) {
  uint32_t bits = 0;
  if constexpr (W % 4 == 0) {
    if ((first & 3) == 0) {
#pragma unroll
      for (int g = 0; g < W / 4; ++g) {
        const Philox4 r = philox_group(key, (first >> 2) + g);
#pragma unroll
        for (int w = 0; w < 4; ++w) bits |= static_cast<uint32_t>(uniform_from_bits(r.v[w]) >= p) << (4 * g + w);
      }
      return bits;
    }
  }
#pragma unroll
  for (int e = 0; e < W; ++e) bits |= static_cast<uint32_t>(philox_uniform(key, first + e) >= p) << e;
  return bits;
}

// The row's first logical index (0 when nothing is drawn).
template <typename T>
__device__ __forceinline__ uint64_t row_first_index(const FusedArgs<T>& a, int row) {
  return a.p > 0.0f ? dropout_index(a.layout, a.layout_cols, static_cast<std::size_t>(row) * a.cols) : 0;
}

template <int W, typename T>
__device__ __forceinline__ uint32_t unit_keep_bits(const FusedArgs<T>& a, uint64_t first, int col) {
  return a.p > 0.0f ? keep_bits<W>(a.key, first + static_cast<uint64_t>(col), a.p) : ~0u;
}

// y, y_copy, mean, rstd (=) for one row per warp, kFusedWarps rows per block (grid ceil(rows / kFusedWarps)): z =
// dropout(x) + residual (kInput) or x (kOutput) read once into registers, mean and squared deviations from the
// registers (the two-pass statistics of layernorm_forward_kernel), then y = (z - mean) · rstd · gamma + beta
// (kOutput: then dropout(y), dropout.cu's keep ? y · scale : 0) stored as float and as T. y may alias residual and
// y_copy x: a lane reads all of its units before it writes any, and no other lane touches them.
template <typename T, int W, int kUnits, DropoutAt kAt>
__global__ void __launch_bounds__(kFusedThreads)
    dropout_residual_layernorm_forward_kernel(const FusedArgs<T> a) {
  const int row = blockIdx.x * kFusedWarps + static_cast<int>(threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= a.rows) return;  // the whole warp leaves together
  const int units = a.cols / W;
  const std::size_t base = static_cast<std::size_t>(row) * static_cast<std::size_t>(a.cols);
  const uint64_t first = row_first_index(a, row);

  float z[kUnits][W];
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < kUnits; ++k) {
    const int u = lane + 32 * k;
    if (u < units) {
      const int c = u * W;
      load_cols<W>(a.x + base + c, z[k]);
      if constexpr (kAt == DropoutAt::kInput) {
        float rv[W];
        load_cols<W>(a.residual + base + c, rv);
        const uint32_t keep = unit_keep_bits<W>(a, first, c);
#pragma unroll
        for (int e = 0; e < W; ++e) z[k][e] = ((keep >> e) & 1u ? z[k][e] * a.scale : 0.0f) + rv[e];
      }
#pragma unroll
      for (int e = 0; e < W; ++e) sum += z[k][e];
    } else {
#pragma unroll
      for (int e = 0; e < W; ++e) z[k][e] = 0.0f;
    }
  }
  const float mu = cuda::warp_sum(sum) / static_cast<float>(a.cols);
  float sq = 0.0f;
#pragma unroll
  for (int k = 0; k < kUnits; ++k) {
    if (lane + 32 * k < units) {
#pragma unroll
      for (int e = 0; e < W; ++e) {
        const float d = z[k][e] - mu;
        sq += d * d;
      }
    }
  }
  const float inv = 1.0f / sqrtf(cuda::warp_sum(sq) / static_cast<float>(a.cols) + a.eps);
#pragma unroll
  for (int k = 0; k < kUnits; ++k) {
    const int u = lane + 32 * k;
    if (u < units) {
      const int c = u * W;
      float g[W], b[W], out[W];
      load_cols<W>(a.gamma + c, g);
      load_cols<W>(a.beta + c, b);
#pragma unroll
      for (int e = 0; e < W; ++e) out[e] = (z[k][e] - mu) * inv * g[e] + b[e];
      if constexpr (kAt == DropoutAt::kOutput) {
        const uint32_t keep = unit_keep_bits<W>(a, first, c);
#pragma unroll
        for (int e = 0; e < W; ++e) out[e] = (keep >> e) & 1u ? out[e] * a.scale : 0.0f;
      }
      store_cols<W>(a.y + base + c, out);
      if (a.y_copy != nullptr) store_cols<W>(a.y_copy + base + c, out);  // rounded once, from the float value
    }
  }
  if (lane == 0) {
    a.mean[row] = mu;
    a.rstd[row] = inv;
  }
}

// The same for rows too wide for registers, any cols: one warp per row, single columns, three passes over global
// memory (z is stored in y by the first and read back by the next two; the same thread writes and reads each
// element). Philox per element.
template <typename T>
__global__ void __launch_bounds__(kFusedThreads)
    dropout_residual_layernorm_forward_uncached_kernel(const FusedArgs<T> a) {
  const int row = blockIdx.x * kFusedWarps + static_cast<int>(threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= a.rows) return;
  const std::size_t base = static_cast<std::size_t>(row) * static_cast<std::size_t>(a.cols);
  const uint64_t first = row_first_index(a, row);
  float* y = a.y + base;

  float sum = 0.0f;
  for (int c = lane; c < a.cols; c += 32) {
    const uint32_t keep = unit_keep_bits<1>(a, first, c);
    const float z = (keep & 1u ? cuda::load(a.x + base + c) * a.scale : 0.0f) + a.residual[base + c];
    y[c] = z;
    sum += z;
  }
  const float mu = cuda::warp_sum(sum) / static_cast<float>(a.cols);
  float sq = 0.0f;
  for (int c = lane; c < a.cols; c += 32) {
    const float d = y[c] - mu;
    sq += d * d;
  }
  const float inv = 1.0f / sqrtf(cuda::warp_sum(sq) / static_cast<float>(a.cols) + a.eps);
  for (int c = lane; c < a.cols; c += 32) {
    const float out = (y[c] - mu) * inv * cuda::load(a.gamma + c) + cuda::load(a.beta + c);
    y[c] = out;
    if (a.y_copy != nullptr) cuda::store(a.y_copy + base + c, out);
  }
  if (lane == 0) {
    a.mean[row] = mu;
    a.rstd[row] = inv;
  }
}

// Shared memory of the cached backward kernel: each warp's column sums of dy · xhat and dy, [kFusedWarps][2][kSumSpan]
// floats, lane-major: unit k's column e of lane l at (k · W + e) · 32 + l (a warp's 32 lanes touch 32 consecutive
// words: no bank conflicts while rows are added; the final sum over warps, one thread per column, reads 32 / W
// lanes' words W apart in 32: a W-way conflict, once per block). 48 KiB at BERT-base's width (bf16 and float),
// 64 KiB at 1024.
template <int W, int kUnits>
constexpr int kSumSpan = kUnits * W * 32;
template <int W, int kUnits>
constexpr std::size_t kBackwardSmem = 2 * kFusedWarps * kSumSpan<W, kUnits> * sizeof(float);

// dz, dx (=) for the rows [blockIdx.x · rows_per_block, + rows_per_block) of a block, warp w taking rows w, w + 8, ...
// of the range; the block's column sums of dy · xhat and dy (its rows in warp-then-row order) (=) into
// partial[blockIdx.x] and partial[gridDim.x + blockIdx.x] (rows of cols floats). One pass over the row into
// registers: z recomputed from x, residual and the regenerated mask (which also masks dx), xhat and dxhat = dy ·
// gamma kept, the row sums of dxhat and dxhat · xhat (layernorm_backward_kernel's formulas), then dz = rstd ·
// (dxhat - mean(dxhat) - xhat · mean(dxhat · xhat)) and dx = keep ? dz · scale : 0 rounded once to T. kOutput: z =
// x, the mask applies to dy instead (dy read as keep ? dy · scale : 0, dropout.cu's backward, before anything else
// uses it) and there is no dx. dz may alias dy: a lane reads all of its units before it writes any.
// Each warp adds its rows' dy · xhat and dy into its own column sums in shared memory (kBackwardSmem), not in
// registers: with them in registers a lane held ~200 registers at BERT-base's width, one block of 8 warps per SM, and
// the kRowPartialBlocks blocks ran in two waves; at most 128 (the launch bound up to 768 columns, where ptxas needs no
// spills for it) two blocks fit per SM, every block at once. The additions are the same, in the same order, so the
// results did not change.
template <int W, int kUnits>
constexpr int kBackwardMinBlocks = kSumSpan<W, kUnits> <= 768 ? 2 : 1;

template <typename T, int W, int kUnits, DropoutAt kAt>
__global__ void __launch_bounds__(kFusedThreads, (kBackwardMinBlocks<W, kUnits>))
    dropout_residual_layernorm_backward_kernel(const FusedArgs<T> a) {
  constexpr int kSpan = kSumSpan<W, kUnits>;
  extern __shared__ float warp_sums[];
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = threadIdx.x & 31;
  const int units = a.cols / W;
  const int r0 = blockIdx.x * a.rows_per_block, r1 = min(a.rows, r0 + a.rows_per_block);
  const float inv_cols = 1.0f / static_cast<float>(a.cols);

  float* g_sum = warp_sums + 2 * kSpan * warp + lane;  // + (k · W + e) · 32: this lane's column sums
  float* b_sum = g_sum + kSpan;
#pragma unroll
  for (int i = 0; i < kUnits * W; ++i) g_sum[32 * i] = b_sum[32 * i] = 0.0f;  // only this lane touches them

  for (int row = r0 + warp; row < r1; row += kFusedWarps) {  // warp-uniform bounds: warp_sum sees all 32 lanes
    const std::size_t base = static_cast<std::size_t>(row) * static_cast<std::size_t>(a.cols);
    const uint64_t first = row_first_index(a, row);
    const float mu = a.saved_mean[row], inv = a.saved_rstd[row];
    float xhat[kUnits][W], dxhat[kUnits][W];
    uint32_t keep[kUnits];
    float sum_dxhat = 0.0f, sum_dxhat_xhat = 0.0f;
#pragma unroll
    for (int k = 0; k < kUnits; ++k) {
      const int u = lane + 32 * k;
      keep[k] = 0;
      if (u < units) {
        const int c = u * W;
        float dyv[W], zv[W], g[W];
        load_cols<W>(a.dy + base + c, dyv);
        load_cols<W>(a.x + base + c, zv);
        load_cols<W>(a.gamma + c, g);
        keep[k] = unit_keep_bits<W>(a, first, c);
        if constexpr (kAt == DropoutAt::kInput) {
          float rv[W];
          load_cols<W>(a.residual + base + c, rv);
#pragma unroll
          for (int e = 0; e < W; ++e) zv[e] = ((keep[k] >> e) & 1u ? zv[e] * a.scale : 0.0f) + rv[e];
        } else {
#pragma unroll
          for (int e = 0; e < W; ++e) dyv[e] = (keep[k] >> e) & 1u ? dyv[e] * a.scale : 0.0f;
        }
#pragma unroll
        for (int e = 0; e < W; ++e) {
          xhat[k][e] = (zv[e] - mu) * inv;
          dxhat[k][e] = dyv[e] * g[e];
          sum_dxhat += dxhat[k][e];
          sum_dxhat_xhat += dxhat[k][e] * xhat[k][e];
          g_sum[32 * (k * W + e)] += dyv[e] * xhat[k][e];
          b_sum[32 * (k * W + e)] += dyv[e];
        }
      } else {
#pragma unroll
        for (int e = 0; e < W; ++e) xhat[k][e] = dxhat[k][e] = 0.0f;
      }
    }
    const float mean_dxhat = cuda::warp_sum(sum_dxhat) * inv_cols;
    const float mean_dxhat_xhat = cuda::warp_sum(sum_dxhat_xhat) * inv_cols;
#pragma unroll
    for (int k = 0; k < kUnits; ++k) {
      const int u = lane + 32 * k;
      if (u < units) {
        const int c = u * W;
        float dzv[W];
#pragma unroll
        for (int e = 0; e < W; ++e) dzv[e] = inv * (dxhat[k][e] - mean_dxhat - xhat[k][e] * mean_dxhat_xhat);
        store_cols<W>(a.dz + base + c, dzv);
        if constexpr (kAt == DropoutAt::kInput) {
          float dxv[W];
#pragma unroll
          for (int e = 0; e < W; ++e) dxv[e] = (keep[k] >> e) & 1u ? dzv[e] * a.scale : 0.0f;
          store_cols<W>(a.dx + base + c, dxv);
        }
      }
    }
  }
  __syncthreads();

  // The block's column sums: the warps' sums added in warp order.
  float* partial_g = a.partial + static_cast<std::size_t>(blockIdx.x) * a.cols;
  float* partial_b = a.partial + static_cast<std::size_t>(gridDim.x + blockIdx.x) * a.cols;
  for (int c = threadIdx.x; c < a.cols; c += kFusedThreads) {
    const int u = c / W, e = c - u * W;
    const int at = ((u >> 5) * W + e) * 32 + (u & 31);  // lane u % 32's unit u / 32, column e
    float g = 0.0f, b = 0.0f;
#pragma unroll
    for (int w = 0; w < kFusedWarps; ++w) {
      g += warp_sums[2 * kSpan * w + at];
      b += warp_sums[2 * kSpan * w + kSpan + at];
    }
    partial_g[c] = g;
    partial_b[c] = b;
  }
}

// The same for rows too wide for registers, any cols: blocks of ONE warp over contiguous row ranges, two passes
// over global memory per row (the row sums, then dz, dx and the column sums), Philox per element in each pass. The
// warp owns its block's partial rows and adds each row's dy · xhat and dy into them in row order (the first row
// stores). A fallback for widths BERT does not have.
template <typename T>
__global__ void __launch_bounds__(32) dropout_residual_layernorm_backward_uncached_kernel(const FusedArgs<T> a) {
  const int lane = threadIdx.x;
  const int r0 = blockIdx.x * a.rows_per_block, r1 = min(a.rows, r0 + a.rows_per_block);
  const float inv_cols = 1.0f / static_cast<float>(a.cols);
  float* partial_g = a.partial + static_cast<std::size_t>(blockIdx.x) * a.cols;
  float* partial_b = a.partial + static_cast<std::size_t>(gridDim.x + blockIdx.x) * a.cols;
  for (int c = lane; c < a.cols; c += 32) partial_g[c] = partial_b[c] = 0.0f;
  for (int row = r0; row < r1; ++row) {
    const std::size_t base = static_cast<std::size_t>(row) * static_cast<std::size_t>(a.cols);
    const uint64_t first = row_first_index(a, row);
    const float mu = a.saved_mean[row], inv = a.saved_rstd[row];
    float sum_dxhat = 0.0f, sum_dxhat_xhat = 0.0f;
    for (int c = lane; c < a.cols; c += 32) {
      const uint32_t keep = unit_keep_bits<1>(a, first, c);
      const float z = (keep & 1u ? cuda::load(a.x + base + c) * a.scale : 0.0f) + a.residual[base + c];
      const float xhat = (z - mu) * inv;
      const float dxhat = a.dy[base + c] * cuda::load(a.gamma + c);
      sum_dxhat += dxhat;
      sum_dxhat_xhat += dxhat * xhat;
    }
    const float mean_dxhat = cuda::warp_sum(sum_dxhat) * inv_cols;
    const float mean_dxhat_xhat = cuda::warp_sum(sum_dxhat_xhat) * inv_cols;
    for (int c = lane; c < a.cols; c += 32) {
      const uint32_t keep = unit_keep_bits<1>(a, first, c);
      const float z = (keep & 1u ? cuda::load(a.x + base + c) * a.scale : 0.0f) + a.residual[base + c];
      const float xhat = (z - mu) * inv;
      const float d = a.dy[base + c];  // read before dz[c] is written: dz may alias dy
      const float dxhat = d * cuda::load(a.gamma + c);
      partial_g[c] += d * xhat;
      partial_b[c] += d;
      const float dzv = inv * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
      a.dz[base + c] = dzv;
      cuda::store(a.dx + base + c, keep & 1u ? dzv * a.scale : 0.0f);
    }
  }
}

// dgamma[c], dbeta[c] (=) the `blocks` partial rows of column c added in block order. Grid (ceil(cols / 32), 2):
// blockIdx.y picks dgamma or dbeta; 256 threads = 32 columns × 8 slices, slice s adding blocks [s · blocks / 8,
// (s + 1) · blocks / 8) in order, then the 8 slice sums added in slice order.
__global__ void __launch_bounds__(256) fused_param_finish_kernel(float* dgamma, float* dbeta, const float* partial,
                                                                 int blocks, int cols) {
  __shared__ float slice_sums[8][32];
  const int lane = threadIdx.x & 31, slice = static_cast<int>(threadIdx.x >> 5);
  const int col = blockIdx.x * 32 + lane;
  const float* src = partial + static_cast<std::size_t>(blockIdx.y) * blocks * cols;
  const int b0 = slice * blocks / 8, b1 = (slice + 1) * blocks / 8;
  float acc = 0.0f;
  if (col < cols) {
    int b = b0;
    for (; b + 4 <= b1; b += 4) {  // four loads in flight, added in order
      float v[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) v[i] = src[static_cast<std::size_t>(b + i) * cols + col];
#pragma unroll
      for (int i = 0; i < 4; ++i) acc += v[i];
    }
    for (; b < b1; ++b) acc += src[static_cast<std::size_t>(b) * cols + col];
  }
  slice_sums[slice][lane] = acc;
  __syncthreads();
  if (slice == 0 && col < cols) {
    float total = 0.0f;
#pragma unroll
    for (int s = 0; s < 8; ++s) total += slice_sums[s][lane];
    (blockIdx.y == 0 ? dgamma : dbeta)[col] = total;
  }
}

// The fused ops' checks (kernels/layernorm.h): p in [0, 1]; when p > 0, dropout's layout checks and layout rows
// holding whole rows. Returns the layout's row width (0 when nothing is drawn).
std::size_t check_fused(int rows, int cols, float p, const DropoutLayout& layout, const char* what) {
  BERTRAIN_CHECK(rows > 0 && cols > 0, what << ": rows " << rows << ", cols " << cols);
  BERTRAIN_CHECK(p >= 0.0f && p <= 1.0f, what << ": dropout probability must be in [0, 1], got " << p);
  return p == 0.0f ? 0 : dropout_residual_layout_cols(layout, rows, cols, what);
}

template <typename T>
FusedArgs<T> fused_args(int rows, int cols, float p, const RandomKey& key, const DropoutLayout& layout,
                        std::size_t layout_cols) {
  FusedArgs<T> a{};
  a.rows = rows;
  a.cols = cols;
  a.p = p;
  a.scale = p > 0.0f ? 1.0f / (1.0f - p) : 1.0f;  // dropout.cu's float scale (inf for p == 1: nothing is kept)
  a.key = key;
  a.layout = layout;
  a.layout_cols = layout_cols;
  return a;
}

// The forward launchers' checks (but the residual's) and arguments; a.y_copy is cuda::separate_copy's.
template <typename T>
FusedArgs<T> fused_forward_args(float* y, T* y_copy, float* mean, float* rstd, const T* x, const T* gamma,
                                const T* beta, int rows, int cols, float eps, float p, const RandomKey& key,
                                const DropoutLayout& layout, const char* what) {
  const std::size_t layout_cols = check_fused(rows, cols, p, layout, what);
  BERTRAIN_CHECK(eps >= 0.0f, what << ": eps " << eps);
  BERTRAIN_CHECK(y != nullptr && mean != nullptr && rstd != nullptr && x != nullptr && gamma != nullptr &&
                     beta != nullptr,
                 what << ": null pointer (only y_copy may be null)");
  FusedArgs<T> a = fused_args<T>(rows, cols, p, key, layout, layout_cols);
  a.y = y;
  a.y_copy = cuda::separate_copy(y, y_copy, what);
  a.mean = mean;
  a.rstd = rstd;
  a.x = x;
  a.gamma = gamma;
  a.beta = beta;
  a.eps = eps;
  return a;
}

// The backward launchers' checks (but those of dx and the residual) and arguments.
template <typename T>
FusedArgs<T> fused_backward_args(float* dz, float* dgamma, float* dbeta, const float* dy, const T* x,
                                 const float* mean, const float* rstd, const T* gamma, int rows, int cols, float p,
                                 const RandomKey& key, const DropoutLayout& layout, const char* what) {
  const std::size_t layout_cols = check_fused(rows, cols, p, layout, what);
  BERTRAIN_CHECK(dz != nullptr && dgamma != nullptr && dbeta != nullptr && dy != nullptr && x != nullptr &&
                     mean != nullptr && rstd != nullptr && gamma != nullptr,
                 what << ": null pointer");
  FusedArgs<T> a = fused_args<T>(rows, cols, p, key, layout, layout_cols);
  a.dz = dz;
  a.dy = dy;
  a.x = x;
  a.saved_mean = mean;
  a.saved_rstd = rstd;
  a.gamma = gamma;
  return a;
}

// Launches Launch<T, W, k>, k the smallest of kClasses holding the row's units (cols / W per row, 32 lanes);
// false when none does. The class lists reach kMaxCachedCols columns exactly: 4-column units up to 8 per lane,
// 8-column units up to 4, single columns up to 32.
template <typename T, int W, template <typename, int, int> class Launch, int... kClasses>
bool launch_cached(const FusedArgs<T>& a, dim3 grid, CudaStream stream) {
  const int per_lane = (a.cols / W + 31) / 32;
  // kClasses ascend and || stops at the first class that fits: exactly one launch.
  return ((per_lane <= kClasses && (Launch<T, W, kClasses>::run(a, grid, stream), true)) || ...);
}

// The cached kernel of 16-byte units for this row width, or false (rows wider than kMaxCachedCols).
template <typename T, template <typename, int, int> class Launch>
bool launch_vector_units(const FusedArgs<T>& a, dim3 grid, CudaStream stream) {
  if (a.cols > kMaxCachedCols) return false;
  if constexpr (sizeof(T) == 4) {
    return launch_cached<T, 4, Launch, 1, 2, 3, 4, 6, 8>(a, grid, stream);
  } else {
    return launch_cached<T, 8, Launch, 1, 2, 3, 4>(a, grid, stream);
  }
}

// The cached kernel for this row width and storage (vector units when `vector`), or false (rows wider than
// kMaxCachedCols).
template <typename T, template <typename, int, int> class Launch>
bool launch_fused(bool vector, const FusedArgs<T>& a, dim3 grid, CudaStream stream) {
  if (vector) return launch_vector_units<T, Launch>(a, grid, stream);
  return a.cols <= kMaxCachedCols && launch_cached<T, 1, Launch, 1, 4, 32>(a, grid, stream);
}

template <DropoutAt kAt>
struct Forward {
  template <typename T, int W, int kUnits>
  struct Launch {
    static void run(const FusedArgs<T>& a, dim3 grid, CudaStream stream) {
      dropout_residual_layernorm_forward_kernel<T, W, kUnits, kAt><<<grid, kFusedThreads, 0, stream>>>(a);
      BERTRAIN_CUDA_CHECK_LAUNCH("dropout_residual_layernorm_forward_kernel");
    }
  };
};

template <DropoutAt kAt>
struct Backward {
  template <typename T, int W, int kUnits>
  struct Launch {
    static void run(const FusedArgs<T>& a, dim3 grid, CudaStream stream) {
      const auto kernel = dropout_residual_layernorm_backward_kernel<T, W, kUnits, kAt>;
      constexpr std::size_t smem = kBackwardSmem<W, kUnits>;
      if constexpr (smem > cuda::kStaticSmemLimit) {
        cuda::allow_shared_memory(kernel, smem, cuda::current_device_facts());
      }
      kernel<<<grid, kFusedThreads, smem, stream>>>(a);
      BERTRAIN_CUDA_CHECK_LAUNCH("dropout_residual_layernorm_backward_kernel");
    }
  };
};

// Blocks of the fused backward over contiguous row ranges of a.rows_per_block (=): as many as fill the GPU (at most
// kRowPartialBlocks), a function of rows alone so that the partial sums, and so dgamma and dbeta, are the same on
// every device. Checks that handles.workspace holds their partials; a.partial (=) it.
template <typename T>
int fused_backward_blocks(const GpuHandles& handles, FusedArgs<T>& a, int warps_per_block, const char* what) {
  int blocks = (a.rows + warps_per_block - 1) / warps_per_block;
  blocks = blocks < kRowPartialBlocks ? blocks : kRowPartialBlocks;
  a.rows_per_block = (a.rows + blocks - 1) / blocks;
  blocks = (a.rows + a.rows_per_block - 1) / a.rows_per_block;  // no block without rows
  const std::size_t needed = 2 * static_cast<std::size_t>(blocks) * static_cast<std::size_t>(a.cols);
  BERTRAIN_CHECK(handles.workspace != nullptr && handles.workspace_elements >= needed,
                 what << ": reduction workspace of " << handles.workspace_elements << " floats, needs " << needed
                      << " for " << a.rows << " rows of " << a.cols
                      << " (size it with gpu_reduction_workspace_elements or dropout_residual_layernorm_workspace_"
                         "elements)");
  a.partial = handles.workspace;
  return blocks;
}

// dgamma, dbeta (=) the `blocks` partial rows the fused backward left in handles.workspace.
void finish_fused_param_gradients(const GpuHandles& handles, float* dgamma, float* dbeta, int blocks, int cols) {
  const dim3 finish_grid(static_cast<unsigned>((cols + 31) / 32), 2);
  fused_param_finish_kernel<<<finish_grid, 256, 0, handles.stream>>>(dgamma, dbeta, handles.workspace, blocks, cols);
  BERTRAIN_CUDA_CHECK_LAUNCH("fused_param_finish_kernel");
}

}  // namespace

template <typename T>
void dropout_residual_layernorm_forward_cuda(float* y, T* y_copy, float* mean, float* rstd, const T* x,
                                             const float* residual, const T* gamma, const T* beta, int rows, int cols,
                                             float eps, float p, const RandomKey& key, const DropoutLayout& layout,
                                             CudaStream stream) {
  const char* what = "dropout_residual_layernorm_forward_cuda";
  FusedArgs<T> a = fused_forward_args(y, y_copy, mean, rstd, x, gamma, beta, rows, cols, eps, p, key, layout, what);
  BERTRAIN_CHECK(residual != nullptr, what << ": null pointer (only y_copy may be null)");
  a.residual = residual;
  const dim3 grid(static_cast<unsigned>((rows + kFusedWarps - 1) / kFusedWarps));
  const bool vector = cols % cuda::kPack<T> == 0 && cuda::aligned16(y, a.y_copy, x, residual, gamma, beta);
  if (launch_fused<T, Forward<DropoutAt::kInput>::template Launch>(vector, a, grid, stream)) return;
  dropout_residual_layernorm_forward_uncached_kernel<T><<<grid, kFusedThreads, 0, stream>>>(a);
  BERTRAIN_CUDA_CHECK_LAUNCH("dropout_residual_layernorm_forward_uncached_kernel");
}

template <typename T>
void dropout_residual_layernorm_backward_cuda(const GpuHandles& handles, float* dz, T* dx, float* dgamma,
                                              float* dbeta, const float* dy, const T* x, const float* residual,
                                              const float* mean, const float* rstd, const T* gamma, int rows, int cols,
                                              float p, const RandomKey& key, const DropoutLayout& layout) {
  const char* what = "dropout_residual_layernorm_backward_cuda";
  FusedArgs<T> a =
      fused_backward_args(dz, dgamma, dbeta, dy, x, mean, rstd, gamma, rows, cols, p, key, layout, what);
  BERTRAIN_CHECK(dx != nullptr && residual != nullptr, what << ": null pointer");
  const void* dx_address = dx;
  BERTRAIN_CHECK(dx_address != dz && dx_address != dy && dx_address != x && dx_address != residual,
                 what << ": dx must not alias dz, dy, x or residual");
  a.dx = dx;
  a.residual = residual;

  const bool vector = cols % cuda::kPack<T> == 0 && cuda::aligned16(dz, dx, dy, x, residual, gamma);
  const bool cached = cols <= kMaxCachedCols;
  const int warps_per_block = cached ? kFusedWarps : 1;  // the uncached kernel's blocks are one warp
  const int blocks = fused_backward_blocks(handles, a, warps_per_block, what);
  const dim3 grid(static_cast<unsigned>(blocks));
  if (!launch_fused<T, Backward<DropoutAt::kInput>::template Launch>(vector, a, grid, handles.stream)) {
    BERTRAIN_CHECK(!cached, what << ": no cached kernel for rows of " << cols);
    dropout_residual_layernorm_backward_uncached_kernel<T><<<grid, 32, 0, handles.stream>>>(a);
    BERTRAIN_CUDA_CHECK_LAUNCH("dropout_residual_layernorm_backward_uncached_kernel");
  }
  finish_fused_param_gradients(handles, dgamma, dbeta, blocks, cols);
}

template <typename T>
void layernorm_dropout_forward_cuda(float* y, T* y_copy, float* mean, float* rstd, const T* x, const T* gamma,
                                    const T* beta, int rows, int cols, float eps, float p, const RandomKey& key,
                                    const DropoutLayout& layout, CudaStream stream) {
  const char* what = "layernorm_dropout_forward_cuda";
  const FusedArgs<T> a =
      fused_forward_args(y, y_copy, mean, rstd, x, gamma, beta, rows, cols, eps, p, key, layout, what);
  const dim3 grid(static_cast<unsigned>((rows + kFusedWarps - 1) / kFusedWarps));
  const bool vector = cols % cuda::kPack<T> == 0 && cuda::aligned16(y, a.y_copy, x, gamma, beta);
  if (vector && launch_vector_units<T, Forward<DropoutAt::kOutput>::template Launch>(a, grid, stream)) return;
  // Rows not of whole 16-byte units, or wider than registers hold: the composition the CPU twin is.
  layernorm_forward_cuda(y, static_cast<T*>(nullptr), mean, rstd, x, static_cast<const float*>(nullptr), gamma, beta,
                         rows, cols, eps, stream);
  dropout_forward_cuda(y, a.y_copy, static_cast<const float*>(y), static_cast<std::size_t>(rows) * cols, p, key,
                       layout, stream);
}

template <typename T>
void layernorm_dropout_backward_cuda(const GpuHandles& handles, float* dz, float* dgamma, float* dbeta,
                                     const float* dy, const T* x, const float* mean, const float* rstd, const T* gamma,
                                     int rows, int cols, float p, const RandomKey& key, const DropoutLayout& layout) {
  const char* what = "layernorm_dropout_backward_cuda";
  FusedArgs<T> a =
      fused_backward_args(dz, dgamma, dbeta, dy, x, mean, rstd, gamma, rows, cols, p, key, layout, what);
  const bool vector = cols % cuda::kPack<T> == 0 && cuda::aligned16(dz, dy, x, gamma);
  if (vector && cols <= kMaxCachedCols) {
    const int blocks = fused_backward_blocks(handles, a, kFusedWarps, what);
    const bool launched = launch_vector_units<T, Backward<DropoutAt::kOutput>::template Launch>(
        a, dim3(static_cast<unsigned>(blocks)), handles.stream);
    BERTRAIN_CHECK(launched, what << ": no cached kernel for rows of " << cols);
    finish_fused_param_gradients(handles, dgamma, dbeta, blocks, cols);
    return;
  }
  // The composition the CPU twin is: dropout' into dz, then LayerNorm's backward in place (its workspace checked
  // before the first launch).
  check_layernorm_workspace(handles, cols, what);
  dropout_backward_cuda(dz, dy, static_cast<std::size_t>(rows) * cols, p, key, layout, handles.stream);
  layernorm_backward_cuda(handles, dz, dgamma, dbeta, static_cast<const float*>(dz), x,
                          static_cast<const float*>(nullptr), mean, rstd, gamma, rows, cols);
}

template <typename T>
void layernorm_forward_cuda(T* y, float* mean, float* rstd, const T* x, const T* residual, const T* gamma,
                            const T* beta, int rows, int cols, float eps, CudaStream stream) {
  launch_layernorm_forward(y, static_cast<T*>(nullptr), mean, rstd, x, residual, gamma, beta, rows, cols, eps,
                           stream);
}

template <typename T>
void layernorm_forward_cuda(float* y, T* y_copy, float* mean, float* rstd, const T* x, const float* residual,
                            const T* gamma, const T* beta, int rows, int cols, float eps, CudaStream stream) {
  launch_layernorm_forward(y, cuda::separate_copy(y, y_copy, "layernorm_forward_cuda"), mean, rstd, x, residual, gamma,
                           beta, rows, cols, eps, stream);
}

template <typename T>
void layernorm_backward_cuda(const GpuHandles& handles, T* dz, float* dgamma, float* dbeta, const T* dy, const T* x,
                             const T* residual, const float* mean, const float* rstd, const T* gamma, int rows,
                             int cols) {
  launch_layernorm_backward(handles, dz, dgamma, dbeta, dy, x, residual, mean, rstd, gamma, rows, cols);
}

void layernorm_backward_cuda(const GpuHandles& handles, float* dz, float* dgamma, float* dbeta, const float* dy,
                             const bf16* x, const float* residual, const float* mean, const float* rstd,
                             const bf16* gamma, int rows, int cols) {
  launch_layernorm_backward(handles, dz, dgamma, dbeta, dy, x, residual, mean, rstd, gamma, rows, cols);
}

template void layernorm_forward_cuda<float>(float*, float*, float*, const float*, const float*, const float*,
                                            const float*, int, int, float, CudaStream);
template void layernorm_forward_cuda<bf16>(bf16*, float*, float*, const bf16*, const bf16*, const bf16*, const bf16*,
                                           int, int, float, CudaStream);
template void layernorm_forward_cuda<float>(float*, float*, float*, float*, const float*, const float*, const float*,
                                            const float*, int, int, float, CudaStream);
template void layernorm_forward_cuda<bf16>(float*, bf16*, float*, float*, const bf16*, const float*, const bf16*,
                                           const bf16*, int, int, float, CudaStream);
template void layernorm_backward_cuda<float>(const GpuHandles&, float*, float*, float*, const float*, const float*,
                                             const float*, const float*, const float*, const float*, int, int);
template void layernorm_backward_cuda<bf16>(const GpuHandles&, bf16*, float*, float*, const bf16*, const bf16*,
                                            const bf16*, const float*, const float*, const bf16*, int, int);
template void dropout_residual_layernorm_forward_cuda<float>(float*, float*, float*, float*, const float*,
                                                             const float*, const float*, const float*, int, int, float,
                                                             float, const RandomKey&, const DropoutLayout&, CudaStream);
template void dropout_residual_layernorm_forward_cuda<bf16>(float*, bf16*, float*, float*, const bf16*, const float*,
                                                            const bf16*, const bf16*, int, int, float, float,
                                                            const RandomKey&, const DropoutLayout&, CudaStream);
template void dropout_residual_layernorm_backward_cuda<float>(const GpuHandles&, float*, float*, float*, float*,
                                                              const float*, const float*, const float*, const float*,
                                                              const float*, const float*, int, int, float,
                                                              const RandomKey&, const DropoutLayout&);
template void dropout_residual_layernorm_backward_cuda<bf16>(const GpuHandles&, float*, bf16*, float*, float*,
                                                             const float*, const bf16*, const float*, const float*,
                                                             const float*, const bf16*, int, int, float,
                                                             const RandomKey&, const DropoutLayout&);
template void layernorm_dropout_forward_cuda<float>(float*, float*, float*, float*, const float*, const float*,
                                                    const float*, int, int, float, float, const RandomKey&,
                                                    const DropoutLayout&, CudaStream);
template void layernorm_dropout_forward_cuda<bf16>(float*, bf16*, float*, float*, const bf16*, const bf16*,
                                                   const bf16*, int, int, float, float, const RandomKey&,
                                                   const DropoutLayout&, CudaStream);
template void layernorm_dropout_backward_cuda<float>(const GpuHandles&, float*, float*, float*, const float*,
                                                     const float*, const float*, const float*, const float*, int, int,
                                                     float, const RandomKey&, const DropoutLayout&);
template void layernorm_dropout_backward_cuda<bf16>(const GpuHandles&, float*, float*, float*, const float*,
                                                    const bf16*, const float*, const float*, const bf16*, int, int,
                                                    float, const RandomKey&, const DropoutLayout&);

}  // namespace bertrain

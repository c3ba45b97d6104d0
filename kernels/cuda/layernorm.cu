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
#include "kernels/layernorm.h"

#include <type_traits>

#include "core/error.h"
#include "kernels/cuda/common.cuh"

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

// The backward launches behind both backward launchers: parameter gradients, then dz.
template <typename DZ, typename DY, typename X, typename R>
void launch_layernorm_backward(const GpuHandles& handles, DZ* dz, float* dgamma, float* dbeta, const DY* dy,
                               const X* x, const R* residual, const float* mean, const float* rstd, const X* gamma,
                               int rows, int cols) {
  BERTRAIN_CHECK(rows > 0 && cols > 0, "layernorm_backward_cuda: rows " << rows << ", cols " << cols);
  BERTRAIN_CHECK(dz != nullptr && dgamma != nullptr && dbeta != nullptr && dy != nullptr && x != nullptr &&
                     mean != nullptr && rstd != nullptr && gamma != nullptr,
                 "layernorm_backward_cuda: null pointer (only residual may be null)");
  const std::size_t needed = 2 * static_cast<std::size_t>(kReductionChunks) * static_cast<std::size_t>(cols);
  BERTRAIN_CHECK(handles.workspace != nullptr && handles.workspace_elements >= needed,
                 "layernorm_backward_cuda: reduction workspace of " << handles.workspace_elements
                                                                    << " floats, needs " << needed << " for " << cols
                                                                    << " columns");
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

}  // namespace

template <typename T>
void layernorm_forward_cuda(T* y, float* mean, float* rstd, const T* x, const T* residual, const T* gamma,
                            const T* beta, int rows, int cols, float eps, CudaStream stream) {
  launch_layernorm_forward(y, static_cast<T*>(nullptr), mean, rstd, x, residual, gamma, beta, rows, cols, eps,
                           stream);
}

template <typename T>
void layernorm_forward_cuda(float* y, T* y_copy, float* mean, float* rstd, const T* x, const float* residual,
                            const T* gamma, const T* beta, int rows, int cols, float eps, CudaStream stream) {
  // For T = float the stream is its own copy: one store. For bf16 the two must be distinct buffers.
  if (static_cast<const void*>(y_copy) == static_cast<const void*>(y)) {
    BERTRAIN_CHECK((std::is_same_v<T, float>), "layernorm_forward_cuda: the bf16 copy is the float output");
    y_copy = nullptr;
  }
  launch_layernorm_forward(y, y_copy, mean, rstd, x, residual, gamma, beta, rows, cols, eps, stream);
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

}  // namespace bertrain

// Fully connected layer on the GPU: cuBLAS GEMMs with fp32 compute, a bias broadcast and a deterministic
// two-pass column sum for the bias gradient.
//
// Row-major to column-major. cuBLAS computes C = α·op(A)·op(B) + β·C on column-major matrices. A row-major
// [r, c] buffer with leading dimension c is, read column-major, the c × r matrix Mᵀ. So every row-major
// product Z = X·Y is issued as its transpose Zᵀ = Yᵀ·Xᵀ, whose operands are the buffers as they lie.
// Below, "buf(r×c)" is the column-major view of a buffer (= the transpose of its row-major meaning).
//
//   y[rows, out] = x[rows, in] · W[out, in]ᵀ
//     yᵀ (out × rows) = W · xᵀ.  W lies as Wᵀ (in × out, ld in) → opA = T gives W (out × in);
//     x lies as xᵀ (in × rows, ld in) → opB = N.  m = out, n = rows, k = in; C = y lies as yᵀ, ldc = out.
//   dx[rows, in] = dy[rows, out] · W[out, in]
//     dxᵀ (in × rows) = Wᵀ · dyᵀ.  W lies as Wᵀ (in × out, ld in) → opA = N;
//     dy lies as dyᵀ (out × rows, ld out) → opB = N.  m = in, n = rows, k = out; C = dx, ldc = in;
//     β = 1 when accumulating into dx, else 0.
//   dw[out, in] = dy[rows, out]ᵀ · x[rows, in]
//     dwᵀ (in × out) = xᵀ · dy.  x lies as xᵀ (in × rows, ld in) → opA = N;
//     dy lies as dyᵀ (out × rows, ld out) → opB = T gives dy (rows × out).  m = in, n = out, k = rows;
//     C = dw lies as dwᵀ, ldc = in; β = 0.
//
// Types: T = float → CUDA_R_32F everywhere (CUBLAS_COMPUTE_32F with the handle's default math mode: no
// TF32, so fp32 matches the CPU); T = bf16 → CUDA_R_16BF A/B/C with fp32 compute, except dw whose C is
// CUDA_R_32F (bf16 inputs, fp32 output: a supported cublasGemmEx combination), and dx in the mixed overload,
// whose C is CUDA_R_32F too (accumulating with β = 1 reads and writes fp32).
// The forward bias is broadcast into y first and the GEMM runs with β = 1, so y = x·Wᵀ + b is rounded to T
// once (for bf16 this avoids rounding x·Wᵀ and then x·Wᵀ + b).
#include "kernels/linear.h"

#include <cublas_v2.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace bertrain {

namespace {

constexpr int kThreads = 256;

// C (m × n, column-major) = op(A) · op(B) + beta · C with fp32 compute (alpha = 1).
void gemm(const GpuHandles& handles, cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k,
          const void* a, cudaDataType_t a_type, int lda, const void* b, cudaDataType_t b_type, int ldb, float beta,
          void* c, cudaDataType_t c_type, int ldc) {
  const float alpha = 1.0f;
  BERTRAIN_CUBLAS_CHECK(cublasGemmEx(handles.blas, op_a, op_b, m, n, k, &alpha, a, a_type, lda, b, b_type, ldb, &beta,
                                     c, c_type, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

bool ranges_overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto a0 = reinterpret_cast<std::uintptr_t>(a), b0 = reinterpret_cast<std::uintptr_t>(b);
  return a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

// y[rows, cols] (+=) b[cols]. Grid-stride over the rows·cols elements of y.
template <typename T>
__global__ void bias_add_kernel(T* y, const T* b, std::size_t n, int cols) {
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    cuda::store(y + i, cuda::load(y + i) + cuda::load(b + i % static_cast<std::size_t>(cols)));
  }
}

// y[rows, cols] (=) b[cols] broadcast over rows (the forward GEMM then adds x·Wᵀ with β = 1).
// Grid-stride over the rows·cols elements of y.
template <typename T>
__global__ void bias_broadcast_kernel(T* y, const T* b, std::size_t n, int cols) {
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = b[i % static_cast<std::size_t>(cols)];
  }
}

// First pass of the column sum: partial[chunk, col] (=) Σ x[r, col] over the rows r of chunk
// [chunk·rows_per_chunk, (chunk + 1)·rows_per_chunk) ∩ [0, rows), added in row order (0 for an empty chunk).
// Grid (ceil(cols / blockDim.x), kReductionChunks): one thread per (column, chunk); a warp reads 32
// consecutive columns of a row.
template <typename T>
__global__ void column_sum_partial_kernel(float* partial, const T* x, int rows, int cols, int rows_per_chunk) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int chunk = blockIdx.y;
  if (col >= cols) return;
  const long long first = static_cast<long long>(chunk) * rows_per_chunk;
  const long long last = first + rows_per_chunk < rows ? first + rows_per_chunk : rows;
  float sum = 0.0f;
  for (long long r = first; r < last; ++r) sum += cuda::load(x + static_cast<std::size_t>(r) * cols + col);
  partial[static_cast<std::size_t>(chunk) * cols + col] = sum;
}

// Second pass: out[col] (=) Σ_chunk partial[chunk, col], chunks added in order 0, 1, ..., so the result
// depends only on the input. One thread per column.
__global__ void column_sum_final_kernel(float* out, const float* partial, int cols) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  float sum = 0.0f;
  for (int chunk = 0; chunk < kReductionChunks; ++chunk) sum += partial[static_cast<std::size_t>(chunk) * cols + col];
  out[col] = sum;
}

}  // namespace

template <typename T>
void bias_add_cuda(T* y, const T* b, int rows, int cols, CudaStream stream) {
  BERTRAIN_CHECK(rows > 0 && cols > 0, "bias_add_cuda: rows " << rows << ", cols " << cols);
  BERTRAIN_CHECK(y != nullptr && b != nullptr, "bias_add_cuda: null y or b");
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  bias_add_kernel<T><<<cuda::elementwise_blocks(n, kThreads), kThreads, 0, stream>>>(y, b, n, cols);
  BERTRAIN_CUDA_CHECK_LAUNCH("bias_add_kernel");
}

template <typename T>
void column_sum_cuda(const GpuHandles& handles, float* out, const T* x, int rows, int cols) {
  BERTRAIN_CHECK(rows > 0 && cols > 0, "column_sum_cuda: rows " << rows << ", cols " << cols);
  BERTRAIN_CHECK(out != nullptr && x != nullptr, "column_sum_cuda: null out or x");
  const std::size_t needed = static_cast<std::size_t>(kReductionChunks) * cols;
  BERTRAIN_CHECK(handles.workspace != nullptr && handles.workspace_elements >= needed,
                 "column_sum_cuda: " << cols << " columns need " << needed
                                     << " workspace floats (kReductionChunks × cols), the context has "
                                     << handles.workspace_elements << " (size it with gpu_reduction_workspace_elements)");
  BERTRAIN_CHECK(!ranges_overlap(out, cols * sizeof(float), handles.workspace, needed * sizeof(float)),
                 "column_sum_cuda: out lies in the reduction workspace");
  const int rows_per_chunk = (rows + kReductionChunks - 1) / kReductionChunks;
  const dim3 grid((cols + kThreads - 1) / kThreads, kReductionChunks);
  column_sum_partial_kernel<T><<<grid, kThreads, 0, handles.stream>>>(handles.workspace, x, rows, cols, rows_per_chunk);
  BERTRAIN_CUDA_CHECK_LAUNCH("column_sum_partial_kernel");
  column_sum_final_kernel<<<(cols + kThreads - 1) / kThreads, kThreads, 0, handles.stream>>>(out, handles.workspace,
                                                                                             cols);
  BERTRAIN_CUDA_CHECK_LAUNCH("column_sum_final_kernel");
}

template <typename T>
void linear_forward_cuda(const GpuHandles& handles, T* y, const T* x, const T* w, const T* b, int rows, int in,
                         int out) {
  BERTRAIN_CHECK(rows > 0 && in > 0 && out > 0,
                 "linear_forward_cuda: rows " << rows << ", in " << in << ", out " << out);
  BERTRAIN_CHECK(y != nullptr && x != nullptr && w != nullptr, "linear_forward_cuda: null y, x or w");
  BERTRAIN_CHECK(handles.blas != nullptr, "linear_forward_cuda: no cuBLAS handle");
  float beta = 0.0f;
  if (b != nullptr) {
    const std::size_t n = static_cast<std::size_t>(rows) * out;
    bias_broadcast_kernel<T><<<cuda::elementwise_blocks(n, kThreads), kThreads, 0, handles.stream>>>(y, b, n, out);
    BERTRAIN_CUDA_CHECK_LAUNCH("bias_broadcast_kernel");
    beta = 1.0f;
  }
  constexpr cudaDataType_t type = cuda::CudaDataType<T>::value;
  // yᵀ (out × rows) = W · xᵀ (+ yᵀ holding the bias).
  gemm(handles, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, w, type, in, x, type, in, beta, y, type, out);
}

namespace {

// The backward behind both launchers: dx in DX (T, or float in the mixed overload), dw and db float.
template <typename T, typename DX>
void launch_linear_backward(const GpuHandles& handles, DX* dx, float* dw, float* db, const T* dy, const T* x,
                            const T* w, int rows, int in, int out, bool accumulate_dx) {
  BERTRAIN_CHECK(rows > 0 && in > 0 && out > 0,
                 "linear_backward_cuda: rows " << rows << ", in " << in << ", out " << out);
  BERTRAIN_CHECK(dw != nullptr && dy != nullptr && x != nullptr && w != nullptr,
                 "linear_backward_cuda: null dw, dy, x or w");
  BERTRAIN_CHECK(handles.blas != nullptr, "linear_backward_cuda: no cuBLAS handle");
  constexpr cudaDataType_t type = cuda::CudaDataType<T>::value;
  if (dx != nullptr) {
    // dxᵀ (in × rows) = Wᵀ · dyᵀ (+ dxᵀ).
    gemm(handles, CUBLAS_OP_N, CUBLAS_OP_N, in, rows, out, w, type, in, dy, type, out, accumulate_dx ? 1.0f : 0.0f, dx,
         cuda::CudaDataType<DX>::value, in);
  }
  // dwᵀ (in × out) = xᵀ · dy, written in fp32.
  gemm(handles, CUBLAS_OP_N, CUBLAS_OP_T, in, out, rows, x, type, in, dy, type, out, 0.0f, dw, CUDA_R_32F, in);
  if (db != nullptr) column_sum_cuda<T>(handles, db, dy, rows, out);
}

}  // namespace

template <typename T>
void linear_backward_cuda(const GpuHandles& handles, T* dx, float* dw, float* db, const T* dy, const T* x, const T* w,
                          int rows, int in, int out, bool accumulate_dx) {
  launch_linear_backward(handles, dx, dw, db, dy, x, w, rows, in, out, accumulate_dx);
}

void linear_backward_cuda(const GpuHandles& handles, float* dx, float* dw, float* db, const bf16* dy, const bf16* x,
                          const bf16* w, int rows, int in, int out, bool accumulate_dx) {
  launch_linear_backward(handles, dx, dw, db, dy, x, w, rows, in, out, accumulate_dx);
}

template void linear_forward_cuda<float>(const GpuHandles&, float*, const float*, const float*, const float*, int, int,
                                         int);
template void linear_forward_cuda<bf16>(const GpuHandles&, bf16*, const bf16*, const bf16*, const bf16*, int, int, int);
template void linear_backward_cuda<float>(const GpuHandles&, float*, float*, float*, const float*, const float*,
                                          const float*, int, int, int, bool);
template void linear_backward_cuda<bf16>(const GpuHandles&, bf16*, float*, float*, const bf16*, const bf16*,
                                         const bf16*, int, int, int, bool);
template void bias_add_cuda<float>(float*, const float*, int, int, CudaStream);
template void bias_add_cuda<bf16>(bf16*, const bf16*, int, int, CudaStream);
template void column_sum_cuda<float>(const GpuHandles&, float*, const float*, int, int);
template void column_sum_cuda<bf16>(const GpuHandles&, float*, const bf16*, int, int);

}  // namespace bertrain

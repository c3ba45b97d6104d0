// The CUDA linear launchers (kernels/cuda/linear.cu) for the emulated test binaries, which link
// tests/cuda/test_cuda_gemm_attention.cpp whole: linear.cu is cuBLAS/cuBLASLt GEMMs, and the emulation has no
// cuBLAS, so these only throw. run.sh's default filter leaves out the tests that reach them (CudaLinear.*,
// CudaGemmAttentionChecks.ColumnSumNeedsEnoughWorkspace); run anyway, they fail naming the missing piece.
#include "core/error.h"
#include "kernels/linear.h"

namespace bertrain {
namespace {
[[noreturn]] void not_emulated(const char* what) {
  BERTRAIN_FAIL(what << " is not emulated: kernels/cuda/linear.cu needs cuBLAS (tools/cuda_emulation/README.md)");
}
}  // namespace

template <typename T>
void linear_forward_cuda(const GpuHandles&, T*, const T*, const T*, const T*, int, int, int) {
  not_emulated("linear_forward_cuda");
}
template <typename T>
void linear_backward_cuda(const GpuHandles&, T*, float*, float*, const T*, const T*, const T*, int, int, int, bool) {
  not_emulated("linear_backward_cuda");
}
void linear_backward_cuda(const GpuHandles&, float*, float*, float*, const bf16*, const bf16*, const bf16*, int, int,
                          int, bool) {
  not_emulated("linear_backward_cuda (mixed precision)");
}
template <typename T>
void bias_add_cuda(T*, const T*, int, int, CudaStream) {
  not_emulated("bias_add_cuda");
}
template <typename T>
void column_sum_cuda(const GpuHandles&, float*, const T*, int, int) {
  not_emulated("column_sum_cuda");
}

template void linear_forward_cuda<float>(const GpuHandles&, float*, const float*, const float*, const float*, int,
                                         int, int);
template void linear_forward_cuda<bf16>(const GpuHandles&, bf16*, const bf16*, const bf16*, const bf16*, int, int,
                                        int);
template void linear_backward_cuda<float>(const GpuHandles&, float*, float*, float*, const float*, const float*,
                                          const float*, int, int, int, bool);
template void linear_backward_cuda<bf16>(const GpuHandles&, bf16*, float*, float*, const bf16*, const bf16*,
                                         const bf16*, int, int, int, bool);
template void bias_add_cuda<float>(float*, const float*, int, int, CudaStream);
template void bias_add_cuda<bf16>(bf16*, const bf16*, int, int, CudaStream);
template void column_sum_cuda<float>(const GpuHandles&, float*, const float*, int, int);
template void column_sum_cuda<bf16>(const GpuHandles&, float*, const bf16*, int, int);

}  // namespace bertrain

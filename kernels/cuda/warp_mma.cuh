// Warp-level tensor-core primitives of sm_80 and newer (Ampere, Hopper): the PTX instructions FlashAttention-2 and
// CUTLASS's SM80 kernels are built from. Unlike nvcuda::wmma, their register layouts are fixed by the PTX ISA, so a
// kernel can keep its accumulators in registers, rescale them row by row, and turn one product's result into the
// next product's operand without a trip through shared memory.
//
//   mma_m16n8k16_bf16(d, a, b)   d[16×8] (+=) A[16×16] · B[16×8], bf16 operands, fp32 accumulation
//                                (mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32)
//   ldmatrix_x4(r, row)          four 8×8 b16 matrices from shared memory (ldmatrix.sync.aligned.m8n8.x4.shared.b16)
//   ldmatrix_x4_trans(r, row)    the same, transposed (.trans)
//   cp_async_16(dst, src, copy)  a 16-byte global → shared copy that bypasses the registers, or 16 zero bytes when
//                                !copy (cp.async.cg.shared.global, source size 16 or 0)
//   cp_async_commit(), cp_async_wait<N>()   close a group of copies; wait until at most N groups are in flight
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"), lane = 4g + t (g = lane / 4, t = lane % 4); a
// 32-bit register holds two b16 values, the lower column (or row) in the low half:
//   A (16×16, row-major):  a[0] = (g, 2t..2t+1)  a[1] = (g+8, 2t..2t+1)  a[2] = (g, 2t+8..2t+9)  a[3] = (g+8, 2t+8..2t+9)
//   B (16×8, k × n):       b[0] = (k 2t..2t+1, n g)  b[1] = (k 2t+8..2t+9, n g)
//   C, D (16×8, fp32):     d[0], d[1] = (g, 2t), (g, 2t+1)  d[2], d[3] = (g+8, 2t), (g+8, 2t+1)
//   ldmatrix_x4:           lane l gives the address of row l % 8 of matrix l / 8 (16-byte aligned); r[i] = matrix i's
//                          (row g, columns 2t, 2t+1), or with .trans (rows 2t, 2t+1, column g)
// So an accumulator tile pair d[j], d[j+1] (16 × 16 of fp32) rounded to bf16 pairs is exactly an A operand, and a
// row-major [k][n] tile in shared memory read with ldmatrix_x4_trans is a B operand.
//
// Where __CUDA_ARCH__ is undefined: the CPU emulation (tests/cuda_emulation, BERTRAIN_CUDA_EMULATION) implements
// the same instructions lane by lane with these layouts; nvcc's host pass compiles empty bodies that never run.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace bertrain {
namespace cuda {

__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif defined(__CUDA_ARCH__)
  __trap();  // the launchers never choose these kernels below compute capability 8.0
#elif defined(BERTRAIN_CUDA_EMULATION)
  emu::mma_m16n8k16_bf16(d, a, b);
#endif
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
#if defined(__CUDA_ARCH__)
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
#elif defined(BERTRAIN_CUDA_EMULATION)
  emu::ldmatrix_x4(r, row, false);
#endif
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
#if defined(__CUDA_ARCH__)
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
#elif defined(BERTRAIN_CUDA_EMULATION)
  emu::ldmatrix_x4(r, row, true);
#endif
}

// `src` must be a valid global address even when !copy (nothing is read from it then).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool copy) {
#if defined(__CUDA_ARCH__)
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const int src_bytes = copy ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(src), "r"(src_bytes) : "memory");
#elif defined(BERTRAIN_CUDA_EMULATION)
  emu::cp_async_16(dst, src, copy);
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int kInFlight>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kInFlight) : "memory");
#endif
}

}  // namespace cuda
}  // namespace bertrain

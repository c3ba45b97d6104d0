// BERTRAIN_HOST_DEVICE: a function that CPU code and CUDA kernels share (one definition, so both compute the same).
#pragma once

#if defined(__CUDACC__)
#define BERTRAIN_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define BERTRAIN_HOST_DEVICE inline
#endif

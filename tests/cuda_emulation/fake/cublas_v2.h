// Stands in for the CUDA toolkit's <cublas_v2.h> in the CPU emulation (tests/cuda_emulation/README.md): the fake
// cuBLAS(Lt) of emu_cublas.h, on top of the emulated runtime.
#pragma once

#include "../emu_cublas.h"

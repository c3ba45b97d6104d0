// Stands in for the CUDA toolkit's <cublasLt.h> in the CPU emulation (tests/cuda_emulation/README.md): the fake
// cuBLAS(Lt) of emu_cublas.h.
#pragma once

#include "../emu_cublas.h"

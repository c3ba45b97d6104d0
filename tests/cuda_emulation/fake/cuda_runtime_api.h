// Stands in for the CUDA toolkit's <cuda_runtime_api.h> in the CPU emulation (tests/cuda_emulation/README.md): everything
// the emulation provides is declared in one header, so every toolkit header the kernels include maps to it.
#pragma once

#include "../emu_cuda.h"

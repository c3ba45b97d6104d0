// The host half of a host-staged bf16 allreduce (dist/staged_communicator.cpp), free of CUDA so that it is
// tested on the CPU. MPI has no bf16 type, so n bf16 values are summed as floats in one staging buffer of
// 4n bytes: the device copies the bf16 values into its upper half (bytes [2n, 4n)), widen_bf16_upper_half
// turns them into n floats over the whole buffer, MPI sums those, and narrow_to_bf16_front rounds the sums back
// to bf16 in its first 2n bytes, which go back to the device. Each sum is therefore rounded once (NCCL's bf16
// allreduce rounds after every addition along its ring: the host path is as accurate or more).
#pragma once

#include <cstddef>
#include <cstring>

#include "core/bf16.h"

namespace bertrain {

// bytes[2n, 4n) holds n bf16 values; afterwards bytes[0, 4n) holds them as floats (returned). In place,
// front to back: float i (bytes [4i, 4i + 4)) overwrites only bytes below 2n + 2(i + 1), where the bf16 values
// still to be read start, so nothing is overwritten before it is read. memcpy keeps the type punning defined.
inline float* widen_bf16_upper_half(unsigned char* bytes, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    bf16 h;
    std::memcpy(&h, bytes + 2 * n + 2 * i, sizeof h);
    const float f = bf16_to_float(h);
    std::memcpy(bytes + 4 * i, &f, sizeof f);
  }
  return reinterpret_cast<float*>(bytes);
}

// bytes[0, 4n) holds n floats; afterwards bytes[0, 2n) holds them rounded to bf16 (to nearest, ties to even).
// In place, front to back: bf16 i (bytes [2i, 2i + 2)) lies below float i + 1 (byte 4i + 4) and on or below
// float i, which was read first.
inline void narrow_to_bf16_front(unsigned char* bytes, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    float f;
    std::memcpy(&f, bytes + 4 * i, sizeof f);
    const bf16 h = float_to_bf16(f);
    std::memcpy(bytes + 2 * i, &h, sizeof h);
  }
}

}  // namespace bertrain

// bfloat16 storage type shared by host and device code: the upper 16 bits of an IEEE float32. Kernel
// declarations use it instead of CUDA's __nv_bfloat16 so that headers outside kernels/cuda need no CUDA
// headers; kernels/cuda/common.cuh converts on the device with the same rounding.
#pragma once

#include <cstdint>
#include <cstring>

namespace bertrain {

struct bf16 {
  uint16_t bits;
};
static_assert(sizeof(bf16) == 2, "bf16 must be two bytes");

// Round to nearest, ties to even (as __float2bfloat16_rn); NaN stays a quiet NaN.
inline bf16 float_to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((u >> 16) | 0x40u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{static_cast<uint16_t>(u >> 16)};
}

inline float bf16_to_float(bf16 x) {
  const uint32_t u = static_cast<uint32_t>(x.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace bertrain

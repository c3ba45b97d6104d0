// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011) shared by the CPU and CUDA kernels.
// A draw is a pure function of (seed, step, tensor, element), so dropout masks do not depend on the
// thread count, the device or the number of ranks.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace bertrain {

// Identifies one random stream: a training run's seed, the optimizer step and the tensor (dropout site).
struct RandomKey {
  uint64_t seed = 0;
  uint32_t step = 0;
  uint32_t tensor = 0;
};

struct Philox4 {
  uint32_t v[4];
};

BERTRAIN_HOST_DEVICE uint32_t philox_mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
  const uint64_t product = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(product >> 32);
  return static_cast<uint32_t>(product);
}

// Philox4x32 with 10 rounds: counter (c0..c3), key (k0, k1).
BERTRAIN_HOST_DEVICE Philox4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                                           uint32_t k1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    const uint32_t lo0 = philox_mulhilo(kMul0, c0, &hi0);
    const uint32_t lo1 = philox_mulhilo(kMul1, c2, &hi1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// Four uint32 draws for elements [4*group, 4*group + 4) of the stream `key`.
BERTRAIN_HOST_DEVICE Philox4 philox_group(const RandomKey& key, uint64_t group) {
  return philox4x32_10(static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32), key.step, key.tensor,
                       static_cast<uint32_t>(key.seed), static_cast<uint32_t>(key.seed >> 32));
}

// Uniform in [0, 1) with 24 random bits: exactly representable in float32, so CPU and GPU agree.
BERTRAIN_HOST_DEVICE float uniform_from_bits(uint32_t bits) { return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f); }

BERTRAIN_HOST_DEVICE float philox_uniform(const RandomKey& key, uint64_t element) {
  const Philox4 r = philox_group(key, element >> 2);
  return uniform_from_bits(r.v[element & 3]);
}

}  // namespace bertrain

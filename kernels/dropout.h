// Inverted dropout with masks drawn from Philox (kernels/philox.h): element i of the stream `key` is kept
// when its uniform draw u satisfies u >= p, and kept values are scaled by 1 / (1 - p).
// The mask is never stored: backward regenerates it from the same key.
#pragma once

#include <cstddef>

#include "kernels/philox.h"

namespace bertrain {

// y = dropout(x); y may alias x. p in [0, 1]; p == 0 copies.
template <typename T>
void dropout_forward_cpu(T* y, const T* x, std::size_t n, float p, const RandomKey& key);

// dx = dropout'(dy) with the mask of `key`; dx may alias dy.
template <typename T>
void dropout_backward_cpu(T* dx, const T* dy, std::size_t n, float p, const RandomKey& key);

}  // namespace bertrain

#include "kernels/tensor_ops.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace bertrain {

namespace {
// sum_of_squares_cpu adds fixed-size blocks in parallel, then the block sums in order: the result depends on
// n only, never on the thread count.
constexpr std::size_t kSquareBlock = 1 << 16;
constexpr std::size_t kLanes = 16, kRun = 2048;
// kLanes floats as one vector (GCC/Clang vector extension: AVX-512 here, narrower vectors elsewhere).
typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float))));
}  // namespace

void cast_cpu(bf16* y, const float* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = float_to_bf16(x[i]);
}

void cast_cpu(float* y, const bf16* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = bf16_to_float(x[i]);
}

template <typename T>
void add_inplace_cpu(T* y, const T* x, std::size_t n) {
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for schedule(static) if (count > 65536)
  for (std::ptrdiff_t i = 0; i < count; ++i) y[i] += x[i];
}

double sum_of_squares_cpu(const float* x, std::size_t n) {
  const std::ptrdiff_t blocks = static_cast<std::ptrdiff_t>((n + kSquareBlock - 1) / kSquareBlock);
  // Kept between calls (per calling thread): the training step calls this every step and must not allocate.
  thread_local std::vector<double> partial;
  partial.assign(static_cast<std::size_t>(blocks), 0.0);
  double* block_sums = partial.data();  // the caller's vector: OpenMP's threads have their own thread_locals
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (std::ptrdiff_t blk = 0; blk < blocks; ++blk) {
    const std::size_t begin = static_cast<std::size_t>(blk) * kSquareBlock, end = std::min(n, begin + kSquareBlock);
    // kLanes float sums over runs of kRun elements (element i into lane i mod kLanes, in one vector register), each
    // run's lanes then added into a double in lane order: a fixed order, so still a function of n only; at most
    // kRun / kLanes terms meet in float.
    double s = 0.0;
    for (std::size_t run = begin; run < end; run += kRun) {
      const std::size_t stop = std::min(end, run + kRun);
      Lanes acc = {};
      std::size_t i = run;
      for (; i + kLanes <= stop; i += kLanes) {
        Lanes v;
        std::memcpy(&v, x + i, sizeof(v));
        acc += v * v;
      }
      for (std::size_t l = 0; i + l < stop; ++l) acc[l] += x[i + l] * x[i + l];
      for (std::size_t l = 0; l < kLanes; ++l) s += acc[l];
    }
    block_sums[blk] = s;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

template void add_inplace_cpu<float>(float*, const float*, std::size_t);
template void add_inplace_cpu<double>(double*, const double*, std::size_t);

}  // namespace bertrain

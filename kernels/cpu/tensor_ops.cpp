#include "kernels/tensor_ops.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/error.h"

namespace bertrain {

namespace {
// sum_of_squares_cpu adds fixed-size blocks in parallel, then the block sums in order: the result depends on
// n only, never on the thread count.
constexpr std::size_t kSquareBlock = 1 << 16;

void check_token_shape(const char* what, int batch, int seq_len, int hidden) {
  BERTRAIN_CHECK(batch > 0 && seq_len > 0 && hidden > 0,
                 what << ": batch " << batch << ", seq_len " << seq_len << ", hidden " << hidden);
}
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

template <typename T>
void gather_first_token_cpu(T* cls, const T* seq, int batch, int seq_len, int hidden) {
  check_token_shape("gather_first_token_cpu", batch, seq_len, hidden);
  const std::size_t h = static_cast<std::size_t>(hidden), sample = static_cast<std::size_t>(seq_len) * h;
  for (std::size_t b = 0; b < static_cast<std::size_t>(batch); ++b) {
    std::copy(seq + b * sample, seq + b * sample + h, cls + b * h);
  }
}

template <typename T>
void scatter_first_token_cpu(T* dseq, const T* dcls, int batch, int seq_len, int hidden) {
  check_token_shape("scatter_first_token_cpu", batch, seq_len, hidden);
  const std::size_t h = static_cast<std::size_t>(hidden), sample = static_cast<std::size_t>(seq_len) * h;
  std::fill(dseq, dseq + static_cast<std::size_t>(batch) * sample, T(0));
  for (std::size_t b = 0; b < static_cast<std::size_t>(batch); ++b) {
    std::copy(dcls + b * h, dcls + b * h + h, dseq + b * sample);
  }
}

double sum_of_squares_cpu(const float* x, std::size_t n) {
  const std::ptrdiff_t blocks = static_cast<std::ptrdiff_t>((n + kSquareBlock - 1) / kSquareBlock);
  std::vector<double> partial(static_cast<std::size_t>(blocks), 0.0);
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (std::ptrdiff_t blk = 0; blk < blocks; ++blk) {
    const std::size_t begin = static_cast<std::size_t>(blk) * kSquareBlock, end = std::min(n, begin + kSquareBlock);
    double s = 0.0;
    for (std::size_t i = begin; i < end; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    partial[static_cast<std::size_t>(blk)] = s;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

template void add_inplace_cpu<float>(float*, const float*, std::size_t);
template void add_inplace_cpu<double>(double*, const double*, std::size_t);
template void gather_first_token_cpu<float>(float*, const float*, int, int, int);
template void gather_first_token_cpu<double>(double*, const double*, int, int, int);
template void scatter_first_token_cpu<float>(float*, const float*, int, int, int);
template void scatter_first_token_cpu<double>(double*, const double*, int, int, int);

}  // namespace bertrain

#include "kernels/packed.h"

#include <algorithm>

#include "core/error.h"

namespace bertrain {

void check_row_offsets(const int32_t* cu_seqlens, int batch, int tokens, int max_len, const char* what) {
  BERTRAIN_CHECK(batch >= 0 && cu_seqlens != nullptr, what << ": " << batch << " rows, offsets "
                                                           << (cu_seqlens ? "given" : "null"));
  BERTRAIN_CHECK(cu_seqlens[0] == 0, what << ": row offsets start at " << cu_seqlens[0] << ", not 0");
  for (int b = 0; b < batch; ++b) {
    const int64_t length = static_cast<int64_t>(cu_seqlens[b + 1]) - cu_seqlens[b];
    BERTRAIN_CHECK(length >= 1 && length <= max_len,
                   what << ": row " << b << " has " << length << " tokens, outside [1, " << max_len << "]");
  }
  BERTRAIN_CHECK(cu_seqlens[batch] == tokens,
                 what << ": row offsets end at " << cu_seqlens[batch] << " but the batch has " << tokens << " tokens");
}

int longest_row(const int32_t* cu_seqlens, int batch) {
  int longest = 0;
  for (int b = 0; b < batch; ++b) longest = std::max(longest, cu_seqlens[b + 1] - cu_seqlens[b]);
  return longest;
}

void dropout_slots_cpu(int64_t* slots, const int32_t* cu_seqlens, int batch, int64_t first_sample, int max_positions) {
  for (int b = 0; b < batch; ++b) {
    for (int t = cu_seqlens[b]; t < cu_seqlens[b + 1]; ++t) {
      slots[t] = (first_sample + b) * max_positions + (t - cu_seqlens[b]);
    }
  }
}

template <typename T>
void gather_first_tokens_cpu(T* cls, const T* tokens, const int32_t* cu_seqlens, int batch, int hidden) {
  const std::size_t h = static_cast<std::size_t>(hidden);
  for (int b = 0; b < batch; ++b) {
    const T* first = tokens + static_cast<std::size_t>(cu_seqlens[b]) * h;
    std::copy(first, first + h, cls + static_cast<std::size_t>(b) * h);
  }
}

template <typename T>
void scatter_first_tokens_cpu(T* dtokens, const T* dcls, const int32_t* cu_seqlens, int batch, int hidden) {
  const std::size_t h = static_cast<std::size_t>(hidden);
  std::fill(dtokens, dtokens + static_cast<std::size_t>(cu_seqlens[batch]) * h, T(0));
  for (int b = 0; b < batch; ++b) {
    std::copy(dcls + static_cast<std::size_t>(b) * h, dcls + static_cast<std::size_t>(b + 1) * h,
              dtokens + static_cast<std::size_t>(cu_seqlens[b]) * h);
  }
}

template void gather_first_tokens_cpu<float>(float*, const float*, const int32_t*, int, int);
template void gather_first_tokens_cpu<double>(double*, const double*, const int32_t*, int, int);
template void scatter_first_tokens_cpu<float>(float*, const float*, const int32_t*, int, int);
template void scatter_first_tokens_cpu<double>(double*, const double*, const int32_t*, int, int);

}  // namespace bertrain

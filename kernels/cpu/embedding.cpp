#include "kernels/embedding.h"

#include <algorithm>
#include <cstddef>

#include "core/error.h"

namespace bertrain {

namespace {
constexpr int kColumnBlock = 16;

void check_ids(const int32_t* ids, const int32_t* token_types, int tokens, int vocab, int type_vocab) {
  for (int t = 0; t < tokens; ++t) {
    BERTRAIN_CHECK(ids[t] >= 0 && ids[t] < vocab,
                   "token id " << ids[t] << " at position " << t << " is outside the vocabulary [0, " << vocab << ")");
    if (token_types != nullptr) {
      BERTRAIN_CHECK(token_types[t] >= 0 && token_types[t] < type_vocab,
                     "token type " << token_types[t] << " at position " << t << " is outside [0, " << type_vocab
                                   << ")");
    }
  }
}

void check_positions(const int32_t* positions, int tokens, int max_pos) {
  for (int t = 0; t < tokens; ++t) {
    BERTRAIN_CHECK(positions[t] >= 0 && positions[t] < max_pos, "position " << positions[t] << " of token " << t
                                                                            << " is outside the position table [0, "
                                                                            << max_pos << ")");
  }
}
}  // namespace

void embedding_positions_cpu(int32_t* positions, const int32_t* ids, const int32_t* cu_seqlens, int batch,
                             int padding_idx) {
  for (int b = 0; b < batch; ++b) {
    int real = 0;  // tokens of the row so far that are not padding_idx
    for (int t = cu_seqlens[b]; t < cu_seqlens[b + 1]; ++t) {
      if (padding_idx < 0) {
        positions[t] = t - cu_seqlens[b];
      } else {
        positions[t] = ids[t] == padding_idx ? padding_idx : padding_idx + 1 + real++;
      }
    }
  }
}

template <typename T>
void embedding_forward_cpu(T* out, const int32_t* ids, const int32_t* positions, const int32_t* token_types,
                           const T* word, const T* pos, const T* type, int tokens, int hidden, int vocab, int max_pos,
                           int type_vocab) {
  check_ids(ids, token_types, tokens, vocab, type_vocab);
  check_positions(positions, tokens, max_pos);
#pragma omp parallel for schedule(static) if (tokens > 64)
  for (int t = 0; t < tokens; ++t) {
    const T* w = word + static_cast<std::size_t>(ids[t]) * hidden;
    const T* p = pos + static_cast<std::size_t>(positions[t]) * hidden;
    T* o = out + static_cast<std::size_t>(t) * hidden;
    if (type == nullptr) {
      for (int c = 0; c < hidden; ++c) o[c] = w[c] + p[c];
      continue;
    }
    const T* ty = type + static_cast<std::size_t>(token_types != nullptr ? token_types[t] : 0) * hidden;
    for (int c = 0; c < hidden; ++c) o[c] = w[c] + p[c] + ty[c];
  }
}

template <typename T>
void embedding_backward_cpu(T* dword, T* dpos, T* dtype, const T* dout, const int32_t* ids, const int32_t* positions,
                            const int32_t* token_types, int tokens, int hidden, int vocab, int max_pos, int type_vocab,
                            int word_padding_idx, int position_padding_idx) {
  BERTRAIN_CHECK((dtype == nullptr) == (type_vocab == 0),
                 "embedding_backward_cpu: a token-type table needs type_vocab > 0, and none type_vocab 0");
  check_ids(ids, token_types, tokens, vocab, type_vocab);
  check_positions(positions, tokens, max_pos);
  std::fill(dword, dword + static_cast<std::size_t>(vocab) * hidden, T(0));
  std::fill(dpos, dpos + static_cast<std::size_t>(max_pos) * hidden, T(0));
  if (dtype != nullptr) std::fill(dtype, dtype + static_cast<std::size_t>(type_vocab) * hidden, T(0));
  const int blocks = (hidden + kColumnBlock - 1) / kColumnBlock;
  // Each task owns a block of columns of all three tables, so no two threads touch the same element.
#pragma omp parallel for schedule(static) if (tokens * hidden > 65536)
  for (int blk = 0; blk < blocks; ++blk) {
    const int c0 = blk * kColumnBlock, c1 = std::min(hidden, c0 + kColumnBlock);
    for (int t = 0; t < tokens; ++t) {
      const T* g = dout + static_cast<std::size_t>(t) * hidden;
      if (ids[t] != word_padding_idx) {
        T* w = dword + static_cast<std::size_t>(ids[t]) * hidden;
        for (int c = c0; c < c1; ++c) w[c] += g[c];
      }
      if (positions[t] != position_padding_idx) {
        T* p = dpos + static_cast<std::size_t>(positions[t]) * hidden;
        for (int c = c0; c < c1; ++c) p[c] += g[c];
      }
      if (dtype == nullptr) continue;
      T* ty = dtype + static_cast<std::size_t>(token_types != nullptr ? token_types[t] : 0) * hidden;
      for (int c = c0; c < c1; ++c) ty[c] += g[c];
    }
  }
}

template void embedding_forward_cpu<float>(float*, const int32_t*, const int32_t*, const int32_t*, const float*,
                                           const float*, const float*, int, int, int, int, int);
template void embedding_forward_cpu<double>(double*, const int32_t*, const int32_t*, const int32_t*, const double*,
                                            const double*, const double*, int, int, int, int, int);
template void embedding_backward_cpu<float>(float*, float*, float*, const float*, const int32_t*, const int32_t*,
                                            const int32_t*, int, int, int, int, int, int, int);
template void embedding_backward_cpu<double>(double*, double*, double*, const double*, const int32_t*,
                                             const int32_t*, const int32_t*, int, int, int, int, int, int, int);

}  // namespace bertrain

// Test helper: packs right-padded [B, S] ids + attention mask (as Hugging Face fixtures store batches) into the
// engine's packed batch, remembering where each packed token was in the padded layout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/bert_classifier.h"
#include "model/safetensors.h"

namespace bertrain::testing {

struct PackedRows {
  std::vector<int32_t> ids, cu_seqlens;
  std::vector<int> padded_index;  // [T] b·S + s of packed token t
  int batch = 0, seq = 0;

  PackedRows(const std::vector<int32_t>& padded_ids, const std::vector<int32_t>& mask, int batch_size, int seq_len)
      : batch(batch_size), seq(seq_len) {
    cu_seqlens.push_back(0);
    for (int b = 0; b < batch; ++b) {
      for (int s = 0; s < seq; ++s) {
        if (mask[static_cast<std::size_t>(b * seq + s)] == 0) continue;
        ids.push_back(padded_ids[static_cast<std::size_t>(b * seq + s)]);
        padded_index.push_back(b * seq + s);
      }
      cu_seqlens.push_back(static_cast<int32_t>(ids.size()));
    }
  }

  // The batch of a golden fixture file (tests/reference/make_fixtures.py): its input_ids and attention_mask.
  static PackedRows from_golden(const SafetensorsFile& golden) {
    const auto int32 = [&](const std::string& name) {
      std::vector<int32_t> out;
      for (int64_t v : golden.read_int(name)) out.push_back(static_cast<int32_t>(v));
      return out;
    };
    const TensorInfo& info = golden.info("input_ids");
    return PackedRows(int32("input_ids"), int32("attention_mask"), static_cast<int>(info.shape.at(0)),
                      static_cast<int>(info.shape.at(1)));
  }

  BertBatch view(int64_t first_sample = 0) const { return packed_batch(ids.data(), cu_seqlens.data(), batch, first_sample); }
  BatchLimits limits() const { return BatchLimits{batch, seq, static_cast<int>(ids.size())}; }

  // The rows of a padded [B, S, H] tensor at the real tokens: [T, H].
  template <typename T>
  std::vector<T> real_tokens(const std::vector<T>& padded, int hidden) const {
    std::vector<T> out;
    for (int index : padded_index) {
      const auto first = padded.begin() + static_cast<std::ptrdiff_t>(index) * hidden;
      out.insert(out.end(), first, first + hidden);
    }
    return out;
  }
};

}  // namespace bertrain::testing

// The random stream of every dropout site of the classifier, shared by the CPU and GPU models so both draw
// the same masks: 0 embeddings, 1 + 3l attention probabilities of layer l, 2 + 3l attention output,
// 3 + 3l feed-forward output, 1 + 3L the classifier input, 2 + 3L the head's input (RoBERTa and ELECTRA drop the
// first token's hidden state before the head's dense layer too).
#pragma once

#include <cstdint>

#include "core/philox.h"
#include "kernels/dropout.h"

namespace bertrain {

enum DropoutSite : uint32_t { kEmbeddings = 0, kAttentionProbs = 1, kAttentionOutput = 2, kFeedForwardOutput = 3 };

inline uint32_t layer_site(int layer, DropoutSite site) { return 3u * static_cast<uint32_t>(layer) + site; }
inline uint32_t classifier_site(int layers) { return 3u * static_cast<uint32_t>(layers) + 1; }
inline uint32_t head_input_site(int layers) { return 3u * static_cast<uint32_t>(layers) + 2; }

// How each site's tensor maps to dropout indices (kernels/dropout.h) for a packed batch whose row 0 is row
// `first_sample` of the global batch and whose tokens have the dropout rows `token_slots` (kernels/packed.h; device
// memory for the GPU model).
struct SiteLayouts {
  DropoutLayout tokens;     // [T, H] hidden states (embeddings, attention output, feed-forward output)
  DropoutLayout attention;  // the attention probabilities (kernels/attention.h)
  DropoutLayout pooled;     // [B, H] the classifier input, and the head's input

  SiteLayouts(int64_t first_sample, int max_positions, int hidden, const int64_t* token_slots)
      : tokens{first_sample, max_positions, hidden, token_slots},
        attention{first_sample, max_positions, 0, nullptr},
        pooled{first_sample, 1, hidden, nullptr} {}
};

}  // namespace bertrain

// The random stream of every dropout site of the classifier, shared by the CPU and GPU models so both draw
// the same masks: 0 embeddings, 1 + 3l attention probabilities of layer l, 2 + 3l attention output,
// 3 + 3l feed-forward output, 1 + 3L the classifier input.
#pragma once

#include <cstdint>

#include "kernels/philox.h"

namespace bertrain {

enum DropoutSite : uint32_t { kEmbeddings = 0, kAttentionProbs = 1, kAttentionOutput = 2, kFeedForwardOutput = 3 };

inline uint32_t layer_site(int layer, DropoutSite site) { return 3u * static_cast<uint32_t>(layer) + site; }
inline uint32_t classifier_site(int layers) { return 3u * static_cast<uint32_t>(layers) + 1; }

}  // namespace bertrain

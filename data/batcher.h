// Batches of tokenized examples as packed tokens (no padding: the rows' tokens back to back with row offsets),
// in a fixed order (the original behaviour) or a seeded shuffle per epoch, and sharded across data-parallel
// ranks.
//
// Sharding: the global batch b (size B, the last one possibly smaller: B_b) is cut into world_size
// contiguous slices whose sizes differ by at most one; rank r takes slice r (possibly empty). Every
// sample is used exactly once per epoch across ranks. Each rank's loss and gradient are its local sums
// divided by the *global* batch size B_b (loss_scale = local / global on top of the local mean), so the
// allreduce-sum of rank gradients equals the gradient of one process over the whole global batch, also
// for the last, uneven batch and for ranks with an empty slice.
//
// Gradient accumulation (accumulation K > 1): an optimizer step takes a step batch of B·K rows, cut into K
// micro-batches of B rows (the last step batch: as many as its rows need), each sharded as above. A slice's
// loss_scale and first_row are relative to the whole step batch, so the sum of its micro-batches' gradients is
// the gradient of the step batch's mean loss and the dropout masks (keyed by first_row) are those of one batch
// of B·K rows.
#pragma once

#include <cstdint>
#include <vector>

namespace bertrain {

struct Example {
  std::vector<int32_t> ids;  // [CLS] ... [SEP]
  std::vector<int> labels;   // class indices whose target is 1: one (single-label), any number (multi-label),
                             // none when unknown (prediction)
};

struct Batch {
  int batch = 0;    // B: rows in this rank's slice (may be 0)
  int tokens = 0;   // T: tokens of all rows (0 when empty)
  int longest = 0;  // S: the longest row in this slice (0 when empty)
  std::vector<int32_t> input_ids;   // [T] the rows' tokens back to back
  std::vector<int32_t> cu_seqlens;  // [B + 1] row offsets: row b is input_ids[cu_seqlens[b], cu_seqlens[b + 1])
  std::vector<float> targets;           // [batch, classes], one-hot / multi-hot (zeros when labels are unknown)
  std::vector<int> rows;                // dataset indices of the rows
  int first_row = 0;                    // position of this slice's first row in the global (step) batch
  int global_batch = 0;                 // rows of the global (step) batch across all ranks and micro-batches
  double loss_scale = 0;                // batch / global_batch: weight of this rank's mean loss
};

struct BatcherOptions {
  int batch_size = 256;  // global batch size (of a micro-batch, with accumulation)
  int accumulation = 1;  // micro-batches per optimizer step: a step batch has batch_size · accumulation rows
  bool shuffle = false;  // false: the same order every epoch, as the original
  uint64_t seed = 0;     // shuffle seed (combined with the epoch)
  int rank = 0;
  int world_size = 1;
  int classes = 0;
};

class Batcher {
 public:
  Batcher(const std::vector<Example>* examples, const BatcherOptions& options);

  // Step batches (optimizer steps) per epoch.
  int batches_per_epoch() const;
  // Micro-batches of step batch `index`: accumulation, or fewer for a short last step batch.
  int micro_batches(int index) const;
  // Fills `out` with this rank's slice of micro-batch `micro` of step batch `index` of `epoch` (all 0-based),
  // packed as described above. Reuses out's storage, so a loop over batches stops allocating once the largest
  // has been seen.
  void batch(int epoch, int index, Batch* out, int micro = 0) const;
  // Bounds on every slice this rank can get (to size activation buffers once): the longest example, the most
  // rows, and the most tokens (exact without shuffling; with it, the largest slice of the longest examples).
  int max_sequence_length() const;
  int max_rows() const;
  int max_tokens() const;

 private:
  std::vector<int> order(int epoch) const;
  // order(epoch), computed once per epoch: batch() runs many times per epoch and must not allocate.
  const std::vector<int>& cached_order(int epoch) const;
  const std::vector<Example>* examples_;
  BatcherOptions options_;
  // The cache makes batch() not thread-safe: give each thread its own Batcher.
  mutable std::vector<int> order_;
  mutable int order_epoch_ = -1;  // epoch order_ holds; -1: none yet
};

}  // namespace bertrain

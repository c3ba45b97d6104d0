// Where data/ meets model/: the model's view of a data batch, and the batch limits a model is built for.
#pragma once

#include <algorithm>
#include <initializer_list>

#include "data/batcher.h"
#include "model/bert_classifier.h"

namespace bertrain {

// The packed batch (host pointers into `batch`, which must outlive the view). first_sample is the slice's
// first row in the global batch, which keys the dropout masks of a training step.
inline BertBatch bert_batch_view(const Batch& batch) {
  BertBatch b;
  b.input_ids = batch.input_ids.data();
  b.cu_seqlens = batch.cu_seqlens.data();
  b.batch = batch.batch;
  b.tokens = batch.tokens;
  b.longest = batch.longest;
  b.first_sample = batch.first_row;
  return b;
}

// Limits covering every slice the batchers can produce (at least one row and one token, so a rank whose
// slices are all empty still builds a model).
inline BatchLimits batch_limits(std::initializer_list<const Batcher*> batchers) {
  BatchLimits limits{1, 1, 1};
  for (const Batcher* b : batchers) {
    limits.rows = std::max(limits.rows, b->max_rows());
    limits.longest = std::max(limits.longest, b->max_sequence_length());
    limits.tokens = std::max(limits.tokens, b->max_tokens());
  }
  limits.tokens = std::max(limits.tokens, limits.rows);
  return limits;
}

}  // namespace bertrain

// Batching and per-rank sharding (see batcher.h).
#include "data/batcher.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "data/split.h"

namespace bertrain {

namespace {

// SplitMix64 finalizer: turns (seed, epoch) into an unrelated seed per epoch, so consecutive epochs
// (or seeds) do not give correlated Philox keys.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Rows [start, start + size) of global batch `index` that rank `rank` of `world` takes: contiguous
// slices whose sizes differ by at most one, the larger ones first.
struct Slice {
  int start = 0;
  int size = 0;
};

Slice rank_slice(int global_start, int global_size, int rank, int world) {
  const int base = global_size / world, extra = global_size % world;
  return Slice{global_start + rank * base + std::min(rank, extra), base + (rank < extra ? 1 : 0)};
}

}  // namespace

Batcher::Batcher(const std::vector<Example>* examples, const BatcherOptions& options)
    : examples_(examples), options_(options) {
  BERTRAIN_CHECK(examples_ != nullptr, "Batcher: no examples (null pointer)");
  BERTRAIN_CHECK(examples_->size() <= static_cast<std::size_t>(std::numeric_limits<int>::max()),
                 "Batcher: " << examples_->size() << " examples do not fit an int index");
  BERTRAIN_CHECK(options_.batch_size >= 1, "Batcher: batch size must be at least 1, got " << options_.batch_size);
  BERTRAIN_CHECK(options_.accumulation >= 1,
                 "Batcher: accumulation must be at least 1, got " << options_.accumulation);
  BERTRAIN_CHECK(static_cast<int64_t>(options_.batch_size) * options_.accumulation <= std::numeric_limits<int>::max(),
                 "Batcher: batch size " << options_.batch_size << " x " << options_.accumulation
                                        << " accumulation steps overflows int");
  BERTRAIN_CHECK(options_.world_size >= 1, "Batcher: world size must be at least 1, got " << options_.world_size);
  BERTRAIN_CHECK(options_.rank >= 0 && options_.rank < options_.world_size,
                 "Batcher: rank " << options_.rank << " outside [0, " << options_.world_size << ")");
  BERTRAIN_CHECK(options_.classes >= 1, "Batcher: classes must be at least 1, got " << options_.classes);
}

int Batcher::batches_per_epoch() const {
  const auto n = static_cast<int64_t>(examples_->size());
  const int64_t step_rows = static_cast<int64_t>(options_.batch_size) * options_.accumulation;
  return static_cast<int>((n + step_rows - 1) / step_rows);
}

int Batcher::micro_batches(int index) const {
  const int64_t step_rows = static_cast<int64_t>(options_.batch_size) * options_.accumulation;
  const int64_t rows = std::min<int64_t>(step_rows, static_cast<int64_t>(examples_->size()) - index * step_rows);
  return static_cast<int>((rows + options_.batch_size - 1) / options_.batch_size);
}

int Batcher::max_sequence_length() const {
  std::size_t longest = 0;
  for (const Example& e : *examples_) longest = std::max(longest, e.ids.size());
  return static_cast<int>(longest);
}

int Batcher::max_rows() const {
  const int n = static_cast<int>(examples_->size());
  const int global = std::min(options_.batch_size, n);
  return rank_slice(0, global, options_.rank, options_.world_size).size;
}

int Batcher::max_tokens() const {
  int64_t most = 0;
  if (!options_.shuffle) {
    const int n = static_cast<int>(examples_->size());
    // Micro-batches start every batch_size rows, whatever the accumulation (counted in 64 bits: a batch size near
    // INT_MAX overflowed n + batch_size - 1, and no micro-batch was looked at).
    const int64_t batches = (int64_t{n} + options_.batch_size - 1) / options_.batch_size;
    for (int64_t index = 0; index < batches; ++index) {
      const int global_start = static_cast<int>(index * options_.batch_size);
      const Slice slice =
          rank_slice(global_start, std::min(options_.batch_size, n - global_start), options_.rank, options_.world_size);
      int64_t tokens = 0;
      for (int row = slice.start; row < slice.start + slice.size; ++row) {
        tokens += static_cast<int64_t>((*examples_)[static_cast<std::size_t>(row)].ids.size());
      }
      most = std::max(most, tokens);
    }
  } else {
    // Any max_rows() examples can share a slice: the longest ones are the bound.
    std::vector<int64_t> lengths;
    lengths.reserve(examples_->size());
    for (const Example& e : *examples_) lengths.push_back(static_cast<int64_t>(e.ids.size()));
    const std::size_t rows = static_cast<std::size_t>(max_rows());
    std::partial_sort(lengths.begin(), lengths.begin() + static_cast<std::ptrdiff_t>(rows), lengths.end(),
                      std::greater<int64_t>());
    for (std::size_t i = 0; i < rows; ++i) most += lengths[i];
  }
  BERTRAIN_CHECK(most <= std::numeric_limits<int>::max(), "Batcher: a batch of " << most << " tokens overflows int");
  return static_cast<int>(most);
}

std::vector<int> Batcher::order(int epoch) const {
  const int n = static_cast<int>(examples_->size());
  if (!options_.shuffle) {
    std::vector<int> identity(static_cast<std::size_t>(n));
    std::iota(identity.begin(), identity.end(), 0);
    return identity;
  }
  return seeded_permutation(n, mix(options_.seed ^ mix(static_cast<uint64_t>(epoch))));
}

const std::vector<int>& Batcher::cached_order(int epoch) const {
  // The unshuffled order is the same every epoch, so it is computed once; the size check catches an
  // examples vector that grew or shrank since the cache was filled.
  const bool fresh = order_.size() == examples_->size() && (order_epoch_ == epoch || (!options_.shuffle && order_epoch_ >= 0));
  if (!fresh) {
    order_ = order(epoch);
    order_epoch_ = epoch;
  }
  return order_;
}

void Batcher::batch(int epoch, int index, Batch* out, int micro) const {
  BERTRAIN_CHECK(out != nullptr, "Batcher::batch: null output batch");
  BERTRAIN_CHECK(epoch >= 0, "Batcher::batch: negative epoch " << epoch);
  const int batches = batches_per_epoch();
  BERTRAIN_CHECK(index >= 0 && index < batches, "Batcher::batch: batch index " << index << " outside [0, " << batches
                                                << ") (" << examples_->size() << " examples, batch size "
                                                << options_.batch_size << " x " << options_.accumulation << ")");
  BERTRAIN_CHECK(micro >= 0 && micro < micro_batches(index), "Batcher::batch: micro-batch " << micro << " outside [0, "
                                                                 << micro_batches(index) << ") of batch " << index);
  const std::vector<int>& epoch_order = cached_order(epoch);
  const int n = static_cast<int>(epoch_order.size());
  const int step_start = index * options_.batch_size * options_.accumulation;
  const int step_size = std::min(options_.batch_size * options_.accumulation, n - step_start);
  const int micro_start = step_start + micro * options_.batch_size;
  const int micro_size = std::min(options_.batch_size, step_start + step_size - micro_start);
  const Slice slice = rank_slice(micro_start, micro_size, options_.rank, options_.world_size);

  out->batch = slice.size;
  out->first_row = slice.start - step_start;
  out->global_batch = step_size;
  out->loss_scale = static_cast<double>(slice.size) / step_size;
  // assign() keeps the capacity, so the storage settles at the largest batch seen.
  out->rows.assign(epoch_order.begin() + slice.start, epoch_order.begin() + slice.start + slice.size);
  const std::size_t classes = static_cast<std::size_t>(options_.classes);
  out->input_ids.clear();
  out->cu_seqlens.assign(1, 0);
  out->targets.assign(out->rows.size() * classes, 0.0f);
  out->longest = 0;
  for (std::size_t b = 0; b < out->rows.size(); ++b) {
    const Example& example = (*examples_)[static_cast<std::size_t>(out->rows[b])];
    for (int label : example.labels) {
      BERTRAIN_CHECK(label >= 0 && label < options_.classes, "Batcher::batch: example " << out->rows[b] << " has label "
                                                              << label << ", outside [0, " << options_.classes << ")");
      out->targets[b * classes + static_cast<std::size_t>(label)] = 1.0f;
    }
    // Attention over a row without tokens is undefined.
    BERTRAIN_CHECK(!example.ids.empty(), "Batcher::batch: example " << out->rows[b] << " has no token ids");
    BERTRAIN_CHECK(out->input_ids.size() + example.ids.size() <= static_cast<std::size_t>(std::numeric_limits<int>::max()),
                   "Batcher::batch: batch " << index << " has more tokens than an int counts");
    out->input_ids.insert(out->input_ids.end(), example.ids.begin(), example.ids.end());
    out->cu_seqlens.push_back(static_cast<int32_t>(out->input_ids.size()));
    out->longest = std::max(out->longest, static_cast<int>(example.ids.size()));
  }
  out->tokens = static_cast<int>(out->input_ids.size());
}

}  // namespace bertrain

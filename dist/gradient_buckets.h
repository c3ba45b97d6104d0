// The gradient buckets of data-parallel training: which slices of the flat gradient buffer are summed
// across ranks, and in which order. NCCL matches collectives by their order alone, so every rank must issue
// the same sequence of allreduces (same slices, same order) or the job hangs or sums the wrong slices. The
// plan is therefore a pure function of the parameter layout (the offsets at which the backward reports
// finished gradients) and the bucket size, computed once, and a rank whose slice of a batch is empty
// replays exactly the calls a backward would make (GradientBucketSchedule::all_gradients_ready).
#pragma once

#include <cstddef>
#include <vector>

namespace bertrain {

// Elements [begin, end) of the flat gradient buffer, reduced by one allreduce.
struct GradientBucket {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t size() const { return end - begin; }
  bool operator==(const GradientBucket& other) const { return begin == other.begin && end == other.end; }
  bool operator!=(const GradientBucket& other) const { return !(*this == other); }
};

// The buckets in reduction order. `ready_offsets` lists, in the order the backward reports them, the offsets
// o at which all gradients at offsets >= o are final: strictly decreasing, each below `total` (the buffer's
// size in elements), the last 0. Walking them, a bucket [o, end of the previous bucket) closes at the first
// offset o where at least `min_bucket_elements` are waiting, and at offset 0 whatever is left (so every
// bucket but the last has at least min_bucket_elements). Buckets therefore start only at readiness offsets
// and together cover [0, total) once, from the top down. Throws Error on input that breaks these rules.
std::vector<GradientBucket> plan_gradient_buckets(const std::vector<std::size_t>& ready_offsets, std::size_t total,
                                                  std::size_t min_bucket_elements);

// Runs one training step's reductions through the plan: the backward's readiness reports come in one at a
// time (gradients_ready), each is checked against the plan, and the bucket that closes at it, if any, goes to
// the caller's `reduce(const GradientBucket&)`. Checking every report means that a backward whose order
// differs from the plan fails on its first step, the same way on every rank, before any mismatched
// collective is issued. Not thread-safe (one instance per training engine, used by its host thread).
class GradientBucketSchedule {
 public:
  GradientBucketSchedule(std::vector<std::size_t> ready_offsets, std::size_t total, std::size_t min_bucket_elements);

  const std::vector<std::size_t>& ready_offsets() const { return offsets_; }
  const std::vector<GradientBucket>& buckets() const { return buckets_; }
  std::size_t total() const { return total_; }

  // The backward reports that gradients at offsets >= `offset` are final. Throws Error unless `offset` is the
  // next one of ready_offsets(); calls reduce(bucket) when a bucket closes at it.
  template <typename Reduce>
  void gradients_ready(std::size_t offset, Reduce&& reduce) {
    if (const GradientBucket* bucket = advance(offset)) reduce(*bucket);
  }
  // A rank with nothing to back-propagate (its gradients zeroed) makes the same reports as a whole backward,
  // so it reduces the same buckets in the same order. Must start a step.
  template <typename Reduce>
  void all_gradients_ready(Reduce&& reduce) {
    check_step_start();
    for (const std::size_t offset : offsets_) gradients_ready(offset, reduce);
  }
  // After the backward: throws Error unless every readiness offset was reported (so every bucket was
  // reduced), then rewinds for the next step.
  void finish_step();

 private:
  // Checks `offset` against the plan and moves on; returns the bucket that closes at it, or nullptr.
  const GradientBucket* advance(std::size_t offset);
  void check_step_start() const;

  std::vector<std::size_t> offsets_;
  std::size_t total_;
  std::vector<GradientBucket> buckets_;
  std::vector<std::size_t> closes_;  // closes_[i]: the bucket closing at offsets_[i], or kNone
  std::size_t next_ = 0;             // index in offsets_ of the report expected next
};

}  // namespace bertrain

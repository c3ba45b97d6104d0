#include "dist/gradient_buckets.h"

#include <limits>
#include <utility>

#include "core/error.h"

namespace bertrain {

namespace {
constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
}  // namespace

std::vector<GradientBucket> plan_gradient_buckets(const std::vector<std::size_t>& ready_offsets, std::size_t total,
                                                  std::size_t min_bucket_elements) {
  BERTRAIN_CHECK(min_bucket_elements > 0, "gradient buckets: the bucket size must be positive");
  BERTRAIN_CHECK(!ready_offsets.empty() && ready_offsets.back() == 0,
                 "gradient buckets: the readiness offsets must end with 0 (the whole buffer is final after the "
                 "backward)");
  std::vector<GradientBucket> buckets;
  std::size_t end = total;  // [offset, end) is final and not yet in a bucket
  for (std::size_t i = 0; i < ready_offsets.size(); ++i) {
    const std::size_t offset = ready_offsets[i];
    BERTRAIN_CHECK(offset < end, "gradient buckets: readiness offset #" << i << " (" << offset
                                     << ") is not below the previous one (or the buffer size " << total
                                     << "); the offsets must be strictly decreasing");
    if (end - offset >= min_bucket_elements || offset == 0) {
      buckets.push_back({offset, end});
      end = offset;
    }
  }
  return buckets;
}

GradientBucketSchedule::GradientBucketSchedule(std::vector<std::size_t> ready_offsets, std::size_t total,
                                               std::size_t min_bucket_elements)
    : offsets_(std::move(ready_offsets)),
      total_(total),
      buckets_(plan_gradient_buckets(offsets_, total, min_bucket_elements)),
      closes_(offsets_.size(), kNone) {
  std::size_t b = 0;
  for (std::size_t i = 0; i < offsets_.size() && b < buckets_.size(); ++i) {
    if (buckets_[b].begin == offsets_[i]) closes_[i] = b++;
  }
  BERTRAIN_CHECK(b == buckets_.size(), "gradient buckets: bucket " << b << " starts at no readiness offset");
}

const GradientBucket* GradientBucketSchedule::advance(std::size_t offset) {
  BERTRAIN_CHECK(next_ < offsets_.size(), "gradients reported ready at offset "
                                              << offset << " after the whole buffer was (" << offsets_.size()
                                              << " reports per step); call finish_step() between steps");
  BERTRAIN_CHECK(offset == offsets_[next_], "gradients reported ready at offset "
                                                << offset << " where the bucket plan expects report #" << next_
                                                << " at offset " << offsets_[next_]
                                                << ": the backward and the plan disagree, so the ranks' "
                                                   "collectives would not match");
  const std::size_t bucket = closes_[next_++];
  return bucket == kNone ? nullptr : &buckets_[bucket];
}

void GradientBucketSchedule::check_step_start() const {
  BERTRAIN_CHECK(next_ == 0, "gradient buckets: a step was started after " << next_
                                                                           << " reports of the previous one");
}

void GradientBucketSchedule::finish_step() {
  BERTRAIN_CHECK(next_ == offsets_.size(), "gradient reduction stopped after "
                                               << next_ << " of " << offsets_.size()
                                               << " readiness reports: some buckets were never reduced");
  next_ = 0;
}

}  // namespace bertrain

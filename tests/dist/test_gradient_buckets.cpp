// The gradient bucket plan and schedule of data-parallel training (every rank must issue the same allreduces
// in the same order, an empty slice included), and the NCCL watchdog's book of outstanding collectives.
// CPU only: the multi-GPU behaviour these guard cannot run on a machine with one GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "core/error.h"
#include "dist/collective_deadline.h"
#include "dist/device_communicator.h"
#include "dist/gradient_buckets.h"
#include "model/bert_config.h"
#include "model/bert_params.h"

namespace bertrain {
namespace {

using Buckets = std::vector<GradientBucket>;

std::string describe(const Buckets& buckets) {
  std::string text;
  for (const GradientBucket& b : buckets) text += "[" + std::to_string(b.begin) + ", " + std::to_string(b.end) + ") ";
  return text;
}

// The properties every plan must have, whatever the sizes: the buckets cover [0, total) exactly once from
// the top down (the backward's order), each starts at a readiness offset, and all but the last hold at least
// min_elements.
void expect_valid_plan(const Buckets& buckets, const std::vector<std::size_t>& offsets, std::size_t total,
                       std::size_t min_elements) {
  ASSERT_FALSE(buckets.empty());
  EXPECT_EQ(buckets.front().end, total) << describe(buckets);
  EXPECT_EQ(buckets.back().begin, 0u) << describe(buckets);
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    const GradientBucket& b = buckets[i];
    EXPECT_LT(b.begin, b.end) << "bucket " << i << " is empty: " << describe(buckets);
    if (i + 1 < buckets.size()) {
      EXPECT_EQ(buckets[i + 1].end, b.begin) << "gap or overlap after bucket " << i << ": " << describe(buckets);
      EXPECT_GE(b.size(), min_elements) << "bucket " << i << " is smaller than the bucket size: " << describe(buckets);
    }
    bool at_offset = false;
    for (const std::size_t o : offsets) at_offset = at_offset || o == b.begin;
    EXPECT_TRUE(at_offset) << "bucket " << i << " starts at " << b.begin << ", not a readiness offset";
  }
}


// Records the allreduces a rank would issue.
struct Recorder {
  Buckets issued;
  void operator()(const GradientBucket& b) { issued.push_back(b); }
};

// One step of a rank that runs the backward: reports every offset in order, as the model does.
Buckets backward_step(GradientBucketSchedule& schedule) {
  Recorder rec;
  for (const std::size_t offset : schedule.ready_offsets()) {
    schedule.gradients_ready(offset, [&](const GradientBucket& b) { rec(b); });
  }
  schedule.finish_step();
  return rec.issued;
}

// One step of a rank whose slice of the batch is empty.
Buckets empty_slice_step(GradientBucketSchedule& schedule) {
  Recorder rec;
  schedule.all_gradients_ready([&](const GradientBucket& b) { rec(b); });
  schedule.finish_step();
  return rec.issued;
}

TEST(GradientBuckets, ClosesAtTheFirstOffsetWithABucketWaiting) {
  // total 100, bucket 25: 10 waiting at 90 (keep going), 30 at 70 (close), 30 at 40 (close), 5 at 35,
  // 30 at 10 (close), and whatever is left at 0.
  const std::vector<std::size_t> offsets{90, 70, 40, 35, 10, 0};
  const Buckets buckets = plan_gradient_buckets(offsets, 100, 25);
  const Buckets expected{{70, 100}, {40, 70}, {10, 40}, {0, 10}};
  EXPECT_EQ(buckets, expected) << describe(buckets);
  expect_valid_plan(buckets, offsets, 100, 25);
}

TEST(GradientBuckets, BucketSizeExtremes) {
  const std::vector<std::size_t> offsets{900, 500, 120, 0};
  // Larger than the buffer: one allreduce of everything, at the end of the backward.
  EXPECT_EQ(plan_gradient_buckets(offsets, 1000, 5000), (Buckets{{0, 1000}}));
  // One element: a bucket at every readiness offset.
  const Buckets fine = plan_gradient_buckets(offsets, 1000, 1);
  EXPECT_EQ(fine, (Buckets{{900, 1000}, {500, 900}, {120, 500}, {0, 120}})) << describe(fine);
  // A single report at 0 (a backward without intermediate reports).
  EXPECT_EQ(plan_gradient_buckets({0}, 7, 3), (Buckets{{0, 7}}));
}

TEST(GradientBuckets, ValidForManySizes) {
  // Irregular tensor sizes, every bucket size from tiny to larger than the buffer.
  std::vector<std::size_t> offsets;
  std::size_t total = 0;
  for (std::size_t i = 0; i < 40; ++i) total += 16 * (1 + (i * 37) % 23);
  for (std::size_t at = total; at > 0;) {
    const std::size_t step = std::min(at, 16 * (1 + (at * 13) % 31));
    at -= step;
    offsets.push_back(at);
  }
  for (const std::size_t min_elements : {std::size_t{1}, std::size_t{17}, std::size_t{160}, std::size_t{1000},
                                          total / 3, total, 10 * total}) {
    SCOPED_TRACE("bucket size " + std::to_string(min_elements));
    expect_valid_plan(plan_gradient_buckets(offsets, total, min_elements), offsets, total, min_elements);
  }
}

TEST(GradientBuckets, BertBaseLayout) {
  // SciBERT (BERT-base with its own vocabulary) with 4 labels and the trainer's 25 MiB buckets: every layer
  // (7.1 M floats, 28 MB) fills a bucket; the head (0.6 M) joins the last layer; the embeddings are the last.
  BertConfig config;
  config.vocab_size = 31090;
  const ParamLayout layout = bert_classifier_layout(config, 4);
  const std::vector<std::size_t> offsets = backward_ready_offsets(layout, config);
  const std::size_t min_elements = (25u << 20) / sizeof(float);
  const Buckets buckets = plan_gradient_buckets(offsets, layout.total(), min_elements);
  expect_valid_plan(buckets, offsets, layout.total(), min_elements);
  ASSERT_EQ(buckets.size(), 13u) << describe(buckets);
  EXPECT_EQ(buckets.front(), (GradientBucket{layout.at("bert.encoder.layer.11.attention.self.query.weight").offset,
                                             layout.total()}));
  EXPECT_EQ(buckets.back(), (GradientBucket{0, layout.at("bert.encoder.layer.0.attention.self.query.weight").offset}));
}

TEST(GradientBuckets, Deterministic) {
  BertConfig config;
  const ParamLayout layout = bert_classifier_layout(config, 2);
  const std::vector<std::size_t> offsets = backward_ready_offsets(layout, config);
  const Buckets first = plan_gradient_buckets(offsets, layout.total(), 1u << 20);
  EXPECT_EQ(plan_gradient_buckets(offsets, layout.total(), 1u << 20), first);
  // Two engines (two ranks) built from the same layout hold the same schedule.
  const GradientBucketSchedule a(offsets, layout.total(), 1u << 20), b(offsets, layout.total(), 1u << 20);
  EXPECT_EQ(a.buckets(), first);
  EXPECT_EQ(b.buckets(), first);
}

TEST(GradientBuckets, RejectsOffsetsThatBreakTheRules) {
  EXPECT_THROW(plan_gradient_buckets({}, 10, 4), Error);                // nothing reported
  EXPECT_THROW(plan_gradient_buckets({5, 2}, 10, 4), Error);            // never reaches 0
  EXPECT_THROW(plan_gradient_buckets({5, 6, 0}, 10, 4), Error);         // not decreasing
  EXPECT_THROW(plan_gradient_buckets({5, 5, 0}, 10, 4), Error);         // repeated
  EXPECT_THROW(plan_gradient_buckets({10, 0}, 10, 4), Error);           // at the buffer's end
  EXPECT_THROW(plan_gradient_buckets({5, 0}, 10, 0), Error);            // no bucket size
  EXPECT_THROW(GradientBucketSchedule({12, 0}, 10, 4), Error);          // the schedule checks too
}

TEST(GradientBucketSchedule, BackwardReducesThePlannedBuckets) {
  const std::vector<std::size_t> offsets{90, 70, 40, 35, 10, 0};
  GradientBucketSchedule schedule(offsets, 100, 25);
  // Each bucket is issued at the report where it closes, and only then.
  std::vector<std::size_t> issued_at;
  for (const std::size_t offset : offsets) {
    schedule.gradients_ready(offset, [&](const GradientBucket& b) {
      EXPECT_EQ(b.begin, offset);
      issued_at.push_back(offset);
    });
  }
  schedule.finish_step();
  EXPECT_EQ(issued_at, (std::vector<std::size_t>{70, 40, 10, 0}));
  EXPECT_EQ(backward_step(schedule), schedule.buckets());  // and again the next step
}

TEST(GradientBucketSchedule, EmptySliceReducesTheSameBucketsInTheSameOrder) {
  BertConfig config;
  config.vocab_size = 31090;
  const ParamLayout layout = bert_classifier_layout(config, 4);
  GradientBucketSchedule schedule(backward_ready_offsets(layout, config), layout.total(),
                                  (25u << 20) / sizeof(float));
  const Buckets from_backward = backward_step(schedule);
  const Buckets from_empty_slice = empty_slice_step(schedule);
  EXPECT_EQ(from_backward, schedule.buckets()) << describe(from_backward);
  EXPECT_EQ(from_empty_slice, schedule.buckets()) << describe(from_empty_slice);
  EXPECT_GT(from_empty_slice.size(), 1u);  // several buckets: one whole-buffer allreduce would not match
}

TEST(GradientBucketSchedule, RanksIssueTheSameCollectivesWhenOneHasAnEmptyLastSlice) {
  // Three ranks, four steps; in the last, rank 2's slice of the short last batch is empty.
  BertConfig config;
  config.num_hidden_layers = 4;
  config.vocab_size = 1000;
  config.hidden_size = 64;
  config.num_attention_heads = 4;
  config.intermediate_size = 256;
  const ParamLayout layout = bert_classifier_layout(config, 3);
  const std::vector<std::size_t> offsets = backward_ready_offsets(layout, config);
  std::vector<Buckets> sequences(3);
  for (int rank = 0; rank < 3; ++rank) {
    GradientBucketSchedule schedule(offsets, layout.total(), 20000);  // 80 KB buckets: several per step
    for (int step = 0; step < 4; ++step) {
      const Buckets issued = (step == 3 && rank == 2) ? empty_slice_step(schedule) : backward_step(schedule);
      sequences[rank].insert(sequences[rank].end(), issued.begin(), issued.end());
    }
  }
  ASSERT_GT(sequences[0].size(), 4u * 2);
  EXPECT_EQ(sequences[1], sequences[0]);
  EXPECT_EQ(sequences[2], sequences[0]) << "rank 2: " << describe(sequences[2])
                                        << "\nrank 0: " << describe(sequences[0]);
}

TEST(GradientBucketSchedule, ReportsThatDisagreeWithThePlanThrow) {
  GradientBucketSchedule schedule({90, 70, 40, 35, 10, 0}, 100, 25);
  int reduced = 0;
  auto count = [&](const GradientBucket&) { ++reduced; };
  // Out of order: the first report must be 90.
  EXPECT_THROW(schedule.gradients_ready(70, count), Error);
  EXPECT_EQ(reduced, 0);

  GradientBucketSchedule fresh({90, 70, 40, 35, 10, 0}, 100, 25);
  fresh.gradients_ready(90, count);
  fresh.gradients_ready(70, count);
  EXPECT_EQ(reduced, 1);
  // A report missing (40 skipped), a step finished early, an empty-slice replay started mid-step.
  EXPECT_THROW(fresh.gradients_ready(35, count), Error);
  EXPECT_THROW(fresh.finish_step(), Error);
  EXPECT_THROW(fresh.all_gradients_ready(count), Error);

  // A report after the whole buffer was reported, without finish_step in between.
  GradientBucketSchedule done({5, 0}, 10, 4);
  done.all_gradients_ready(count);
  EXPECT_THROW(done.gradients_ready(5, count), Error);
  done.finish_step();
  EXPECT_NO_THROW(done.gradients_ready(5, count));
}

TEST(CollectiveWatch, AgeOfTheOldestUnfinishedCollective) {
  CollectiveWatch watch;
  std::vector<bool> finished;
  for (const double enqueued : {1.0, 2.0, 4.0}) {
    const std::size_t slot = watch.reserve(enqueued);
    ASSERT_EQ(slot, finished.size());
    watch.publish();
    finished.push_back(false);
  }
  auto done = [&](std::size_t slot) { return static_cast<bool>(finished[slot]); };
  EXPECT_DOUBLE_EQ(watch.oldest_outstanding_s(10.0, done), 9.0);
  finished[0] = true;
  EXPECT_DOUBLE_EQ(watch.oldest_outstanding_s(10.0, done), 8.0);
  EXPECT_EQ(watch.finished(), 1u);
  finished[1] = finished[2] = true;
  EXPECT_DOUBLE_EQ(watch.oldest_outstanding_s(10.0, done), 0.0);
  EXPECT_EQ(watch.finished(), 3u);
  EXPECT_EQ(watch.published(), 3u);
  // Nothing outstanding: the watch asks about nothing.
  EXPECT_DOUBLE_EQ(watch.oldest_outstanding_s(99.0, [](std::size_t) -> bool {
    ADD_FAILURE() << "asked about a collective that was seen finished";
    return true;
  }), 0.0);
}

// Time this process did not run (OwnAbsence) moves only the collectives still outstanding: a whole job suspended
// and continued does not find them timed out, and what finished or comes later keeps its times.
TEST(CollectiveWatch, PostponeMovesOnlyTheOutstandingCollectives) {
  CollectiveWatch watch;
  for (const double enqueued : {1.0, 2.0}) {
    watch.reserve(enqueued);
    watch.publish();
  }
  EXPECT_DOUBLE_EQ(watch.oldest_outstanding_s(3.0, [](std::size_t slot) { return slot == 0; }), 1.0);
  watch.postpone(100.0);  // slot 1 outstanding: enqueued at 102 now; slot 0 was seen finished
  const std::size_t next = watch.reserve(150.0);
  watch.publish();
  EXPECT_DOUBLE_EQ(watch.oldest_outstanding_s(160.0, [](std::size_t) { return false; }), 58.0);
  EXPECT_DOUBLE_EQ(watch.oldest_outstanding_s(160.0, [&](std::size_t slot) { return slot != next; }), 10.0);
}

TEST(OwnAbsence, OnlyLooksLaterThanTwoPeriodsAreAbsence) {
  OwnAbsence absence(std::chrono::duration<double>(1.0), 0.0);
  EXPECT_DOUBLE_EQ(absence.at_look(1.0), 0.0);   // on time
  EXPECT_DOUBLE_EQ(absence.at_look(2.9), 0.0);   // 0.9 s late: a slow wake-up
  EXPECT_DOUBLE_EQ(absence.at_look(14.9), 11.0);  // 12 s after the last look: 11 s beyond the period
  EXPECT_DOUBLE_EQ(absence.at_look(15.9), 0.0);
}

TEST(CollectiveWatch, StopsAtTheFirstUnfinished) {
  CollectiveWatch watch;
  for (int i = 0; i < 3; ++i) {
    watch.reserve(static_cast<double>(i));
    watch.publish();
  }
  std::vector<std::size_t> asked;
  const double age = watch.oldest_outstanding_s(5.0, [&](std::size_t slot) {
    asked.push_back(slot);
    return slot != 1;  // collective 1 hangs
  });
  EXPECT_DOUBLE_EQ(age, 4.0);
  EXPECT_EQ(asked, (std::vector<std::size_t>{0, 1}));
}

TEST(CollectiveWatch, FullRingLeavesCollectivesUnwatchedUntilTheWatcherCatchesUp) {
  CollectiveWatch watch;
  for (std::size_t i = 0; i < CollectiveWatch::kSlots; ++i) {
    ASSERT_EQ(watch.reserve(1.0), i);
    watch.publish();
  }
  // Every slot still holds a collective the watcher has not seen finish: none may be overwritten.
  EXPECT_EQ(watch.reserve(2.0), CollectiveWatch::kNoSlot);
  EXPECT_DOUBLE_EQ(watch.oldest_outstanding_s(3.0, [](std::size_t slot) { return slot < 10; }), 2.0);
  // Ten seen finished: their slots come back, in ring order.
  ASSERT_EQ(watch.reserve(4.0), 0u);
  watch.publish();
  EXPECT_EQ(watch.published(), CollectiveWatch::kSlots + 1);
  EXPECT_DOUBLE_EQ(watch.oldest_outstanding_s(5.0, [](std::size_t) { return true; }), 0.0);
  EXPECT_EQ(watch.finished(), CollectiveWatch::kSlots + 1);
}

}  // namespace
}  // namespace bertrain

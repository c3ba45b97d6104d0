// Labels, the seeded stratified split and subsets, and the batcher's padding, ordering and sharding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/batcher.h"
#include "data/csv.h"
#include "data/labels.h"
#include "data/split.h"
#include "tests/data_dir.h"

namespace bertrain {
namespace {

const std::vector<std::string> kMadeWithMlLabels = {"computer-vision", "mlops", "natural-language-processing", "other"};

template <typename F>
void expect_error(F&& f, std::initializer_list<const char*> fragments) {
  try {
    f();
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const char* x : fragments) EXPECT_NE(message.find(x), std::string::npos) << "'" << x << "' not in: " << message;
  }
}

// The tags of $BERTRAIN_DATA_DIR/madewithml/dataset.csv (csv.found is false when there is none).
std::vector<std::string> dataset_tags(const testing::DataFile& csv) {
  const CsvTable t = read_csv(csv.path);
  const int tag = t.require_column("tag");
  std::vector<std::string> tags;
  for (const auto& row : t.rows) tags.push_back(row[static_cast<std::size_t>(tag)]);
  return tags;
}

// ---- LabelSet ------------------------------------------------------------------------------------

TEST(LabelSet, FromTagsSortedUnique) {
  const LabelSet labels = LabelSet::from_tags({"other", "mlops", "natural-language-processing", "computer-vision",
                                               "mlops", "other"});
  EXPECT_EQ(labels.names(), kMadeWithMlLabels);
  EXPECT_EQ(labels.size(), 4);
  EXPECT_EQ(labels.find("natural-language-processing"), 2);
  EXPECT_EQ(labels.find("robotics"), -1);
  EXPECT_EQ(labels.name(1), "mlops");
  EXPECT_EQ(labels.require("other", "holdout.csv"), 3);
  // Byte order, as Python's sorted(): uppercase before lowercase.
  EXPECT_EQ(LabelSet::from_tags({"b", "a", "B"}).names(), (std::vector<std::string>{"B", "a", "b"}));
  EXPECT_EQ(LabelSet::from_tags({}).size(), 0);
  // Integer labels in numeric order, so that class k is label k where labels are 0..n-1 (text order put "10" at 2).
  EXPECT_EQ(LabelSet::from_tags({"10", "2", "0", "1", "11", "-3"}).names(),
            (std::vector<std::string>{"-3", "0", "1", "2", "10", "11"}));
  // Not all integers as Python writes them: byte order for all.
  EXPECT_EQ(LabelSet::from_tags({"10", "2", "x"}).names(), (std::vector<std::string>{"10", "2", "x"}));
  EXPECT_EQ(LabelSet::from_tags({"10", "02"}).names(), (std::vector<std::string>{"02", "10"}));
  EXPECT_EQ(LabelSet::from_tags({"10", "2.0"}).names(), (std::vector<std::string>{"10", "2.0"}));
}

TEST(LabelSet, ExplicitOrderKeptAndDuplicatesRefused) {
  const LabelSet labels({"z", "a"});
  EXPECT_EQ(labels.find("z"), 0);
  EXPECT_EQ(labels.find("a"), 1);
  expect_error([] { LabelSet({"a", "b", "a"}); }, {"label 'a' appears twice", "indices 0 and 2"});
}

TEST(LabelSet, RequireNamesTagPlaceAndKnownLabels) {
  const LabelSet labels(kMadeWithMlLabels);
  expect_error([&] { labels.require("robotics", "holdout.csv row 7"); },
               {"unknown tag 'robotics' in holdout.csv row 7 (the model knows: computer-vision, mlops, "
                "natural-language-processing, other)"});
  // Tens of thousands of labels: found by a hash (a model of 50,000 took 8.4 s to load, its pairs compared), and
  // named in a message by the first 20.
  std::vector<std::string> many;
  for (int i = 0; i < 50000; ++i) many.push_back("label-" + std::to_string(i));
  const LabelSet large(many);
  EXPECT_EQ(large.find("label-49999"), 49999);
  EXPECT_EQ(large.find("label-50000"), -1);
  expect_error([&] { large.require("x", "a.csv row 2"); },
               {"unknown tag 'x' in a.csv row 2 (the model knows: label-0, label-1, ", "label-19, ... (50000 in all))"});
  many.push_back("label-7");
  expect_error([&] { LabelSet{many}; }, {"label 'label-7' appears twice (indices 7 and 50000)"});
}

TEST(LabelSet, MadeWithMlOrder) {
  const testing::DataFile csv = testing::find_data_file("madewithml/dataset.csv");
  if (!csv.found) GTEST_SKIP() << csv.skip_message;
  const std::vector<std::string> tags = dataset_tags(csv);
  EXPECT_EQ(LabelSet::from_tags(tags).names(), kMadeWithMlLabels);
}

// ---- Split and sampling --------------------------------------------------------------------------

void expect_partition(const Split& s, int n) {
  EXPECT_TRUE(std::is_sorted(s.train.begin(), s.train.end()));
  EXPECT_TRUE(std::is_sorted(s.val.begin(), s.val.end()));
  std::vector<int> all = s.train;
  all.insert(all.end(), s.val.begin(), s.val.end());
  std::sort(all.begin(), all.end());
  std::vector<int> expected(static_cast<std::size_t>(n));
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(all, expected) << "train and val must be disjoint and cover every row";
}

std::vector<int> class_counts(const std::vector<int>& rows, const std::vector<int>& labels, int classes) {
  std::vector<int> counts(static_cast<std::size_t>(classes), 0);
  for (int r : rows) ++counts[static_cast<std::size_t>(labels[static_cast<std::size_t>(r)])];
  return counts;
}

TEST(Split, MadeWithMlDataset) {
  const testing::DataFile csv = testing::find_data_file("madewithml/dataset.csv");
  if (!csv.found) GTEST_SKIP() << csv.skip_message;
  const std::vector<std::string> tags = dataset_tags(csv);
  const LabelSet set = LabelSet::from_tags(tags);
  std::vector<int> labels;
  for (const auto& t : tags) labels.push_back(set.require(t, csv.path));
  const Split s = stratified_split(labels, 0.2, 1234);
  EXPECT_EQ(s.train.size(), 610u);
  EXPECT_EQ(s.val.size(), 154u);
  // ceil(0.2·n): CV 285 -> 57, mlops 63 -> 13 (12.6), NLP 310 -> 62, other 106 -> 22 (21.2).
  EXPECT_EQ(class_counts(s.val, labels, 4), (std::vector<int>{57, 13, 62, 22}));
  EXPECT_EQ(class_counts(s.train, labels, 4), (std::vector<int>{228, 50, 248, 84}));
  expect_partition(s, static_cast<int>(labels.size()));

  const Split again = stratified_split(labels, 0.2, 1234);
  EXPECT_EQ(again.train, s.train);
  EXPECT_EQ(again.val, s.val);
  const Split other = stratified_split(labels, 0.2, 1235);
  EXPECT_NE(other.val, s.val);
  EXPECT_EQ(class_counts(other.val, labels, 4), (std::vector<int>{57, 13, 62, 22}));
}

TEST(Split, SmallClassesRoundUp) {
  // Class 0: 5 rows -> ceil(1.0) = 1; class 1: 1 row -> ceil(0.2) = 1 (the row goes to val);
  // class 2: 2 rows -> ceil(0.4) = 1.
  const std::vector<int> labels = {0, 2, 0, 0, 1, 0, 2, 0};
  const Split s = stratified_split(labels, 0.2, 7);
  EXPECT_EQ(class_counts(s.val, labels, 3), (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(class_counts(s.train, labels, 3), (std::vector<int>{4, 0, 1}));
  EXPECT_NE(std::find(s.val.begin(), s.val.end(), 4), s.val.end());
  expect_partition(s, 8);
}

TEST(Split, CeilingIsRobustToRounding) {
  // In double, 0.07·100 = 7.000000000000001 and 0.14·50 = 7.000000000000001: a bare ceil would add a row.
  EXPECT_EQ(stratified_split(std::vector<int>(100, 0), 0.07, 1).val.size(), 7u);
  EXPECT_EQ(stratified_split(std::vector<int>(50, 0), 0.14, 1).val.size(), 7u);
  EXPECT_EQ(stratified_split(std::vector<int>(30, 0), 0.1, 1).val.size(), 3u);
  EXPECT_EQ(stratified_split(std::vector<int>(5, 0), 0.2, 1).val.size(), 1u);
  EXPECT_EQ(stratified_split(std::vector<int>(31, 0), 0.1, 1).val.size(), 4u);  // 3.1 still rounds up
}

TEST(Split, FractionZeroMissingClassesAndEmptyInput) {
  const std::vector<int> labels = {3, 0, 3, 3};  // classes 1 and 2 have no rows
  const Split none = stratified_split(labels, 0.0, 1);
  EXPECT_TRUE(none.val.empty());
  EXPECT_EQ(none.train, (std::vector<int>{0, 1, 2, 3}));
  const Split half = stratified_split(labels, 0.5, 1);
  EXPECT_EQ(class_counts(half.val, labels, 4), (std::vector<int>{1, 0, 0, 2}));
  expect_partition(half, 4);
  const Split empty = stratified_split({}, 0.2, 1);
  EXPECT_TRUE(empty.train.empty() && empty.val.empty());
}

TEST(Split, ValidationRowsAreShuffledNotTheFirst) {
  const Split s = stratified_split(std::vector<int>(100, 0), 0.2, 1234);
  ASSERT_EQ(s.val.size(), 20u);
  std::vector<int> first(20);
  std::iota(first.begin(), first.end(), 0);
  EXPECT_NE(s.val, first);
}

TEST(Split, RejectsBadInput) {
  expect_error([] { stratified_split({0, 1}, 1.0, 1); }, {"fraction must be in [0, 1)", "got 1"});
  expect_error([] { stratified_split({0, 1}, -0.1, 1); }, {"fraction must be in [0, 1)"});
  expect_error([] { stratified_split({0, 1}, std::nan(""), 1); }, {"fraction must be in [0, 1)"});
  expect_error([] { stratified_split({0, -1}, 0.2, 1); }, {"row 1 has no class"});
}

TEST(SampleRows, SubsetAscendingAndSeeded) {
  const std::vector<int> s = sample_rows(100, 10, 5);
  ASSERT_EQ(s.size(), 10u);
  EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
  EXPECT_EQ(std::set<int>(s.begin(), s.end()).size(), 10u);
  EXPECT_GE(s.front(), 0);
  EXPECT_LT(s.back(), 100);
  EXPECT_EQ(sample_rows(100, 10, 5), s);
  EXPECT_NE(sample_rows(100, 10, 6), s);
  std::vector<int> all(7);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(sample_rows(7, 7, 1), all);
  EXPECT_EQ(sample_rows(7, 100, 1), all);
  EXPECT_TRUE(sample_rows(7, 0, 1).empty());
  EXPECT_TRUE(sample_rows(0, 3, 1).empty());
  expect_error([] { sample_rows(5, -1, 1); }, {"negative sample count"});
}

TEST(SeededPermutation, PermutationAndDeterministic) {
  for (int n : {0, 1, 2, 7, 1000}) {
    std::vector<int> p = seeded_permutation(n, 42);
    EXPECT_EQ(seeded_permutation(n, 42), p);
    std::sort(p.begin(), p.end());
    std::vector<int> identity(static_cast<std::size_t>(n));
    std::iota(identity.begin(), identity.end(), 0);
    EXPECT_EQ(p, identity) << "n = " << n;
  }
  EXPECT_NE(seeded_permutation(1000, 42), seeded_permutation(1000, 43));
}

TEST(SeededPermutation, PinnedAcrossPlatforms) {
  // Philox + Lemire's bounded draw are pure integer arithmetic: this must never change, or every saved
  // split and shuffled run changes with it.
  EXPECT_EQ(seeded_permutation(10, 42), (std::vector<int>{2, 6, 5, 9, 0, 7, 3, 1, 8, 4}));
  EXPECT_EQ(seeded_permutation(10, 1234), (std::vector<int>{6, 0, 8, 1, 5, 7, 3, 9, 2, 4}));
}

TEST(SeededPermutation, UniformOverAllOrders) {
  // Every one of the 3! orders of 3 elements is equally likely; a biased Fisher–Yates (j in [0, i), or
  // j in [0, n)) misses orders or skews them far beyond these bounds (expected 1000, σ ≈ 29).
  std::map<std::vector<int>, int> counts;
  for (uint64_t seed = 0; seed < 6000; ++seed) ++counts[seeded_permutation(3, seed)];
  EXPECT_EQ(counts.size(), 6u);
  for (const auto& [order, count] : counts) {
    EXPECT_GT(count, 850) << order[0] << order[1] << order[2];
    EXPECT_LT(count, 1150) << order[0] << order[1] << order[2];
  }
}

// ---- Batcher -------------------------------------------------------------------------------------

std::vector<Example> examples_of_lengths(const std::vector<int>& lengths, int classes) {
  std::vector<Example> examples;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    Example e;
    for (int t = 0; t < lengths[i]; ++t) e.ids.push_back(static_cast<int32_t>(100 * (i + 1) + t));
    e.labels = {static_cast<int>(i) % classes};
    examples.push_back(e);
  }
  return examples;
}

BatcherOptions options(int batch_size, int classes, int rank = 0, int world_size = 1) {
  BatcherOptions o;
  o.batch_size = batch_size;
  o.classes = classes;
  o.rank = rank;
  o.world_size = world_size;
  return o;
}

// Rows of every batch of one epoch, in order.
std::vector<int> epoch_rows(const Batcher& batcher, int epoch) {
  std::vector<int> rows;
  Batch b;
  for (int i = 0; i < batcher.batches_per_epoch(); ++i) {
    batcher.batch(epoch, i, &b);
    rows.insert(rows.end(), b.rows.begin(), b.rows.end());
  }
  return rows;
}

TEST(Batcher, PacksRowsWithOffsetsAndOneHotTargets) {
  std::vector<Example> examples = {{{1, 2, 3}, {0}}, {{4, 5}, {1}}, {{6}, {}}, {{7, 8, 9, 10}, {2}}};
  const Batcher batcher(&examples, options(3, 3));
  EXPECT_EQ(batcher.batches_per_epoch(), 2);
  EXPECT_EQ(batcher.max_sequence_length(), 4);
  EXPECT_EQ(batcher.max_rows(), 3);
  EXPECT_EQ(batcher.max_tokens(), 6);  // batch 0: 3 + 2 + 1 tokens; batch 1: 4

  Batch b;
  batcher.batch(0, 0, &b);
  EXPECT_EQ(b.batch, 3);
  EXPECT_EQ(b.tokens, 6);
  EXPECT_EQ(b.longest, 3);  // the longest in this batch, not in the data set
  EXPECT_EQ(b.rows, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(b.input_ids, (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));  // no padding
  EXPECT_EQ(b.cu_seqlens, (std::vector<int32_t>{0, 3, 5, 6}));
  EXPECT_EQ(b.targets, (std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 0}));  // no labels: all zero
  EXPECT_EQ(b.global_batch, 3);
  EXPECT_EQ(b.loss_scale, 1.0);

  batcher.batch(0, 1, &b);
  EXPECT_EQ(b.batch, 1);
  EXPECT_EQ(b.tokens, 4);
  EXPECT_EQ(b.longest, 4);
  EXPECT_EQ(b.input_ids, (std::vector<int32_t>{7, 8, 9, 10}));
  EXPECT_EQ(b.cu_seqlens, (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(b.targets, (std::vector<float>{0, 0, 1}));
  EXPECT_EQ(b.global_batch, 1);
}

TEST(Batcher, MultiHotTargetsAndLabelBounds) {
  std::vector<Example> examples = {{{1, 2}, {0, 2}}, {{3}, {}}, {{4, 5}, {1, 0, 2}}};
  Batch b;
  Batcher(&examples, options(3, 3)).batch(0, 0, &b);
  EXPECT_EQ(b.targets, (std::vector<float>{1, 0, 1, 0, 0, 0, 1, 1, 1}));
  examples[1].labels = {3};
  expect_error([&] { Batcher(&examples, options(3, 3)).batch(0, 0, &b); }, {"example 1 has label 3", "outside [0, 3)"});
}

TEST(Batcher, ReusesOutputStorage) {
  const std::vector<Example> examples = examples_of_lengths({5, 6, 7, 2, 3}, 2);
  const Batcher batcher(&examples, options(3, 2));
  Batch b;
  batcher.batch(0, 0, &b);  // the larger batch: 18 tokens
  const int32_t* ids = b.input_ids.data();
  const int32_t* offsets = b.cu_seqlens.data();
  const float* targets = b.targets.data();
  batcher.batch(0, 1, &b);
  batcher.batch(1, 0, &b);
  EXPECT_EQ(b.input_ids.data(), ids);
  EXPECT_EQ(b.cu_seqlens.data(), offsets);
  EXPECT_EQ(b.targets.data(), targets);
}

// The bounds size the engine's buffers: every slice of every epoch must fit them. Without shuffling the token
// bound is the largest slice's exact count; with shuffling any rows can meet, so it is the longest rows' sum.
TEST(Batcher, MaxTokensBoundsEverySlice) {
  const std::vector<Example> examples = examples_of_lengths({5, 1, 7, 2, 3, 9, 4}, 2);
  for (bool shuffle : {false, true}) {
    for (int world : {1, 2, 3}) {
      for (int rank = 0; rank < world; ++rank) {
        BatcherOptions o = options(3, 2, rank, world);
        o.shuffle = shuffle;
        o.seed = 5;
        const Batcher batcher(&examples, o);
        int most = 0, most_rows = 0;
        Batch b;
        for (int epoch = 0; epoch < 20; ++epoch) {
          for (int i = 0; i < batcher.batches_per_epoch(); ++i) {
            batcher.batch(epoch, i, &b);
            ASSERT_LE(b.tokens, batcher.max_tokens()) << "shuffle " << shuffle << ", rank " << rank << "/" << world;
            ASSERT_LE(b.longest, batcher.max_sequence_length());
            most = std::max(most, b.tokens);
            most_rows = std::max(most_rows, b.batch);
          }
        }
        EXPECT_EQ(batcher.max_rows(), most_rows);
        if (!shuffle) {
          EXPECT_EQ(batcher.max_tokens(), most) << "rank " << rank << "/" << world;
        }
      }
    }
  }
  const Batcher shuffled(&examples, [] {
    BatcherOptions o = options(3, 2);
    o.shuffle = true;
    return o;
  }());
  EXPECT_EQ(shuffled.max_tokens(), 9 + 7 + 5);
}

TEST(Batcher, FixedOrderWithoutShuffle) {
  const std::vector<Example> examples = examples_of_lengths(std::vector<int>(10, 3), 2);
  const Batcher batcher(&examples, options(4, 2));
  std::vector<int> identity(10);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(epoch_rows(batcher, 0), identity);
  EXPECT_EQ(epoch_rows(batcher, 1), identity);
  EXPECT_EQ(epoch_rows(batcher, 9), identity);
}

TEST(Batcher, SeededShufflePerEpoch) {
  const std::vector<Example> examples = examples_of_lengths(std::vector<int>(20, 3), 2);
  BatcherOptions o = options(6, 2);
  o.shuffle = true;
  o.seed = 11;
  const Batcher batcher(&examples, o), twin(&examples, o);
  o.seed = 12;
  const Batcher other_seed(&examples, o);

  const std::vector<int> e0 = epoch_rows(batcher, 0), e1 = epoch_rows(batcher, 1);
  std::vector<int> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> identity(20);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity);
  EXPECT_NE(e0, identity);
  EXPECT_NE(e0, e1);
  EXPECT_EQ(epoch_rows(twin, 1), e1);
  EXPECT_EQ(epoch_rows(twin, 0), e0);
  EXPECT_EQ(epoch_rows(batcher, 0), e0);  // going back to an earlier epoch recomputes it
  EXPECT_NE(epoch_rows(other_seed, 0), e0);
}

// Every sample exactly once per epoch across ranks; per global batch the ranks' slices are contiguous,
// differ by at most one row, add up to the global batch, and loss_scale = batch / global_batch.
void check_sharding(int n, int batch_size, int world, bool shuffle) {
  SCOPED_TRACE(::testing::Message() << "n " << n << ", batch " << batch_size << ", world " << world
                                    << (shuffle ? ", shuffled" : ""));
  const std::vector<Example> examples = examples_of_lengths(std::vector<int>(static_cast<std::size_t>(n), 2), 3);
  std::vector<Batcher> ranks;
  for (int r = 0; r < world; ++r) {
    BatcherOptions o = options(batch_size, 3, r, world);
    o.shuffle = shuffle;
    o.seed = 5;
    ranks.emplace_back(&examples, o);
  }
  const Batcher single(&examples, [&] {
    BatcherOptions o = options(batch_size, 3);
    o.shuffle = shuffle;
    o.seed = 5;
    return o;
  }());
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<int> seen;
    for (int i = 0; i < single.batches_per_epoch(); ++i) {
      Batch whole;
      single.batch(epoch, i, &whole);
      std::vector<int> joined;
      int sum = 0, smallest = whole.batch, largest = 0;
      for (int r = 0; r < world; ++r) {
        EXPECT_EQ(ranks[static_cast<std::size_t>(r)].batches_per_epoch(), single.batches_per_epoch());
        Batch b;
        ranks[static_cast<std::size_t>(r)].batch(epoch, i, &b);
        EXPECT_EQ(b.global_batch, whole.batch);
        EXPECT_DOUBLE_EQ(b.loss_scale * b.global_batch, b.batch);
        EXPECT_EQ(b.rows.size(), static_cast<std::size_t>(b.batch));
        sum += b.batch;
        smallest = std::min(smallest, b.batch);
        largest = std::max(largest, b.batch);
        joined.insert(joined.end(), b.rows.begin(), b.rows.end());
      }
      EXPECT_EQ(sum, whole.global_batch);
      EXPECT_LE(largest - smallest, 1);
      EXPECT_EQ(joined, whole.rows) << "rank slices must be contiguous pieces of the global batch, in rank order";
      seen.insert(seen.end(), joined.begin(), joined.end());
    }
    std::sort(seen.begin(), seen.end());
    std::vector<int> identity(static_cast<std::size_t>(n));
    std::iota(identity.begin(), identity.end(), 0);
    EXPECT_EQ(seen, identity) << "epoch " << epoch;
  }
}

TEST(Batcher, EverySampleOnceAcrossRanks) {
  for (int world = 1; world <= 4; ++world) {
    for (int n : {1, 7, 10, 13}) {
      for (int batch_size : {1, 3, 4, 5}) {
        check_sharding(n, batch_size, world, false);
        check_sharding(n, batch_size, world, true);
      }
    }
  }
}

TEST(Batcher, UnevenLastBatchLeavesARankEmpty) {
  // 10 examples, global batch 4 -> batches of 4, 4, 2; three ranks take 2/1/1, 2/1/1, 1/1/0.
  const std::vector<Example> examples = examples_of_lengths(std::vector<int>(10, 3), 2);
  const std::vector<std::vector<int>> expected_sizes = {{2, 1, 1}, {2, 1, 1}, {1, 1, 0}};
  for (int r = 0; r < 3; ++r) {
    const Batcher batcher(&examples, options(4, 2, r, 3));
    ASSERT_EQ(batcher.batches_per_epoch(), 3);
    Batch b;
    for (int i = 0; i < 3; ++i) {
      batcher.batch(0, i, &b);
      EXPECT_EQ(b.batch, expected_sizes[static_cast<std::size_t>(i)][static_cast<std::size_t>(r)]) << "rank " << r;
      EXPECT_EQ(b.global_batch, i < 2 ? 4 : 2);
    }
  }
  // Rank 2's slice of the last batch: empty but well formed, and weighted 0.
  const Batcher last(&examples, options(4, 2, 2, 3));
  Batch b;
  last.batch(0, 0, &b);  // fill the buffers first: an empty slice must clear them
  last.batch(0, 2, &b);
  EXPECT_EQ(b.batch, 0);
  EXPECT_EQ(b.tokens, 0);
  EXPECT_EQ(b.longest, 0);
  EXPECT_TRUE(b.input_ids.empty());
  EXPECT_EQ(b.cu_seqlens, (std::vector<int32_t>{0}));
  EXPECT_TRUE(b.targets.empty());
  EXPECT_TRUE(b.rows.empty());
  EXPECT_EQ(b.global_batch, 2);
  EXPECT_EQ(b.loss_scale, 0.0);
}

TEST(Batcher, ValidatesOptionsAndArguments) {
  const std::vector<Example> examples = examples_of_lengths({2, 3, 4}, 2);
  expect_error([&] { Batcher(&examples, options(0, 2)); }, {"batch size must be at least 1, got 0"});
  expect_error([&] { Batcher(&examples, options(2, 0)); }, {"classes must be at least 1, got 0"});
  expect_error([&] { Batcher(&examples, options(2, 2, 3, 3)); }, {"rank 3 outside [0, 3)"});
  expect_error([&] { Batcher(&examples, options(2, 2, -1, 3)); }, {"rank -1 outside [0, 3)"});
  expect_error([&] { Batcher(&examples, options(2, 2, 0, 0)); }, {"world size must be at least 1"});
  expect_error([&] { Batcher(nullptr, options(2, 2)); }, {"no examples"});

  const Batcher batcher(&examples, options(2, 2));
  Batch b;
  expect_error([&] { batcher.batch(0, 2, &b); }, {"batch index 2 outside [0, 2)", "3 examples, batch size 2"});
  expect_error([&] { batcher.batch(0, -1, &b); }, {"batch index -1 outside [0, 2)"});
  expect_error([&] { batcher.batch(-1, 0, &b); }, {"negative epoch"});

  const std::vector<Example> none;
  const Batcher empty(&none, options(2, 2));
  EXPECT_EQ(empty.batches_per_epoch(), 0);
  EXPECT_EQ(empty.max_sequence_length(), 0);
  EXPECT_EQ(empty.max_rows(), 0);
  EXPECT_EQ(empty.max_tokens(), 0);
  expect_error([&] { empty.batch(0, 0, &b); }, {"batch index 0 outside [0, 0)"});
}

TEST(Batcher, RejectsBadExamples) {
  const std::vector<Example> bad_label = {{{1, 2}, {0}}, {{3}, {2}}};
  const Batcher labels(&bad_label, options(2, 2));
  Batch b;
  expect_error([&] { labels.batch(0, 0, &b); }, {"example 1 has label 2, outside [0, 2)"});
  const std::vector<Example> no_tokens = {{{1, 2}, {0}}, {{}, {1}}};
  const Batcher tokens(&no_tokens, options(2, 2));
  expect_error([&] { tokens.batch(0, 0, &b); }, {"example 1 has no token ids"});
}


// Gradient accumulation: the micro-batches of a step batch, over all ranks, are exactly the rows of one batch of
// batch_size · accumulation, with the positions (first_row, for dropout) and weights (loss_scale) that batch gives
// them, so their summed gradients are its gradient.
TEST(Batcher, MicroBatchesAreTheStepBatchCutInPieces) {
  const std::vector<Example> examples = examples_of_lengths({5, 1, 7, 2, 3, 9, 4, 6, 2, 8, 1}, 3);  // 11 rows
  for (int world : {1, 2, 3}) {
    BatcherOptions whole_options = options(6, 3);
    const Batcher whole(&examples, whole_options);  // one process, batches of 6
    ASSERT_EQ(whole.batches_per_epoch(), 2);
    for (int rank = 0; rank < world; ++rank) {
      BatcherOptions o = options(2, 3, rank, world);
      o.accumulation = 3;  // steps of 2 x 3 = 6 rows
      const Batcher micro(&examples, o);
      ASSERT_EQ(micro.batches_per_epoch(), 2) << world;
      EXPECT_EQ(micro.micro_batches(0), 3);
      EXPECT_EQ(micro.micro_batches(1), 3);  // 5 rows left: 2 + 2 + 1
      EXPECT_LE(micro.max_rows(), 2);
      Batch w, m;
      for (int step = 0; step < 2; ++step) {
        whole.batch(0, step, &w);
        double scale = 0;
        for (int k = 0; k < micro.micro_batches(step); ++k) {
          micro.batch(0, step, &m, k);
          EXPECT_EQ(m.global_batch, w.batch);
          EXPECT_DOUBLE_EQ(m.loss_scale, static_cast<double>(m.batch) / w.batch);
          scale += m.loss_scale;
          for (int r = 0; r < m.batch; ++r) {
            // Row r of this slice is row first_row + r of the whole step batch.
            EXPECT_EQ(m.rows[static_cast<std::size_t>(r)], w.rows[static_cast<std::size_t>(m.first_row + r)])
                << "world " << world << " rank " << rank << " step " << step << " micro " << k;
          }
          EXPECT_LE(m.tokens, micro.max_tokens());
        }
        if (world == 1) {
          EXPECT_DOUBLE_EQ(scale, 1.0);
        }
      }
      Batch b;
      expect_error([&] { micro.batch(0, 1, &b, 3); }, {"micro-batch 3 outside [0, 3)"});
    }
  }
  BatcherOptions bad = options(2, 3);
  bad.accumulation = 0;
  expect_error([&] { Batcher(&examples, bad); }, {"accumulation must be at least 1"});
}

}  // namespace
}  // namespace bertrain

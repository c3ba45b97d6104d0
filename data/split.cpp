// Seeded sample selection (see split.h). All randomness comes from Philox draws and integer arithmetic,
// so a split is the same on every platform, compiler and standard library (std::shuffle is not).
#include "data/split.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/philox.h"

namespace bertrain {

namespace {

// Philox streams (RandomKey::tensor) of this file, distinct from each other so that the split, the
// subset and a plain permutation with the same seed are unrelated.
constexpr uint32_t kPermutationStream = 0x5045524Du;  // "PERM"
constexpr uint32_t kSplitStream = 0x53504C54u;        // "SPLT"; RandomKey::step = class index
constexpr uint32_t kSampleStream = 0x53414D50u;       // "SAMP"

// Sequential uint32 draws from one Philox stream: draw k is word k % 4 of group k / 4.
class DrawStream {
 public:
  explicit DrawStream(const RandomKey& key) : key_(key) {}

  uint32_t next() {
    if ((count_ & 3) == 0) group_ = philox_group(key_, count_ >> 2);
    return group_.v[count_++ & 3];
  }

  // Uniform in [0, bound) without modulo bias (Lemire 2019: multiply, reject the short low range).
  uint32_t below(uint32_t bound) {
    uint64_t product = static_cast<uint64_t>(next()) * bound;
    if (static_cast<uint32_t>(product) < bound) {
      const uint32_t threshold = (0u - bound) % bound;
      while (static_cast<uint32_t>(product) < threshold) product = static_cast<uint64_t>(next()) * bound;
    }
    return static_cast<uint32_t>(product >> 32);
  }

 private:
  RandomKey key_;
  uint64_t count_ = 0;
  Philox4 group_{};
};

// Fisher–Yates (Durstenfeld): position i swaps with a uniform j in [0, i], from the back.
void shuffle(std::vector<int>* values, const RandomKey& key) {
  DrawStream draws(key);
  for (std::size_t i = values->size(); i > 1; --i) {
    const uint32_t j = draws.below(static_cast<uint32_t>(i));
    std::swap((*values)[i - 1], (*values)[j]);
  }
}

// ceil(fraction · n), robust to the product landing a rounding error above an integer
// (0.07 · 100 is 7.000000000000001 in double, which must give 7, not 8).
int validation_count(double fraction, int n) {
  const double exact = fraction * n;
  const double count = std::ceil(exact - 1e-9 * std::max(1.0, exact));
  return std::min(n, static_cast<int>(count));
}

}  // namespace

std::vector<int> seeded_permutation(int n, uint64_t seed) {
  BERTRAIN_CHECK(n >= 0, "seeded_permutation: negative size " << n);
  std::vector<int> values(static_cast<std::size_t>(n));
  std::iota(values.begin(), values.end(), 0);
  shuffle(&values, RandomKey{seed, 0, kPermutationStream});
  return values;
}

std::vector<int> sample_rows(int n, int count, uint64_t seed) {
  BERTRAIN_CHECK(n >= 0, "sample_rows: negative row count " << n);
  BERTRAIN_CHECK(count >= 0, "sample_rows: negative sample count " << count);
  std::vector<int> rows(static_cast<std::size_t>(n));
  std::iota(rows.begin(), rows.end(), 0);
  shuffle(&rows, RandomKey{seed, 0, kSampleStream});
  rows.resize(static_cast<std::size_t>(std::min(n, count)));
  std::sort(rows.begin(), rows.end());
  return rows;
}

Split stratified_split(const std::vector<int>& labels, double fraction, uint64_t seed) {
  BERTRAIN_CHECK(fraction >= 0 && fraction < 1,
                 "stratified_split: validation fraction must be in [0, 1), got " << fraction);
  int classes = 0;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    BERTRAIN_CHECK(labels[i] >= 0, "stratified_split: row " << i << " has no class (label " << labels[i] << ")");
    classes = std::max(classes, labels[i] + 1);
  }
  // Rows of each class in file order, so the shuffle's input does not depend on anything but the labels.
  std::vector<std::vector<int>> by_class(static_cast<std::size_t>(classes));
  for (std::size_t i = 0; i < labels.size(); ++i) by_class[static_cast<std::size_t>(labels[i])].push_back(static_cast<int>(i));

  Split split;
  for (int c = 0; c < classes; ++c) {
    std::vector<int>& rows = by_class[static_cast<std::size_t>(c)];
    shuffle(&rows, RandomKey{seed, static_cast<uint32_t>(c), kSplitStream});
    const auto n_val = static_cast<std::size_t>(validation_count(fraction, static_cast<int>(rows.size())));
    split.val.insert(split.val.end(), rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(n_val));
    split.train.insert(split.train.end(), rows.begin() + static_cast<std::ptrdiff_t>(n_val), rows.end());
  }
  std::sort(split.train.begin(), split.train.end());
  std::sort(split.val.begin(), split.val.end());
  return split;
}

}  // namespace bertrain

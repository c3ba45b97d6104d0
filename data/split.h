// Seeded sample selection: the stratified train/validation split of the original pipeline and the
// --num-samples subset.
#pragma once

#include <cstdint>
#include <vector>

namespace bertrain {

struct Split {
  std::vector<int> train;  // row indices, ascending
  std::vector<int> val;    // row indices, ascending
};

// Stratified split: for each class c with n_c rows, n_val = ceil(fraction · n_c) rows chosen by a
// seeded shuffle go to validation, the rest to training (fraction 0.2 on dataset.csv: 610 / 154).
// `labels[i]` is row i's class index. fraction in [0, 1); throws Error otherwise.
Split stratified_split(const std::vector<int>& labels, double fraction, uint64_t seed);

// The first `count` of `n` row indices after a seeded shuffle (all of them, shuffled, when count >= n),
// returned in ascending order so the file order is kept.
std::vector<int> sample_rows(int n, int count, uint64_t seed);

// A deterministic permutation of [0, n) from `seed` (Fisher–Yates over Philox draws): the same on
// every platform and standard library.
std::vector<int> seeded_permutation(int n, uint64_t seed);

}  // namespace bertrain

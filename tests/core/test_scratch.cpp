// core/scratch.h: a per-thread scratch buffer is kept between calls unless a long text grew it past 1 MiB.
#include "core/scratch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace bertrain {
namespace {

TEST(Scratch, ABufferGrownPastTheBoundIsLetGoASmallOneKept) {
  std::vector<int32_t> small(1000), large(kKeptScratchBytes / sizeof(int32_t) + 1);
  release_if_large(small);
  release_if_large(large);
  EXPECT_GE(small.capacity(), 1000u);
  EXPECT_EQ(large.capacity(), 0u);
  std::string text(kKeptScratchBytes, 'a'), longer(kKeptScratchBytes + 1, 'a');
  release_if_large(text);  // exactly the bound: kept
  release_if_large(longer);
  EXPECT_GE(text.capacity(), kKeptScratchBytes);
  EXPECT_TRUE(longer.empty());
  EXPECT_LT(longer.capacity(), kKeptScratchBytes);
}

}  // namespace
}  // namespace bertrain

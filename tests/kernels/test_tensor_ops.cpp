// CPU tensor ops (kernels/cpu/tensor_ops.cpp): bf16 casts round to nearest even and keep specials, y += x,
// the [CLS] gather and its scatter backward, and the double-accumulated sum of squares.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/error.h"
#include "kernels/packed.h"
#include "kernels/tensor_ops.h"

namespace bertrain {
namespace {

float float_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t cast_one(float x) {
  bf16 y{0xdeadu};
  cast_cpu(&y, &x, 1);
  return y.bits;
}

TEST(CastCpu, RoundTripOfBf16ValuesIsExact) {
  // Values already representable in bf16 (rounded once first) survive float → bf16 → float unchanged.
  const std::vector<float> x = {0.0f, -0.0f, 1.0f, -2.5f, 0.15625f, 3.0e-3f, 255.0f, -1.0e30f, 1.17549435e-38f};
  std::vector<bf16> h(x.size());
  std::vector<float> back(x.size());
  std::vector<float> exact(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) exact[i] = bf16_to_float(float_to_bf16(x[i]));
  cast_cpu(h.data(), exact.data(), exact.size());
  cast_cpu(back.data(), h.data(), h.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(std::memcmp(&back[i], &exact[i], sizeof(float)), 0) << "element " << i << ": " << back[i];
  }
  // bf16 → float is the upper half of the float's bits.
  EXPECT_EQ(cast_one(1.0f), 0x3f80u);
  EXPECT_EQ(cast_one(-2.5f), 0xc020u);
  EXPECT_EQ(cast_one(-0.0f), 0x8000u);
  float f = 0;
  const bf16 one_and_a_half{0x3fc0u};
  cast_cpu(&f, &one_and_a_half, 1);
  EXPECT_EQ(f, 1.5f);
}

TEST(CastCpu, RoundsToNearestTiesToEven) {
  // bf16 keeps 7 fraction bits: near 1 the spacing is 2^-7, so 1 + 2^-8 lies halfway between 1 (even) and
  // 1 + 2^-7 (odd) and goes down; 1 + 3·2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even), goes up.
  EXPECT_EQ(cast_one(1.0f + std::ldexp(1.0f, -8)), 0x3f80u);
  EXPECT_EQ(cast_one(1.0f + 3.0f * std::ldexp(1.0f, -8)), 0x3f82u);
  EXPECT_EQ(cast_one(-(1.0f + 3.0f * std::ldexp(1.0f, -8))), 0xbf82u);
  // Just above the tie rounds up, just below rounds down.
  EXPECT_EQ(cast_one(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81u);
  EXPECT_EQ(cast_one(1.0f + std::ldexp(1.0f, -8) - std::ldexp(1.0f, -20)), 0x3f80u);
  // The largest float is past the largest bf16 by more than half a step: it rounds to infinity.
  EXPECT_EQ(cast_one(std::numeric_limits<float>::max()), 0x7f80u);
}

TEST(CastCpu, KeepsInfinitiesAndNaN) {
  EXPECT_EQ(cast_one(std::numeric_limits<float>::infinity()), 0x7f80u);
  EXPECT_EQ(cast_one(-std::numeric_limits<float>::infinity()), 0xff80u);
  // A NaN whose payload sits only in the low 16 bits must not round into infinity.
  const float quiet_nan = std::numeric_limits<float>::quiet_NaN();
  const float low_payload_nan = float_from_bits(0x7f800001u);
  for (float nan : {quiet_nan, low_payload_nan, -quiet_nan}) {
    const uint16_t bits = cast_one(nan);
    float back = 0;
    const bf16 h{bits};
    cast_cpu(&back, &h, 1);
    EXPECT_TRUE(std::isnan(back)) << "bits " << std::hex << bits;
  }
}

TEST(AddInplaceCpu, AddsElementwise) {
  std::vector<float> y = {1.0f, -2.0f, 0.5f};
  const std::vector<float> x = {0.25f, 2.0f, -1.5f};
  add_inplace_cpu(y.data(), x.data(), y.size());
  EXPECT_EQ(y, (std::vector<float>{1.25f, 0.0f, -1.0f}));

  std::vector<double> yd = {1.0, 2.0};
  const std::vector<double> xd = {1e-17, -3.0};
  add_inplace_cpu(yd.data(), xd.data(), yd.size());
  EXPECT_EQ(yd[0], 1.0 + 1e-17);
  EXPECT_EQ(yd[1], -1.0);
}

TEST(FirstTokenCpu, GatherTakesEachRowsFirstTokenAndScatterIsItsTranspose) {
  const int batch = 3, hidden = 4;
  const std::vector<int32_t> cu_seqlens = {0, 3, 4, 6};  // rows of 3, 1 and 2 tokens
  const int tokens = cu_seqlens[batch];
  std::vector<double> values(tokens * hidden);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = 100.0 + static_cast<double>(i);
  std::vector<double> cls(batch * hidden, -1.0);
  gather_first_tokens_cpu(cls.data(), values.data(), cu_seqlens.data(), batch, hidden);
  // Row b's first token starts at flat index cu_seqlens[b] · H: 0, 12, 16.
  EXPECT_EQ(cls, (std::vector<double>{100, 101, 102, 103, 112, 113, 114, 115, 116, 117, 118, 119}));

  const std::vector<float> dcls = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  std::vector<float> dtokens(tokens * hidden, 42.0f);  // stale values must be overwritten with zeros
  scatter_first_tokens_cpu(dtokens.data(), dcls.data(), cu_seqlens.data(), batch, hidden);
  std::vector<float> expected(tokens * hidden, 0.0f);
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < hidden; ++h) expected[cu_seqlens[b] * hidden + h] = dcls[b * hidden + h];
  }
  EXPECT_EQ(dtokens, expected);
}

TEST(PackedRowsCpu, DropoutSlotsAndOffsetChecks) {
  const std::vector<int32_t> cu_seqlens = {0, 2, 3, 7};
  std::vector<int64_t> slots(7, -1);
  dropout_slots_cpu(slots.data(), cu_seqlens.data(), 3, 10, 512);
  EXPECT_EQ(slots, (std::vector<int64_t>{10 * 512, 10 * 512 + 1, 11 * 512, 12 * 512, 12 * 512 + 1, 12 * 512 + 2,
                                         12 * 512 + 3}));
  EXPECT_EQ(longest_row(cu_seqlens.data(), 3), 4);
  EXPECT_NO_THROW(check_row_offsets(cu_seqlens.data(), 3, 7, 4, "test"));
  EXPECT_THROW(check_row_offsets(cu_seqlens.data(), 3, 7, 3, "test"), Error);  // a row longer than allowed
  EXPECT_THROW(check_row_offsets(cu_seqlens.data(), 3, 8, 4, "test"), Error);  // T disagrees
  const std::vector<int32_t> empty_row = {0, 2, 2, 7};
  EXPECT_THROW(check_row_offsets(empty_row.data(), 3, 7, 8, "test"), Error);
  const std::vector<int32_t> decreasing = {0, 5, 3, 7};
  EXPECT_THROW(check_row_offsets(decreasing.data(), 3, 7, 8, "test"), Error);
  try {
    check_row_offsets(empty_row.data(), 3, 7, 8, "my batch");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("my batch: row 1 has 0 tokens"), std::string::npos) << e.what();
  }
}

TEST(SumOfSquaresCpu, HandValues) {
  const std::vector<float> x = {1.0f, 2.0f, 3.0f, -4.0f};
  EXPECT_EQ(sum_of_squares_cpu(x.data(), x.size()), 30.0);
  EXPECT_EQ(sum_of_squares_cpu(x.data(), 0), 0.0);
}

TEST(SumOfSquaresCpu, AccumulatesInDoubleAcrossBlocks) {
  // 1e8 + 10 · 1: a float accumulator (spacing 8 at 1e8) would return 1e8.
  std::vector<float> x(11, 1.0f);
  x[0] = 1.0e4f;
  EXPECT_EQ(sum_of_squares_cpu(x.data(), x.size()), 100000010.0);
  // Several 65536-element blocks with a partial last one; 0.25 · n is exact in double.
  const std::size_t n = 200001;
  const std::vector<float> halves(n, -0.5f);
  EXPECT_EQ(sum_of_squares_cpu(halves.data(), n), 0.25 * static_cast<double>(n));
}

}  // namespace
}  // namespace bertrain

// Finite-difference checks (double) of every backward CPU op, plus the properties FD cannot see: dropout
// masks (rate, determinism, float/double agreement), attention's padding, hand-computed loss values and
// Adam / AdamW against a scalar transcription of torch.optim's update.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/philox.h"
#include "kernels/activation.h"
#include "kernels/adam.h"
#include "kernels/attention.h"
#include "kernels/dropout.h"
#include "kernels/embedding.h"
#include "kernels/layernorm.h"
#include "kernels/linear.h"
#include "kernels/loss.h"
#include "kernels/packed.h"
#include "tests/kernels/gradient_check.h"

namespace bertrain {
namespace {

using gradcheck::all_close;
using gradcheck::check_gradient;
using gradcheck::kDoubleFd;
using gradcheck::projection;
using gradcheck::random_normal;
using gradcheck::random_uniform;
using gradcheck::Tolerance;

// Results that differ from a reference only in the order of a few roundings (e.g. Eigen's fused += versus
// a separate add), in double.
constexpr Tolerance kRounding{1e-13, 1e-13};

// ---- The checker itself: it must be able to fail ------------------------------------------------------

TEST(GradientCheck, AcceptsCorrectAndRejectsWrongGradient) {
  std::vector<double> x = random_uniform(10, 1, -2.0, 2.0);
  auto loss = [&] {
    double s = 0.0;
    for (double v : x) s += v * v * v;
    return s;
  };
  std::vector<double> grad(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) grad[i] = 3.0 * x[i] * x[i];
  EXPECT_TRUE(check_gradient("x^3", loss, x.data(), grad.data(), x.size()));

  grad[7] *= 1.0 + 1e-4;  // a relative error 10× rtol must be caught, and reported at its index
  const ::testing::AssertionResult wrong = check_gradient("x^3", loss, x.data(), grad.data(), x.size());
  EXPECT_FALSE(wrong);
  EXPECT_NE(std::string(wrong.message()).find("index 7"), std::string::npos) << wrong.message();

  auto constant = [] { return 1.0; };  // a loss not depending on x must not pass vacuously
  std::vector<double> zeros(x.size(), 0.0);
  EXPECT_FALSE(check_gradient("constant", constant, x.data(), zeros.data(), x.size()));
}

// ---- Activations ------------------------------------------------------------------------------------

class ActivationGradient : public ::testing::TestWithParam<Activation> {};

TEST_P(ActivationGradient, MatchesFiniteDifferences) {
  const Activation act = GetParam();
  const std::size_t n = 256;
  // [-5, 5] covers GELU's curved region and both saturated tails.
  std::vector<double> x = random_uniform(n, 11, -5.0, 5.0);
  if (act == Activation::kRelu) {
    // ReLU has a kink at 0: keep every point at least 0.05 ≫ h away from it.
    for (double& v : x) {
      if (std::abs(v) < 0.05) v = v < 0 ? v - 0.05 : v + 0.05;
    }
  }
  const std::vector<double> r = random_normal(n, 12);
  std::vector<double> y(n), dx(n);
  auto loss = [&] {
    activation_forward_cpu(y.data(), x.data(), n, act);
    return projection(r, y.data());
  };
  activation_backward_cpu(dx.data(), r.data(), x.data(), n, act);
  EXPECT_TRUE(check_gradient("dx", loss, x.data(), dx.data(), n));

  // Documented aliasing dx == dy must give the same result.
  std::vector<double> inplace = r;
  activation_backward_cpu(inplace.data(), inplace.data(), x.data(), n, act);
  EXPECT_TRUE(all_close("dx aliasing dy", inplace.data(), dx.data(), n, Tolerance{0.0, 0.0}));
}

INSTANTIATE_TEST_SUITE_P(AllActivations, ActivationGradient,
                         ::testing::Values(Activation::kGelu, Activation::kGeluTanh, Activation::kRelu,
                                           Activation::kTanh),
                         [](const ::testing::TestParamInfo<Activation>& info) {
                           switch (info.param) {
                             case Activation::kGelu: return std::string("Gelu");
                             case Activation::kGeluTanh: return std::string("GeluTanh");
                             case Activation::kRelu: return std::string("Relu");
                             case Activation::kTanh: return std::string("Tanh");
                           }
                           return std::string("Unknown");
                         });

// ---- Linear -------------------------------------------------------------------------------------------

struct LinearCase {
  static constexpr int kRows = 5, kIn = 7, kOut = 6;
  std::vector<double> x = random_normal(kRows * kIn, 21);
  std::vector<double> w = random_normal(kOut * kIn, 22);
  std::vector<double> b = random_normal(kOut, 23);
  std::vector<double> r = random_normal(kRows * kOut, 24);  // dL/dy
  std::vector<double> y = std::vector<double>(kRows * kOut);

  double loss() {
    linear_forward_cpu(y.data(), x.data(), w.data(), b.data(), kRows, kIn, kOut);
    return projection(r, y.data());
  }
};

TEST(LinearGradient, DxDwDbMatchFiniteDifferences) {
  LinearCase c;
  const int rows = LinearCase::kRows, in = LinearCase::kIn, out = LinearCase::kOut;
  // Garbage in the outputs: all three are documented as written (=), so it must not survive.
  std::vector<double> dx(rows * in, 1e3), dw(out * in, 1e3), db(out, 1e3);
  linear_backward_cpu(dx.data(), dw.data(), db.data(), c.r.data(), c.x.data(), c.w.data(), rows, in, out, false);
  auto loss = [&] { return c.loss(); };
  EXPECT_TRUE(check_gradient("linear dx", loss, c.x.data(), dx.data(), dx.size(), kDoubleFd, {rows, in}));
  EXPECT_TRUE(check_gradient("linear dw", loss, c.w.data(), dw.data(), dw.size(), kDoubleFd, {out, in}));
  EXPECT_TRUE(check_gradient("linear db", loss, c.b.data(), db.data(), db.size(), kDoubleFd, {out}));

  // dx and db may be null (the first layer's input, bias-free layers): dw must be unaffected.
  std::vector<double> dw_only(out * in, 1e3);
  linear_backward_cpu(static_cast<double*>(nullptr), dw_only.data(), static_cast<double*>(nullptr), c.r.data(),
                      c.x.data(), c.w.data(), rows, in, out, false);
  EXPECT_TRUE(all_close("dw with null dx, db", dw_only.data(), dw.data(), dw.size(), kRounding));
}

TEST(LinearGradient, AccumulateDxAddsToOldValue) {
  LinearCase c;
  const int rows = LinearCase::kRows, in = LinearCase::kIn, out = LinearCase::kOut;
  std::vector<double> fresh(rows * in), dw(out * in), db(out);
  linear_backward_cpu(fresh.data(), dw.data(), db.data(), c.r.data(), c.x.data(), c.w.data(), rows, in, out, false);

  const std::vector<double> old = random_normal(rows * in, 25);
  std::vector<double> dx = old, dw2(out * in, 1e3), db2(out, 1e3);
  linear_backward_cpu(dx.data(), dw2.data(), db2.data(), c.r.data(), c.x.data(), c.w.data(), rows, in, out, true);
  std::vector<double> expected(rows * in);
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = old[i] + fresh[i];
  EXPECT_TRUE(all_close("accumulated dx = old + new", dx.data(), expected.data(), dx.size(), kRounding, {rows, in}));
  // accumulate_dx concerns dx only: dw and db are still written (=).
  EXPECT_TRUE(all_close("dw with accumulate_dx", dw2.data(), dw.data(), dw.size(), kRounding, {out, in}));
  EXPECT_TRUE(all_close("db with accumulate_dx", db2.data(), db.data(), db.size(), kRounding, {out}));
}

// ---- LayerNorm ----------------------------------------------------------------------------------------

// One LayerNorm check: dz against FD on x and (when used) on residual, dgamma and dbeta against FD.
// `sample` and `column_sample` limit the dz and the dgamma / dbeta checks to some elements, for shapes too
// large to difference fully.
void check_layernorm(int rows, int cols, bool with_residual, double eps, const std::vector<std::size_t>& sample = {},
                     const std::vector<std::size_t>& column_sample = {}) {
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  // An offset and a spread per row, so mean and variance differ across rows.
  std::vector<double> x = random_normal(n, 31, 0.5, 2.0);
  std::vector<double> residual = with_residual ? random_normal(n, 32) : std::vector<double>();
  std::vector<double> gamma = random_normal(cols, 33, 1.0, 0.3);
  std::vector<double> beta = random_normal(cols, 34);
  const std::vector<double> r = random_normal(n, 35);
  const double* res = with_residual ? residual.data() : nullptr;

  std::vector<double> y(n), mean(rows), rstd(rows);
  auto loss = [&] {
    layernorm_forward_cpu(y.data(), mean.data(), rstd.data(), x.data(), res, gamma.data(), beta.data(), rows, cols,
                          eps);
    return projection(r, y.data());
  };
  loss();
  const std::vector<double> saved_mean = mean, saved_rstd = rstd;
  std::vector<double> dz(n, 1e3), dgamma(cols, 1e3), dbeta(cols, 1e3);
  layernorm_backward_cpu(dz.data(), dgamma.data(), dbeta.data(), r.data(), x.data(), res, saved_mean.data(),
                         saved_rstd.data(), gamma.data(), rows, cols);

  const std::string tag = "layernorm " + std::to_string(rows) + "x" + std::to_string(cols) +
                          (with_residual ? " with residual" : " without residual");
  EXPECT_TRUE(check_gradient(tag + " dz (via x)", loss, x.data(), dz.data(), n, kDoubleFd, {rows, cols}, sample));
  if (with_residual) {
    EXPECT_TRUE(check_gradient(tag + " dz (via residual)", loss, residual.data(), dz.data(), n, kDoubleFd,
                               {rows, cols}, sample));
  }
  EXPECT_TRUE(check_gradient(tag + " dgamma", loss, gamma.data(), dgamma.data(), cols, kDoubleFd, {cols},
                             column_sample));
  EXPECT_TRUE(check_gradient(tag + " dbeta", loss, beta.data(), dbeta.data(), cols, kDoubleFd, {cols},
                             column_sample));

  // Documented aliasing dz == dy.
  std::vector<double> inplace = r, g2(cols), b2(cols);
  layernorm_backward_cpu(inplace.data(), g2.data(), b2.data(), inplace.data(), x.data(), res, saved_mean.data(),
                         saved_rstd.data(), gamma.data(), rows, cols);
  EXPECT_TRUE(all_close(tag + " dz aliasing dy", inplace.data(), dz.data(), n, Tolerance{0.0, 0.0}, {rows, cols}));
  EXPECT_TRUE(all_close(tag + " dgamma with dz aliasing dy", g2.data(), dgamma.data(), cols, Tolerance{0.0, 0.0}));
}

// 37 columns = two full blocks of 16 plus a tail of 5 in the column-sum loop.
TEST(LayerNormGradient, WithoutResidualColumnTail) { check_layernorm(5, 37, false, 1e-5); }
TEST(LayerNormGradient, WithResidualColumnTail) { check_layernorm(5, 37, true, 1e-5); }
// BERT's eps (1e-12): the derivative of rstd then rests on the variance alone.
TEST(LayerNormGradient, WithResidualBertEps) { check_layernorm(3, 8, true, 1e-12); }

// rows·cols > 65536 and rows > 64 switch both loops to their OpenMP paths (with a column tail: 1030 =
// 64·16 + 6). Each FD element costs two passes over 68k elements, so only a sample is differenced: every
// 997th element of dz, and every 37th column plus the whole tail block of dgamma / dbeta.
TEST(LayerNormGradient, ParallelPathsLargeShape) {
  const int rows = 66, cols = 1030;
  std::vector<std::size_t> sample, columns;
  for (std::size_t i = 0; i < static_cast<std::size_t>(rows) * cols; i += 997) sample.push_back(i);
  for (std::size_t c = 0; c < 1024; c += 37) columns.push_back(c);
  for (std::size_t c = 1024; c < 1030; ++c) columns.push_back(c);
  check_layernorm(rows, cols, true, 1e-5, sample, columns);
}

// ---- Embedding ----------------------------------------------------------------------------------------

struct EmbeddingCase {
  // hidden 19: one full column block of 16 and a tail of 3 in the backward scatter. Two packed rows of 6 and 4
  // tokens: positions 0–3 are used twice, 4–5 once, 6–7 never.
  static constexpr int kBatch = 2, kTokens = 10, kLongest = 6, kHidden = 19, kVocab = 9, kMaxPos = 8, kTypeVocab = 3;
  // Repeated ids (3 four times, 1 three times) within and across rows exercise the scatter-add.
  std::vector<int32_t> ids = {3, 1, 3, 3, 0, 1, 8, 3, 2, 1};
  std::vector<int32_t> cu_seqlens = {0, 6, 10};
  std::vector<int32_t> positions = {0, 1, 2, 3, 4, 5, 0, 1, 2, 3};
  std::vector<int32_t> types = {0, 0, 1, 1, 2, 0, 1, 1, 2, 2};
  std::vector<double> word = random_normal(kVocab * kHidden, 41);
  std::vector<double> pos = random_normal(kMaxPos * kHidden, 42);
  std::vector<double> type = random_normal(kTypeVocab * kHidden, 43);
  std::vector<double> r = random_normal(kTokens * kHidden, 44);
  std::vector<double> out = std::vector<double>(kTokens * kHidden);
};

void check_embedding(bool with_types) {
  EmbeddingCase c;
  const int B = EmbeddingCase::kBatch, T = EmbeddingCase::kTokens, H = EmbeddingCase::kHidden;
  const int V = EmbeddingCase::kVocab, P = EmbeddingCase::kMaxPos, TV = EmbeddingCase::kTypeVocab;
  const int32_t* types = with_types ? c.types.data() : nullptr;
  std::vector<int32_t> positions(T, -1);
  embedding_positions_cpu(positions.data(), c.ids.data(), c.cu_seqlens.data(), B, -1);
  ASSERT_EQ(positions, c.positions);
  auto loss = [&] {
    embedding_forward_cpu(c.out.data(), c.ids.data(), c.positions.data(), types, c.word.data(), c.pos.data(),
                          c.type.data(), T, H, V, P, TV);
    return projection(c.r, c.out.data());
  };
  // Garbage first: the tables are documented as written (=), unused rows zero.
  std::vector<double> dword(V * H, 1e3), dpos(P * H, 1e3), dtype(TV * H, 1e3);
  embedding_backward_cpu(dword.data(), dpos.data(), dtype.data(), c.r.data(), c.ids.data(), c.positions.data(), types,
                         T, H, V, P, TV, -1, -1);
  const std::string tag = with_types ? "with token types" : "without token types";
  // The loss is linear in the tables, so FD is exact up to rounding and unused rows (ids 4–7, positions
  // 5–7, and types 1–2 without token types) must come out exactly 0 on both sides.
  EXPECT_TRUE(check_gradient("dword " + tag, loss, c.word.data(), dword.data(), dword.size(), kDoubleFd, {V, H}));
  EXPECT_TRUE(check_gradient("dpos " + tag, loss, c.pos.data(), dpos.data(), dpos.size(), kDoubleFd, {P, H}));
  EXPECT_TRUE(check_gradient("dtype " + tag, loss, c.type.data(), dtype.data(), dtype.size(), kDoubleFd, {TV, H}));
  for (int v = 4; v < 8; ++v) {
    for (int h = 0; h < H; ++h) ASSERT_EQ(dword[v * H + h], 0.0) << "unused word row " << v << ", column " << h;
  }
  for (int p = EmbeddingCase::kLongest; p < P; ++p) {
    for (int h = 0; h < H; ++h) ASSERT_EQ(dpos[p * H + h], 0.0) << "unused position row " << p << ", column " << h;
  }
  if (!with_types) {
    for (int t = 1; t < TV; ++t) {
      for (int h = 0; h < H; ++h) ASSERT_EQ(dtype[t * H + h], 0.0) << "unused type row " << t << ", column " << h;
    }
  }
}

// RoBERTa numbers positions from padding_idx + 1, a token whose id is padding_idx taking row padding_idx and no
// place (transformers' create_position_ids_from_input_ids), and its word and position tables give row padding_idx no
// gradient (nn.Embedding's padding_idx). Without a token-type table, as DistilBERT.
TEST(EmbeddingGradient, PaddingRowsAsTransformers) {
  EmbeddingCase c;
  const int B = EmbeddingCase::kBatch, T = EmbeddingCase::kTokens, H = EmbeddingCase::kHidden;
  const int V = EmbeddingCase::kVocab, P = EmbeddingCase::kMaxPos, pad = 1;  // id 1: tokens 1, 5 and 9
  std::vector<int32_t> positions(T, -1);
  embedding_positions_cpu(positions.data(), c.ids.data(), c.cu_seqlens.data(), B, pad);
  // ids {3, 1, 3, 3, 0, 1 | 8, 3, 2, 1}: 1 + cumsum(id != 1) for the others, 1 for the pads.
  ASSERT_EQ(positions, (std::vector<int32_t>{2, 1, 3, 4, 5, 1, 2, 3, 4, 1}));
  auto loss = [&] {
    embedding_forward_cpu(c.out.data(), c.ids.data(), positions.data(), static_cast<const int32_t*>(nullptr),
                          c.word.data(), c.pos.data(), static_cast<const double*>(nullptr), T, H, V, P, 0);
    return projection(c.r, c.out.data());
  };
  // Without padding rows every used row has its gradient; with them the same but rows `pad` of both tables zero.
  std::vector<double> dword(V * H, 1e3), dpos(P * H, 1e3), padded_dword(V * H, 1e3), padded_dpos(P * H, 1e3);
  embedding_backward_cpu(dword.data(), dpos.data(), static_cast<double*>(nullptr), c.r.data(), c.ids.data(),
                         positions.data(), static_cast<const int32_t*>(nullptr), T, H, V, P, 0, -1, -1);
  EXPECT_TRUE(check_gradient("dword, RoBERTa positions", loss, c.word.data(), dword.data(), dword.size(), kDoubleFd,
                             {V, H}));
  EXPECT_TRUE(check_gradient("dpos, RoBERTa positions", loss, c.pos.data(), dpos.data(), dpos.size(), kDoubleFd, {P, H}));
  embedding_backward_cpu(padded_dword.data(), padded_dpos.data(), static_cast<double*>(nullptr), c.r.data(),
                         c.ids.data(), positions.data(), static_cast<const int32_t*>(nullptr), T, H, V, P, 0, pad, pad);
  for (int h = 0; h < H; ++h) {
    ASSERT_NE(dword[pad * H + h], 0.0);  // the padding row would have a gradient
    ASSERT_NE(dpos[pad * H + h], 0.0);
    dword[pad * H + h] = dpos[pad * H + h] = 0;
  }
  EXPECT_EQ(padded_dword, dword);
  EXPECT_EQ(padded_dpos, dpos);
  // Position row 0 is below every RoBERTa position: no token reads it.
  for (int h = 0; h < H; ++h) ASSERT_EQ(padded_dpos[h], 0.0);
}

// A padding_idx that no token has changes nothing, and a row of padding tokens only is numbered padding_idx.
TEST(EmbeddingPositions, NumberedAsTransformers) {
  const std::vector<int32_t> ids = {5, 6, 7, 1, 1, 0, 9, 1};
  const std::vector<int32_t> cu = {0, 3, 5, 8};
  std::vector<int32_t> positions(ids.size(), -1);
  embedding_positions_cpu(positions.data(), ids.data(), cu.data(), 3, -1);
  EXPECT_EQ(positions, (std::vector<int32_t>{0, 1, 2, 0, 1, 0, 1, 2}));
  embedding_positions_cpu(positions.data(), ids.data(), cu.data(), 3, 1);
  EXPECT_EQ(positions, (std::vector<int32_t>{2, 3, 4, 1, 1, 2, 3, 1}));
  embedding_positions_cpu(positions.data(), ids.data(), cu.data(), 3, 2);  // no token is 2
  EXPECT_EQ(positions, (std::vector<int32_t>{3, 4, 5, 3, 4, 3, 4, 5}));
}

TEST(EmbeddingGradient, WithTokenTypes) { check_embedding(true); }
TEST(EmbeddingGradient, WithoutTokenTypes) { check_embedding(false); }

TEST(EmbeddingForward, RejectsOutOfRangeIds) {
  EmbeddingCase c;
  const int T = EmbeddingCase::kTokens, H = EmbeddingCase::kHidden;
  const int V = EmbeddingCase::kVocab, P = EmbeddingCase::kMaxPos, TV = EmbeddingCase::kTypeVocab;
  auto forward = [&](const std::vector<int32_t>& ids, const int32_t* types, const std::vector<int32_t>& positions) {
    embedding_forward_cpu(c.out.data(), ids.data(), positions.data(), types, c.word.data(), c.pos.data(),
                          c.type.data(), T, H, V, P, TV);
  };
  EXPECT_NO_THROW(forward(c.ids, c.types.data(), c.positions));  // the baseline is valid, so the throws below are the ids'
  for (int32_t bad : {V, -1}) {
    std::vector<int32_t> ids = c.ids;
    ids[6] = bad;
    EXPECT_THROW(forward(ids, nullptr, c.positions), Error) << "id " << bad;
  }
  std::vector<int32_t> types = c.types;
  types[3] = TV;
  EXPECT_THROW(forward(c.ids, types.data(), c.positions), Error) << "token type " << TV;
  for (int32_t bad : {P, -1}) {
    std::vector<int32_t> positions = c.positions;
    positions[4] = bad;
    EXPECT_THROW(forward(c.ids, nullptr, positions), Error) << "position " << bad;
  }
}

TEST(EmbeddingBackward, RejectsOutOfRangeInputs) {
  EmbeddingCase c;
  const int T = EmbeddingCase::kTokens, H = EmbeddingCase::kHidden, V = EmbeddingCase::kVocab;
  const int P = EmbeddingCase::kMaxPos, TV = EmbeddingCase::kTypeVocab;
  std::vector<double> dword(V * H), dpos(P * H), dtype(TV * H);
  auto backward = [&](const std::vector<int32_t>& ids, const std::vector<int32_t>& positions) {
    embedding_backward_cpu(dword.data(), dpos.data(), dtype.data(), c.r.data(), ids.data(), positions.data(), nullptr,
                           T, H, V, P, TV, -1, -1);
  };
  EXPECT_NO_THROW(backward(c.ids, c.positions));
  for (int32_t bad : {P, -1}) {
    std::vector<int32_t> positions = c.positions;
    positions[7] = bad;
    EXPECT_THROW(backward(c.ids, positions), Error) << "position " << bad;
  }
  for (int32_t bad : {V, -1}) {
    std::vector<int32_t> ids = c.ids;
    ids[2] = bad;
    EXPECT_THROW(backward(ids, c.positions), Error) << "id " << bad;
  }
}

// ---- Attention ----------------------------------------------------------------------------------------

struct AttentionCase {
  // Three packed rows of 6, 4 and 1 tokens: attention runs over each row's own tokens, with no mask. Q, K and V
  // side by side in qkv[T, 3H] as the QKV GEMM writes them.
  static constexpr int kBatch = 3, kTokens = 11, kLongest = 6, kHeads = 3, kHeadDim = 4, kHidden = kHeads * kHeadDim;
  static constexpr std::size_t kElements = kTokens * kHidden;
  std::vector<int32_t> cu_seqlens = {0, 6, 10, 11};
  std::vector<double> qkv = random_normal(3 * kElements, 51);
  std::vector<double> r = random_normal(kElements, 54);
  std::vector<double> scratch = std::vector<double>(attention_scratch_elements(kLongest, omp_get_max_threads()));

  // Element d of head h's query (part 0), key (1) or value (2) of token t.
  double at(int part, std::size_t t, int h, int d) const {
    return qkv[t * 3 * kHidden + static_cast<std::size_t>(part) * kHidden + static_cast<std::size_t>(h) * kHeadDim +
               d];
  }
};

void check_attention(float dropout_p) {
  AttentionCase c;
  const int B = AttentionCase::kBatch, T = AttentionCase::kTokens, NH = AttentionCase::kHeads;
  const int HD = AttentionCase::kHeadDim, H = AttentionCase::kHidden;
  const int32_t* cu = c.cu_seqlens.data();
  const RandomKey key{1234, 7, 3};  // the same key in forward and backward: the mask is a function of it
  std::vector<double> ctx(AttentionCase::kElements), lse(static_cast<std::size_t>(NH) * T);
  auto loss = [&] {
    attention_forward_cpu(ctx.data(), lse.data(), c.qkv.data(), cu, B, NH, HD, dropout_p, key, c.scratch.data());
    return projection(c.r, ctx.data());
  };
  loss();
  const std::vector<double> saved_ctx = ctx, saved_lse = lse;

  // Independently of the kernel: the scores of query i and key j of row b, head h, and each query's log-sum-exp.
  auto score = [&](int b, int h, int i, int j) {
    double dot = 0.0;
    for (int d = 0; d < HD; ++d) dot += c.at(0, cu[b] + i, h, d) * c.at(1, cu[b] + j, h, d);
    return dot / std::sqrt(double(HD));
  };
  for (int b = 0; b < B; ++b) {
    const int L = cu[b + 1] - cu[b];
    for (int h = 0; h < NH; ++h) {
      for (int i = 0; i < L; ++i) {
        double sum = 0.0;
        for (int j = 0; j < L; ++j) sum += std::exp(score(b, h, i, j));
        ASSERT_NEAR(saved_lse[static_cast<std::size_t>(h) * T + cu[b] + i], std::log(sum), 1e-12)
            << "log-sum-exp of batch " << b << ", head " << h << ", query " << i;
      }
    }
  }

  // The context from those probabilities and the documented mask (element ((b·NH + h)·P + i)·P + j of the stream
  // `key`, P = the longest row here: the default layout's max_positions is 1), or the GPU twin and the padded
  // engine could not match. The one-token row attends to itself with probability 1.
  const std::size_t P = AttentionCase::kLongest;
  const double scale = dropout_p > 0.0f ? 1.0 / (1.0 - double(dropout_p)) : 1.0;
  std::vector<double> want(AttentionCase::kElements, 0.0);
  std::size_t dropped = 0;
  for (int b = 0; b < B; ++b) {
    const int L = cu[b + 1] - cu[b];
    for (int h = 0; h < NH; ++h) {
      for (int i = 0; i < L; ++i) {
        const double row_lse = saved_lse[static_cast<std::size_t>(h) * T + cu[b] + i];
        for (int j = 0; j < L; ++j) {
          const std::size_t element = ((static_cast<std::size_t>(b) * NH + h) * P + i) * P + j;
          const bool keep = dropout_p == 0.0f || philox_uniform(key, element) >= dropout_p;
          dropped += !keep;
          const double p = keep ? std::exp(score(b, h, i, j) - row_lse) * scale : 0.0;
          for (int d = 0; d < HD; ++d) want[(static_cast<std::size_t>(cu[b]) + i) * H + h * HD + d] += p * c.at(2, cu[b] + j, h, d);
        }
      }
    }
  }
  const std::string tag = "attention (dropout " + std::to_string(dropout_p) + ")";
  if (dropout_p > 0.0f) {
    EXPECT_GT(dropped, 0u) << "no attention probability was dropped: the case checks nothing new";
  }
  EXPECT_TRUE(all_close(tag + " context vs documented probabilities and mask", saved_ctx.data(), want.data(),
                        saved_ctx.size(), kRounding, {T, H}));

  std::vector<double> dqkv(3 * AttentionCase::kElements, 1e3);
  attention_backward_cpu(dqkv.data(), c.r.data(), saved_ctx.data(), saved_lse.data(), c.qkv.data(), cu, B, NH, HD,
                         dropout_p, key, c.scratch.data());
  EXPECT_TRUE(check_gradient(tag + " dqkv", loss, c.qkv.data(), dqkv.data(), dqkv.size(), kDoubleFd, {T, 3 * H}));
}

TEST(AttentionGradient, RaggedRowsNoDropout) { check_attention(0.0f); }
TEST(AttentionGradient, RaggedRowsWithDropout) { check_attention(0.3f); }

// ---- Dropout ------------------------------------------------------------------------------------------

TEST(Dropout, BackwardOfOnesEqualsForwardOfOnes) {
  const std::size_t n = 1001;  // not a multiple of 4: the last Philox group is partial
  const RandomKey key{99, 5, 2};
  const std::vector<double> ones(n, 1.0);
  std::vector<double> fwd(n), bwd(n);
  dropout_forward_cpu(fwd.data(), ones.data(), n, 0.25f, key);
  dropout_backward_cpu(bwd.data(), ones.data(), n, 0.25f, key);
  EXPECT_TRUE(all_close("backward(1) vs forward(1)", bwd.data(), fwd.data(), n, Tolerance{0.0, 0.0}));
  // Inverted dropout: survivors scaled by exactly 1 / (1 - p), computed in T as the kernel does.
  const double scale = 1.0 / (1.0 - double(0.25f));
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(fwd[i] == 0.0 || fwd[i] == scale) << "element " << i << " = " << fwd[i];
  }

  // And a gradient check: the op is linear in x for a fixed key.
  std::vector<double> x = random_normal(n, 61);
  const std::vector<double> r = random_normal(n, 62);
  std::vector<double> y(n), dx(n);
  auto loss = [&] {
    dropout_forward_cpu(y.data(), x.data(), n, 0.25f, key);
    return projection(r, y.data());
  };
  dropout_backward_cpu(dx.data(), r.data(), n, 0.25f, key);
  EXPECT_TRUE(check_gradient("dropout dx", loss, x.data(), dx.data(), n));
}

// Random123's known-answer vectors for Philox4x32-10 (kat_vectors: counter[4], key[2] → output[4]): the
// generator every dropout mask on CPU and GPU derives from.
TEST(Philox, MatchesRandom123KnownAnswers) {
  struct Kat {
    uint32_t counter[4], key[2], want[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    const Philox4 got = philox4x32_10(k.counter[0], k.counter[1], k.counter[2], k.counter[3], k.key[0], k.key[1]);
    for (int w = 0; w < 4; ++w) {
      EXPECT_EQ(got.v[w], k.want[w]) << "word " << w << " for counter " << std::hex << k.counter[0] << "…";
    }
  }
}

std::vector<double> dropout_of_ones(std::size_t n, float p, const RandomKey& key) {
  std::vector<double> y(n, 1.0);
  dropout_forward_cpu(y.data(), y.data(), n, p, key);  // in place (y may alias x)
  return y;
}

std::size_t count_dropped(const std::vector<double>& y) {
  std::size_t zeros = 0;
  for (double v : y) zeros += v == 0.0;
  return zeros;
}

// Element i is kept iff philox_uniform(key, i) >= p (kernels/dropout.h): pins the lane and group mapping,
// which rate and determinism checks cannot see, and which the GPU kernel must reproduce.
TEST(Dropout, MaskFollowsTheDocumentedStream) {
  const RandomKey key{(uint64_t(3) << 32) | 5, 11, 4};
  for (std::size_t n : {std::size_t(1001), std::size_t(100000)}) {  // a partial group; the OpenMP path
    const std::vector<double> y = dropout_of_ones(n, 0.4f, key);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(y[i] != 0.0, philox_uniform(key, i) >= 0.4f) << "n = " << n << ", element " << i;
    }
  }
}

// Packed tokens draw the mask of their padded position: token s of row b (first_sample f) has element c at index
// ((f + b)·P + s)·C + c, whatever the other rows' lengths (kernels/dropout.h, kernels/packed.h).
TEST(Dropout, PackedTokensDrawTheirPaddedPositionsMask) {
  const RandomKey key{17, 3, 9};
  const int C = 5, P = 8, B = 3;
  const int64_t first_sample = 4;
  const std::vector<int32_t> cu_seqlens = {0, 3, 4, 8};  // rows of 3, 1 and 4 tokens
  const int T = cu_seqlens[B];
  std::vector<int64_t> slots(T);
  dropout_slots_cpu(slots.data(), cu_seqlens.data(), B, first_sample, P);
  EXPECT_EQ(slots, (std::vector<int64_t>{4 * P, 4 * P + 1, 4 * P + 2, 5 * P, 6 * P, 6 * P + 1, 6 * P + 2, 6 * P + 3}));
  std::vector<double> y(static_cast<std::size_t>(T) * C, 1.0);
  dropout_forward_cpu(y.data(), y.data(), y.size(), 0.5f, key, DropoutLayout{first_sample, P, C, slots.data()});
  std::size_t dropped = 0;
  for (int b = 0; b < B; ++b) {
    for (int t = cu_seqlens[b]; t < cu_seqlens[b + 1]; ++t) {
      for (int c = 0; c < C; ++c) {
        const uint64_t index = ((static_cast<uint64_t>(first_sample) + b) * P + (t - cu_seqlens[b])) * C + c;
        const bool kept = y[static_cast<std::size_t>(t) * C + c] != 0.0;
        dropped += !kept;
        ASSERT_EQ(kept, philox_uniform(key, index) >= 0.5f) << "row " << b << ", token " << t << ", column " << c;
      }
    }
  }
  EXPECT_GT(dropped, 0u);
}

TEST(Dropout, DroppedFractionIsNearP) {
  const std::size_t n = 100000;  // > 65536: also the OpenMP path
  for (float p : {0.1f, 0.3f, 0.5f, 0.9f}) {
    // Binomial standard deviation sqrt(p(1-p)/n) <= 0.0016, so 1% is over 6 sigma.
    const double fraction = static_cast<double>(count_dropped(dropout_of_ones(n, p, RandomKey{7, 1, 0}))) / n;
    EXPECT_NEAR(fraction, p, 0.01) << "p = " << p;
  }
}

TEST(Dropout, MaskIsAFunctionOfTheKey) {
  const std::size_t n = 4096;
  const float p = 0.5f;
  const RandomKey key{42, 3, 1};
  const std::vector<double> base = dropout_of_ones(n, p, key);
  EXPECT_EQ(base, dropout_of_ones(n, p, key)) << "same key, different mask";

  // Two independent masks agree on ~50% of elements at p = 0.5; "different" means clearly so, not one bit.
  auto differing = [&](const RandomKey& other) {
    const std::vector<double> y = dropout_of_ones(n, p, other);
    std::size_t diff = 0;
    for (std::size_t i = 0; i < n; ++i) diff += (y[i] == 0.0) != (base[i] == 0.0);
    return static_cast<double>(diff) / n;
  };
  EXPECT_GT(differing(RandomKey{42, 4, 1}), 0.4) << "different step";
  EXPECT_GT(differing(RandomKey{42, 3, 2}), 0.4) << "different tensor";
  EXPECT_GT(differing(RandomKey{43, 3, 1}), 0.4) << "different seed";
  EXPECT_GT(differing(RandomKey{42 + (uint64_t(1) << 32), 3, 1}), 0.4) << "different high seed word";
}

TEST(Dropout, FloatAndDoubleDrawTheSameMask) {
  const std::size_t n = 10007;
  const RandomKey key{2024, 17, 9};
  for (float p : {0.1f, 0.5f}) {
    const std::vector<double> d = dropout_of_ones(n, p, key);
    std::vector<float> f(n, 1.0f);
    dropout_forward_cpu(f.data(), f.data(), n, p, key);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(f[i] == 0.0f, d[i] == 0.0) << "p = " << p << ": element " << i << " float " << f[i] << ", double "
                                           << d[i];
    }
  }
}

TEST(Dropout, ZeroProbabilityIsIdentity) {
  const std::size_t n = 1000;
  const std::vector<double> x = random_normal(n, 63);
  std::vector<double> y(n, 1e3), dx(n, 1e3);
  dropout_forward_cpu(y.data(), x.data(), n, 0.0f, RandomKey{1, 1, 1});
  dropout_backward_cpu(dx.data(), x.data(), n, 0.0f, RandomKey{1, 1, 1});
  EXPECT_TRUE(all_close("forward p=0", y.data(), x.data(), n, Tolerance{0.0, 0.0}));
  EXPECT_TRUE(all_close("backward p=0", dx.data(), x.data(), n, Tolerance{0.0, 0.0}));
  std::vector<double> inplace = x;
  dropout_forward_cpu(inplace.data(), inplace.data(), n, 0.0f, RandomKey{1, 1, 1});
  EXPECT_TRUE(all_close("forward p=0 in place", inplace.data(), x.data(), n, Tolerance{0.0, 0.0}));
}

// ---- Losses -------------------------------------------------------------------------------------------

// Hand-computed references, printed to 17 digits by Python (math.log1p, math.exp); only libm rounding differs.
constexpr Tolerance kLossValue{1e-15, 1e-14};

TEST(LossValue, BceOneByTwoByHand) {
  // logits [0.5, -1], targets [1, 0]: elements log1p(e^-0.5) and log1p(e^-1), mean over 2.
  const double logits[] = {0.5, -1.0}, targets[] = {1.0, 0.0};
  double d[2];
  const double loss = bce_with_logits_cpu(d, logits, targets, static_cast<const double*>(nullptr), 1, 2);
  const double want_loss = 0.39366933584916475;
  // (sigmoid(x) - y) / 2
  const double want_d[] = {-0.1887703343990727, 0.13447071068499755};
  EXPECT_TRUE(all_close("bce loss", &loss, &want_loss, 1, kLossValue));
  EXPECT_TRUE(all_close("bce dlogits", d, want_d, 2, kLossValue));

  // Class weights [2, 0.5] scale each element and its gradient (torch's `weight`).
  const double weights[] = {2.0, 0.5};
  const double weighted = bce_with_logits_cpu(d, logits, targets, weights, 1, 2);
  const double want_weighted = 0.5523924060596624;
  const double want_wd[] = {-0.3775406687981454, 0.06723535534249878};
  EXPECT_TRUE(all_close("weighted bce loss", &weighted, &want_weighted, 1, kLossValue));
  EXPECT_TRUE(all_close("weighted bce dlogits", d, want_wd, 2, kLossValue));
}

TEST(LossValue, CrossEntropyByHand) {
  // logits [1, 2, 3], target class 0: log(e + e² + e³) - 1; gradient softmax - onehot.
  const double logits[] = {1.0, 2.0, 3.0}, targets[] = {1.0, 0.0, 0.0};
  double d[3];
  const double loss = softmax_cross_entropy_cpu(d, logits, targets, 1, 3);
  const double want_loss = 2.40760596444438;
  const double want_d[] = {-0.9099694268296196, 0.2447284710547977, 0.665240955774822};
  EXPECT_TRUE(all_close("ce loss", &loss, &want_loss, 1, kLossValue));
  EXPECT_TRUE(all_close("ce dlogits", d, want_d, 3, kLossValue));
}

struct LossCase {
  static constexpr int kBatch = 3, kClasses = 4;
  // Up to ±8: large enough that BCE's stable form (max, log1p(exp(-|x|))) is exercised on both signs.
  std::vector<double> logits = random_uniform(kBatch * kClasses, 71, -8.0, 8.0);
  std::vector<double> onehot = {0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1};
  std::vector<double> soft = {0.1, 0.6, 0.2, 0.1, 0.25, 0.25, 0.25, 0.25, 0.0, 0.0, 0.3, 0.7};
  std::vector<double> weights = {0.5, 2.0, 1.0, 3.0};
  std::vector<double> dlogits = std::vector<double>(kBatch * kClasses, 1e3);
};

TEST(LossGradient, BceWithAndWithoutClassWeights) {
  LossCase c;
  const int B = LossCase::kBatch, C = LossCase::kClasses;
  for (const double* w : {static_cast<const double*>(nullptr), static_cast<const double*>(c.weights.data())}) {
    auto loss = [&] {
      return bce_with_logits_cpu(static_cast<double*>(nullptr), c.logits.data(), c.onehot.data(), w, B, C);
    };
    const double value = bce_with_logits_cpu(c.dlogits.data(), c.logits.data(), c.onehot.data(), w, B, C);
    EXPECT_EQ(value, loss()) << "the loss must not depend on whether the gradient is requested";
    EXPECT_TRUE(check_gradient(w ? "bce dlogits (class weights)" : "bce dlogits", loss, c.logits.data(),
                               c.dlogits.data(), c.dlogits.size(), kDoubleFd, {B, C}));
    // The dispatcher must route to the same function.
    std::vector<double> via(c.dlogits.size());
    EXPECT_EQ(value, classification_loss_cpu(LossKind::kBce, via.data(), c.logits.data(), c.onehot.data(), w, B, C));
    EXPECT_TRUE(all_close("classification_loss_cpu(kBce)", via.data(), c.dlogits.data(), via.size(),
                          Tolerance{0.0, 0.0}));
  }
}

TEST(LossGradient, SoftmaxCrossEntropyOneHotAndSoftTargets) {
  LossCase c;
  const int B = LossCase::kBatch, C = LossCase::kClasses;
  for (const std::vector<double>* targets : {&c.onehot, &c.soft}) {
    auto loss = [&] {
      return softmax_cross_entropy_cpu(static_cast<double*>(nullptr), c.logits.data(), targets->data(), B, C);
    };
    const double value = softmax_cross_entropy_cpu(c.dlogits.data(), c.logits.data(), targets->data(), B, C);
    EXPECT_EQ(value, loss());
    EXPECT_TRUE(check_gradient(targets == &c.onehot ? "ce dlogits (one-hot)" : "ce dlogits (soft targets)", loss,
                               c.logits.data(), c.dlogits.data(), c.dlogits.size(), kDoubleFd, {B, C}));
  }
  // Class weights are BCE-only; the dispatcher says so rather than ignoring them.
  EXPECT_THROW(classification_loss_cpu(LossKind::kSoftmaxCrossEntropy, c.dlogits.data(), c.logits.data(),
                                       c.onehot.data(), c.weights.data(), B, C),
               Error);
}

// ---- Adam ---------------------------------------------------------------------------------------------

// torch.optim.Adam / AdamW (single-tensor path) for one element, written out from the formula:
// m = m + (1-b1)(g - m); v = v·b2 + (1-b2)·g²; denom = sqrt(v)/sqrt(1-b2^t) + eps;
// p -= lr/(1-b1^t) · m/denom; AdamW first multiplies p by (1 - lr·wd).
void reference_adam(double* p, double* m, double* v, double g, const AdamHyper& hp, long t) {
  if (hp.weight_decay > 0.0) *p *= 1.0 - hp.lr * hp.weight_decay;
  *m = *m + (1.0 - hp.beta1) * (g - *m);
  *v = *v * hp.beta2 + (1.0 - hp.beta2) * g * g;
  const double denom = std::sqrt(*v) / std::sqrt(1.0 - std::pow(hp.beta2, double(t))) + hp.eps;
  *p -= hp.lr / (1.0 - std::pow(hp.beta1, double(t))) * (*m / denom);
}

void check_adam(double weight_decay) {
  AdamHyper hp;
  hp.lr = 1e-2;  // large enough that the update is far above the tolerance
  hp.weight_decay = weight_decay;
  const std::size_t n = 9;
  std::vector<double> param = random_normal(n, 81);
  // Gradients include 0 and values near eps (1e-9) where eps's placement outside the sqrt matters.
  std::vector<std::vector<double>> grads = {
      {0.3, -1.2, 0.0, 1e-9, -2e-9, 5.0, -0.01, 0.7, 1e-4},
      {-0.1, -1.0, 0.5, 3e-9, 1e-9, -4.0, 0.02, 0.7, 0.0},
  };
  std::vector<double> m(n, 0.0), v(n, 0.0);
  std::vector<double> ref_p = param, ref_m = m, ref_v = v;
  std::vector<float> pf(param.begin(), param.end()), mf(n, 0.0f), vf(n, 0.0f);
  const std::string tag = weight_decay > 0 ? "adamw" : "adam";
  for (long step = 1; step <= 2; ++step) {
    const std::vector<double>& g = grads[step - 1];
    adam_update_cpu(param.data(), m.data(), v.data(), g.data(), n, hp, step);
    for (std::size_t i = 0; i < n; ++i) reference_adam(&ref_p[i], &ref_m[i], &ref_v[i], g[i], hp, step);
    const std::string s = tag + " step " + std::to_string(step);
    // Double: the same operations in the same order, so only a rounding or two may differ.
    EXPECT_TRUE(all_close(s + " param", param.data(), ref_p.data(), n, kRounding));
    // m and v reach 1e-19 for the tiny gradients: relative tolerance only.
    EXPECT_TRUE(all_close(s + " m", m.data(), ref_m.data(), n, Tolerance{1e-30, 1e-13}));
    EXPECT_TRUE(all_close(s + " v", v.data(), ref_v.data(), n, Tolerance{1e-30, 1e-13}));
    // Float: the instantiation training uses, against the double reference within float rounding.
    const std::vector<float> gf(g.begin(), g.end());
    adam_update_cpu(pf.data(), mf.data(), vf.data(), gf.data(), n, hp, step);
    const std::vector<double> pfd(pf.begin(), pf.end()), mfd(mf.begin(), mf.end()), vfd(vf.begin(), vf.end());
    EXPECT_TRUE(all_close(s + " param (float)", pfd.data(), ref_p.data(), n, Tolerance{1e-6, 1e-6}));
    EXPECT_TRUE(all_close(s + " m (float)", mfd.data(), ref_m.data(), n, Tolerance{1e-12, 1e-6}));
    EXPECT_TRUE(all_close(s + " v (float)", vfd.data(), ref_v.data(), n, Tolerance{1e-20, 1e-6}));
  }
}

TEST(AdamUpdate, MatchesTorchFormulaTwoSteps) { check_adam(0.0); }
TEST(AdamUpdate, AdamWMatchesTorchFormulaTwoSteps) { check_adam(0.01); }

// Weight decay reaches only the elements the mask selects (Trainer leaves biases and LayerNorm weights out): each is
// the element of a run that decays everything, or of one with no weight decay at all. To a float rounding, not bit
// for bit: GCC contracts this build's products into FMAs (kernels/cuda/adam.cu), and differently where the decay
// is conditional. The decay itself moves every parameter by 0.5 %, thousands of times that.
TEST(AdamUpdate, DecayMaskSelectsTheDecayedElements) {
  const std::size_t n = 70;  // three mask words, the last one partly used
  std::vector<uint32_t> mask((n + 31) / 32, 0u);
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 3 != 1) mask[i / 32] |= 1u << (i % 32);
  }
  const std::vector<double> start = random_normal(n, 82), g1 = random_normal(n, 83), g2 = random_normal(n, 84);
  AdamHyper decayed;
  decayed.lr = 1e-2;
  decayed.weight_decay = 0.5;  // p · (1 - 5e-3): far above a rounding
  AdamHyper plain = decayed;
  plain.weight_decay = 0.0;
  struct Run {
    std::vector<float> p, m, v;
  };
  const auto run = [&](const AdamHyper& hp, const uint32_t* with_mask) {
    Run r{std::vector<float>(start.begin(), start.end()), std::vector<float>(n, 0.0f), std::vector<float>(n, 0.0f)};
    long step = 0;
    for (const std::vector<double>* g : {&g1, &g2}) {
      const std::vector<float> gf(g->begin(), g->end());
      adam_update_cpu(r.p.data(), r.m.data(), r.v.data(), gf.data(), n, hp, ++step, 1.0f, with_mask);
    }
    return r;
  };
  const Run masked = run(decayed, mask.data()), all = run(decayed, nullptr), none = run(plain, nullptr);
  for (std::size_t i = 0; i < n; ++i) {
    const Run& expected = i % 3 != 1 ? all : none;
    EXPECT_NEAR(masked.p[i], expected.p[i], 4e-7 * std::abs(expected.p[i])) << i;
    EXPECT_EQ(masked.m[i], expected.m[i]) << i;  // the moments do not see the decay
    EXPECT_EQ(masked.v[i], expected.v[i]) << i;
    EXPECT_GT(std::abs(all.p[i] - none.p[i]), 1e-3 * std::abs(none.p[i])) << i;  // the decay shows in every element
  }
}

TEST(AdamUpdate, RejectsStepZero) {
  double p = 1.0, m = 0.0, v = 0.0, g = 1.0;
  EXPECT_THROW(adam_update_cpu(&p, &m, &v, &g, 1, AdamHyper{}, 0), Error);
}

}  // namespace
}  // namespace bertrain

// The fused dropout + residual add + LayerNorm CPU twin (kernels/layernorm.h) against the unfused composition it
// replaces (dropout_forward_cpu then layernorm_forward_cpu; layernorm_backward_cpu then dropout_backward_cpu), with
// the same key and layout: flat, one row per sample and the token slots of a packed batch, p = 0, 0.1, 0.5 and 1.
// Then central differences in double, independence from the thread count, the documented aliasing and the
// rejected arguments.
//
// Tolerances against the composition (atol + rtol·|ref|): the fused twin sums a row in eight interleaved partial
// sums and the column sums in 16-row chunks, the composition sequentially, so results differ by the rounding of
// the sums only. A row sum of `cols` terms carries a relative rounding error of about √cols·u in either order
// (1.6e-6 for 768 floats), which moves the mean, rstd and so y and dz by that much relative to their O(1) size:
// float 3e-6 + 3e-6·|ref| (the largest difference seen over these cases is 3.1e-6 at |y| = 1.1, cols 768);
// double 1e-13 + 1e-13·|ref|. Column sums over `rows` rows of O(1) terms: atol 2e-7·rows (float), 1e-15·rows
// (double). The masks are compared bit for bit (which elements of dx are zero), and so is everything that must
// not depend on the thread count or on aliasing.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/philox.h"
#include "kernels/dropout.h"
#include "kernels/layernorm.h"
#include "kernels/packed.h"
#include "tests/kernels/gradient_check.h"

namespace bertrain {
namespace {

using gradcheck::check_gradient;
using gradcheck::kDoubleFd;
using gradcheck::projection;
using gradcheck::random_normal;
using gradcheck::Tolerance;

template <typename T>
constexpr Tolerance kComposition = std::is_same_v<T, float> ? Tolerance{3e-6, 3e-6} : Tolerance{1e-13, 1e-13};
template <typename T>
Tolerance column_sum_tolerance(int rows) {
  return std::is_same_v<T, float> ? Tolerance{2e-7 * rows + 1e-6, 1e-6} : Tolerance{1e-15 * rows + 1e-13, 1e-13};
}

template <typename T>
std::vector<T> cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

template <typename T>
::testing::AssertionResult close(const std::string& what, const std::vector<T>& got, const std::vector<T>& ref,
                                 Tolerance tol, std::vector<int64_t> shape = {}) {
  const std::vector<double> g(got.begin(), got.end()), r(ref.begin(), ref.end());
  return gradcheck::all_close(what, g.data(), r.data(), r.size(), tol, shape);
}

template <typename T>
::testing::AssertionResult same_bits(const std::string& what, const std::vector<T>& got, const std::vector<T>& ref) {
  return close(what, got, ref, Tolerance{0.0, 0.0});
}

// Which kind of dropout layout a case uses (kernels/dropout.h).
enum class LayoutKind { kFlat, kSampleRows, kTokenSlots, kFlatWithFirstSample };

const char* layout_name(LayoutKind k) {
  switch (k) {
    case LayoutKind::kFlat: return "flat";
    case LayoutKind::kSampleRows: return "sample rows";
    case LayoutKind::kTokenSlots: return "token slots";
    case LayoutKind::kFlatWithFirstSample: return "flat, first_sample 2";
  }
  return "?";
}

// A rows × cols problem: inputs, the dropout layout (token slots of packed rows whose lengths add up to rows) and
// the upstream gradient.
struct Case {
  int rows, cols;
  float p;
  LayoutKind kind;
  std::vector<double> x, residual, gamma, beta, dy;
  std::vector<int64_t> slots;
  DropoutLayout layout;
  RandomKey key{0x5eedULL, 11, 4};

  Case(int rows_, int cols_, float p_, LayoutKind kind_, uint64_t seed) : rows(rows_), cols(cols_), p(p_), kind(kind_) {
    const std::size_t n = static_cast<std::size_t>(rows) * cols;
    x = random_normal(n, seed, 0.5, 2.0);  // an offset, so the mean matters
    residual = random_normal(n, seed + 1);
    gamma = random_normal(cols, seed + 2, 1.0, 0.3);
    beta = random_normal(cols, seed + 3);
    dy = random_normal(n, seed + 4);
    switch (kind) {
      case LayoutKind::kFlat: layout = DropoutLayout{}; break;
      case LayoutKind::kSampleRows: layout = DropoutLayout{3, 1, cols, nullptr}; break;
      case LayoutKind::kFlatWithFirstSample: layout = DropoutLayout{2, 1, 0, nullptr}; break;
      case LayoutKind::kTokenSlots: {
        // Rows of 1, 2, 3, ... tokens (the last one shorter), first sample 5, P = 16.
        std::vector<int32_t> cu = {0};
        for (int length = 1; cu.back() < rows; ++length) cu.push_back(std::min(rows, cu.back() + length % 16 + 1));
        const int batch = static_cast<int>(cu.size()) - 1;
        slots.resize(static_cast<std::size_t>(rows));
        dropout_slots_cpu(slots.data(), cu.data(), batch, 5, 16);
        layout = DropoutLayout{5, 16, cols, slots.data()};
        break;
      }
    }
  }
  std::string name() const {
    return std::to_string(rows) + "x" + std::to_string(cols) + " p=" + std::to_string(p) + " " + layout_name(kind);
  }
};

template <typename T>
struct Forward {
  std::vector<T> y, mean, rstd;
};

template <typename T>
Forward<T> composed_forward(const Case& c) {
  const std::size_t n = c.x.size();
  const std::vector<T> x = cast<T>(c.x), residual = cast<T>(c.residual), gamma = cast<T>(c.gamma),
                       beta = cast<T>(c.beta);
  std::vector<T> dropped(n);
  dropout_forward_cpu(dropped.data(), x.data(), n, c.p, c.key, c.layout);
  Forward<T> f{std::vector<T>(n), std::vector<T>(c.rows), std::vector<T>(c.rows)};
  layernorm_forward_cpu(f.y.data(), f.mean.data(), f.rstd.data(), dropped.data(), residual.data(), gamma.data(),
                        beta.data(), c.rows, c.cols, T(1e-5));
  return f;
}

template <typename T>
Forward<T> fused_forward(const Case& c) {
  const std::size_t n = c.x.size();
  const std::vector<T> x = cast<T>(c.x), residual = cast<T>(c.residual), gamma = cast<T>(c.gamma),
                       beta = cast<T>(c.beta);
  Forward<T> f{std::vector<T>(n, T(1e3)), std::vector<T>(c.rows, T(1e3)), std::vector<T>(c.rows, T(1e3))};
  dropout_residual_layernorm_forward_cpu(f.y.data(), f.mean.data(), f.rstd.data(), x.data(), residual.data(),
                                         gamma.data(), beta.data(), c.rows, c.cols, T(1e-5), c.p, c.key, c.layout);
  return f;
}

template <typename T>
struct Backward {
  std::vector<T> dz, dx, dgamma, dbeta;
};

// Both backwards from the same saved statistics (the composition's forward).
template <typename T>
Backward<T> composed_backward(const Case& c, const Forward<T>& saved) {
  const std::size_t n = c.x.size();
  const std::vector<T> x = cast<T>(c.x), residual = cast<T>(c.residual), gamma = cast<T>(c.gamma), dy = cast<T>(c.dy);
  std::vector<T> dropped(n);
  dropout_forward_cpu(dropped.data(), x.data(), n, c.p, c.key, c.layout);
  Backward<T> b{std::vector<T>(n), std::vector<T>(n), std::vector<T>(c.cols), std::vector<T>(c.cols)};
  layernorm_backward_cpu(b.dz.data(), b.dgamma.data(), b.dbeta.data(), dy.data(), dropped.data(), residual.data(),
                         saved.mean.data(), saved.rstd.data(), gamma.data(), c.rows, c.cols);
  dropout_backward_cpu(b.dx.data(), b.dz.data(), n, c.p, c.key, c.layout);
  return b;
}

template <typename T>
Backward<T> fused_backward(const Case& c, const Forward<T>& saved) {
  const std::size_t n = c.x.size();
  const std::vector<T> x = cast<T>(c.x), residual = cast<T>(c.residual), gamma = cast<T>(c.gamma), dy = cast<T>(c.dy);
  Backward<T> b{std::vector<T>(n, T(1e3)), std::vector<T>(n, T(1e3)), std::vector<T>(c.cols, T(1e3)),
                std::vector<T>(c.cols, T(1e3))};
  dropout_residual_layernorm_backward_cpu(b.dz.data(), b.dx.data(), b.dgamma.data(), b.dbeta.data(), dy.data(),
                                          x.data(), residual.data(), saved.mean.data(), saved.rstd.data(),
                                          gamma.data(), c.rows, c.cols, c.p, c.key, c.layout);
  return b;
}

// Which elements are zero: the mask as dx shows it (dz itself is never exactly zero for these inputs).
template <typename T>
std::vector<T> zero_pattern(const std::vector<T>& v) {
  std::vector<T> z(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) z[i] = v[i] == T(0) ? T(1) : T(0);
  return z;
}

template <typename T>
void check_against_composition(const Case& c) {
  SCOPED_TRACE(c.name() + (std::is_same_v<T, float> ? " float" : " double"));
  const std::vector<int64_t> shape = {c.rows, c.cols};
  const Forward<T> ref = composed_forward<T>(c), got = fused_forward<T>(c);
  EXPECT_TRUE(close("y", got.y, ref.y, kComposition<T>, shape));
  EXPECT_TRUE(close("mean", got.mean, ref.mean, kComposition<T>));
  EXPECT_TRUE(close("rstd", got.rstd, ref.rstd, kComposition<T>));

  const Backward<T> bref = composed_backward<T>(c, ref), bgot = fused_backward<T>(c, ref);
  // dz = rstd · (...): rounding noise of the row sums times rstd (≈ 0.5 for these inputs).
  EXPECT_TRUE(close("dz", bgot.dz, bref.dz, kComposition<T>, shape));
  EXPECT_TRUE(close("dx", bgot.dx, bref.dx, kComposition<T>, shape));
  EXPECT_TRUE(same_bits("dx zero pattern (the mask)", zero_pattern(bgot.dx), zero_pattern(bref.dx)));
  EXPECT_TRUE(close("dgamma", bgot.dgamma, bref.dgamma, column_sum_tolerance<T>(c.rows), {c.cols}));
  EXPECT_TRUE(close("dbeta", bgot.dbeta, bref.dbeta, column_sum_tolerance<T>(c.rows), {c.cols}));

  std::size_t dropped = 0;
  for (T v : bref.dx) dropped += v == T(0);
  if (c.p == 0.0f) {
    EXPECT_EQ(dropped, 0u);
  } else if (c.p == 1.0f) {
    EXPECT_EQ(dropped, bref.dx.size());
  } else if (bref.dx.size() >= 200) {
    EXPECT_GT(dropped, 0u) << "the reference dropped nothing: the masks are not exercised";
    EXPECT_LT(dropped, bref.dx.size());
  }
}

// (rows, cols): a column tail after the 8 partial sums and the 256-element mask spans (37, 13, 300), BERT widths,
// rows below and above one 16-row chunk and above the 64 rows of the OpenMP paths (with a chunk tail: 130, 71).
TEST(DropoutResidualLayerNorm, EqualsDropoutThenLayerNorm) {
  const int shapes[][2] = {{1, 13}, {5, 37}, {16, 12}, {17, 300}, {71, 384}, {130, 768}};
  uint64_t seed = 100;
  for (const auto& s : shapes) {
    for (LayoutKind kind : {LayoutKind::kFlat, LayoutKind::kSampleRows, LayoutKind::kTokenSlots,
                            LayoutKind::kFlatWithFirstSample}) {
      for (float p : {0.0f, 0.1f, 0.5f}) {
        const Case c(s[0], s[1], p, kind, seed += 10);
        check_against_composition<float>(c);
        check_against_composition<double>(c);
      }
    }
  }
  // p = 1 drops all of x: z is the residual.
  check_against_composition<float>(Case(9, 40, 1.0f, LayoutKind::kTokenSlots, 7));
  check_against_composition<double>(Case(9, 40, 1.0f, LayoutKind::kSampleRows, 8));
}

// Central differences in double: dx via x, dz via the residual, dgamma and dbeta via gamma and beta (the mask is a
// function of the key, so the loss is smooth in every input).
void check_fused_gradients(int rows, int cols, float p, LayoutKind kind, double eps) {
  Case c(rows, cols, p, kind, 700 + rows);
  const std::size_t n = c.x.size();
  SCOPED_TRACE(c.name());
  std::vector<double> y(n), mean(rows), rstd(rows);
  const std::vector<double> r = random_normal(n, 77);
  auto loss = [&] {
    dropout_residual_layernorm_forward_cpu(y.data(), mean.data(), rstd.data(), c.x.data(), c.residual.data(),
                                           c.gamma.data(), c.beta.data(), rows, cols, eps, p, c.key, c.layout);
    return projection(r, y.data());
  };
  loss();
  const std::vector<double> saved_mean = mean, saved_rstd = rstd;
  std::vector<double> dz(n), dx(n), dgamma(cols), dbeta(cols);
  dropout_residual_layernorm_backward_cpu(dz.data(), dx.data(), dgamma.data(), dbeta.data(), r.data(), c.x.data(),
                                          c.residual.data(), saved_mean.data(), saved_rstd.data(), c.gamma.data(),
                                          rows, cols, p, c.key, c.layout);
  const std::vector<int64_t> shape = {rows, cols};
  EXPECT_TRUE(check_gradient("dx (via x)", loss, c.x.data(), dx.data(), n, kDoubleFd, shape));
  EXPECT_TRUE(check_gradient("dz (via residual)", loss, c.residual.data(), dz.data(), n, kDoubleFd, shape));
  EXPECT_TRUE(check_gradient("dgamma", loss, c.gamma.data(), dgamma.data(), cols, kDoubleFd, {cols}));
  EXPECT_TRUE(check_gradient("dbeta", loss, c.beta.data(), dbeta.data(), cols, kDoubleFd, {cols}));
  if (p > 0.0f) {
    std::size_t dropped = 0;
    for (double v : dx) dropped += v == 0.0;
    EXPECT_GT(dropped, 0u) << "no element dropped: the dropout case checks nothing new";
  }
}

TEST(DropoutResidualLayerNormGradient, NoDropout) { check_fused_gradients(5, 37, 0.0f, LayoutKind::kFlat, 1e-5); }
TEST(DropoutResidualLayerNormGradient, DropoutOverTokenSlots) {
  check_fused_gradients(6, 37, 0.1f, LayoutKind::kTokenSlots, 1e-5);
}
TEST(DropoutResidualLayerNormGradient, HalfDroppedSampleRowsBertEps) {
  check_fused_gradients(19, 8, 0.5f, LayoutKind::kSampleRows, 1e-12);  // 19 rows: two column-sum chunks
}

// Bit-identical results with 1 and with 4 OpenMP threads, over shapes that take the parallel paths.
template <typename T>
void check_thread_independence(const Case& c) {
  SCOPED_TRACE(c.name() + (std::is_same_v<T, float> ? " float" : " double"));
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const Forward<T> f1 = fused_forward<T>(c);
  const Backward<T> b1 = fused_backward<T>(c, f1);
  omp_set_num_threads(4);
  const Forward<T> f4 = fused_forward<T>(c);
  const Backward<T> b4 = fused_backward<T>(c, f4);
  omp_set_num_threads(saved);
  EXPECT_TRUE(same_bits("y", f4.y, f1.y));
  EXPECT_TRUE(same_bits("mean", f4.mean, f1.mean));
  EXPECT_TRUE(same_bits("rstd", f4.rstd, f1.rstd));
  EXPECT_TRUE(same_bits("dz", b4.dz, b1.dz));
  EXPECT_TRUE(same_bits("dx", b4.dx, b1.dx));
  EXPECT_TRUE(same_bits("dgamma", b4.dgamma, b1.dgamma));
  EXPECT_TRUE(same_bits("dbeta", b4.dbeta, b1.dbeta));
}

TEST(DropoutResidualLayerNorm, ResultsDoNotDependOnTheThreadCount) {
  check_thread_independence<float>(Case(301, 768, 0.1f, LayoutKind::kTokenSlots, 900));
  check_thread_independence<double>(Case(130, 97, 0.1f, LayoutKind::kSampleRows, 910));
  check_thread_independence<float>(Case(200, 64, 0.0f, LayoutKind::kFlat, 920));
}

// y over the residual or over x, and dz over dy, give the same bits as separate buffers.
TEST(DropoutResidualLayerNorm, DocumentedAliasing) {
  const Case c(70, 96, 0.1f, LayoutKind::kTokenSlots, 950);
  const std::size_t n = c.x.size();
  const Forward<float> ref = fused_forward<float>(c);
  const std::vector<float> x = cast<float>(c.x), residual = cast<float>(c.residual), gamma = cast<float>(c.gamma),
                           beta = cast<float>(c.beta);
  std::vector<float> mean(c.rows), rstd(c.rows);
  std::vector<float> over_residual = residual;
  dropout_residual_layernorm_forward_cpu(over_residual.data(), mean.data(), rstd.data(), x.data(),
                                         over_residual.data(), gamma.data(), beta.data(), c.rows, c.cols, 1e-5f, c.p,
                                         c.key, c.layout);
  EXPECT_TRUE(same_bits("y over residual", over_residual, ref.y));
  std::vector<float> over_x = x;
  dropout_residual_layernorm_forward_cpu(over_x.data(), mean.data(), rstd.data(), over_x.data(), residual.data(),
                                         gamma.data(), beta.data(), c.rows, c.cols, 1e-5f, c.p, c.key, c.layout);
  EXPECT_TRUE(same_bits("y over x", over_x, ref.y));

  const Backward<float> bref = fused_backward<float>(c, ref);
  std::vector<float> dy = cast<float>(c.dy), dx(n), dgamma(c.cols), dbeta(c.cols);
  dropout_residual_layernorm_backward_cpu(dy.data(), dx.data(), dgamma.data(), dbeta.data(), dy.data(), x.data(),
                                          residual.data(), ref.mean.data(), ref.rstd.data(), gamma.data(), c.rows,
                                          c.cols, c.p, c.key, c.layout);
  EXPECT_TRUE(same_bits("dz over dy", dy, bref.dz));
  EXPECT_TRUE(same_bits("dx with dz over dy", dx, bref.dx));
  EXPECT_TRUE(same_bits("dgamma with dz over dy", dgamma, bref.dgamma));
}

TEST(DropoutResidualLayerNorm, RejectsBadArguments) {
  const Case c(4, 8, 0.1f, LayoutKind::kFlat, 990);
  std::vector<float> x = cast<float>(c.x), r = cast<float>(c.residual), g = cast<float>(c.gamma),
                     b = cast<float>(c.beta), dy = cast<float>(c.dy);
  std::vector<float> y(x.size()), dz(x.size()), dx(x.size()), mean(4), rstd(4), dg(8), db(8);
  const RandomKey key{1, 2, 3};
  auto forward = [&](float p, const DropoutLayout& layout, const float* residual) {
    dropout_residual_layernorm_forward_cpu(y.data(), mean.data(), rstd.data(), x.data(), residual, g.data(), b.data(),
                                           4, 8, 1e-5f, p, key, layout);
  };
  auto backward = [&](float p, const DropoutLayout& layout, float* dx_out) {
    dropout_residual_layernorm_backward_cpu(dz.data(), dx_out, dg.data(), db.data(), dy.data(), x.data(), r.data(),
                                            mean.data(), rstd.data(), g.data(), 4, 8, p, key, layout);
  };
  EXPECT_NO_THROW(forward(0.1f, DropoutLayout{0, 1, 8, nullptr}, r.data()));  // the baseline is valid
  EXPECT_NO_THROW(backward(0.1f, DropoutLayout{0, 1, 16, nullptr}, dx.data()));  // two rows per logical row
  EXPECT_THROW(forward(1.5f, DropoutLayout{}, r.data()), Error);
  EXPECT_THROW(forward(-0.1f, DropoutLayout{}, r.data()), Error);
  EXPECT_THROW(forward(0.1f, DropoutLayout{}, nullptr), Error);                 // the residual is required
  EXPECT_THROW(forward(0.1f, DropoutLayout{0, 1, 4, nullptr}, r.data()), Error);  // a row straddles logical rows
  EXPECT_THROW(forward(0.1f, DropoutLayout{0, 1, 24, nullptr}, r.data()), Error);  // 32 elements, rows of 24
  EXPECT_THROW(forward(0.1f, DropoutLayout{-1, 1, 8, nullptr}, r.data()), Error);
  EXPECT_NO_THROW(forward(0.0f, DropoutLayout{0, 1, 4, nullptr}, r.data()));  // p == 0 draws nothing: no layout check
  EXPECT_THROW(backward(0.1f, DropoutLayout{0, 1, 4, nullptr}, dx.data()), Error);
  EXPECT_THROW(backward(0.1f, DropoutLayout{}, dy.data()), Error);  // dx over dy
  EXPECT_THROW(backward(0.1f, DropoutLayout{}, dz.data()), Error);  // dx over dz
}

}  // namespace
}  // namespace bertrain

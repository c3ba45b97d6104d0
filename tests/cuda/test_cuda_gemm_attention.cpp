// The GEMM-based CUDA kernels (kernels/cuda/linear.cu, kernels/cuda/attention.cu) against their CPU twins, for
// T = float and T = bf16; attention over ragged packed batches (the CPU's ragged probability blocks against the
// real entries of the GPU's padded ones). bf16 inputs are rounded to bf16 first (bf16_rounded), so the fp32 CPU twin sees exactly
// the values the bf16 kernel reads; differences then come only from the kernel's bf16 outputs and intermediates.
//
// Tolerances (atol + rtol·|ref|):
//  - float: GPU and CPU both compute in fp32 and differ only in summation order. A sum of k ≤ 1024 products of
//    values in [-1, 1] (|sum| up to ~50) carries ~3e-5 absolute rounding error per side, hence atol 1e-4,
//    rtol 1e-5 for the linear layer; attention outputs are O(1) convex combinations, hence atol 1e-5, rtol 1e-4.
//  - bf16: bf16 has 8 mantissa bits, so one rounding of an output is up to 2^-9 ≈ 2e-3 relative (2^-8 just
//    above a power of two). The linear outputs are rounded once (rtol 1e-2, atol 1e-3). The attention scores are fp32 (the softmax reads them
//    unrounded), so the probabilities are the fp32 softmax rounded once to bf16: at most 2^-8 ≈ 3.9e-3 relative
//    plus fp32 noise, hence rtol 5e-3 (bf16-rounded scores would miss it: a score of ~1 rounded moves its
//    probability by up to ~4e-3 more). ctx and the gradients see the probabilities, the dropped probabilities, dP
//    and dS rounded before the last products (an emulation of these roundings measured errors up to 6e-3 of the
//    largest |ref| over these shapes), hence atol 2e-2·max|ref| and rtol 2e-2.
//    Weight and bias gradients, and dx of the mixed-precision linear backward (bf16 operands, fp32 C), are fp32
//    outputs of exact bf16 inputs: near-fp32 tolerances.
//  Wrong indexing, a wrong transpose or a different dropout mask gives errors of the order of the values
//  themselves; a single mismatched dropout element moves ctx by ~P·v ≥ 1e-3, far above the float tolerance.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/linear.h"
#include "tests/cuda/gpu_test.h"
#include "tests/tolerance.h"

namespace bertrain {
namespace {

using testing::all_close;
using testing::bf16_rounded;
using testing::describe_lengths;
using testing::longest_of;
using testing::mixed_lengths;
using testing::random_floats;
using testing::row_offsets;
using testing::to_bf16;
using testing::to_float;

// The context's streams are non-blocking: uploads (legacy stream) and launches (context stream) are not ordered
// with each other, so tests synchronise the whole device between setting up, launching and downloading.
void sync_device() { BERTRAIN_CUDA_CHECK(cudaDeviceSynchronize()); }

// Random inputs in [lo, hi), exactly representable in T.
template <typename T>
std::vector<float> make_input(std::size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> x = random_floats(n, seed, lo, hi);
  if constexpr (std::is_same_v<T, bf16>) x = bf16_rounded(x);
  return x;
}

template <typename T>
DeviceBuffer<T> to_device(const std::vector<float>& x) {
  if constexpr (std::is_same_v<T, bf16>) {
    return DeviceBuffer<bf16>(to_bf16(x));
  } else {
    return DeviceBuffer<float>(x);
  }
}

template <typename T>
std::vector<float> to_host(const DeviceBuffer<T>& d) {
  if constexpr (std::is_same_v<T, bf16>) {
    return to_float(d.download());
  } else {
    return d.download();
  }
}

// Fills a buffer with NaNs (all-ones bytes are NaN in float and bf16), so reading what a kernel should have
// written first shows up in the results.
template <typename T>
void poison(DeviceBuffer<T>& d) {
  if (d.size() > 0) BERTRAIN_CUDA_CHECK(cudaMemset(d.data(), 0xff, d.bytes()));
}

template <typename T>
bool bitwise_equal(const DeviceBuffer<T>& a, const DeviceBuffer<T>& b) {
  const std::vector<T> x = a.download(), y = b.download();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
}

double max_abs(const std::vector<float>& x) {
  double m = 0;
  for (float v : x) m = std::max(m, static_cast<double>(std::abs(v)));
  return m;
}

struct Tolerance {
  double atol, rtol;
};

// Column sums up to 4096 wide (the tests reach 1024).
const std::size_t kReductionWorkspace = gpu_reduction_workspace_elements(4096);

// ---- Linear ---------------------------------------------------------------------------------------------

template <typename T>
struct LinearTolerances;
template <>
struct LinearTolerances<float> {
  static constexpr Tolerance out{1e-4, 1e-5};      // y, dx
  static constexpr Tolerance weight{1e-4, 1e-5};   // dw
  static constexpr Tolerance bias{1e-4, 1e-5};     // db, column sums
};
template <>
struct LinearTolerances<bf16> {
  static constexpr Tolerance out{1e-3, 1e-2};     // rounded once to bf16
  static constexpr Tolerance weight{1e-3, 1e-4};  // fp32 output; tensor-core accumulation order
  static constexpr Tolerance bias{1e-4, 1e-5};    // fp32 sums of exact inputs
};

// cuBLAS's bf16 GEMM with beta = 1 (the forward's bias broadcast into y first, or dx accumulated) rounds the
// product P to bf16 before it adds C: seen on an H100 with cuBLAS 13.0 (2026-11-22), with reduced-precision
// reductions disallowed on the handle, as errors of one bf16 ulp of |P| in outputs much smaller than P. So
// y = round(round(P) + C) is checked against |y − ref| ≤ 2⁻⁸·|P| + 2⁻⁸·|ref| + atol, element by element: one
// rounding to bf16 (8 significant bits) moves a value v by at most half an ulp, which is at most 2⁻⁸·|v|.
::testing::AssertionResult within_two_bf16_roundings(const char* what, const std::vector<float>& got,
                                                     const std::vector<float>& ref, const std::vector<float>& product) {
  constexpr double kAtol = 1e-6;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double bound = std::ldexp(std::abs(product[i]) + std::abs(ref[i]), -8) + kAtol;
    if (!(std::abs(static_cast<double>(got[i]) - ref[i]) <= bound)) {
      return ::testing::AssertionFailure() << what << "[" << i << "]: got " << got[i] << ", expected " << ref[i]
                                           << " (product before C " << product[i] << ", bound " << bound << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

struct LinearShape {
  int rows, in, out;
};
// Sizes that are not multiples of a warp or a tile, single rows/columns, and BERT-sized layers.
const LinearShape kLinearShapes[] = {{1, 1, 1},     {3, 31, 33},      {5, 33, 1},
                                     {7, 1000, 31}, {257, 768, 1000}, {64, 1024, 768}};

std::string describe(const LinearShape& s) {
  return "rows " + std::to_string(s.rows) + ", in " + std::to_string(s.in) + ", out " + std::to_string(s.out);
}

template <typename T>
class CudaLinear : public ::testing::Test {};
using Dtypes = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(CudaLinear, Dtypes);

TYPED_TEST(CudaLinear, ForwardMatchesCpu) {
  BERTRAIN_REQUIRE_GPU();
  using T = TypeParam;
  GpuContext gpu(0, kReductionWorkspace);
  const Tolerance tol = LinearTolerances<T>::out;
  for (const LinearShape& s : kLinearShapes) {
    for (bool with_bias : {true, false}) {
      SCOPED_TRACE(describe(s) + (with_bias ? ", bias" : ", no bias"));
      const std::size_t nx = static_cast<std::size_t>(s.rows) * s.in, ny = static_cast<std::size_t>(s.rows) * s.out;
      const std::vector<float> x = make_input<T>(nx, 1), w = make_input<T>(static_cast<std::size_t>(s.out) * s.in, 2);
      const std::vector<float> b = make_input<T>(s.out, 3);
      std::vector<float> ref(ny);
      linear_forward_cpu<float>(ref.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, s.rows, s.in, s.out);

      DeviceBuffer<T> dx_ = to_device<T>(x), dw_ = to_device<T>(w), db_ = to_device<T>(b), dy_(ny);
      poison(dy_);
      sync_device();
      linear_forward_cuda<T>(gpu.handles(), dy_.data(), dx_.data(), dw_.data(), with_bias ? db_.data() : nullptr,
                             s.rows, s.in, s.out);
      sync_device();
      const std::vector<float> got = to_host(dy_);
      if (std::is_same_v<T, bf16> && with_bias) {
        std::vector<float> product(ny);
        linear_forward_cpu<float>(product.data(), x.data(), w.data(), nullptr, s.rows, s.in, s.out);
        EXPECT_TRUE(within_two_bf16_roundings("y", got, ref, product));
      } else {
        EXPECT_TRUE(all_close("y", got.data(), ref.data(), ny, tol.atol, tol.rtol));
      }
    }
  }
}

TYPED_TEST(CudaLinear, BackwardMatchesCpu) {
  BERTRAIN_REQUIRE_GPU();
  using T = TypeParam;
  GpuContext gpu(0, kReductionWorkspace);
  using Tol = LinearTolerances<T>;
  for (const LinearShape& s : kLinearShapes) {
    // {accumulate_dx, dx wanted, db wanted}: plain, accumulating, and the optional outputs left out.
    const bool variants[][3] = {{false, true, true}, {true, true, true}, {false, false, true}, {true, true, false},
                                {false, false, false}};
    for (const auto& variant : variants) {
      const bool accumulate = variant[0], want_dx = variant[1], want_db = variant[2];
      SCOPED_TRACE(describe(s) + ", accumulate_dx " + std::to_string(accumulate) + ", dx " + std::to_string(want_dx) +
                   ", db " + std::to_string(want_db));
      const std::size_t nx = static_cast<std::size_t>(s.rows) * s.in, ny = static_cast<std::size_t>(s.rows) * s.out;
      const std::size_t nw = static_cast<std::size_t>(s.out) * s.in;
      const std::vector<float> x = make_input<T>(nx, 11), w = make_input<T>(nw, 12), dy = make_input<T>(ny, 13);
      const std::vector<float> dx0 = make_input<T>(nx, 14);  // what dx holds before an accumulating call
      std::vector<float> ref_dx = dx0, ref_dw(nw), ref_db(s.out);
      linear_backward_cpu<float>(ref_dx.data(), ref_dw.data(), ref_db.data(), dy.data(), x.data(), w.data(), s.rows,
                                 s.in, s.out, accumulate);

      DeviceBuffer<T> x_ = to_device<T>(x), w_ = to_device<T>(w), dy_ = to_device<T>(dy), dx_ = to_device<T>(dx0);
      DeviceBuffer<float> dw_(nw), db_(s.out);
      if (want_dx && !accumulate) poison(dx_);
      poison(dw_);
      poison(db_);
      sync_device();
      linear_backward_cuda<T>(gpu.handles(), want_dx ? dx_.data() : nullptr, dw_.data(), want_db ? db_.data() : nullptr,
                              dy_.data(), x_.data(), w_.data(), s.rows, s.in, s.out, accumulate);
      sync_device();
      const std::vector<float> got_dw = dw_.download();
      EXPECT_TRUE(all_close("dw", got_dw.data(), ref_dw.data(), nw, Tol::weight.atol, Tol::weight.rtol));
      if (want_dx && std::is_same_v<T, bf16> && accumulate) {
        std::vector<float> product(nx), unused_dw(nw);
        linear_backward_cpu<float>(product.data(), unused_dw.data(), nullptr, dy.data(), x.data(), w.data(), s.rows,
                                   s.in, s.out, false);
        EXPECT_TRUE(within_two_bf16_roundings("dx", to_host(dx_), ref_dx, product));
      } else if (want_dx) {
        const std::vector<float> got_dx = to_host(dx_);
        EXPECT_TRUE(all_close("dx", got_dx.data(), ref_dx.data(), nx, Tol::out.atol, Tol::out.rtol));
      } else {
        const std::vector<float> got_dx = to_host(dx_);  // left alone
        EXPECT_EQ(0, std::memcmp(got_dx.data(), dx0.data(), nx * sizeof(float))) << "dx was written although null";
      }
      if (want_db) {
        const std::vector<float> got_db = db_.download();
        EXPECT_TRUE(all_close("db", got_db.data(), ref_db.data(), s.out, Tol::bias.atol, Tol::bias.rtol));
      } else {
        const std::vector<float> got_db = db_.download();  // still the poison: nothing written
        for (float v : got_db) ASSERT_TRUE(std::isnan(v)) << "db was written although null";
      }
    }
  }
}

TYPED_TEST(CudaLinear, BiasAddIsExact) {
  BERTRAIN_REQUIRE_GPU();
  using T = TypeParam;
  // One addition in float and one rounding to T, on both sides: bit-identical.
  const int shapes[][2] = {{1, 1}, {3, 33}, {257, 1000}};  // rows, cols
  for (const auto& shape : shapes) {
    const int rows = shape[0], cols = shape[1];
    SCOPED_TRACE("rows " + std::to_string(rows) + ", cols " + std::to_string(cols));
    const std::size_t n = static_cast<std::size_t>(rows) * cols;
    const std::vector<float> y = make_input<T>(n, 21), b = make_input<T>(cols, 22);
    std::vector<float> ref(n);
    for (std::size_t i = 0; i < n; ++i) ref[i] = y[i] + b[i % cols];
    if constexpr (std::is_same_v<T, bf16>) ref = bf16_rounded(ref);
    DeviceBuffer<T> y_ = to_device<T>(y), b_ = to_device<T>(b);
    sync_device();
    bias_add_cuda<T>(y_.data(), b_.data(), rows, cols, nullptr);  // the legacy default stream
    sync_device();
    const std::vector<float> got = to_host(y_);
    EXPECT_TRUE(all_close("y + b", got.data(), ref.data(), n, 0.0, 0.0));
  }
}

TYPED_TEST(CudaLinear, ColumnSumIsDeterministic) {
  BERTRAIN_REQUIRE_GPU();
  using T = TypeParam;
  GpuContext gpu(0, kReductionWorkspace);
  const Tolerance tol = LinearTolerances<T>::bias;
  // Rows below, at and above kReductionChunks, and not multiples of it.
  const int row_counts[] = {1, 3, 63, 64, 65, 257, 4099};
  const int col_counts[] = {1, 31, 33, 768, 1000, 1024};
  for (int rows : row_counts) {
    for (int cols : col_counts) {
      SCOPED_TRACE("rows " + std::to_string(rows) + ", cols " + std::to_string(cols));
      const std::size_t n = static_cast<std::size_t>(rows) * cols;
      const std::vector<float> x = make_input<T>(n, 31);
      std::vector<double> exact(cols, 0.0);
      for (std::size_t i = 0; i < n; ++i) exact[i % cols] += x[i];
      DeviceBuffer<T> x_ = to_device<T>(x);
      DeviceBuffer<float> first(cols), second(cols);
      poison(first);
      poison(second);
      BERTRAIN_CUDA_CHECK(cudaMemset(gpu.handles().workspace, 0xff, gpu.handles().workspace_elements * sizeof(float)));
      sync_device();
      column_sum_cuda<T>(gpu.handles(), first.data(), x_.data(), rows, cols);
      column_sum_cuda<T>(gpu.handles(), second.data(), x_.data(), rows, cols);
      sync_device();
      const std::vector<float> got = first.download();
      EXPECT_TRUE(all_close("column sum", got.data(), exact.data(), cols, tol.atol, tol.rtol));
      EXPECT_TRUE(bitwise_equal(first, second)) << "two column sums of the same input differ";
    }
  }
}

// ---- Linear backward, mixed precision: dx in float -----------------------------------------------------------
// bf16 dy, x and W, fp32 C: dx is the CPU's float dy·W of the same (bf16-representable) values up to fp32
// accumulation order. The value dx accumulates onto is full float precision, so a GEMM that rounded C to bf16
// would fail. For T = float the same call resolves to the all-float template (what the model relies on).

TYPED_TEST(CudaLinear, MixedPrecisionBackwardWritesFloatDx) {
  BERTRAIN_REQUIRE_GPU();
  using T = TypeParam;
  GpuContext gpu(0, kReductionWorkspace);
  // fp32 outputs for both T: fp32's own tolerance for float, bf16's weight-gradient one (tensor-core accumulation
  // order) for bf16 operands.
  const Tolerance out_tol = std::is_same_v<T, float> ? LinearTolerances<float>::out : LinearTolerances<bf16>::weight;
  const Tolerance bias_tol = LinearTolerances<T>::bias;
  for (const LinearShape& s : kLinearShapes) {
    for (bool accumulate : {false, true}) {
      SCOPED_TRACE(describe(s) + ", accumulate_dx " + std::to_string(accumulate));
      const std::size_t nx = static_cast<std::size_t>(s.rows) * s.in, ny = static_cast<std::size_t>(s.rows) * s.out;
      const std::size_t nw = static_cast<std::size_t>(s.out) * s.in;
      const std::vector<float> x = make_input<T>(nx, 51), w = make_input<T>(nw, 52), dy = make_input<T>(ny, 53);
      const std::vector<float> dx0 = random_floats(nx, 54);  // full float precision
      std::vector<float> ref_dx = dx0, ref_dw(nw), ref_db(s.out);
      linear_backward_cpu<float>(ref_dx.data(), ref_dw.data(), ref_db.data(), dy.data(), x.data(), w.data(), s.rows,
                                 s.in, s.out, accumulate);

      DeviceBuffer<T> x_ = to_device<T>(x), w_ = to_device<T>(w), dy_ = to_device<T>(dy);
      DeviceBuffer<float> dx_(dx0), dw_(nw), db_(s.out);
      if (!accumulate) poison(dx_);
      poison(dw_);
      poison(db_);
      sync_device();
      float* dx = dx_.data();
      linear_backward_cuda(gpu.handles(), dx, dw_.data(), db_.data(), static_cast<const T*>(dy_.data()),
                           static_cast<const T*>(x_.data()), static_cast<const T*>(w_.data()), s.rows, s.in, s.out,
                           accumulate);
      sync_device();
      const std::vector<float> got_dx = dx_.download(), got_dw = dw_.download(), got_db = db_.download();
      EXPECT_TRUE(all_close("dx (float)", got_dx.data(), ref_dx.data(), nx, out_tol.atol, out_tol.rtol));
      EXPECT_TRUE(all_close("dw", got_dw.data(), ref_dw.data(), nw, out_tol.atol, out_tol.rtol));
      EXPECT_TRUE(all_close("db", got_db.data(), ref_db.data(), s.out, bias_tol.atol, bias_tol.rtol));
    }
  }
}

// The model's Q/K/V pattern: three branches written (=) then accumulated (+=) into one float dx, then their sum
// compared with the CPU's. Three fp32 roundings of partial sums: 3× the single-GEMM tolerance.
TYPED_TEST(CudaLinear, MixedPrecisionBranchesAccumulateInFloat) {
  BERTRAIN_REQUIRE_GPU();
  using T = TypeParam;
  GpuContext gpu(0, kReductionWorkspace);
  const Tolerance one = std::is_same_v<T, float> ? LinearTolerances<float>::out : LinearTolerances<bf16>::weight;
  const Tolerance tol{3 * one.atol, 3 * one.rtol};
  for (const LinearShape& s : kLinearShapes) {
    SCOPED_TRACE(describe(s));
    const std::size_t nx = static_cast<std::size_t>(s.rows) * s.in, ny = static_cast<std::size_t>(s.rows) * s.out;
    const std::size_t nw = static_cast<std::size_t>(s.out) * s.in;
    const std::vector<float> x = make_input<T>(nx, 61);
    std::vector<float> ref_dx(nx, 0.0f), ref_dw(nw);
    std::vector<DeviceBuffer<T>> dys, ws;
    for (uint32_t branch = 0; branch < 3; ++branch) {
      const std::vector<float> w = make_input<T>(nw, 62 + 2 * branch), dy = make_input<T>(ny, 63 + 2 * branch);
      linear_backward_cpu<float>(ref_dx.data(), ref_dw.data(), nullptr, dy.data(), x.data(), w.data(), s.rows, s.in,
                                 s.out, branch > 0);
      dys.push_back(to_device<T>(dy));
      ws.push_back(to_device<T>(w));
    }
    DeviceBuffer<T> x_ = to_device<T>(x);
    DeviceBuffer<float> dx_(nx), dw_(nw);
    poison(dx_);
    sync_device();
    for (int branch = 0; branch < 3; ++branch) {
      linear_backward_cuda(gpu.handles(), dx_.data(), dw_.data(), static_cast<float*>(nullptr),
                           static_cast<const T*>(dys[branch].data()), static_cast<const T*>(x_.data()),
                           static_cast<const T*>(ws[branch].data()), s.rows, s.in, s.out, branch > 0);
    }
    sync_device();
    const std::vector<float> got_dx = dx_.download();
    EXPECT_TRUE(all_close("dx of three branches", got_dx.data(), ref_dx.data(), nx, tol.atol, tol.rtol));
  }
}

// ---- Attention ------------------------------------------------------------------------------------------

template <typename T>
struct AttentionTolerances;
template <>
struct AttentionTolerances<float> {
  static Tolerance probs(double) { return {1e-6, 1e-4}; }
  static Tolerance values(double) { return {1e-5, 1e-4}; }
};
template <>
struct AttentionTolerances<bf16> {
  // The fp32 softmax rounded once (see the top of the file); only real (row, key) entries are compared.
  static Tolerance probs(double) { return {1e-6, 5e-3}; }
  // + 1e-6: in a row of one token dq and dk are exactly zero (a one-key softmax has no gradient).
  static Tolerance values(double scale) { return {2e-2 * scale + 1e-6, 2e-2}; }
};

struct AttentionCase {
  std::vector<int> lengths;  // the rows of the packed batch
  int heads, head_dim;
  float dropout_p;
  int64_t first_sample;
  int max_positions;
};

// Ragged batches: every row of length 1 (S = 1, with and without dropout); short mixed rows with hidden 32..1024 (33
// for a head dim that is no multiple of 8); mixed lengths 1..512 in a few rows; one row of 512; 64 rows of mixed
// lengths. Dropout with first_sample > 0, max_positions > S and max_positions < S (which counts as S). The longest
// row is never only row 0, so padding sits between real rows of the GPU's padded blocks.
const std::vector<AttentionCase>& attention_cases() {
  static const std::vector<AttentionCase> cases = {
      {{1, 1}, 2, 16, 0.0f, 0, 1},
      {std::vector<int>(5, 1), 2, 16, 0.1f, 4, 512},
      {{7, 5, 4}, 2, 16, 0.1f, 4, 512},
      {{2, 7, 7}, 3, 11, 0.5f, 0, 3},
      {{7, 1, 3, 6}, 2, 16, 0.1f, 2, 9},
      {{64, 33}, 12, 64, 0.1f, 2, 512},
      {{85, 128, 64}, 16, 64, 0.0f, 0, 512},
      {{128, 1, 100}, 16, 64, 0.1f, 1, 512},
      {{170, 512, 1, 73, 2}, 4, 32, 0.1f, 3, 512},
      {{512}, 4, 32, 0.1f, 7, 512},
      {mixed_lengths(64, 96, 23), 2, 16, 0.1f, 5, 128},
  };
  return cases;
}

std::string describe(const AttentionCase& c) {
  return describe_lengths(c.lengths) + ", NH " + std::to_string(c.heads) + ", HD " + std::to_string(c.head_dim) +
         ", p " + std::to_string(c.dropout_p) + ", first_sample " + std::to_string(c.first_sample) +
         ", max_positions " + std::to_string(c.max_positions);
}

// Head-major copy [B, NH, S, HD] of a packed [T, H] tensor, zero beyond each row's L_b tokens (the GPU's padded
// qh, kh, vh).
std::vector<float> split_heads(const std::vector<float>& x, const AttentionCase& c) {
  const std::vector<int32_t> cu = row_offsets(c.lengths);
  const std::size_t B = c.lengths.size(), S = static_cast<std::size_t>(longest_of(c.lengths));
  const std::size_t NH = static_cast<std::size_t>(c.heads), HD = static_cast<std::size_t>(c.head_dim);
  std::vector<float> out(B * NH * S * HD, 0.0f);
  for (std::size_t b = 0; b < B; ++b) {
    for (std::size_t h = 0; h < NH; ++h) {
      for (std::size_t s = 0; s < static_cast<std::size_t>(c.lengths[b]); ++s) {
        for (std::size_t d = 0; d < HD; ++d) {
          out[((b * NH + h) * S + s) * HD + d] = x[((static_cast<std::size_t>(cu[b]) + s) * NH + h) * HD + d];
        }
      }
    }
  }
  return out;
}

// The real entries of the GPU's padded probs [B, NH, S, S] in the CPU's ragged layout: block (b, h) at offset
// NH·Σ_{b' < b} L_b'² + h·L_b², row-major L_b × L_b (kernels/attention.h). Entries of padded queries or keys are
// unspecified and left out; a padded key that leaked into the softmax would still show, as real probabilities
// too small.
std::vector<float> real_probabilities(const std::vector<float>& padded, const AttentionCase& c) {
  const std::size_t S = static_cast<std::size_t>(longest_of(c.lengths)), NH = static_cast<std::size_t>(c.heads);
  std::vector<float> out;
  for (std::size_t b = 0; b < c.lengths.size(); ++b) {
    const std::size_t L = static_cast<std::size_t>(c.lengths[b]);
    for (std::size_t h = 0; h < NH; ++h) {
      for (std::size_t i = 0; i < L; ++i) {
        const float* row = padded.data() + ((b * NH + h) * S + i) * S;
        out.insert(out.end(), row, row + L);
      }
    }
  }
  return out;
}

template <typename T>
class CudaAttention : public ::testing::Test {};
TYPED_TEST_SUITE(CudaAttention, Dtypes);

TYPED_TEST(CudaAttention, ForwardAndBackwardMatchCpu) {
  BERTRAIN_REQUIRE_GPU();
  using T = TypeParam;
  using Tol = AttentionTolerances<T>;
  GpuContext gpu(0, kReductionWorkspace);
  const RandomKey key{0x5eed1234abcdULL, 17, 9};
  bool checked_determinism = false;
  for (const AttentionCase& c : attention_cases()) {
    SCOPED_TRACE(describe(c));
    const std::vector<int32_t> cu = row_offsets(c.lengths);
    const int B = static_cast<int>(c.lengths.size()), S = longest_of(c.lengths), NH = c.heads, HD = c.head_dim;
    const int tokens = cu.back();
    const std::size_t n = static_cast<std::size_t>(tokens) * NH * HD;       // packed [T, H]
    const std::size_t nh = static_cast<std::size_t>(B) * S * NH * HD;       // padded [B, NH, S, HD]
    const std::size_t np = static_cast<std::size_t>(B) * NH * S * S;        // padded [B, NH, S, S]
    const std::size_t np_cpu = attention_probs_elements(cu.data(), B, NH);  // ragged NH·ΣL_b²
    const DropoutLayout layout{c.first_sample, c.max_positions, 0};
    const std::vector<float> q = make_input<T>(n, 41), k = make_input<T>(n, 42), v = make_input<T>(n, 43);
    const std::vector<float> dctx = make_input<T>(n, 44);

    std::vector<float> ref_ctx(n), ref_probs(np_cpu), ref_dq(n), ref_dk(n), ref_dv(n);
    std::vector<float> scratch(attention_scratch_elements(S, omp_get_max_threads()));
    attention_forward_cpu<float>(ref_ctx.data(), ref_probs.data(), q.data(), k.data(), v.data(), cu.data(), B, NH, HD,
                                 c.dropout_p, key, scratch.data(), layout);
    attention_backward_cpu<float>(ref_dq.data(), ref_dk.data(), ref_dv.data(), dctx.data(), ref_probs.data(), q.data(),
                                  k.data(), v.data(), cu.data(), B, NH, HD, c.dropout_p, key, scratch.data(), layout);

    DeviceBuffer<T> q_ = to_device<T>(q), k_ = to_device<T>(k), v_ = to_device<T>(v), dctx_ = to_device<T>(dctx);
    DeviceBuffer<int32_t> cu_(cu);  // the launchers read the row offsets on the device
    DeviceBuffer<T> ctx_(n), probs_(np), qh_(nh), kh_(nh), vh_(nh), dq_(n), dk_(n), dv_(n);
    DeviceBuffer<T> workspace(attention_workspace_elements_cuda(B, S, NH, HD));
    for (DeviceBuffer<T>* d : {&ctx_, &probs_, &qh_, &kh_, &vh_, &dq_, &dk_, &dv_, &workspace}) poison(*d);
    sync_device();
    auto run = [&](DeviceBuffer<T>& ctx, DeviceBuffer<T>& probs, DeviceBuffer<T>& dq, DeviceBuffer<T>& dk,
                   DeviceBuffer<T>& dv) {
      attention_forward_cuda<T>(gpu.handles(), ctx.data(), probs.data(), qh_.data(), kh_.data(), vh_.data(), q_.data(),
                                k_.data(), v_.data(), cu_.data(), B, tokens, S, NH, HD, c.dropout_p, key, layout,
                                workspace.data());
      attention_backward_cuda<T>(gpu.handles(), dq.data(), dk.data(), dv.data(), dctx_.data(), probs.data(),
                                 qh_.data(), kh_.data(), vh_.data(), cu_.data(), B, tokens, S, NH, HD, c.dropout_p,
                                 key, layout, workspace.data());
    };
    run(ctx_, probs_, dq_, dk_, dv_);
    sync_device();

    // The head-major copies are plain permutations with zero padding: exact, padding included (the GEMMs read it).
    const std::vector<float> got_qh = to_host(qh_), got_kh = to_host(kh_), got_vh = to_host(vh_);
    EXPECT_TRUE(all_close("qh", got_qh.data(), split_heads(q, c).data(), nh, 0.0, 0.0));
    EXPECT_TRUE(all_close("kh", got_kh.data(), split_heads(k, c).data(), nh, 0.0, 0.0));
    EXPECT_TRUE(all_close("vh", got_vh.data(), split_heads(v, c).data(), nh, 0.0, 0.0));

    // The real entries of each (row, head) block, in the CPU's ragged layout (the index in the failure is the CPU's).
    const std::vector<float> got_probs = real_probabilities(to_host(probs_), c);
    ASSERT_EQ(got_probs.size(), np_cpu);
    const Tolerance tp = Tol::probs(max_abs(ref_probs));
    EXPECT_TRUE(all_close("probs", got_probs.data(), ref_probs.data(), np_cpu, tp.atol, tp.rtol));
    // Every packed token's context and gradients (all poisoned before): tokens of every row written, none missed.
    struct Output {
      const char* name;
      const DeviceBuffer<T>* got;
      const std::vector<float>* ref;
    };
    for (const Output& o : {Output{"ctx", &ctx_, &ref_ctx}, Output{"dq", &dq_, &ref_dq}, Output{"dk", &dk_, &ref_dk},
                            Output{"dv", &dv_, &ref_dv}}) {
      const std::vector<float> got = to_host(*o.got);
      const Tolerance t = Tol::values(max_abs(*o.ref));
      EXPECT_TRUE(all_close(o.name, got.data(), o.ref->data(), n, t.atol, t.rtol));
    }

    // Run to run bit-identical (no atomics; cuBLAS is deterministic on one stream), once with dropout.
    if (c.dropout_p > 0.0f && !checked_determinism) {
      checked_determinism = true;
      DeviceBuffer<T> ctx2(n), probs2(np), dq2(n), dk2(n), dv2(n);
      run(ctx2, probs2, dq2, dk2, dv2);
      sync_device();
      EXPECT_TRUE(bitwise_equal(ctx_, ctx2) && bitwise_equal(dq_, dq2) && bitwise_equal(dk_, dk2) &&
                  bitwise_equal(dv_, dv2))
          << "a second identical attention forward/backward gave different bits";
      const std::vector<float> first = real_probabilities(to_host(probs_), c),
                               second = real_probabilities(to_host(probs2), c);
      EXPECT_EQ(0, std::memcmp(first.data(), second.data(), first.size() * sizeof(float)))
          << "a second identical attention forward gave different probabilities";
    }
  }
}

// ---- Host-side validation: these throw before anything touches the device, so they run without a GPU. ------

// Expects an Error whose message contains `needle` (so a CUDA error from a missing device cannot pass for it).
template <typename F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error thrown; expected one mentioning \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(CudaGemmAttentionChecks, ColumnSumNeedsEnoughWorkspace) {
  std::vector<float> host(64);
  GpuHandles handles;
  handles.workspace = host.data();
  handles.workspace_elements = static_cast<std::size_t>(kReductionChunks) * 10 - 1;
  // Pointers are never dereferenced: the workspace check comes first.
  expect_error([&] { column_sum_cuda<float>(handles, host.data(), host.data(), 5, 10); }, "workspace");
  expect_error([&] { column_sum_cuda<float>(handles, host.data(), host.data(), 0, 10); }, "rows 0");
}

TEST(CudaGemmAttentionChecks, AttentionRejectsOverlapAndBadArguments) {
  // Two full rows of S tokens (T = B·S), so the packed [T, H] and the padded [B, NH, S, HD] tensors are both n long.
  const int B = 2, S = 7, NH = 2, HD = 4, T = B * S;
  const std::size_t n = static_cast<std::size_t>(B) * S * NH * HD, np = static_cast<std::size_t>(B) * NH * S * S;
  const std::size_t nw = attention_workspace_elements_cuda(B, S, NH, HD);
  EXPECT_GE(nw, 2 * np + 4 * n);
  // Host memory standing in for device buffers: every call below fails its checks before any launch.
  std::vector<float> arena(8 * n + 2 * np + nw);
  float* ctx = arena.data();
  float* qh = ctx + n;
  float* kh = qh + n;
  float* vh = kh + n;
  float* q = vh + n;
  float* k = q + n;
  float* v = k + n;
  float* dctx = v + n;
  float* probs = dctx + n;
  float* workspace = probs + np;
  const std::vector<int32_t> cu_seqlens = {0, S, T};  // never read on the host
  const GpuHandles no_blas;  // a valid call gets as far as the handle check
  const RandomKey key;
  const DropoutLayout layout;
  auto forward_tokens = [&](float* c, float* w, float p, int tokens) {
    attention_forward_cuda<float>(no_blas, c, probs, qh, kh, vh, q, k, v, cu_seqlens.data(), B, tokens, S, NH, HD, p,
                                  key, layout, w);
  };
  auto forward = [&](float* c, float* w, float p) { forward_tokens(c, w, p, T); };
  auto backward = [&](float* dq, float* w) {
    attention_backward_cuda<float>(no_blas, dq, q, k, dctx, probs, qh, kh, vh, cu_seqlens.data(), B, T, S, NH, HD,
                                   0.1f, key, layout, w);
  };
  expect_error([&] { forward(ctx, workspace, 0.1f); }, "no cuBLAS handle");
  expect_error([&] { forward(ctx, workspace, 1.0f); }, "dropout");
  // T must lie in [B, B·S]: more tokens than the padded blocks hold, or a row without tokens.
  expect_error([&] { forward_tokens(ctx, workspace, 0.1f, T + 1); }, "tokens in");
  expect_error([&] { forward_tokens(ctx, workspace, 0.1f, B - 1); }, "tokens in");
  expect_error([&] { forward(ctx, probs + 1, 0.1f); }, "overlap");  // workspace over probs
  expect_error([&] { forward(q, workspace, 0.1f); }, "overlap");     // ctx over q
  // Backward: dq, dk, dv are the (otherwise unused here) q and k buffers and dctx's neighbour.
  expect_error([&] { backward(ctx, workspace); }, "no cuBLAS handle");
  expect_error([&] { backward(ctx, workspace - 1); }, "overlap");  // workspace over probs
  expect_error([&] { backward(qh, workspace); }, "overlap");       // dq over qh
  expect_error([&] { attention_workspace_elements_cuda(B, 0, NH, HD); }, "seq 0");
}

}  // namespace
}  // namespace bertrain

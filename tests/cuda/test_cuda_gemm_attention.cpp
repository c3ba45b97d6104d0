// The GEMM-based CUDA kernels (kernels/cuda/linear.cu) and the fused attention kernels (kernels/cuda/attention.cu)
// against their CPU twins, for T = float and T = bf16; attention over ragged packed batches. bf16 inputs are rounded
// to bf16 first (bf16_rounded), so the fp32 CPU twin sees exactly the values the bf16 kernel reads; differences then
// come only from the kernel's bf16 outputs and intermediates.
//
// Tolerances (atol + rtol·|ref|):
//  - float: GPU and CPU both compute in fp32 and differ only in summation order. A sum of k ≤ 1024 products of
//    values in [-1, 1] (|sum| up to ~50) carries ~3e-5 absolute rounding error per side, hence atol 1e-4,
//    rtol 1e-5 for the linear layer. Attention: ctx and the gradients are O(1) convex combinations or sums of ≤ 512
//    small terms, and the GPU's online softmax (running max, rescaled sums, the dropout scale folded into the final
//    1/l) differs from the CPU's two-pass softmax only in rounding, hence atol 1e-5, rtol 1e-4; lse (|lse| ≲ 10) is a
//    few ulps off, hence atol 1e-5, rtol 1e-5.
//  - bf16: bf16 has 8 mantissa bits, so one rounding of an output is up to 2^-9 ≈ 2e-3 relative (2^-8 just
//    above a power of two). The linear outputs are rounded once (rtol 1e-2, atol 1e-3). Attention scores and softmax
//    statistics are fp32 (exact bf16 products accumulated in fp32 on the tensor cores), so lse stays near fp32: atol
//    5e-5, rtol 2e-5 (room for the tensor cores' accumulation order). ctx and the gradients see the probabilities
//    rounded to bf16 before P·V (and P̃ᵀ·dctx), dS rounded before dS·K and dSᵀ·Q, and their own rounding on output
//    (the padded engine's emulation of such roundings measured errors up to 6e-3 of the largest |ref|), hence atol
//    2e-2·max|ref| and rtol 2e-2, with dq, dk and dv compared separately, each against its own largest value (dv is
//    larger than dq and dk, and would loosen their atol). The backward is compared with the twin run on the GPU's own
//    ctx and lse (ForwardAndBackwardMatchCpu says why).
//    Weight and bias gradients, and dx of the mixed-precision linear backward (bf16 operands, fp32 C), are fp32
//    outputs of exact bf16 inputs: near-fp32 tolerances.
//  Wrong indexing, a wrong transpose or a different dropout mask gives errors of the order of the values
//  themselves; a single mismatched dropout element moves ctx by ~P·v ≥ 1e-3, far above the float tolerance.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/linear.h"
#include "tests/cuda/gpu_test.h"
#include "tests/scoped_env.h"
#include "tests/tolerance.h"

namespace bertrain {
namespace {

using testing::all_close;
using testing::bf16_rounded;
using testing::bitwise_equal;
using testing::describe_lengths;
using testing::longest_of;
using testing::make_input;
using testing::mixed_lengths;
using testing::poison;
using testing::random_floats;
using testing::row_offsets;
using testing::to_bf16;
using testing::to_device;
using testing::to_float;
using testing::to_host;

// The context's streams are non-blocking: uploads (legacy stream) and launches (context stream) are not ordered
// with each other, so tests synchronise the whole device between setting up, launching and downloading.
void sync_device() { BERTRAIN_CUDA_CHECK(cudaDeviceSynchronize()); }


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
  static Tolerance values(double) { return {1e-5, 1e-4}; }
  static Tolerance lse() { return {1e-5, 1e-5}; }
};
template <>
struct AttentionTolerances<bf16> {
  // + 1e-6: in a row of one token dq and dk are zero up to rounding (a one-key softmax has no gradient).
  static Tolerance values(double scale) { return {2e-2 * scale + 1e-6, 2e-2}; }
  static Tolerance lse() { return {5e-5, 2e-5}; }
};

struct AttentionCase {
  std::string name;
  std::vector<int> lengths;  // the rows of the packed batch
  int heads, head_dim;
  float dropout_p;
  int64_t first_sample;
  int max_positions;  // the dropout indices' P is max(max_positions, S)
};

// The ragged sets every packed kernel is checked on (gpu_test.h: every row of length 1; mixed lengths 1..512 with the
// longest not first; one row of 512; 64 mixed rows) at BERT's head dim 64 (the fast path), without dropout, and with
// dropout and first_sample > 0. Then the generic path: head dims 24, 8 and 40 (padded to 32, 16 and 48 inside the
// kernels), 33 (rows not 16-byte aligned: scalar tile loads), 128 (32-token tiles) and 200 (16-token tiles); P = 65 and
// P = 130 (not multiples of 4, so a lane's four keys straddle two Philox groups; 65 also has max_positions < S); and
// 12 heads.
std::vector<AttentionCase> attention_cases() {
  std::vector<AttentionCase> cases;
  for (const testing::RaggedRows& rows : testing::ragged_row_sets(512, 23)) {
    cases.push_back({rows.name, rows.lengths, 2, 64, 0.0f, 0, 1});
    cases.push_back({rows.name, rows.lengths, 2, 64, 0.1f, 3, 512});
  }
  cases.push_back({"head_dim 24", mixed_lengths(9, 100, 31), 3, 24, 0.1f, 1, 128});
  cases.push_back({"head_dim 8, P 65", {7, 1, 3, 6, 65}, 2, 8, 0.1f, 2, 9});
  cases.push_back({"head_dim 40, P 130", {130, 17, 64}, 2, 40, 0.1f, 0, 130});
  cases.push_back({"head_dim 33", {70, 33, 1}, 2, 33, 0.1f, 2, 512});
  cases.push_back({"head_dim 128", {100, 31, 1}, 2, 128, 0.1f, 1, 512});
  cases.push_back({"head_dim 200", {40, 17}, 1, 200, 0.1f, 0, 512});
  cases.push_back({"12 heads", {128, 1, 100, 77}, 12, 64, 0.1f, 5, 512});
  return cases;
}

std::string describe(const AttentionCase& c) {
  return c.name + ": " + describe_lengths(c.lengths) + ", NH " + std::to_string(c.heads) + ", HD " +
         std::to_string(c.head_dim) + ", p " + std::to_string(c.dropout_p) + ", first_sample " +
         std::to_string(c.first_sample) + ", max_positions " + std::to_string(c.max_positions);
}

// One case's inputs (values representable in T): qkv [T, 3H], dctx [T, H].
struct AttentionData {
  AttentionCase c;
  std::vector<int32_t> cu;
  int batch = 0, longest = 0, tokens = 0;
  DropoutLayout layout;
  std::vector<float> qkv, dctx;
  int hidden() const { return c.heads * c.head_dim; }
  std::size_t hidden_elements() const { return static_cast<std::size_t>(tokens) * hidden(); }   // T·H
  std::size_t lse_elements() const { return static_cast<std::size_t>(tokens) * c.heads; }       // NH·T
};

// ctx [T, H], lse [NH, T], dqkv [T, 3H] as floats.
struct AttentionOutputs {
  std::vector<float> ctx, lse, dqkv;
};

AttentionData with_rows(const AttentionCase& c) {
  AttentionData d;
  d.c = c;
  d.cu = row_offsets(c.lengths);
  d.batch = static_cast<int>(c.lengths.size());
  d.longest = longest_of(c.lengths);
  d.tokens = d.cu.back();
  d.layout = DropoutLayout{c.first_sample, c.max_positions, 0, nullptr};
  return d;
}

template <typename T>
AttentionData attention_inputs(const AttentionCase& c) {
  AttentionData d = with_rows(c);
  d.qkv = make_input<T>(3 * d.hidden_elements(), 41);
  d.dctx = make_input<T>(d.hidden_elements(), 44);
  return d;
}

// The CPU twin's forward: ctx and lse (for bf16 inputs: the float twin on the same values).
AttentionOutputs cpu_forward(const AttentionData& d, const RandomKey& key) {
  AttentionOutputs o{std::vector<float>(d.hidden_elements()), std::vector<float>(d.lse_elements()), {}};
  std::vector<float> scratch(attention_scratch_elements(d.longest, omp_get_max_threads()));
  attention_forward_cpu<float>(o.ctx.data(), o.lse.data(), d.qkv.data(), d.cu.data(), d.batch, d.c.heads,
                               d.c.head_dim, d.c.dropout_p, key, scratch.data(), d.layout);
  return o;
}

// The CPU twin's dqkv from the given forward outputs.
std::vector<float> cpu_backward(const AttentionData& d, const std::vector<float>& ctx, const std::vector<float>& lse,
                                const RandomKey& key) {
  std::vector<float> dqkv(3 * d.hidden_elements());
  std::vector<float> scratch(attention_scratch_elements(d.longest, omp_get_max_threads()));
  attention_backward_cpu<float>(dqkv.data(), d.dctx.data(), ctx.data(), lse.data(), d.qkv.data(), d.cu.data(),
                                d.batch, d.c.heads, d.c.head_dim, d.c.dropout_p, key, scratch.data(), d.layout);
  return dqkv;
}

// Where gpu_attention writes: ctx and dqkv `offset` elements into their buffers (an odd offset leaves a bf16 output
// 2-byte aligned only), and, when set, BERTRAIN_ATTENTION_MMA for the backward alone.
struct OutputPlacement {
  int ctx_offset = 0, dqkv_offset = 0;
  const char* backward_mma = nullptr;
};

// The CUDA kernels, forward then backward from the device's own ctx and lse. Every output and the workspace are
// poisoned with NaN first, so an element a kernel fails to write (=) shows. With keep_mask, the forward is given a
// dropout mask buffer (filled with 0x5a bytes, no mask's words) and the backward reads it (the model's way).
template <typename T>
AttentionOutputs gpu_attention(const AttentionData& d, const RandomKey& key, CudaStream stream,
                               bool keep_mask = false, const OutputPlacement& at = {}) {
  const std::size_t n = d.hidden_elements();
  DeviceBuffer<T> qkv = to_device<T>(d.qkv), dctx = to_device<T>(d.dctx);
  DeviceBuffer<T> ctx_buffer(n + at.ctx_offset), dqkv_buffer(3 * n + at.dqkv_offset);
  T* const ctx = ctx_buffer.data() + at.ctx_offset;
  T* const dqkv = dqkv_buffer.data() + at.dqkv_offset;
  DeviceBuffer<float> lse(d.lse_elements());
  DeviceBuffer<float> workspace(attention_workspace_floats_cuda(d.tokens, d.c.heads, d.longest));
  DeviceBuffer<int32_t> cu(d.cu);  // the kernels read the row offsets on the device
  DeviceBuffer<uint32_t> mask(keep_mask ? attention_dropout_mask_words_cuda(d.tokens, d.c.heads, d.longest) : 0);
  poison(ctx_buffer);
  poison(dqkv_buffer);
  poison(lse);
  poison(workspace);
  if (keep_mask) BERTRAIN_CUDA_CHECK(cudaMemset(mask.data(), 0x5a, mask.bytes()));
  sync_device();
  attention_forward_cuda<T>(ctx, lse.data(), qkv.data(), cu.data(), d.batch, d.tokens, d.longest, d.c.heads,
                            d.c.head_dim, d.c.dropout_p, key, d.layout, stream, mask.data());
  {
    std::optional<testing::ScopedEnv> backward_setting;
    if (at.backward_mma != nullptr) backward_setting.emplace("BERTRAIN_ATTENTION_MMA", at.backward_mma);
    attention_backward_cuda<T>(dqkv, dctx.data(), ctx, lse.data(), qkv.data(), cu.data(), d.batch, d.tokens,
                               d.longest, d.c.heads, d.c.head_dim, d.c.dropout_p, key, d.layout, workspace.data(),
                               stream, mask.data());
  }
  sync_device();
  const auto past = [](std::vector<float> x, int offset) { return std::vector<float>(x.begin() + offset, x.end()); };
  return {past(to_host(ctx_buffer), at.ctx_offset), lse.download(), past(to_host(dqkv_buffer), at.dqkv_offset)};
}

// Part `part` (0: q, 1: k, 2: v) of a [T, 3H] tensor, as [T, H].
std::vector<float> qkv_part(const std::vector<float>& x, int part, int tokens, int hidden) {
  std::vector<float> out(static_cast<std::size_t>(tokens) * hidden);
  for (std::size_t t = 0; t < static_cast<std::size_t>(tokens); ++t) {
    const float* row = x.data() + t * 3 * hidden + static_cast<std::size_t>(part) * hidden;
    std::copy(row, row + hidden, out.data() + t * hidden);
  }
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

template <typename T>
class CudaAttention : public ::testing::Test {};
TYPED_TEST_SUITE(CudaAttention, Dtypes);

// Forward against the CPU twin's forward; backward against the CPU twin's backward run on the GPU's own ctx and lse
// (the inputs the GPU backward sees). Not end to end for the backward on purpose: in bf16 mode D = rowsum(dctx ∘ ctx)
// comes from the bf16-rounded ctx (as in FlashAttention), so in a one-token row, where dQ and dK are exactly zero in
// exact arithmetic, dS = dP − D is the ~3e-3 rounding of D rather than ~1e-7; fed the same ctx, the twin reproduces
// that, and what is left is the backward's own rounding.
// In bf16 both kernel families run: at head dim 64 the tensor-core kernels (kernels/cuda/attention_mma.cu) by default
// and the general ones under BERTRAIN_ATTENTION_MMA=0; elsewhere both settings run the general kernels.
TYPED_TEST(CudaAttention, ForwardAndBackwardMatchCpu) {
  BERTRAIN_REQUIRE_GPU();
  using T = TypeParam;
  using Tol = AttentionTolerances<T>;
  GpuContext gpu(0, kReductionWorkspace);
  const RandomKey key{0x5eed1234abcdULL, 17, 9};
  const std::vector<std::string> kernels =
      std::is_same<T, bf16>::value ? std::vector<std::string>{"1", "0"} : std::vector<std::string>{"1"};
  for (const std::string& mma : kernels) {
    const testing::ScopedEnv mma_setting("BERTRAIN_ATTENTION_MMA", mma.c_str());
    for (const AttentionCase& c : attention_cases()) {
      SCOPED_TRACE("BERTRAIN_ATTENTION_MMA=" + mma + ", " + describe(c));
      const AttentionData d = attention_inputs<T>(c);
      const AttentionOutputs got = gpu_attention<T>(d, key, gpu.stream());
      const AttentionOutputs ref = cpu_forward(d, key);
      const Tolerance tc = Tol::values(max_abs(ref.ctx)), tl = Tol::lse();
      EXPECT_TRUE(all_close("ctx", got.ctx.data(), ref.ctx.data(), ref.ctx.size(), tc.atol, tc.rtol));
      EXPECT_TRUE(all_close("lse", got.lse.data(), ref.lse.data(), ref.lse.size(), tl.atol, tl.rtol));
      const std::vector<float> ref_dqkv = cpu_backward(d, got.ctx, got.lse, key);
      const char* names[] = {"dq", "dk", "dv"};
      for (int part = 0; part < 3; ++part) {
        const std::vector<float> g = qkv_part(got.dqkv, part, d.tokens, d.hidden());
        const std::vector<float> r = qkv_part(ref_dqkv, part, d.tokens, d.hidden());
        const Tolerance t = Tol::values(max_abs(r));
        EXPECT_TRUE(all_close(names[part], g.data(), r.data(), r.size(), t.atol, t.rtol));
      }
    }
  }
}

// Every kept and dropped element, compared one by one through inputs that expose them. Q = 0, so every probability
// of a row of L keys is 1/L. Pattern "ctx, dv": V_j = e_(j mod HD) and dctx_i = e_(i mod HD) (one-hot), so ctx_i[d] =
// 1/((1 − p)·L) · #{kept j ≡ d} and dV_j[d] = 1/((1 − p)·L) · #{kept i ≡ d}. Pattern "dq": V_j = dctx_i = e_0, so
// dP = 1 everywhere, and K_j = e_(j mod HD), so dQ_i[d] = scale/L · Σ_(j ≡ d) (m_ij/(1 − p) − D_i). A count of at
// most ⌈512 / 64⌉ = 8 changes by at least 1/8 of a value when one mask bit differs, and a dQ value by 2·scale/L, both
// far outside 2 % of the largest value (the bf16 rounding of P, dS and the outputs stays well inside it). The bf16
// tolerance of ForwardAndBackwardMatchCpu could hide one wrong bit; this cannot. Lengths around the 64-token tiles and
// the 32-key mask words, and P = 130 (groups of four straddle rows).
TYPED_TEST(CudaAttention, DropoutMaskMatchesCpuElementByElement) {
  BERTRAIN_REQUIRE_GPU();
  using T = TypeParam;
  GpuContext gpu(0, kReductionWorkspace);
  const RandomKey key{0xd20b, 5, 1};
  const AttentionCase c{"one-hot", {1, 63, 64, 65, 130, 7, 127, 33}, 2, 64, 0.5f, 4, 130};
  for (const bool dq_pattern : {false, true}) {
    SCOPED_TRACE(dq_pattern ? "pattern dq" : "pattern ctx, dv");
    AttentionData d = with_rows(c);
    const std::size_t H = static_cast<std::size_t>(d.hidden());
    d.qkv.assign(3 * d.hidden_elements(), 0.0f);
    d.dctx.assign(d.hidden_elements(), 0.0f);
    for (int b = 0; b < d.batch; ++b) {
      for (int i = 0; i < c.lengths[b]; ++i) {
        const std::size_t token = static_cast<std::size_t>(d.cu[b] + i);
        for (int h = 0; h < c.heads; ++h) {
          const std::size_t head = static_cast<std::size_t>(h) * c.head_dim;
          const std::size_t own = head + static_cast<std::size_t>(i % c.head_dim);
          d.qkv[token * 3 * H + H + own] = 1.0f;                                  // K_j = e_(j mod HD)
          d.qkv[token * 3 * H + 2 * H + (dq_pattern ? head : own)] = 1.0f;       // V_j
          d.dctx[token * H + (dq_pattern ? head : own)] = 1.0f;                  // dctx_i
        }
      }
    }
    const AttentionOutputs got = gpu_attention<T>(d, key, gpu.stream());
    const AttentionOutputs ref = cpu_forward(d, key);
    const std::vector<float> ref_dqkv = cpu_backward(d, got.ctx, got.lse, key);
    const Tolerance tc{2e-2 * max_abs(ref.ctx), 2e-2};
    EXPECT_TRUE(all_close("ctx", got.ctx.data(), ref.ctx.data(), ref.ctx.size(), tc.atol, tc.rtol));
    const int part = dq_pattern ? 0 : 2;
    const std::vector<float> g = qkv_part(got.dqkv, part, d.tokens, d.hidden());
    const std::vector<float> r = qkv_part(ref_dqkv, part, d.tokens, d.hidden());
    const Tolerance t{2e-2 * max_abs(r), 2e-2};
    EXPECT_TRUE(all_close(dq_pattern ? "dq" : "dv", g.data(), r.data(), r.size(), t.atol, t.rtol));
    EXPECT_GT(max_abs(r), 0.0);
  }
}

// Run to run bit-identical (no atomics: every output element is written by one warp in a fixed order), on the fast
// path and on the generic one, with dropout.
TYPED_TEST(CudaAttention, RunsAreBitIdentical) {
  BERTRAIN_REQUIRE_GPU();
  using T = TypeParam;
  GpuContext gpu(0, kReductionWorkspace);
  const RandomKey key{0x5eed1234abcdULL, 18, 9};
  const AttentionCase cases[] = {{"fast path", {170, 512, 1, 73, 2, 511}, 4, 64, 0.1f, 3, 512},
                                 {"generic path", {130, 17, 64}, 2, 40, 0.1f, 0, 130}};
  for (const AttentionCase& c : cases) {
    SCOPED_TRACE(describe(c));
    const AttentionData d = attention_inputs<T>(c);
    const AttentionOutputs first = gpu_attention<T>(d, key, gpu.stream());
    const AttentionOutputs second = gpu_attention<T>(d, key, gpu.stream());
    EXPECT_TRUE(same_bits(first.ctx, second.ctx)) << "ctx differs between two identical runs";
    EXPECT_TRUE(same_bits(first.lse, second.lse)) << "lse differs between two identical runs";
    EXPECT_TRUE(same_bits(first.dqkv, second.dqkv)) << "dqkv differs between two identical runs";
  }
}

// The dropout mask the forward keeps for its backward (the model's way) gives the bits of the backward that draws the
// mask itself: the same ctx and lse, the same dqkv. The tensor-core forward stores the words it draws, so a wrong or
// missing word (the buffer starts as 0x5a bytes) changes dqkv; the general kernels ignore the buffer. Lengths around
// the 32-key words and 64-token tiles, one token, and a P that makes four-key groups straddle rows.
TYPED_TEST(CudaAttention, KeptDropoutMaskGivesTheSameBits) {
  BERTRAIN_REQUIRE_GPU();
  using T = TypeParam;
  GpuContext gpu(0, kReductionWorkspace);
  const RandomKey key{0x3a5c, 11, 4};
  const AttentionCase cases[] = {{"tensor-core shape", {170, 1, 31, 32, 33, 64, 65, 96, 200}, 3, 64, 0.1f, 2, 512},
                                 {"P = 130", {130, 7, 127}, 2, 64, 0.5f, 5, 130},
                                 {"other head dim", {130, 17, 64}, 2, 40, 0.1f, 0, 130}};
  const std::vector<std::string> kernels =
      std::is_same<T, bf16>::value ? std::vector<std::string>{"1", "0"} : std::vector<std::string>{"1"};
  for (const std::string& mma : kernels) {
    const testing::ScopedEnv mma_setting("BERTRAIN_ATTENTION_MMA", mma.c_str());
    for (const AttentionCase& c : cases) {
      SCOPED_TRACE("BERTRAIN_ATTENTION_MMA=" + mma + ", " + describe(c));
      const AttentionData d = attention_inputs<T>(c);
      const AttentionOutputs drawn = gpu_attention<T>(d, key, gpu.stream());
      const AttentionOutputs kept = gpu_attention<T>(d, key, gpu.stream(), true);
      EXPECT_TRUE(same_bits(drawn.ctx, kept.ctx)) << "ctx differs when the forward keeps its mask";
      EXPECT_TRUE(same_bits(drawn.lse, kept.lse)) << "lse differs when the forward keeps its mask";
      EXPECT_TRUE(same_bits(drawn.dqkv, kept.dqkv)) << "dqkv from the kept mask differs from the drawn mask's";
    }
  }
}

// Where every row has at most 64 tokens the tensor-core backward is one kernel (dQ from the dS the dK/dV kernel keeps
// in shared memory); it gives the two kernels' bits (BERTRAIN_ATTENTION_FUSED_BACKWARD=0), with and without dropout
// and with the forward's kept mask. Lengths around the 16-query warps and 32-key mask words, one token, 64. bf16 only:
// the tensor-core kernels' case.
TEST(CudaAttentionMma, FusedBackwardGivesTheTwoKernelsBits) {
  BERTRAIN_REQUIRE_GPU();
  using T = bf16;
  GpuContext gpu(0, kReductionWorkspace);
  const RandomKey key{0xf05e, 7, 2};
  const AttentionCase cases[] = {{"rows up to 64", {64, 1, 31, 32, 33, 15, 16, 17, 48}, 3, 64, 0.1f, 2, 512},
                                 {"no dropout", {40, 64, 9}, 2, 64, 0.0f, 0, 512},
                                 {"P = 66", {63, 2, 50}, 2, 64, 0.5f, 1, 66}};
  for (const AttentionCase& c : cases) {
    for (const bool keep_mask : {false, true}) {
      SCOPED_TRACE(describe(c) + (keep_mask ? ", kept mask" : ""));
      const AttentionData d = attention_inputs<T>(c);
      AttentionOutputs fused, two_kernels;
      {
        const testing::ScopedEnv setting("BERTRAIN_ATTENTION_FUSED_BACKWARD", "1");
        fused = gpu_attention<T>(d, key, gpu.stream(), keep_mask);
      }
      {
        const testing::ScopedEnv setting("BERTRAIN_ATTENTION_FUSED_BACKWARD", "0");
        two_kernels = gpu_attention<T>(d, key, gpu.stream(), keep_mask);
      }
      EXPECT_TRUE(same_bits(fused.dqkv, two_kernels.dqkv))
          << "dqkv of the fused backward differs from the two kernels'";
    }
  }
}

// The tensor-core kernels store two bf16 columns at a time, so an output that is only 2-byte aligned sends its
// direction to the general kernels, and every combination gives the bits of a run that chose the same kernels with
// aligned outputs. A forward that fell back still leaves the mask the backward, whose pointers are aligned, reads
// from the buffer (0x5a bytes before: a missing mask changes dqkv); a backward that fell back draws its own mask.
TEST(CudaAttentionMma, OutputsAlignedToTwoBytesTakeTheGeneralKernels) {
  BERTRAIN_REQUIRE_GPU();
  using T = bf16;
  GpuContext gpu(0, kReductionWorkspace);
  const RandomKey key{0xa119, 3, 8};
  const AttentionCase c{"tensor-core shape", {170, 1, 33, 64, 65}, 2, 64, 0.1f, 1, 512};
  const AttentionData d = attention_inputs<T>(c);
  for (const bool keep_mask : {false, true}) {
    SCOPED_TRACE(keep_mask ? "kept mask" : "no kept mask");
    // ctx misaligned: the forward is the general kernels', the backward the tensor-core kernels'.
    const AttentionOutputs ctx_moved = gpu_attention<T>(d, key, gpu.stream(), keep_mask, {1, 0, nullptr});
    const AttentionOutputs general_backward = gpu_attention<T>(d, key, gpu.stream(), false, {0, 0, "0"});
    AttentionOutputs general_both;
    {
      const testing::ScopedEnv setting("BERTRAIN_ATTENTION_MMA", "0");
      general_both = gpu_attention<T>(d, key, gpu.stream());
    }
    EXPECT_TRUE(same_bits(ctx_moved.ctx, general_both.ctx)) << "a misaligned ctx is not the general kernels'";
    EXPECT_TRUE(same_bits(ctx_moved.lse, general_both.lse)) << "lse beside a misaligned ctx is not the general's";
    const AttentionOutputs tensor_core_backward =
        gpu_attention<T>(d, key, gpu.stream(), false, {1, 0, nullptr});  // drawing the mask itself
    EXPECT_TRUE(same_bits(ctx_moved.dqkv, tensor_core_backward.dqkv))
        << "the tensor-core backward after a forward on the general kernels differs";
    EXPECT_FALSE(same_bits(ctx_moved.dqkv, general_both.dqkv)) << "the backward did not take the tensor-core kernels";

    // dqkv misaligned: the forward is the tensor-core kernels', the backward the general kernels'.
    const AttentionOutputs dqkv_moved = gpu_attention<T>(d, key, gpu.stream(), keep_mask, {0, 1, nullptr});
    EXPECT_TRUE(same_bits(dqkv_moved.ctx, general_backward.ctx)) << "ctx of the tensor-core forward differs";
    EXPECT_TRUE(same_bits(dqkv_moved.dqkv, general_backward.dqkv)) << "a misaligned dqkv is not the general kernels'";
    // lse, not ctx: ctx is rounded to bf16, where the kernels' fp32 differences (exp2f against expf) mostly vanish.
    EXPECT_FALSE(same_bits(dqkv_moved.lse, general_both.lse)) << "the forward did not take the tensor-core kernels";
  }
}

// A row's results do not depend on the rows packed around it: each row of a batch run alone, as the batch's row b
// (first_sample + b, the batch's P), gives exactly the bits it gets inside the batch. Catches row-offset mistakes and
// dropout indices that depend on packing (the CPU comparison above would too, but not bit for bit).
TYPED_TEST(CudaAttention, RowsDoNotDependOnTheirNeighbours) {
  BERTRAIN_REQUIRE_GPU();
  using T = TypeParam;
  GpuContext gpu(0, kReductionWorkspace);
  const RandomKey key{77, 3, 5};
  const AttentionCase whole_case{"batch", {37, 130, 1, 64, 9}, 2, 64, 0.1f, 2, 128};  // P = 130, the longest row
  const AttentionData whole = attention_inputs<T>(whole_case);
  const AttentionOutputs all = gpu_attention<T>(whole, key, gpu.stream());
  const int positions = std::max(whole_case.max_positions, whole.longest);
  const std::size_t H = static_cast<std::size_t>(whole.hidden());
  for (int b = 0; b < whole.batch; ++b) {
    SCOPED_TRACE("row " + std::to_string(b));
    const int first = whole.cu[b], length = whole_case.lengths[b];
    AttentionCase one = whole_case;
    one.lengths = {length};
    one.first_sample = whole_case.first_sample + b;
    one.max_positions = positions;
    AttentionData row = with_rows(one);
    row.qkv.assign(whole.qkv.begin() + first * 3 * H, whole.qkv.begin() + (first + length) * 3 * H);
    row.dctx.assign(whole.dctx.begin() + first * H, whole.dctx.begin() + (first + length) * H);
    const AttentionOutputs alone = gpu_attention<T>(row, key, gpu.stream());
    EXPECT_TRUE(same_bits(alone.ctx, std::vector<float>(all.ctx.begin() + first * H,
                                                         all.ctx.begin() + (first + length) * H)))
        << "ctx of the row alone differs from its rows in the batch";
    EXPECT_TRUE(same_bits(alone.dqkv, std::vector<float>(all.dqkv.begin() + first * 3 * H,
                                                          all.dqkv.begin() + (first + length) * 3 * H)))
        << "dqkv of the row alone differs from its rows in the batch";
    for (int h = 0; h < whole_case.heads; ++h) {
      const auto in_batch = all.lse.begin() + static_cast<std::size_t>(h) * whole.tokens + first;
      EXPECT_TRUE(same_bits(std::vector<float>(alone.lse.begin() + static_cast<std::size_t>(h) * length,
                                               alone.lse.begin() + static_cast<std::size_t>(h + 1) * length),
                            std::vector<float>(in_batch, in_batch + length)))
          << "lse of head " << h << " of the row alone differs from the batch's";
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
  const int B = 2, S = 7, NH = 2, HD = 4, T = B * S, H = NH * HD;
  const std::size_t n = static_cast<std::size_t>(T) * H, nl = static_cast<std::size_t>(T) * NH;
  // D [NH, T], then one 32-bit mask word per (head, query) for rows of up to 32 keys.
  const std::size_t nw = attention_workspace_floats_cuda(T, NH, S);
  EXPECT_EQ(nw, 2 * nl);
  EXPECT_EQ(attention_workspace_floats_cuda(T, NH, 33), 3 * nl);
  // Host memory standing in for device buffers, laid out back to back: every call below fails its checks before
  // anything touches the device.
  std::vector<float> arena(3 * n + n + nl + n + 3 * n + nw);
  float* qkv = arena.data();
  float* ctx = qkv + 3 * n;
  float* lse = ctx + n;
  float* dctx = lse + nl;
  float* dqkv = dctx + n;
  float* workspace = dqkv + 3 * n;
  const std::vector<int32_t> cu_seqlens = {0, S, T};  // never read on the host
  const RandomKey key;
  auto forward = [&](float* c, float* l, const float* x, float p, int tokens, int longest, int heads, int head_dim,
                     const DropoutLayout& layout = DropoutLayout{}) {
    attention_forward_cuda<float>(c, l, x, cu_seqlens.data(), B, tokens, longest, heads, head_dim, p, key, layout,
                                  nullptr);
  };
  auto backward = [&](float* dx, const float* dc, const float* c, const float* l, float* w, float p) {
    attention_backward_cuda<float>(dx, dc, c, l, qkv, cu_seqlens.data(), B, T, S, NH, HD, p, key, DropoutLayout{}, w,
                                   nullptr);
  };
  expect_error([&] { forward(ctx, lse, qkv, 1.0f, T, S, NH, HD); }, "dropout");
  expect_error([&] { forward(ctx, lse, qkv, -0.1f, T, S, NH, HD); }, "dropout");
  expect_error([&] { forward(ctx, lse, qkv, NAN, T, S, NH, HD); }, "dropout");
  expect_error([&] { forward(ctx, lse, qkv, 0.1f, T, S, NH, HD, DropoutLayout{-1, 512, 0, nullptr}); },
               "first_sample");
  // T must lie in [B, B·S]: a row without tokens, or more tokens than B rows of at most S hold.
  expect_error([&] { forward(ctx, lse, qkv, 0.1f, T + 1, S, NH, HD); }, "tokens in");
  expect_error([&] { forward(ctx, lse, qkv, 0.1f, B - 1, S, NH, HD); }, "tokens in");
  expect_error([&] { forward(ctx, lse, qkv, 0.1f, T, 0, NH, HD); }, "longest 0");
  expect_error([&] { forward(ctx, lse, qkv, 0.1f, T, S, 0, HD); }, "heads 0");
  expect_error([&] { forward(ctx, lse, qkv, 0.1f, T, S, NH, 0); }, "head_dim 0");
  expect_error([&] { forward(ctx, nullptr, qkv, 0.1f, T, S, NH, HD); }, "null pointer");
  expect_error([&] { forward(qkv + 1, lse, qkv, 0.1f, T, S, NH, HD); }, "ctx overlaps qkv");
  expect_error([&] { forward(ctx, qkv, qkv, 0.1f, T, S, NH, HD); }, "lse overlaps qkv");
  expect_error([&] { forward(ctx, ctx + n - 1, qkv, 0.1f, T, S, NH, HD); }, "ctx and lse overlap");

  expect_error([&] { backward(dqkv, dctx, ctx, lse, workspace, 1.0f); }, "dropout");
  expect_error([&] { backward(dqkv, dctx, ctx, lse, nullptr, 0.1f); }, "null pointer");
  expect_error([&] { backward(qkv + 1, dctx, ctx, lse, workspace, 0.1f); }, "dqkv overlaps");  // ctx and qkv
  expect_error([&] { backward(dctx + 1, dctx, ctx, lse, workspace, 0.1f); }, "dqkv overlaps dctx");
  // The workspace (2·nl floats here) is longer than lse, so starting at lse it also covers dctx, which is checked first.
  expect_error([&] { backward(dqkv, dctx, ctx, lse, lse, 0.1f); }, "workspace overlaps dctx");
  expect_error([&] { backward(dqkv, dctx, ctx, lse, ctx, 0.1f); }, "workspace overlaps ctx");
  expect_error([&] { backward(dqkv, dctx, ctx, lse, dqkv + 3 * n - 1, 0.1f); }, "dqkv and workspace overlap");
  expect_error([&] { attention_workspace_floats_cuda(T, 0, S); }, "heads 0");
  expect_error([&] { attention_workspace_floats_cuda(T, NH, 0); }, "longest 0");
}

}  // namespace
}  // namespace bertrain

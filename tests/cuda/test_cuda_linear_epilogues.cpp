// The cuBLASLt linear layers (kernels/cuda/linear.cu) against their CPU twins, for T = float and T = bf16:
// linear_forward with the bias epilogue, linear_activation_forward (the tanh GELU epilogue; exact GELU and ReLU
// through the bias epilogue and the activation kernel), linear_activation_backward_data (GEMM, activation-backward
// kernel and column sum: cuBLASLt's DGELU epilogue is off, linear.cu says why), linear_backward (dx = and +=,
// the float-dx overload, dw, db through BGRADB or the column sum), over rows 1, 7, 300 and in/out among 8, 24, 768, 3072, 2304 plus an odd 33/31 pair (epilogue leading dimensions
// that are no multiple of 8, hence the fallbacks); unaligned pointers; bit-equal reruns; which path ran
// (linear_path_counts_cuda); and the host-side argument checks.
//
// Inputs are exactly representable in T (bf16_rounded), so the fp32 CPU twin sees the values the kernel reads.
// Weights are scaled by 1/√k (k the GEMM's inner size) so that pre-activations lie mostly in [-6, 6], where GELU
// bends, instead of saturating.
//
// Tolerances (atol + rtol·|ref|):
//  - float: GPU and CPU both compute in fp32 and differ in summation order only: sums of k ≤ 3072 products of
//    O(1/√k) terms are O(1) with ~1e-6 rounding, hence atol 1e-4, rtol 1e-5 for every output (erff/tanhf on
//    the device differ from the CPU's by a few ulps). The fused tanh GELU is held to the same tolerance: fp32
//    mode promises the CPU's numbers (kFuseGeluEpilogueInFp32 in linear.cu says what to do if this fails).
//  - bf16 outputs (y, pre, dpre, dx): rounded once or twice to bf16, each rounding at most 2⁻⁸ relative (bf16
//    keeps 8 significant bits): 2⁻⁷·|ref| for two; an activation applied to a rounded pre-activation moves by
//    |act'(x)·x|·2⁻⁸, within 1e-3 + 1e-2·|act(x)| for GELU and ReLU on [-6, 6]; hence atol 1e-3, rtol 1e-2. y is
//    compared with the twin's activation of the device's own pre, so that the check of the activation does not
//    inherit the GEMM's error. A bf16 GEMM with β = 1 (the fallback's bias broadcast, dx +=) rounds the product
//    before adding C, and so does the bias epilogue for leading dimensions that are no multiple of 8 (on an H100
//    with cuBLAS 13.0, rows 300, in 33, out 31: y 0.0977 against 0.1014 where the product is ~1, one bf16 step of
//    the product): those outputs get the two-rounding bound of test_cuda_gemm_attention.cpp.
//  - bf16 inputs with fp32 outputs (dw, the float dx): near-fp32, tensor-core accumulation order: atol 1e-3,
//    rtol 1e-4.
//  - Bias gradients are sums over rows: checked against the double sum of the terms (the device's own dpre for
//    linear_activation_backward_data, whose dpre is checked against the twin first; the exact dy for linear_backward)
//    with a bound proportional to the sum of the terms' magnitudes, Σ|term|: 1e-5 of it in fp32 (rows ≤ 300), 2⁻⁸
//    of it for a bf16 dpre, since a fused bias gradient may sum the terms before their rounding to bf16 (one
//    rounding of 2⁻⁸). Checking dbias against the twin's dpre instead would hold a one-row dbias (= dpre) to 1e-6
//    where dpre itself is held to 1e-4: on an H100 the fp32 tanh-GELU derivative near its root (x ≈ -0.75, where
//    two terms of ~0.23 cancel) differed from the twin's by 3.6e-6 at a dpre of 1.4e-3. Against the derivative in
//    double over [-4, 4], the twin's (Eigen's vectorised tanh) errs by up to 2.2e-6, the same float formula with
//    libm's tanhf by 3.6e-7 (measured on the development machine).
//  A wrong transpose, index or epilogue errs by the size of the values themselves (O(0.1–1)), far above these.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "kernels/activation.h"
#include "kernels/linear.h"
#include "tests/cuda/gpu_test.h"
#include "tests/tolerance.h"

namespace bertrain {
namespace {

using testing::all_close;
using testing::bf16_rounded;
using testing::bitwise_equal;
using testing::make_input;
using testing::poison;
using testing::random_floats;
using testing::to_bf16;
using testing::to_device;
using testing::to_float;
using testing::to_host;

// Uploads (legacy stream) and launches (the context's non-blocking stream) are not ordered with each other.
void sync_device() { BERTRAIN_CUDA_CHECK(cudaDeviceSynchronize()); }

// Weights W[out, in] of a GEMM with inner size k, in [-6/√k, 6/√k): x·Wᵀ then has a standard deviation of ~2.
template <typename T>
std::vector<float> make_weights(std::size_t n, int k, uint32_t seed) {
  const float s = 6.0f / std::sqrt(static_cast<float>(k));
  return make_input<T>(n, seed, -s, s);
}


struct Tolerance {
  double atol, rtol;
};

template <typename T>
struct Tolerances;
template <>
struct Tolerances<float> {
  static constexpr Tolerance out{1e-4, 1e-5};       // y, pre, dpre, dx
  static constexpr Tolerance fp32_out{1e-4, 1e-5};  // dw, float dx
  static constexpr double dbias_fraction = 1e-5;    // dbias = Σ_rows dpre (the device's), as a fraction of Σ|dpre|
};
template <>
struct Tolerances<bf16> {
  static constexpr Tolerance out{1e-3, 1e-2};
  static constexpr Tolerance fp32_out{1e-3, 1e-4};
  static constexpr double dbias_fraction = 1.0 / 256;  // 2⁻⁸: a fused bias gradient may sum dpre before its rounding
};
constexpr double kSumOfExactTerms = 1e-5;  // db = Σ_rows dy of exact inputs, fp32 accumulation

// got[c] against the double sum exact[c] of terms whose magnitudes add up to abs_sum[c]:
// |got − exact| ≤ fraction·abs_sum + 1e-6.
::testing::AssertionResult close_to_sums(const char* what, const std::vector<float>& got,
                                         const std::vector<double>& exact, const std::vector<double>& abs_sum,
                                         double fraction) {
  for (std::size_t c = 0; c < exact.size(); ++c) {
    const double bound = fraction * abs_sum[c] + 1e-6;
    if (!(std::abs(static_cast<double>(got[c]) - exact[c]) <= bound)) {
      return ::testing::AssertionFailure() << what << "[" << c << "]: got " << got[c] << ", expected " << exact[c]
                                           << " (Σ|terms| " << abs_sum[c] << ", bound " << bound << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// Column sums of x[rows, cols] in double, and of |x|.
void column_sums(const std::vector<float>& x, int rows, int cols, std::vector<double>* sums,
                 std::vector<double>* abs_sums) {
  sums->assign(static_cast<std::size_t>(cols), 0.0);
  abs_sums->assign(static_cast<std::size_t>(cols), 0.0);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const double v = x[static_cast<std::size_t>(r) * cols + c];
      (*sums)[c] += v;
      (*abs_sums)[c] += std::abs(v);
    }
  }
}

// A bf16 GEMM with β = 1 rounds the product P to bf16 before it adds C (seen with cuBLAS 13.0 on an H100; the
// same bound as test_cuda_gemm_attention.cpp): |y − ref| ≤ 2⁻⁸·(|P| + |ref|) + 1e-6.
::testing::AssertionResult within_two_bf16_roundings(const char* what, const std::vector<float>& got,
                                                     const std::vector<float>& ref, const std::vector<float>& product) {
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double bound = std::ldexp(std::abs(product[i]) + std::abs(ref[i]), -8) + 1e-6;
    if (!(std::abs(static_cast<double>(got[i]) - ref[i]) <= bound)) {
      return ::testing::AssertionFailure() << what << "[" << i << "]: got " << got[i] << ", expected " << ref[i]
                                           << " (product " << product[i] << ", bound " << bound << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

struct Shape {
  int rows, in, out;
};

// rows 1, 7, 300 × (in, out) pairs: tiny and BERT-base-sized layers (H = 768, I = 3072, fused QKV 2304 = 3·768)
// and an odd pair whose epilogue leading dimensions are no multiple of 8.
std::vector<Shape> shapes() {
  const std::pair<int, int> in_out[] = {{8, 24}, {24, 8}, {768, 3072}, {3072, 768}, {768, 2304}, {33, 31}};
  std::vector<Shape> all;
  for (int rows : {1, 7, 300}) {
    for (const auto& io : in_out) all.push_back({rows, io.first, io.second});
  }
  return all;
}

std::string describe(const Shape& s) {
  return "rows " + std::to_string(s.rows) + ", in " + std::to_string(s.in) + ", out " + std::to_string(s.out);
}

const char* name_of(Activation act) {
  switch (act) {
    case Activation::kGelu: return "gelu";
    case Activation::kGeluTanh: return "gelu_tanh";
    case Activation::kRelu: return "relu";
    case Activation::kTanh: return "tanh";
  }
  return "?";
}

// An aligned layer: every leading dimension a multiple of 8, so cuBLASLt's epilogues apply.
bool aligned(const Shape& s) { return s.in % 8 == 0 && s.out % 8 == 0; }

// Whether the test requires the fused epilogue (or any cuBLASLt algorithm) to run for a shape. cuBLASLt's heuristic
// need not offer an epilogue algorithm for every shape (fp32, one-row GEMMs), and linear.cu falls back correctly:
// there the results are checked, whichever path ran. bf16 GEMMs of several rows with dimensions a multiple of 8 are
// the training path, where a missing epilogue would be a silent slowdown.
template <typename T>
bool epilogue_required(const Shape& s) {
  return std::is_same_v<T, bf16> && s.rows > 1 && aligned(s);
}

// Column sums up to 4096 wide.
const std::size_t kReductionWorkspace = gpu_reduction_workspace_elements(4096);

template <typename T>
class CudaLinearEpilogues : public ::testing::Test {};
using Dtypes = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(CudaLinearEpilogues, Dtypes);

// ---- linear_forward: the bias epilogue ---------------------------------------------------------------------------

TYPED_TEST(CudaLinearEpilogues, ForwardMatchesCpu) {
  BERTRAIN_REQUIRE_GPU();
  using T = TypeParam;
  GpuContext gpu(0, kReductionWorkspace);
  const Tolerance tol = Tolerances<T>::out;
  for (const Shape& s : shapes()) {
    for (bool with_bias : {true, false}) {
      SCOPED_TRACE(describe(s) + (with_bias ? ", bias" : ", no bias"));
      const std::size_t nx = static_cast<std::size_t>(s.rows) * s.in, ny = static_cast<std::size_t>(s.rows) * s.out;
      const std::vector<float> x = make_input<T>(nx, 1), w = make_weights<T>(static_cast<std::size_t>(s.out) * s.in,
                                                                             s.in, 2);
      const std::vector<float> b = make_input<T>(s.out, 3);
      std::vector<float> ref(ny);
      linear_forward_cpu<float>(ref.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, s.rows, s.in, s.out);

      DeviceBuffer<T> x_ = to_device<T>(x), w_ = to_device<T>(w), b_ = to_device<T>(b), y_(ny);
      poison(y_);
      sync_device();
      const LinearPathCounts before = linear_path_counts_cuda();
      linear_forward_cuda<T>(gpu.handles(), y_.data(), x_.data(), w_.data(), with_bias ? b_.data() : nullptr, s.rows,
                             s.in, s.out);
      sync_device();
      const LinearPathCounts after = linear_path_counts_cuda();
      const std::vector<float> got = to_host(y_);
      if (std::is_same_v<T, bf16> && with_bias && (after.bias_epilogues == before.bias_epilogues || !aligned(s))) {
        // The fallback (bias broadcast, then a β = 1 GEMM), and the epilogue at unaligned shapes, round twice.
        std::vector<float> product(ny);
        linear_forward_cpu<float>(product.data(), x.data(), w.data(), nullptr, s.rows, s.in, s.out);
        EXPECT_TRUE(within_two_bf16_roundings("y", got, ref, product));
      } else {
        // With the bias in the epilogue, y is rounded once: the one-rounding tolerance holds for bf16 too.
        EXPECT_TRUE(all_close("y", got.data(), ref.data(), ny, tol.atol, tol.rtol));
      }
      if (with_bias && epilogue_required<T>(s)) {
        EXPECT_EQ(after.bias_epilogues - before.bias_epilogues, 1u) << "the bias was not added in the epilogue";
      }
      if (epilogue_required<T>(s)) {
        EXPECT_EQ(after.gemm_ex_fallbacks, before.gemm_ex_fallbacks) << "no cuBLASLt algorithm";
      }
    }
  }
}

// ---- linear_activation_forward -------------------------------------------------------------------------------------

TYPED_TEST(CudaLinearEpilogues, ActivationForwardMatchesCpu) {
  BERTRAIN_REQUIRE_GPU();
  using T = TypeParam;
  GpuContext gpu(0, kReductionWorkspace);
  const Tolerance tol = Tolerances<T>::out;
  for (const Shape& s : shapes()) {
    for (bool with_bias : {true, false}) {
      const std::size_t nx = static_cast<std::size_t>(s.rows) * s.in, ny = static_cast<std::size_t>(s.rows) * s.out;
      const std::vector<float> x = make_input<T>(nx, 11), w = make_weights<T>(static_cast<std::size_t>(s.out) * s.in,
                                                                              s.in, 12);
      const std::vector<float> b = make_input<T>(s.out, 13);
      std::vector<float> ref_pre(ny), product(ny);
      linear_forward_cpu<float>(ref_pre.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, s.rows, s.in,
                                s.out);
      linear_forward_cpu<float>(product.data(), x.data(), w.data(), nullptr, s.rows, s.in, s.out);
      DeviceBuffer<T> x_ = to_device<T>(x), w_ = to_device<T>(w), b_ = to_device<T>(b), y_(ny), pre_(ny);
      for (Activation act : {Activation::kGelu, Activation::kGeluTanh, Activation::kRelu}) {
        SCOPED_TRACE(describe(s) + (with_bias ? ", bias, " : ", no bias, ") + name_of(act));
        poison(y_);
        poison(pre_);
        sync_device();
        const LinearPathCounts before = linear_path_counts_cuda();
        linear_activation_forward_cuda<T>(gpu.handles(), y_.data(), pre_.data(), x_.data(), w_.data(),
                                          with_bias ? b_.data() : nullptr, s.rows, s.in, s.out, act);
        sync_device();
        const LinearPathCounts after = linear_path_counts_cuda();
        const std::vector<float> got_pre = to_host(pre_), got_y = to_host(y_);
        const bool fused = after.gelu_epilogues > before.gelu_epilogues || after.bias_epilogues > before.bias_epilogues;
        if (std::is_same_v<T, bf16> && with_bias && (!fused || !aligned(s))) {
          // The β = 1 fallback, and the bias epilogue at unaligned shapes, round twice (see the top).
          EXPECT_TRUE(within_two_bf16_roundings("pre", got_pre, ref_pre, product));
        } else {
          EXPECT_TRUE(all_close("pre", got_pre.data(), ref_pre.data(), ny, tol.atol, tol.rtol));
        }
        // y against the twin's activation of the device's own pre-activation: the activation alone. (The fused
        // GELU applies it to the unrounded fp32 pre-activation: within the bf16 tolerance, see the top.)
        std::vector<float> ref_y(ny);
        activation_forward_cpu<float>(ref_y.data(), got_pre.data(), ny, act);
        EXPECT_TRUE(all_close("y", got_y.data(), ref_y.data(), ny, tol.atol, tol.rtol));
        if (aligned(s)) {
          if (act == Activation::kGeluTanh) {
            if (epilogue_required<T>(s)) {
              EXPECT_EQ(after.gelu_epilogues - before.gelu_epilogues, 1u) << "the GELU epilogue did not run";
            }
          } else {
            EXPECT_EQ(after.gelu_epilogues, before.gelu_epilogues) << "a GELU epilogue ran for " << name_of(act);
            if (with_bias && epilogue_required<T>(s)) {
              EXPECT_EQ(after.bias_epilogues - before.bias_epilogues, 1u) << "the bias was not added in the epilogue";
            }
          }
        } else {
          EXPECT_EQ(after.gelu_epilogues, before.gelu_epilogues) << "GELU epilogue with an aux ld not a multiple of 8";
        }
      }
    }
  }
}

// cuBLASLt's GELU epilogue is the tanh form, not the exact erf GELU (linear.cu explains why the code relies on it).
// Pre-activations spread over [-6, 6] include the region around ±2.7 where the two differ by up to 4.7e-4. With
// s_i = sign(erf_i − tanh_i) over elements where they differ by more than 1e-4: mean s_i·(y_i − tanh_i) is ~0 for
// the tanh form (rounding noise of either sign) and mean |erf_i − tanh_i| (≥ 1e-4) for the erf form.
TYPED_TEST(CudaLinearEpilogues, GeluEpilogueIsTheTanhForm) {
  BERTRAIN_REQUIRE_GPU();
  using T = TypeParam;
  GpuContext gpu(0, kReductionWorkspace);
  const Shape s{300, 64, 256};
  const std::size_t nx = static_cast<std::size_t>(s.rows) * s.in, ny = static_cast<std::size_t>(s.rows) * s.out;
  const std::vector<float> x = make_input<T>(nx, 21), w = make_weights<T>(static_cast<std::size_t>(s.out) * s.in,
                                                                          s.in, 22);
  const std::vector<float> b = make_input<T>(s.out, 23);
  DeviceBuffer<T> x_ = to_device<T>(x), w_ = to_device<T>(w), b_ = to_device<T>(b), y_(ny), pre_(ny);
  sync_device();
  const LinearPathCounts before = linear_path_counts_cuda();
  linear_activation_forward_cuda<T>(gpu.handles(), y_.data(), pre_.data(), x_.data(), w_.data(), b_.data(), s.rows,
                                    s.in, s.out, Activation::kGeluTanh);
  sync_device();
  ASSERT_EQ(linear_path_counts_cuda().gelu_epilogues - before.gelu_epilogues, 1u) << "the GELU epilogue did not run";
  // Both twins from the device's own pre-activation, so that only the formula differs.
  const std::vector<float> pre = to_host(pre_), y = to_host(y_);
  std::vector<float> tanh_form(ny), erf_form(ny);
  activation_forward_cpu<float>(tanh_form.data(), pre.data(), ny, Activation::kGeluTanh);
  activation_forward_cpu<float>(erf_form.data(), pre.data(), ny, Activation::kGelu);
  double toward_erf = 0, gap = 0;
  std::size_t count = 0;
  for (std::size_t i = 0; i < ny; ++i) {
    const double d = static_cast<double>(erf_form[i]) - tanh_form[i];
    if (std::abs(d) <= 1e-4) continue;
    toward_erf += (d > 0 ? 1.0 : -1.0) * (static_cast<double>(y[i]) - tanh_form[i]);
    gap += std::abs(d);
    ++count;
  }
  ASSERT_GT(count, 100u) << "too few pre-activations where the two GELUs differ";
  toward_erf /= static_cast<double>(count);
  gap /= static_cast<double>(count);
  std::cout << "[ gelu epilogue ] " << count << " elements: mean shift toward erf " << toward_erf
            << ", mean |erf - tanh| " << gap << "\n";
  EXPECT_LT(std::abs(toward_erf), 0.25 * gap) << "the GELU epilogue is not the tanh form";
}

// ---- linear_activation_backward_data -------------------------------------------------------------------------------

TYPED_TEST(CudaLinearEpilogues, ActivationBackwardDataMatchesCpu) {
  BERTRAIN_REQUIRE_GPU();
  using T = TypeParam;
  GpuContext gpu(0, kReductionWorkspace);
  const Tolerance tol = Tolerances<T>::out;
  for (const Shape& s : shapes()) {
    // Here W[out, in] is the next dense's weight: dpre[rows, in] = (dy[rows, out] · W) ∘ act'(pre[rows, in]).
    const std::size_t nd = static_cast<std::size_t>(s.rows) * s.in, ny = static_cast<std::size_t>(s.rows) * s.out;
    const std::vector<float> dy = make_input<T>(ny, 31), pre = make_input<T>(nd, 32, -4.0f, 4.0f);
    const std::vector<float> w = make_weights<T>(static_cast<std::size_t>(s.out) * s.in, s.out, 33);
    DeviceBuffer<T> dy_ = to_device<T>(dy), pre_ = to_device<T>(pre), w_ = to_device<T>(w), dpre_(nd);
    DeviceBuffer<float> dbias_(s.in);
    for (Activation act : {Activation::kGelu, Activation::kGeluTanh, Activation::kRelu}) {
      std::vector<float> ref(nd), ref_bias(s.in);
      linear_activation_backward_data_cpu<float>(ref.data(), ref_bias.data(), dy.data(), w.data(), pre.data(), s.rows,
                                                 s.in, s.out, act);
      for (bool with_bias : {true, false}) {
        SCOPED_TRACE(describe(s) + ", " + name_of(act) + (with_bias ? ", dbias" : ", no dbias"));
        poison(dpre_);
        poison(dbias_);
        sync_device();
        const LinearPathCounts before = linear_path_counts_cuda();
        linear_activation_backward_data_cuda<T>(gpu.handles(), dpre_.data(), with_bias ? dbias_.data() : nullptr,
                                                dy_.data(), w_.data(), pre_.data(), s.rows, s.in, s.out, act);
        sync_device();
        const LinearPathCounts after = linear_path_counts_cuda();
        const std::vector<float> got = to_host(dpre_), got_bias = dbias_.download();
        EXPECT_TRUE(all_close("dpre", got.data(), ref.data(), nd, tol.atol, tol.rtol));
        if (with_bias) {
          // dbias against the column sums of the device's own dpre, checked just above against the twin: a test of
          // the reduction, not a second, tighter test of dpre (see dbias_fraction).
          std::vector<double> exact_bias, abs_bias;
          column_sums(got, s.rows, s.in, &exact_bias, &abs_bias);
          EXPECT_TRUE(close_to_sums("dbias", got_bias, exact_bias, abs_bias, Tolerances<T>::dbias_fraction));
        } else {
          for (float v : got_bias) ASSERT_TRUE(std::isnan(v)) << "dbias was written although null";
        }
        // The DGELU epilogues stay off (kFuseDGeluEpilogue in linear.cu: their derivative missed these tolerances).
        EXPECT_EQ(after.dgelu_epilogues, before.dgelu_epilogues) << "a DGELU epilogue ran";
      }
    }
  }
}

// ---- linear_backward ---------------------------------------------------------------------------------------------

TYPED_TEST(CudaLinearEpilogues, BackwardMatchesCpu) {
  BERTRAIN_REQUIRE_GPU();
  using T = TypeParam;
  GpuContext gpu(0, kReductionWorkspace);
  const Tolerance out_tol = Tolerances<T>::out, w_tol = Tolerances<T>::fp32_out;
  bool reported = false;
  for (const Shape& s : shapes()) {
    const std::size_t nx = static_cast<std::size_t>(s.rows) * s.in, ny = static_cast<std::size_t>(s.rows) * s.out;
    const std::size_t nw = static_cast<std::size_t>(s.out) * s.in;
    const std::vector<float> x = make_input<T>(nx, 41), dy = make_input<T>(ny, 42);
    const std::vector<float> w = make_weights<T>(nw, s.out, 43), dx0 = make_input<T>(nx, 44);
    std::vector<double> exact_db, abs_db;
    column_sums(dy, s.rows, s.out, &exact_db, &abs_db);
    DeviceBuffer<T> x_ = to_device<T>(x), w_ = to_device<T>(w), dy_ = to_device<T>(dy);
    // {accumulate_dx, dx wanted, db wanted}
    const bool variants[][3] = {{false, true, true}, {true, true, true}, {false, false, true}, {false, true, false}};
    for (const auto& variant : variants) {
      const bool accumulate = variant[0], want_dx = variant[1], want_db = variant[2];
      SCOPED_TRACE(describe(s) + ", accumulate_dx " + std::to_string(accumulate) + ", dx " + std::to_string(want_dx) +
                   ", db " + std::to_string(want_db));
      std::vector<float> ref_dx = dx0, ref_dw(nw), product(nx), unused_dw(nw);
      linear_backward_cpu<float>(ref_dx.data(), ref_dw.data(), nullptr, dy.data(), x.data(), w.data(), s.rows, s.in,
                                 s.out, accumulate);
      linear_backward_cpu<float>(product.data(), unused_dw.data(), nullptr, dy.data(), x.data(), w.data(), s.rows,
                                 s.in, s.out, false);
      DeviceBuffer<T> dx_ = to_device<T>(dx0);
      DeviceBuffer<float> dw_(nw), db_(s.out);
      if (want_dx && !accumulate) poison(dx_);  // a null dx must leave dx0 as it is
      poison(dw_);
      poison(db_);
      sync_device();
      const LinearPathCounts before = linear_path_counts_cuda();
      linear_backward_cuda<T>(gpu.handles(), want_dx ? dx_.data() : nullptr, dw_.data(), want_db ? db_.data() : nullptr,
                              dy_.data(), x_.data(), w_.data(), s.rows, s.in, s.out, accumulate);
      sync_device();
      const LinearPathCounts after = linear_path_counts_cuda();
      const std::vector<float> got_dw = dw_.download(), got_db = db_.download(), got_dx = to_host(dx_);
      EXPECT_TRUE(all_close("dw", got_dw.data(), ref_dw.data(), nw, w_tol.atol, w_tol.rtol));
      if (!want_dx) {
        EXPECT_EQ(0, std::memcmp(got_dx.data(), dx0.data(), nx * sizeof(float))) << "dx was written although null";
      } else if (accumulate && std::is_same_v<T, bf16>) {
        EXPECT_TRUE(within_two_bf16_roundings("dx", got_dx, ref_dx, product));
      } else {
        EXPECT_TRUE(all_close("dx", got_dx.data(), ref_dx.data(), nx, out_tol.atol, out_tol.rtol));
      }
      if (want_db) {
        EXPECT_TRUE(close_to_sums("db", got_db, exact_db, abs_db, kSumOfExactTerms));
        EXPECT_EQ((after.bgrad_epilogues - before.bgrad_epilogues) + (after.column_sum_fallbacks -
                                                                      before.column_sum_fallbacks),
                  1u)
            << "db neither fused nor column-summed";
        if (!reported && s.rows == 300 && s.in == 768 && s.out == 3072) {
          std::cout << "[ linear db ] " << describe(s) << ": "
                    << (after.bgrad_epilogues > before.bgrad_epilogues ? "BGRADB epilogue of the dw GEMM"
                                                                       : "column_sum_cuda")
                    << "\n";
          reported = true;
        }
      } else {
        for (float v : got_db) ASSERT_TRUE(std::isnan(v)) << "db was written although null";
      }
    }
  }
}

// The mixed-precision overload: bf16 dy, x, W and an fp32 dx written (=) or accumulated (+=) in fp32. For T = float
// the same call is the all-float template.
TYPED_TEST(CudaLinearEpilogues, FloatDxBackwardMatchesCpu) {
  BERTRAIN_REQUIRE_GPU();
  using T = TypeParam;
  GpuContext gpu(0, kReductionWorkspace);
  const Tolerance tol = Tolerances<T>::fp32_out;
  for (const Shape& s : shapes()) {
    for (bool accumulate : {false, true}) {
      SCOPED_TRACE(describe(s) + ", accumulate_dx " + std::to_string(accumulate));
      const std::size_t nx = static_cast<std::size_t>(s.rows) * s.in, ny = static_cast<std::size_t>(s.rows) * s.out;
      const std::size_t nw = static_cast<std::size_t>(s.out) * s.in;
      const std::vector<float> x = make_input<T>(nx, 51), dy = make_input<T>(ny, 52), w = make_weights<T>(nw, s.out, 53);
      const std::vector<float> dx0 = random_floats(nx, 54);  // full float precision
      std::vector<float> ref_dx = dx0, ref_dw(nw);
      linear_backward_cpu<float>(ref_dx.data(), ref_dw.data(), nullptr, dy.data(), x.data(), w.data(), s.rows, s.in,
                                 s.out, accumulate);
      std::vector<double> exact_db, abs_db;
      column_sums(dy, s.rows, s.out, &exact_db, &abs_db);
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
      EXPECT_TRUE(all_close("dx (float)", got_dx.data(), ref_dx.data(), nx, tol.atol, tol.rtol));
      EXPECT_TRUE(all_close("dw", got_dw.data(), ref_dw.data(), nw, tol.atol, tol.rtol));
      EXPECT_TRUE(close_to_sums("db", got_db, exact_db, abs_db, kSumOfExactTerms));
    }
  }
}

// ---- Pointers that are not 256-byte aligned -------------------------------------------------------------------------
// The model carves its tensors from one arena: cuBLASLt must not assume the default 256-byte alignment. Every
// operand one element past an aligned address (2 bytes for bf16, 4 for float): the algorithm chosen for these
// alignments, or the fallback, must give the same results as aligned operands.

TYPED_TEST(CudaLinearEpilogues, UnalignedPointersGiveTheSameResults) {
  BERTRAIN_REQUIRE_GPU();
  using T = TypeParam;
  GpuContext gpu(0, kReductionWorkspace);
  const Tolerance tol = Tolerances<T>::out, w_tol = Tolerances<T>::fp32_out;
  const Shape s{64, 768, 256};
  const std::size_t nx = static_cast<std::size_t>(s.rows) * s.in, ny = static_cast<std::size_t>(s.rows) * s.out;
  const std::size_t nw = static_cast<std::size_t>(s.out) * s.in;
  std::vector<float> x = make_input<T>(nx + 1, 61), w = make_weights<T>(nw + 1, s.in, 62);
  std::vector<float> b = make_input<T>(s.out + 1, 63), dy = make_input<T>(ny + 1, 64);
  DeviceBuffer<T> x_ = to_device<T>(x), w_ = to_device<T>(w), b_ = to_device<T>(b), dy_ = to_device<T>(dy);
  DeviceBuffer<T> y_(ny + 1), pre_(ny + 1), dx_(nx + 1);
  DeviceBuffer<float> dw_(nw + 1), db_(s.out + 1);
  // The host copies of the operands as the device sees them from element 1 on.
  const std::vector<float> hx(x.begin() + 1, x.end()), hw(w.begin() + 1, w.end()), hb(b.begin() + 1, b.end()),
      hdy(dy.begin() + 1, dy.end());
  sync_device();
  linear_activation_forward_cuda<T>(gpu.handles(), y_.data() + 1, pre_.data() + 1, x_.data() + 1, w_.data() + 1,
                                    b_.data() + 1, s.rows, s.in, s.out, Activation::kGeluTanh);
  linear_backward_cuda<T>(gpu.handles(), dx_.data() + 1, dw_.data() + 1, db_.data() + 1, dy_.data() + 1, x_.data() + 1,
                          w_.data() + 1, s.rows, s.in, s.out, false);
  sync_device();
  std::vector<float> ref_pre(ny), product(ny), ref_dx(nx), ref_dw(nw);
  linear_forward_cpu<float>(ref_pre.data(), hx.data(), hw.data(), hb.data(), s.rows, s.in, s.out);
  linear_forward_cpu<float>(product.data(), hx.data(), hw.data(), nullptr, s.rows, s.in, s.out);
  linear_backward_cpu<float>(ref_dx.data(), ref_dw.data(), nullptr, hdy.data(), hx.data(), hw.data(), s.rows, s.in,
                             s.out, false);
  std::vector<double> exact_db, abs_db;
  column_sums(hdy, s.rows, s.out, &exact_db, &abs_db);
  const std::vector<float> y = to_host(y_), dx = to_host(dx_), dw = dw_.download(), db = db_.download();
  const std::vector<float> all_pre = to_host(pre_), pre(all_pre.begin() + 1, all_pre.end());
  // Unaligned operands may take the fallback, whose bf16 pre-activation is rounded twice (β = 1).
  if (std::is_same_v<T, bf16>) {
    EXPECT_TRUE(within_two_bf16_roundings("pre", pre, ref_pre, product));
  } else {
    EXPECT_TRUE(all_close("pre", pre.data(), ref_pre.data(), ny, tol.atol, tol.rtol));
  }
  std::vector<float> ref_y(ny);
  activation_forward_cpu<float>(ref_y.data(), pre.data(), ny, Activation::kGeluTanh);
  EXPECT_TRUE(all_close("y", y.data() + 1, ref_y.data(), ny, tol.atol, tol.rtol));
  EXPECT_TRUE(all_close("dx", dx.data() + 1, ref_dx.data(), nx, tol.atol, tol.rtol));
  EXPECT_TRUE(all_close("dw", dw.data() + 1, ref_dw.data(), nw, w_tol.atol, w_tol.rtol));
  EXPECT_TRUE(close_to_sums("db", std::vector<float>(db.begin() + 1, db.end()), exact_db, abs_db, kSumOfExactTerms));
}

// ---- Determinism: the same inputs give the same bits ---------------------------------------------------------------
// Large row counts (4099: many tiles along the reduced dimension of dw and of the bias gradients) so that an
// unordered (atomic) reduction anywhere would show up as differing bits between runs.

TYPED_TEST(CudaLinearEpilogues, RepeatedRunsAreBitEqual) {
  BERTRAIN_REQUIRE_GPU();
  using T = TypeParam;
  GpuContext gpu(0, kReductionWorkspace);
  for (const Shape& s : {Shape{4099, 768, 3072}, Shape{4099, 3072, 768}}) {
    SCOPED_TRACE(describe(s));
    const std::size_t nx = static_cast<std::size_t>(s.rows) * s.in, ny = static_cast<std::size_t>(s.rows) * s.out;
    const std::size_t nw = static_cast<std::size_t>(s.out) * s.in;
    DeviceBuffer<T> x_ = to_device<T>(make_input<T>(nx, 71)), w_ = to_device<T>(make_weights<T>(nw, s.in, 72));
    DeviceBuffer<T> b_ = to_device<T>(make_input<T>(s.out, 73)), dy_ = to_device<T>(make_input<T>(ny, 74));
    DeviceBuffer<T> pre_in_ = to_device<T>(make_input<T>(nx, 75, -4.0f, 4.0f));
    struct Outputs {
      DeviceBuffer<T> y, pre, dpre, dx;
      DeviceBuffer<float> dbias, dw, db;
    };
    auto run = [&](Outputs& o) {
      linear_activation_forward_cuda<T>(gpu.handles(), o.y.data(), o.pre.data(), x_.data(), w_.data(), b_.data(),
                                        s.rows, s.in, s.out, Activation::kGeluTanh);
      linear_activation_backward_data_cuda<T>(gpu.handles(), o.dpre.data(), o.dbias.data(), dy_.data(), w_.data(),
                                              pre_in_.data(), s.rows, s.in, s.out, Activation::kGeluTanh);
      linear_backward_cuda<T>(gpu.handles(), o.dx.data(), o.dw.data(), o.db.data(), dy_.data(), x_.data(), w_.data(),
                              s.rows, s.in, s.out, false);
    };
    std::vector<Outputs> runs;
    for (int i = 0; i < 3; ++i) {
      runs.push_back(Outputs{DeviceBuffer<T>(ny), DeviceBuffer<T>(ny), DeviceBuffer<T>(nx), DeviceBuffer<T>(nx),
                             DeviceBuffer<float>(s.in), DeviceBuffer<float>(nw), DeviceBuffer<float>(s.out)});
    }
    sync_device();
    for (Outputs& o : runs) run(o);
    sync_device();
    for (std::size_t i = 1; i < runs.size(); ++i) {
      EXPECT_TRUE(bitwise_equal(runs[0].y, runs[i].y)) << "y differs in run " << i;
      EXPECT_TRUE(bitwise_equal(runs[0].pre, runs[i].pre)) << "pre differs in run " << i;
      EXPECT_TRUE(bitwise_equal(runs[0].dpre, runs[i].dpre)) << "dpre differs in run " << i;
      EXPECT_TRUE(bitwise_equal(runs[0].dbias, runs[i].dbias)) << "dbias differs in run " << i;
      EXPECT_TRUE(bitwise_equal(runs[0].dx, runs[i].dx)) << "dx differs in run " << i;
      EXPECT_TRUE(bitwise_equal(runs[0].dw, runs[i].dw)) << "dw differs in run " << i;
      EXPECT_TRUE(bitwise_equal(runs[0].db, runs[i].db)) << "db differs in run " << i;
    }
  }
}

// ---- Host-side validation: these throw before anything touches the device, so they run without a GPU. ------------

template <typename F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error thrown; expected one mentioning \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(CudaLinearEpilogueChecks, RejectBadArgumentsBeforeLaunching) {
  // Host memory standing in for device buffers: never dereferenced, every call fails its checks first.
  std::vector<float> arena(4096);
  float* a = arena.data();
  float* b = a + 1024;
  float* c = b + 1024;
  float* d = c + 1024;
  const GpuHandles no_blas;
  const Activation gelu = Activation::kGeluTanh;
  // Valid arguments get as far as the handle check.
  expect_error([&] { linear_forward_cuda<float>(no_blas, a, b, c, d, 4, 8, 8); }, "no cuBLAS handle");
  expect_error([&] { linear_activation_forward_cuda<float>(no_blas, a, b, c, d, d, 4, 8, 8, gelu); },
               "no cuBLAS handle");
  expect_error([&] { linear_activation_backward_data_cuda<float>(no_blas, a, d, b, c, d + 256, 4, 8, 8, gelu); },
               "no cuBLAS handle");
  expect_error([&] { linear_backward_cuda<float>(no_blas, a, b, c, d, d, d, 4, 8, 8, false); }, "no cuBLAS handle");
  // Sizes.
  expect_error([&] { linear_forward_cuda<float>(no_blas, a, b, c, d, 0, 8, 8); }, "rows 0");
  expect_error([&] { linear_activation_forward_cuda<float>(no_blas, a, b, c, d, d, 4, -1, 8, gelu); }, "in -1");
  expect_error([&] { linear_activation_backward_data_cuda<float>(no_blas, a, d, b, c, d, 4, 8, 0, gelu); }, "out 0");
  expect_error([&] { linear_backward_cuda<float>(no_blas, a, b, c, d, d, d, 0, 8, 8, false); }, "rows 0");
  // Null pointers.
  expect_error([&] { linear_forward_cuda<float>(no_blas, nullptr, b, c, d, 4, 8, 8); }, "null");
  expect_error([&] { linear_activation_forward_cuda<float>(no_blas, a, nullptr, c, d, d, 4, 8, 8, gelu); }, "null");
  expect_error([&] { linear_activation_backward_data_cuda<float>(no_blas, a, d, b, c, nullptr, 4, 8, 8, gelu); },
               "null");
  expect_error([&] { linear_backward_cuda<float>(no_blas, a, nullptr, c, d, d, d, 4, 8, 8, false); }, "null");
  // y and pre overlapping (pre must survive for backward); dpre over dy, w or pre.
  expect_error([&] { linear_activation_forward_cuda<float>(no_blas, a, a + 31, c, d, d, 4, 8, 8, gelu); },
               "overlaps");
  expect_error([&] { linear_activation_backward_data_cuda<float>(no_blas, a, d, a + 8, c, d, 4, 8, 8, gelu); },
               "overlaps");
  expect_error([&] { linear_activation_backward_data_cuda<float>(no_blas, a, d, b, c, a, 4, 8, 8, gelu); },
               "overlaps");
  // An activation value outside the enum.
  expect_error([&] {
    linear_activation_forward_cuda<float>(no_blas, a, b, c, d, d, 4, 8, 8, static_cast<Activation>(99));
  }, "activation");
}

}  // namespace
}  // namespace bertrain

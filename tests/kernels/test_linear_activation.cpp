// The CPU twins of the fused linear + activation launchers (kernels/cpu/linear.cpp): the forward against a plain
// loop transcription of act(x·Wᵀ + b), and the backward's dpre and dbias against finite differences (double) of
// the feed-forward they serve, L = Σ r ∘ (act(pre) · Wᵀ), with pre = base + b1 broadcast over rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/activation.h"
#include "kernels/linear.h"
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

constexpr Tolerance kRounding{1e-12, 1e-12};

class LinearActivation : public ::testing::TestWithParam<Activation> {};

std::string activation_name(const ::testing::TestParamInfo<Activation>& info) {
  switch (info.param) {
    case Activation::kGelu: return "Gelu";
    case Activation::kGeluTanh: return "GeluTanh";
    case Activation::kRelu: return "Relu";
    case Activation::kTanh: return "Tanh";
  }
  return "Unknown";
}

// The activations by their formulas (kernels/activation.h), for the loop reference.
double act_value(double x, Activation act) {
  switch (act) {
    case Activation::kGelu: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case Activation::kGeluTanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / std::acos(-1.0)) * (x + 0.044715 * x * x * x)));
    case Activation::kRelu: return x > 0 ? x : 0.0;
    case Activation::kTanh: return std::tanh(x);
  }
  return 0.0;
}

TEST_P(LinearActivation, ForwardIsActOfTheAffineMap) {
  const Activation act = GetParam();
  const int rows = 5, in = 7, out = 6;
  const std::vector<double> x = random_normal(rows * in, 1), w = random_normal(out * in, 2), b = random_normal(out, 3);
  for (bool with_bias : {true, false}) {
    SCOPED_TRACE(with_bias ? "bias" : "no bias");
    std::vector<double> y(rows * out, 1e3), pre(rows * out, 1e3);  // garbage: both are written (=)
    linear_activation_forward_cpu(y.data(), pre.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, rows, in,
                                  out, act);
    std::vector<double> ref_pre(rows * out), ref_y(rows * out);
    for (int r = 0; r < rows; ++r) {
      for (int o = 0; o < out; ++o) {
        double sum = with_bias ? b[o] : 0.0;
        for (int i = 0; i < in; ++i) sum += x[r * in + i] * w[o * in + i];
        ref_pre[r * out + o] = sum;
        ref_y[r * out + o] = act_value(sum, act);
      }
    }
    EXPECT_TRUE(all_close("pre", pre.data(), ref_pre.data(), pre.size(), kRounding, {rows, out}));
    EXPECT_TRUE(all_close("y", y.data(), ref_y.data(), y.size(), kRounding, {rows, out}));
  }
}

// The feed-forward around the backward: pre[rows, in] = base + b1 (the first dense's output and bias), then the
// second dense W[out, in] applied to act(pre); L = Σ r ∘ (act(pre) · Wᵀ), so dL/d(second dense's output) = r = dy.
struct FeedForward {
  static constexpr int kRows = 4, kIn = 9, kOut = 5;
  Activation act;
  std::vector<double> base, b1, w, r;
  explicit FeedForward(Activation a)
      : act(a),
        base(random_uniform(kRows * kIn, 11, -3.0, 3.0)),
        b1(random_normal(kIn, 12)),
        w(random_normal(kOut * kIn, 13)),
        r(random_normal(kRows * kOut, 14)) {
    if (act == Activation::kRelu) {
      // ReLU has a kink at 0: keep every pre-activation at least 0.05 ≫ h away from it.
      for (int row = 0; row < kRows; ++row) {
        for (int c = 0; c < kIn; ++c) {
          double& v = base[row * kIn + c];
          const double p = v + b1[c];
          if (std::abs(p) < 0.05) v += p < 0 ? -0.05 : 0.05;
        }
      }
    }
  }
  std::vector<double> pre() const {
    std::vector<double> p(base);
    for (int row = 0; row < kRows; ++row) {
      for (int c = 0; c < kIn; ++c) p[row * kIn + c] += b1[c];
    }
    return p;
  }
  double loss() const {
    std::vector<double> a = pre(), y(kRows * kOut);
    activation_forward_cpu(a.data(), a.data(), a.size(), act);
    linear_forward_cpu(y.data(), a.data(), w.data(), static_cast<const double*>(nullptr), kRows, kIn, kOut);
    return projection(r, y.data());
  }
};

TEST_P(LinearActivation, BackwardDataMatchesFiniteDifferences) {
  FeedForward f(GetParam());
  const int rows = FeedForward::kRows, in = FeedForward::kIn, out = FeedForward::kOut;
  const std::vector<double> pre = f.pre();
  std::vector<double> dpre(rows * in, 1e3), dbias(in, 1e3);  // garbage: both are written (=)
  linear_activation_backward_data_cpu(dpre.data(), dbias.data(), f.r.data(), f.w.data(), pre.data(), rows, in, out,
                                      f.act);
  auto loss = [&] { return f.loss(); };
  // dL/dbase = dL/dpre (pre = base + b1), dL/db1 = Σ_rows dL/dpre.
  EXPECT_TRUE(check_gradient("dpre", loss, f.base.data(), dpre.data(), dpre.size(), kDoubleFd, {rows, in}));
  EXPECT_TRUE(check_gradient("dbias", loss, f.b1.data(), dbias.data(), dbias.size(), kDoubleFd, {in}));

  // dbias may be null: dpre is unchanged.
  std::vector<double> dpre_only(rows * in, 1e3);
  linear_activation_backward_data_cpu(dpre_only.data(), static_cast<double*>(nullptr), f.r.data(), f.w.data(),
                                      pre.data(), rows, in, out, f.act);
  EXPECT_TRUE(all_close("dpre without dbias", dpre_only.data(), dpre.data(), dpre.size(), kRounding, {rows, in}));
}

INSTANTIATE_TEST_SUITE_P(AllActivations, LinearActivation,
                         ::testing::Values(Activation::kGelu, Activation::kGeluTanh, Activation::kRelu,
                                           Activation::kTanh),
                         activation_name);

TEST(LinearActivationChecks, RejectOverlappingOutputs) {
  std::vector<float> buf(64, 0.0f);
  float* p = buf.data();
  // y over pre: pre must survive for backward.
  EXPECT_THROW(linear_activation_forward_cpu<float>(p, p + 2, p + 40, p + 40, nullptr, 2, 2, 2, Activation::kGelu),
               Error);
  // dpre over dy, w or pre.
  EXPECT_THROW(linear_activation_backward_data_cpu<float>(p, nullptr, p + 1, p + 40, p + 50, 2, 2, 2,
                                                          Activation::kGelu),
               Error);
  EXPECT_THROW(linear_activation_backward_data_cpu<float>(p, nullptr, p + 20, p + 3, p + 50, 2, 2, 2,
                                                          Activation::kGelu),
               Error);
  EXPECT_THROW(linear_activation_backward_data_cpu<float>(p, nullptr, p + 20, p + 40, p, 2, 2, 2, Activation::kGelu),
               Error);
  // Disjoint buffers are fine.
  EXPECT_NO_THROW(linear_activation_backward_data_cpu<float>(p, p + 8, p + 20, p + 40, p + 50, 2, 2, 2,
                                                             Activation::kGelu));
}

}  // namespace
}  // namespace bertrain

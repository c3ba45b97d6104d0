// Finite-difference gradient checking for the double instantiations of the CPU ops and of the model:
// central differences of a scalar loss compared with the analytic gradient, reported through GoogleTest
// with the worst element, its index and both values.
//
// Why double and these numbers: with central differences and h = 1e-6 the truncation error is
// O(h²·f''') ≈ 1e-12 and the rounding error is O(ε·|L|/h) ≈ 1e-10·|L|; for the O(1)–O(100) losses of the
// tests both sit two or more orders below atol = 1e-7, so a reported mismatch is a wrong derivative, not
// noise. rtol = 1e-5 covers large gradient elements, whose FD rounding error grows with |L|. In float the
// rounding term alone would be ~1e-1·|L|: FD checks are meaningful in double only.
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace bertrain::gradcheck {

// Allowed |actual - ref| is atol + rtol·|ref| (DESIGN.md).
struct Tolerance {
  double atol;
  double rtol;
};

inline constexpr Tolerance kDoubleFd{1e-7, 1e-5};
inline constexpr double kStep = 1e-6;

// Fixed-seed inputs: a failure reproduces exactly on every run and machine with the same standard library.
inline std::vector<double> random_normal(std::size_t n, uint64_t seed, double mean = 0.0, double stddev = 1.0) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist(mean, stddev);
  std::vector<double> v(n);
  for (double& x : v) x = dist(gen);
  return v;
}

inline std::vector<double> random_uniform(std::size_t n, uint64_t seed, double lo, double hi) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = dist(gen);
  return v;
}

// L = Σ r_i · y_i with r fixed and random: every output element reaches the loss with its own weight (a
// plain sum would hide errors that cancel across elements, e.g. in softmax or LayerNorm backward), and
// dL/dy = r is what the tests pass as the op's upstream gradient.
// Summed with Neumaier's compensation: over ~10⁵ terms a plain sum's rounding (~ε·Σ|r·y|) divided by 2h
// reaches 1e-7, the size of atol, and turns FD noise into false failures; compensated, the error is ~ε·|L|.
inline double projection(const std::vector<double>& r, const double* y) {
  double sum = 0.0, compensation = 0.0;
  for (std::size_t i = 0; i < r.size(); ++i) {
    const double term = r[i] * y[i];
    const double t = sum + term;
    compensation += std::abs(sum) >= std::abs(term) ? (sum - t) + term : (term - t) + sum;
    sum = t;
  }
  return sum + compensation;
}

// "i" for a flat index, "i = [a, b, c]" when the tensor's shape is known.
inline std::string index_string(std::size_t index, const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << index;
  if (!shape.empty()) {
    std::vector<int64_t> coords(shape.size());
    std::size_t rest = index;
    for (std::size_t d = shape.size(); d-- > 0;) {
      coords[d] = static_cast<int64_t>(rest % static_cast<std::size_t>(shape[d]));
      rest /= static_cast<std::size_t>(shape[d]);
    }
    os << " = [";
    for (std::size_t d = 0; d < coords.size(); ++d) os << (d ? ", " : "") << coords[d];
    os << "]";
  }
  return os.str();
}

// Element-wise |actual - ref| <= atol + rtol·|ref| over the elements listed in `indices` (all when empty).
// On failure: how many elements fail, and the worst one (largest error / allowed), its index and values.
// A NaN on either side fails and counts as the worst.
inline ::testing::AssertionResult all_close(const std::string& what, const double* actual, const double* ref,
                                            std::size_t n, Tolerance tol, const std::vector<int64_t>& shape = {},
                                            const std::vector<std::size_t>& indices = {}) {
  std::size_t failures = 0, worst = 0, checked = 0;
  double worst_ratio = -1.0;
  auto visit = [&](std::size_t i) {
    ++checked;
    const double diff = std::abs(actual[i] - ref[i]);
    const double allowed = tol.atol + tol.rtol * std::abs(ref[i]);
    const double ratio = std::isnan(diff) ? std::numeric_limits<double>::infinity() : diff / allowed;
    if (!(diff <= allowed)) ++failures;
    if (ratio > worst_ratio) worst_ratio = ratio, worst = i;
  };
  if (indices.empty()) {
    for (std::size_t i = 0; i < n; ++i) visit(i);
  } else {
    for (std::size_t i : indices) visit(i);
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  const double diff = std::abs(actual[worst] - ref[worst]);
  return ::testing::AssertionFailure()
         << what << ": " << failures << " of " << checked << " elements out of tolerance (atol " << tol.atol
         << " + rtol " << tol.rtol << "·|ref|); worst at index " << index_string(worst, shape)
         << ": actual " << std::setprecision(17) << actual[worst] << ", ref " << ref[worst] << ", |diff| " << diff
         << " > allowed " << tol.atol + tol.rtol * std::abs(ref[worst]);
}

// Runs its scope with one OpenMP thread, restoring the previous count on exit.
class SingleThreadScope {
 public:
  SingleThreadScope() : saved_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~SingleThreadScope() { omp_set_num_threads(saved_); }
  SingleThreadScope(const SingleThreadScope&) = delete;
  SingleThreadScope& operator=(const SingleThreadScope&) = delete;

 private:
  int saved_;
};

// Central difference of loss() with respect to x[i] for each listed i (all when empty; others stay 0).
// x is perturbed in place and restored bit-exactly; the step is divided by the difference actually
// represented, (x + h) - (x - h), not by 2h, to remove the representation error of the step itself.
// Single-threaded: differencing calls the forward thousands of times on tiny inputs, where OpenMP fork/join
// dominates, and on a loaded machine (parallel builds, ctest -j) spin-waiting team threads stretched a
// 0.2 s run to 20 s. The kernels' results do not depend on the thread count, and the analytic gradient,
// computed by the caller outside this scope, still runs on every thread.
inline std::vector<double> numerical_gradient(const std::function<double()>& loss, double* x, std::size_t n,
                                              const std::vector<std::size_t>& indices = {}, double h = kStep) {
  const SingleThreadScope single_thread;
  std::vector<double> grad(n, 0.0);
  auto one = [&](std::size_t i) {
    const double x0 = x[i];
    const double plus = x0 + h, minus = x0 - h;
    x[i] = plus;
    const double f_plus = loss();
    x[i] = minus;
    const double f_minus = loss();
    x[i] = x0;
    grad[i] = (f_plus - f_minus) / (plus - minus);
  };
  if (indices.empty()) {
    for (std::size_t i = 0; i < n; ++i) one(i);
  } else {
    for (std::size_t i : indices) one(i);
  }
  return grad;
}

// Whether check_gradient accepts a numerical gradient that is zero everywhere.
enum class ZeroGradient { kReject, kAllow };

// Compares `analytic` (n elements, the gradient of loss() at the current x) with central differences.
// Also fails when the numerical gradient is zero everywhere (below 10·atol): then loss() does not depend
// on x, e.g. a lambda reading the wrong buffer, and the comparison would pass without checking anything.
// Pass ZeroGradient::kAllow only for inputs whose gradient is zero by mathematics (and say why).
inline ::testing::AssertionResult check_gradient(const std::string& what, const std::function<double()>& loss,
                                                 double* x, const double* analytic, std::size_t n,
                                                 Tolerance tol = kDoubleFd, const std::vector<int64_t>& shape = {},
                                                 const std::vector<std::size_t>& indices = {},
                                                 ZeroGradient zero = ZeroGradient::kReject) {
  const std::vector<double> numerical = numerical_gradient(loss, x, n, indices);
  double largest = 0.0;
  for (double g : numerical) largest = std::max(largest, std::abs(g));
  if (zero == ZeroGradient::kReject && !(largest > 10.0 * tol.atol)) {
    return ::testing::AssertionFailure() << what << ": the numerical gradient is zero (max |g| = " << largest
                                         << "): the loss does not depend on this input, so nothing is checked";
  }
  return all_close(what + " (analytic vs central differences)", analytic, numerical.data(), n, tol, shape, indices);
}

}  // namespace bertrain::gradcheck

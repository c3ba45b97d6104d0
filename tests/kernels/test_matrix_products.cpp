// The CPU engine's matrix products as its kernels write them (kernels/cpu/eigen_maps.h): row-major maps, blocks
// of wider rows (one head of Q, K, V in [T, 3H]), transposed operands, accumulation. With BERTRAIN_BLAS they go
// through Eigen's BLAS binding to OpenBLAS, which must read those strides and transposes as Eigen does, and must
// run on the engine's OpenMP threads; without it, Eigen's own products are checked the same way.
#include <gtest/gtest.h>

#include <dirent.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/build_config.h"
#include "core/cpu_threads.h"
#include "kernels/cpu/eigen_maps.h"
#include "tests/run_process.h"

#if BERTRAIN_HAS_BLAS
#include "core/openblas.h"
#endif

namespace bertrain {
namespace {

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// A float product summed in any order is within K·u·Σ|a||b| of the exact sum (u = 2⁻²⁴, K terms: the standard
// bound γ_K ≈ K·u for recursive or blocked summation); the reference is summed in double, exact enough beside it.
// `at(i, k)` and `bt(k, j)` read the operands as the product sees them.
template <typename A, typename B, typename C>
void expect_product(const C& c, const A& at, const B& bt, int m, int n, int k, const std::vector<double>& before) {
  const double u = std::numeric_limits<float>::epsilon() / 2;
  int wrong = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = before.empty() ? 0.0 : before[static_cast<std::size_t>(i) * n + j], magnitude = std::abs(sum);
      for (int p = 0; p < k; ++p) {
        sum += static_cast<double>(at(i, p)) * bt(p, j);
        magnitude += std::abs(static_cast<double>(at(i, p)) * bt(p, j));
      }
      if (std::abs(c(i, j) - sum) > (k + 1) * u * magnitude && ++wrong <= 5) {
        ADD_FAILURE() << "(" << i << ", " << j << "): " << c(i, j) << " against " << sum;
      }
    }
  }
  EXPECT_EQ(wrong, 0);
}

// Shapes past Eigen's small-product path (and past OpenBLAS's small-matrix kernels) and below them.
struct Shape {
  int m, n, k;
};
const Shape kShapes[] = {{300, 200, 160}, {37, 64, 21}, {5, 3, 7}};

// linear_forward: y = x Wᵀ over row-major buffers; linear_backward: dW (+)= dyᵀ x.
TEST(MatrixProducts, TransposedOperandsAndAccumulationEqualTheSum) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << s.m << " x " << s.n << " x " << s.k);
    const std::vector<float> x = random_values(static_cast<std::size_t>(s.m) * s.k, 1);
    const std::vector<float> w = random_values(static_cast<std::size_t>(s.n) * s.k, 2);
    std::vector<float> y(static_cast<std::size_t>(s.m) * s.n);
    ConstMatrixMap<float> xm(x.data(), s.m, s.k), wm(w.data(), s.n, s.k);
    MatrixMap<float> ym(y.data(), s.m, s.n);
    ym.noalias() = xm * wm.transpose();
    expect_product(ym, xm, wm.transpose(), s.m, s.n, s.k, {});

    // dW [n, k] += dyᵀ [n, m] · x [m, k], onto what dW held.
    const std::vector<float> dy = random_values(static_cast<std::size_t>(s.m) * s.n, 3);
    std::vector<float> dw = random_values(static_cast<std::size_t>(s.n) * s.k, 4);
    const std::vector<double> before(dw.begin(), dw.end());
    ConstMatrixMap<float> dym(dy.data(), s.m, s.n);
    MatrixMap<float> dwm(dw.data(), s.n, s.k);
    dwm.noalias() += dym.transpose() * xm;
    expect_product(dwm, dym.transpose(), xm, s.n, s.k, s.m, before);
  }
}

// Attention: one head's Q, K, V are L × HD blocks of [T, 3H] rows; scores = Q Kᵀ, ctx (a block of [T, H]) = P V.
TEST(MatrixProducts, BlocksOfWiderRowsEqualTheSum) {
  const int hidden = 96, head_dim = 32, stride = 3 * hidden;
  for (const int length : {1, 20, 130}) {
    SCOPED_TRACE(::testing::Message() << length << " tokens");
    const std::vector<float> qkv = random_values(static_cast<std::size_t>(length) * stride, 5);
    const int head = 1;
    ConstStridedMap<float> q(qkv.data() + head * head_dim, length, head_dim, Eigen::OuterStride<>(stride));
    ConstStridedMap<float> k(qkv.data() + hidden + head * head_dim, length, head_dim, Eigen::OuterStride<>(stride));
    ConstStridedMap<float> v(qkv.data() + 2 * hidden + head * head_dim, length, head_dim, Eigen::OuterStride<>(stride));
    std::vector<float> scores(static_cast<std::size_t>(length) * length);
    MatrixMap<float> sm(scores.data(), length, length);
    sm.noalias() = q * k.transpose();
    expect_product(sm, q, k.transpose(), length, length, head_dim, {});

    // The context goes into head 1's columns of [T, H]; the other columns must stay as they were.
    std::vector<float> ctx(static_cast<std::size_t>(length) * hidden, 7.0f);
    StridedMap<float> cm(ctx.data() + head * head_dim, length, head_dim, Eigen::OuterStride<>(hidden));
    cm.noalias() = ConstMatrixMap<float>(scores.data(), length, length) * v;
    expect_product(cm, ConstMatrixMap<float>(scores.data(), length, length), v, length, head_dim, length, {});
    for (int i = 0; i < length; ++i) {
      for (int j = 0; j < hidden; ++j) {
        if (j >= head * head_dim && j < (head + 1) * head_dim) continue;
        ASSERT_EQ(ctx[static_cast<std::size_t>(i) * hidden + j], 7.0f) << "(" << i << ", " << j << ")";
      }
    }
  }
}

// Threads of this process (/proc/self/task).
int thread_count() {
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  int n = 0;
  while (const dirent* e = ::readdir(dir)) n += e->d_name[0] != '.';
  ::closedir(dir);
  return n;
}

// A product as large as the engine's: past the size at which OpenBLAS threads its products.
bool large_product_is_finite() {
  const int n = 512;
  RowMatrix<float> a = RowMatrix<float>::Random(n, n), b = RowMatrix<float>::Random(n, n), c(n, n);
  c.noalias() = a * b;
  return std::isfinite(c(0, 0));
}

// `--threads 1` means one thread: a large product starts none (OpenBLAS's pthreads build would start its own pool
// beside OpenMP's, and its threads would spin on the cores the engine's threads use).
TEST(MatrixProducts, OneThreadStartsNoOther) {
  EXPECT_EQ(testing::exit_code_in_child([] {
              if (configure_cpu_threads(1) != 1) return 1;
              if (!large_product_is_finite()) return 2;
              return thread_count() == 1 ? 0 : 3;
            }),
            0)
      << "1: --threads 1 not applied; 3: a product started threads of its own";
}

// Every CPU (--threads 0): the count configure_cpu_threads returns is the one the engine's loops still run after a
// product. OpenBLAS sets the caller's OpenMP count to its own before each threaded product (at most its MAX_THREADS,
// 64 in Debian's build), which cut a larger count behind the engine's back. In this process, not a forked child:
// libgomp hangs a child that starts a team of several threads after its parent ran one.
TEST(MatrixProducts, AProductLeavesTheThreadCountAsConfigured) {
  const int count = configure_cpu_threads(0);
  ASSERT_TRUE(large_product_is_finite());
  EXPECT_EQ(omp_get_max_threads(), count);
}

#if BERTRAIN_HAS_BLAS
// CMake's check ran the library it found; this checks the one the binary loads (its RUNPATH, not a system-wide
// libopenblas.so.0 that Debian's alternatives may point at the pthreads build).
TEST(MatrixProducts, BlasIsOpenBlasBuiltForOpenMp) { EXPECT_EQ(openblas_get_parallel(), 2); }
#endif

}  // namespace
}  // namespace bertrain

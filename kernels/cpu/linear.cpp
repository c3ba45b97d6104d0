#include "kernels/linear.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "kernels/cpu/eigen_maps.h"

namespace bertrain {

namespace {

// sums[cols] (=) Σ_rows x[rows, cols] in a fixed row order, not Eigen's colwise().sum(): Eigen peels unaligned
// leading columns onto a path that adds in another order, so the result depended on the output's heap address
// and a resumed run (different allocations) drifted from an uninterrupted one.
template <typename T>
void column_sums_in_row_order(T* sums, const T* x, int rows, int cols) {
  std::fill(sums, sums + cols, T(0));
  for (int r = 0; r < rows; ++r) {
    const T* row = x + static_cast<std::size_t>(r) * cols;
    for (int c = 0; c < cols; ++c) sums[c] += row[c];
  }
}

template <typename T>
bool overlap(const T* a, std::size_t a_count, const T* b, std::size_t b_count) {
  const auto a0 = reinterpret_cast<std::uintptr_t>(a), b0 = reinterpret_cast<std::uintptr_t>(b);
  return a0 < b0 + b_count * sizeof(T) && b0 < a0 + a_count * sizeof(T);
}

}  // namespace

template <typename T>
void linear_forward_cpu(T* y, const T* x, const T* w, const T* b, int rows, int in, int out) {
  MatrixMap<T> ym(y, rows, out);
  ym.noalias() = ConstMatrixMap<T>(x, rows, in) * ConstMatrixMap<T>(w, out, in).transpose();
  if (b != nullptr) ym.rowwise() += ConstRowVectorMap<T>(b, out);
}

template <typename T>
void linear_backward_cpu(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, int rows, int in, int out,
                         bool accumulate_dx) {
  ConstMatrixMap<T> dym(dy, rows, out);
  if (dx != nullptr) {
    MatrixMap<T> dxm(dx, rows, in);
    if (accumulate_dx) {
      dxm.noalias() += dym * ConstMatrixMap<T>(w, out, in);
    } else {
      dxm.noalias() = dym * ConstMatrixMap<T>(w, out, in);
    }
  }
  MatrixMap<T>(dw, out, in).noalias() = dym.transpose() * ConstMatrixMap<T>(x, rows, in);
  if (db != nullptr) column_sums_in_row_order(db, dy, rows, out);
}

template <typename T>
void linear_activation_forward_cpu(T* y, T* pre, const T* x, const T* w, const T* b, int rows, int in, int out,
                                   Activation act) {
  const std::size_t n = static_cast<std::size_t>(rows) * out;
  BERTRAIN_CHECK(!overlap(y, n, pre, n), "linear_activation_forward_cpu: y overlaps pre (pre is kept for backward)");
  linear_forward_cpu(pre, x, w, b, rows, in, out);
  activation_forward_cpu(y, pre, n, act);
}

template <typename T>
void linear_activation_backward_data_cpu(T* dpre, T* dbias, const T* dy, const T* w, const T* pre, int rows, int in,
                                         int out, Activation act) {
  const std::size_t n = static_cast<std::size_t>(rows) * in;
  BERTRAIN_CHECK(!overlap(dpre, n, dy, static_cast<std::size_t>(rows) * out) &&
                     !overlap(dpre, n, w, static_cast<std::size_t>(out) * in) && !overlap(dpre, n, pre, n),
                 "linear_activation_backward_data_cpu: dpre overlaps dy, w or pre");
  MatrixMap<T>(dpre, rows, in).noalias() = ConstMatrixMap<T>(dy, rows, out) * ConstMatrixMap<T>(w, out, in);
  activation_backward_cpu(dpre, dpre, pre, n, act);
  if (dbias != nullptr) column_sums_in_row_order(dbias, dpre, rows, in);
}

template void linear_forward_cpu<float>(float*, const float*, const float*, const float*, int, int, int);
template void linear_forward_cpu<double>(double*, const double*, const double*, const double*, int, int, int);
template void linear_backward_cpu<float>(float*, float*, float*, const float*, const float*, const float*, int, int,
                                         int, bool);
template void linear_backward_cpu<double>(double*, double*, double*, const double*, const double*, const double*,
                                          int, int, int, bool);
template void linear_activation_forward_cpu<float>(float*, float*, const float*, const float*, const float*, int, int,
                                                   int, Activation);
template void linear_activation_forward_cpu<double>(double*, double*, const double*, const double*, const double*, int,
                                                    int, int, Activation);
template void linear_activation_backward_data_cpu<float>(float*, float*, const float*, const float*, const float*, int,
                                                         int, int, Activation);
template void linear_activation_backward_data_cpu<double>(double*, double*, const double*, const double*,
                                                          const double*, int, int, int, Activation);

}  // namespace bertrain

#include "kernels/linear.h"

#include <algorithm>
#include <cstddef>

#include "kernels/cpu/eigen_maps.h"

namespace bertrain {

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
  if (db != nullptr) {
    // A fixed row order, not Eigen's colwise().sum(): Eigen peels unaligned leading columns onto a path
    // that adds in another order, so the result depended on db's heap address and a resumed run
    // (different allocations) drifted from an uninterrupted one.
    std::fill(db, db + out, T(0));
    for (int r = 0; r < rows; ++r) {
      const T* row = dy + static_cast<std::size_t>(r) * out;
      for (int c = 0; c < out; ++c) db[c] += row[c];
    }
  }
}

template void linear_forward_cpu<float>(float*, const float*, const float*, const float*, int, int, int);
template void linear_forward_cpu<double>(double*, const double*, const double*, const double*, int, int, int);
template void linear_backward_cpu<float>(float*, float*, float*, const float*, const float*, const float*, int, int,
                                         int, bool);
template void linear_backward_cpu<double>(double*, double*, double*, const double*, const double*, const double*,
                                          int, int, int, bool);

}  // namespace bertrain

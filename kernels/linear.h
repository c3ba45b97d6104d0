// Fully connected layer in Hugging Face layout: W is [out, in], y = x · Wᵀ + b.
#pragma once

namespace bertrain {

// y[rows, out] = x[rows, in] · Wᵀ + b (b may be null). Written (=).
template <typename T>
void linear_forward_cpu(T* y, const T* x, const T* w, const T* b, int rows, int in, int out);

// dx[rows, in] = dy · W, written (=) or accumulated (+=) when accumulate_dx; dx may be null (not needed).
// dw[out, in] = dyᵀ · x and db[out] = Σ_rows dy, both written (=); db may be null.
template <typename T>
void linear_backward_cpu(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, int rows, int in, int out,
                         bool accumulate_dx);

}  // namespace bertrain

// Element-wise activations of BERT: the intermediate (feed-forward) activation and the pooler's tanh.
#pragma once

#include <cstddef>
#include <string>

#include "core/bf16.h"
#include "core/cuda/gpu_handles.h"

namespace bertrain {

enum class Activation {
  kGelu,      // exact: 0.5 x (1 + erf(x / sqrt 2)); Hugging Face "gelu"
  kGeluTanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); "gelu_new", "gelu_pytorch_tanh"
  kRelu,      // "relu"
  kTanh,      // the pooler's activation
};

// Parses a Hugging Face hidden_act name; throws Error naming the value for unknown ones.
Activation activation_from_name(const std::string& name);
// The hidden_act names activation_from_name takes, for messages.
inline constexpr const char* kActivationNames = "gelu, gelu_python, gelu_new, gelu_pytorch_tanh, gelu_python_tanh, "
                                                "gelu_fast, relu";

// y = act(x), n elements; y may alias x.
template <typename T>
void activation_forward_cpu(T* y, const T* x, std::size_t n, Activation act);

// dx = dy * act'(x), from the saved pre-activation x; dx may alias dy.
template <typename T>
void activation_backward_cpu(T* dx, const T* dy, const T* x, std::size_t n, Activation act);

// ---- CUDA (kernels/cuda/activation.cu). T is float or bf16; arithmetic in float. Grid-stride, one thread
// per element.
template <typename T>
void activation_forward_cuda(T* y, const T* x, std::size_t n, Activation act, CudaStream stream);
template <typename T>
void activation_backward_cuda(T* dx, const T* dy, const T* x, std::size_t n, Activation act, CudaStream stream);
// The bias + activation after a GEMM: x[rows, cols] += b[cols] (x keeps the pre-activation that backward
// needs), then y = act(x). y must not alias x.
template <typename T>
void bias_activation_forward_cuda(T* y, T* x, const T* bias, int rows, int cols, Activation act, CudaStream stream);

}  // namespace bertrain

// The benchmarks of `bertrain bench kernels`, one per CUDA launcher, defined one kernel family per file in this
// folder (embedding.cpp, layernorm.cpp, ...). Each checks its kernel against the CPU twin, then times it
// (harness.h). The templates are instantiated for float and bf16, the two --precision modes.
//
// Byte formulas use e = sizeof(T) (4 for fp32, 2 for bf16); statistics, parameter gradients, Adam state and
// targets are fp32 (4 bytes) whatever T is. Each formula is written next to its benchmark.
#pragma once

#include <cstddef>

#include "tools/bench_kernels/harness.h"

namespace bertrain::bench {

// embedding.cpp
template <typename T>
void bench_embedding_forward(Runner& r);
template <typename T>
void bench_embedding_backward(Runner& r);

// layernorm.cpp
template <typename T>
void bench_layernorm_forward(Runner& r);
template <typename T>
void bench_layernorm_backward(Runner& r);
// ... and fused with its dropout (the float residual stream, a T copy): with `residual` the dropout before it and the
// residual add, every LayerNorm inside a layer (dropout_residual_layernorm_*); else the dropout after it, the
// embeddings' LayerNorm (layernorm_dropout_*).
template <typename T>
void bench_fused_layernorm_forward(Runner& r, bool residual);
template <typename T>
void bench_fused_layernorm_backward(Runner& r, bool residual);

// dropout.cpp: dropout_forward, or dropout_backward when !forward.
template <typename T>
void bench_dropout(Runner& r, bool forward);

// linear.cpp: the GEMMs of a BERT layer and the reductions and adds around them.
template <typename T>
void bench_linear_forward(Runner& r);
template <typename T>
void bench_linear_backward(Runner& r);
// ... the feed-forward's GEMMs with their activation: intermediate dense + GELU (forward), and the output dense's
// dx through GELU' with the intermediate bias gradient (backward), exact GELU and the cuBLASLt tanh-GELU epilogues.
template <typename T>
void bench_linear_activation_forward(Runner& r);
template <typename T>
void bench_linear_activation_backward_data(Runner& r);
template <typename T>
void bench_column_sum(Runner& r);
template <typename T>
void bench_add_inplace(Runner& r);

// attention.cpp
template <typename T>
void bench_attention_forward(Runner& r);
template <typename T>
void bench_attention_backward(Runner& r);

// activation.cpp: bias + GELU of the intermediate layer, and GELU alone (activation_backward when !forward).
template <typename T>
void bench_bias_activation_forward(Runner& r);
template <typename T>
void bench_activation(Runner& r, bool forward);

// loss.cpp
template <typename T>
void bench_loss(Runner& r);

// optimizer.cpp: fp32 whatever the precision (parameters, gradients and Adam state are fp32).
// Elements of the flat parameter buffer of a BERT classifier of these shapes (padding included, as the
// trainer allocates it): what Adam, the bf16 cast and the gradient norm run over.
std::size_t parameter_elements(const Shape& s);
void bench_adam(Runner& r, bool bf16_copy);
void bench_cast(Runner& r, bool to_bf16);
void bench_sum_of_squares(Runner& r);

}  // namespace bertrain::bench

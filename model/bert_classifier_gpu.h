// A BERT-family sequence classifier (model/model_family.h) on a CUDA device: the same sequence of ops as the CPU
// model (model/bert_classifier.h), each a kernels/cuda launcher, all on one stream. T is the storage type of
// weights and GEMM operands: float (--precision fp32, matches the CPU engine) or bf16 (--precision bf16).
//
// A layer is seven launches forward: the Q/K/V GEMM (N = 3H, bias epilogue), the fused attention (flash form,
// dropout inside), the attention output GEMM (bias epilogue), dropout + residual + LayerNorm in one kernel, the
// intermediate GEMM with bias and activation in its epilogue (plus an activation kernel for the exact erf GELU of
// BERT and SciBERT: cuBLASLt's GELU epilogue is the tanh form), the output GEMM, and dropout + residual +
// LayerNorm again; backward mirrors it (bias gradients and the activation derivative ride on the GEMMs' epilogues
// where cuBLASLt offers them, kernels/linear.h).
//
// What is float whatever T is, as torch.autocast(bfloat16) keeps it for Hugging Face BERT:
// - the residual stream: every LayerNorm output (the layer inputs and outputs, the attention block's output),
//   which is the next LayerNorm's residual input; each LayerNorm also writes a T copy that the next GEMMs read
//   (autocast's cast of a linear layer's input), so the residual add z = dropout(sublayer(x)) + x runs in fp32;
// - the residual stream's gradient (dy_): the LayerNorm backwards update it in place, and the Q/K/V and
//   intermediate dx GEMMs accumulate into it (bf16 operands, fp32 C), which is also where the residual adds
//   happen, in fp32;
// - the attention's softmax statistics (scores, lse), LayerNorm statistics, and all parameter gradients.
// What is T: weights, the GEMM outputs inside a sublayer (qkv, ctx, the dense outputs, the intermediate pre- and
// post-activation), the embedding sum, the pooler and classifier head, and the gradients inside a sublayer. For
// T = float the residual stream and its T copy are one buffer, and the sequence of float operations is the one
// of the all-float engine.
//
// Every activation is a slice of one device arena that the owner allocates once (arena_bytes), so forward and
// backward never allocate or synchronise with the host. A model built for BertUse::kInference holds one layer's
// activations and no backward scratch, and one for BertUse::kTrainingRecompute every layer's input and one layer's
// activations, which backward recomputes layer by layer, as the CPU model does (model/bert_classifier.h). No CUDA
// headers here: model/ only calls the launchers of kernels/*.h.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/bf16.h"
#include "core/cuda/gpu_handles.h"
#include "model/bert_classifier.h"

namespace bertrain {

template <typename T>
class BertClassifierGpu {
 public:
  // Bytes of device memory the activations and scratch of a model with these sizes need.
  static std::size_t arena_bytes(const BertConfig& config, int num_labels, const BatchLimits& limits,
                                 BertUse use = BertUse::kTraining);
  // Widest matrix a column reduction sees (for GpuContext's workspace: gpu_reduction_workspace_elements).
  static int widest_reduction(const BertConfig& config) {
    return std::max({config.intermediate_size, config.hidden_size, config.embedding_width()});
  }

  // `arena` is device memory of arena_bytes(..., use) bytes, owned by the caller and kept alive with the model.
  BertClassifierGpu(const BertConfig& config, int num_labels, const BatchLimits& limits, const GpuHandles& handles,
                    void* arena, std::size_t arena_size, BertUse use = BertUse::kTraining);

  const BertConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  int num_labels() const { return num_labels_; }
  const BatchLimits& limits() const { return limits_; }

  // Enqueues the forward pass. `params` (device, layout()) in T; batch.input_ids [T] and batch.cu_seqlens [B + 1]
  // are DEVICE pointers whose ids and offsets the caller has checked on the host (against the vocabulary,
  // check_row_offsets), and batch.tokens / batch.longest are the host's counts.
  void forward(const T* params, const BertBatch& batch, const DropoutSetting& dropout);
  // Enqueues the backward pass of the last forward: grads (device, layout(), float) written (=) from
  // dlogits [B, C] (device, T). After the gradients at layout offsets >= `offset` are final,
  // on_gradients_ready(offset) is called (host side, in enqueue order: the classifier head first, then
  // layers L-1 … 0, then the embeddings at offset 0) so that a data-parallel caller can start reducing
  // them while the rest of the backward runs.
  void backward(float* grads, const T* params, const T* dlogits,
                const std::function<void(std::size_t offset)>& on_gradients_ready = {});

  T* logits() const { return logits_; }    // [B, C] device
  T* dlogits() const { return dlogits_; }  // [max_batch, C] device scratch for the caller's loss gradient (training)
  const T* pooled_output() const { return pooled_; }                // [B, H]
  const float* sequence_output() const { return stream_.back(); }  // [T, H], the float residual stream

 private:
  void layer_forward(int l, const BertLayerWeights<const T>& lw);

  // Token-wise tensors are [T, H], [T, 3H] (qkv: the fused projection the attention reads by strides) or [T, I]
  // (packed). attn_out and out_dense are the dense outputs before their dropout (the fused
  // dropout + residual + LayerNorm regenerates the mask in backward); inter_pre and inter_act the intermediate
  // dense before and after its activation (both written by one GEMM epilogue, both read by backward).
  struct LayerActivations {
    T *qkv, *ctx, *attn_out, *inter_pre, *inter_act, *out_dense;
    float* lse;      // [NH, T] the attention's softmax statistics (flash-attention form: no probabilities kept)
    float* ln1_out;  // [T, H] the attention block's output: residual stream (float)
    T* ln1_out_t;    // [T, H] its T copy, the intermediate dense's input (ln1_out itself when T is float)
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd;
    // bf16 only: the attention dropout mask the tensor-core forward draws, read by the backward instead of drawing
    // it again (kernels/attention.h); null for float, whose attention kernels draw in each direction.
    uint32_t* attention_mask = nullptr;
  };

  BertConfig config_;
  int num_labels_;
  BatchLimits limits_;
  BertUse use_;
  ParamLayout layout_;
  GpuHandles handles_;

  int32_t* positions_;  // [T] each token's row of the position table (embedding_positions_cuda)
  int64_t* slots_;      // [T] each token's dropout row
  T *emb_sum_;                   // [T, E] (E the embedding width)
  float *emb_mean_, *emb_rstd_;
  // ELECTRA's embeddings_project input: the embedding LayerNorm's output after dropout [T, E], float and T copy, and
  // its gradient; null without a projection.
  float* emb_norm_ = nullptr;
  T* emb_norm_t_ = nullptr;
  float* d_emb_norm_ = nullptr;
  // L + 1 tensors [T, H]: the input of layer l (the last is the encoder's output) as the float residual stream,
  // and its T copy that the Q/K/V GEMMs read (the same pointers when T is float).
  std::vector<float*> stream_;
  std::vector<T*> stream_t_;
  std::vector<LayerActivations> layers_;  // L (inference, recomputing: L copies of one set)
  T *cls_, *cls_drop_, *pool_pre_, *pooled_, *pooled_drop_, *logits_;
  // The backward's scratch, shared by all layers (null in a model built for inference).
  T* dlogits_ = nullptr;
  T* d_inter_ = nullptr;                  // [T, I] the intermediate pre-activation's gradient
  T* d_qkv_ = nullptr;                    // [T, 3H]
  float* dy_ = nullptr;                   // [T, H] gradient of the residual stream (float; every update in place)
  float* d_emb_ = nullptr;                // [T, E] the embedding sum's gradient
  T *d_b_ = nullptr, *d_c_ = nullptr;     // [T, H] gradients inside a sublayer
  T* d_small_a_ = nullptr;                // [B, H] head gradients
  float* d_small_b_ = nullptr;            // [B, H] the head's input gradient, scattered into dy_
  float* attention_workspace_ = nullptr;  // attention_workspace_floats_cuda
  void* embedding_scratch_ = nullptr;
  std::size_t embedding_scratch_bytes_ = 0;

  BoundWeights<const T> weights_;
  BoundWeights<float> gradients_;

  BertBatch batch_;
  DropoutSetting dropout_;
  std::size_t arena_used_ = 0;  // bytes carved from the arena (arena_bytes builds a model without one)
};

}  // namespace bertrain

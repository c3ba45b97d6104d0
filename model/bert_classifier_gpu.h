// BertForSequenceClassification on a CUDA device: the same sequence of ops as the CPU model
// (model/bert_classifier.h), each a kernels/cuda launcher, all on one stream. T is the storage type of
// weights and GEMM operands: float (--precision fp32, matches the CPU engine) or bf16 (--precision bf16).
//
// What is float whatever T is, as torch.autocast(bfloat16) keeps it for Hugging Face BERT:
// - the residual stream: every LayerNorm output (the layer inputs and outputs, the attention block's output),
//   which is the next LayerNorm's residual input; each LayerNorm also writes a T copy that the next GEMMs read
//   (autocast's cast of a linear layer's input), so the residual add z = sublayer(x) + x runs in fp32;
// - the residual stream's gradient (dy_, d_ln1_): the Q/K/V and intermediate dx GEMMs write and accumulate it
//   with bf16 operands and an fp32 C, the residual adds run in fp32, LayerNorm backward reads and writes it in
//   float, and dropout backward rounds it to T once for the sublayer's GEMMs;
// - the attention scores before the softmax (inside attention_forward_cuda), LayerNorm statistics, and all
//   parameter gradients.
// What is T: weights, the GEMM outputs inside a sublayer (q, k, v, probs, ctx, attention and feed-forward
// dense outputs, the intermediate activation), the embedding sum, the pooler and classifier head, and the
// gradients inside a sublayer. For T = float the residual stream and its T copy are one buffer, and the
// sequence of float operations is the one of the all-float engine.
//
// Every activation is a slice of one device arena that the owner allocates once (arena_bytes), so forward and
// backward never allocate or synchronise with the host. No CUDA headers here: model/ only calls the launchers of
// kernels/*.h.
#pragma once

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
  static std::size_t arena_bytes(const BertConfig& config, int num_labels, const BatchLimits& limits);
  // Widest matrix a column reduction sees (for GpuContext's workspace: gpu_reduction_workspace_elements).
  static int widest_reduction(const BertConfig& config) { return config.intermediate_size > config.hidden_size
                                                                     ? config.intermediate_size
                                                                     : config.hidden_size; }

  // `arena` is device memory of arena_bytes(...) bytes, owned by the caller and kept alive with the model.
  BertClassifierGpu(const BertConfig& config, int num_labels, const BatchLimits& limits, const GpuHandles& handles,
                    void* arena, std::size_t arena_size);

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
  T* dlogits() const { return dlogits_; }  // [max_batch, C] device scratch for the caller's loss gradient
  const T* pooled_output() const { return pooled_; }                // [B, H]
  const float* sequence_output() const { return stream_.back(); }  // [T, H], the float residual stream

 private:
  // Token-wise tensors are [T, H] or [T, I] (packed); qh, kh, vh [B, NH, S, HD] and probs [B, NH, S, S] are the
  // attention's padded internals (kernels/attention.h).
  struct LayerActivations {
    T *qh, *kh, *vh, *probs, *ctx, *attn_out, *inter_pre, *out_dense;
    float* ln1_out;  // [T, H] the attention block's output: residual stream (float)
    T* ln1_out_t;    // [T, H] its T copy, the intermediate dense's input (ln1_out itself when T is float)
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd;
  };

  BertConfig config_;
  int num_labels_;
  BatchLimits limits_;
  ParamLayout layout_;
  GpuHandles handles_;

  int32_t* positions_;  // [T] each token's position in its row (kernels/packed.h)
  int64_t* slots_;      // [T] each token's dropout row
  T *emb_sum_;
  float *emb_mean_, *emb_rstd_;
  // L + 1 tensors [T, H]: the input of layer l (the last is the encoder's output) as the float residual stream,
  // and its T copy that the Q/K/V GEMMs read (the same pointers when T is float).
  std::vector<float*> stream_;
  std::vector<T*> stream_t_;
  std::vector<LayerActivations> layers_;
  T *cls_, *pool_pre_, *pooled_, *pooled_drop_, *logits_, *dlogits_;
  // Scratch shared by all layers.
  T *q_, *k_, *v_;                  // [T, H] projections before the head-major permute
  T *act_, *d_inter_;               // [T, I]
  float *dy_, *d_ln1_;              // [T, H] gradients of the residual stream (float; LayerNorm dz in place)
  T *d_b_, *d_c_, *d_d_, *d_e_;     // [T, H] gradients inside a sublayer
  T* d_small_a_;                    // [B, H] head gradients
  float* d_small_b_;                // [B, H] the pooler's input gradient, scattered into dy_
  T* attention_workspace_;
  void* embedding_scratch_;
  std::size_t embedding_scratch_bytes_;

  BoundWeights<const T> weights_;
  BoundWeights<float> gradients_;

  BertBatch batch_;
  DropoutSetting dropout_;
  std::size_t arena_used_ = 0;  // bytes carved from the arena (arena_bytes builds a model without one)
};

}  // namespace bertrain

// BertForSequenceClassification on a CUDA device: the same sequence of ops as the CPU model
// (model/bert_classifier.h), each a kernels/cuda launcher, all on one stream. T is the storage type of
// weights and activations: float (--precision fp32, matches the CPU engine) or bf16 (--precision bf16);
// gradients are always float and LayerNorm statistics float. Every activation is a slice of one device
// arena that the owner allocates once (arena_bytes), so forward and backward never allocate or
// synchronise with the host. No CUDA headers here: model/ only calls the launchers of kernels/*.h.
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
  static std::size_t arena_bytes(const BertConfig& config, int num_labels, int max_batch, int max_seq);
  // Widest matrix a column reduction sees (for GpuContext's workspace: gpu_reduction_workspace_elements).
  static int widest_reduction(const BertConfig& config) { return config.intermediate_size > config.hidden_size
                                                                     ? config.intermediate_size
                                                                     : config.hidden_size; }

  // `arena` is device memory of arena_bytes(...) bytes, owned by the caller and kept alive with the model.
  BertClassifierGpu(const BertConfig& config, int num_labels, int max_batch, int max_seq, const GpuHandles& handles,
                    void* arena, std::size_t arena_size);

  const BertConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  int num_labels() const { return num_labels_; }
  int max_batch() const { return max_batch_; }
  int max_seq() const { return max_seq_; }

  // Enqueues the forward pass. `params` (device, layout()) in T; batch.input_ids and batch.attention_mask are
  // DEVICE pointers to [B, S] int32 whose ids the caller has checked against the vocabulary.
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
  const T* pooled_output() const { return pooled_; }              // [B, H]
  const T* sequence_output() const { return layer_in_.back(); }  // [B, S, H]

 private:
  struct LayerActivations {
    T *qh, *kh, *vh, *probs, *ctx, *attn_out, *ln1_out, *inter_pre, *out_dense;
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd;
  };

  BertConfig config_;
  int num_labels_, max_batch_, max_seq_;
  ParamLayout layout_;
  GpuHandles handles_;

  T *emb_sum_;
  float *emb_mean_, *emb_rstd_;
  std::vector<T*> layer_in_;  // L + 1 tensors [T, H]: the input of layer l; the last is the output
  std::vector<LayerActivations> layers_;
  T *cls_, *pool_pre_, *pooled_, *pooled_drop_, *logits_, *dlogits_;
  // Scratch shared by all layers.
  T *q_, *k_, *v_;                             // [T, H] projections before the head-major permute
  T *act_, *d_inter_;                          // [T, I]
  T *dy_, *d_a_, *d_b_, *d_c_, *d_d_, *d_e_;  // [T, H]
  T *d_small_a_, *d_small_b_;                  // [B, H]
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

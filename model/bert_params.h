// The parameters of a BERT sequence classifier: their Hugging Face names and shapes (the flat layout), and
// typed pointers into any buffer with that layout (parameters, gradients), so kernels get raw pointers.
#pragma once

#include <string>
#include <vector>

#include "core/param_store.h"
#include "model/bert_config.h"

namespace bertrain {

// Layout of a BertForSequenceClassification with `num_labels` outputs, named as Hugging Face names them
// ("bert." prefix, LayerNorm.weight / .bias, classifier.weight / .bias).
ParamLayout bert_classifier_layout(const BertConfig& config, int num_labels);

// The offsets at which the backward passes (BertClassifierGpu::backward) report finished gradients, in their
// order: the head from bert.pooler.dense.weight up, then each layer from its query weight up, last layer
// first, then 0 (the embeddings). Data-parallel gradient buckets are planned from this list alone.
std::vector<std::size_t> backward_ready_offsets(const ParamLayout& layout, int num_layers);

template <typename T>
struct BertLayerWeights {
  T *qkv_w, *qkv_b;                                          // [3H, H], [3H]: query, key, value back to back
  T *attn_out_w, *attn_out_b, *attn_ln_g, *attn_ln_b;       // [H, H], [H], [H], [H]
  T *inter_w, *inter_b;                                      // [I, H], [I]
  T *out_w, *out_b, *out_ln_g, *out_ln_b;                    // [H, I], [H], [H], [H]
};

template <typename T>
struct BertWeights {
  T *word_emb, *pos_emb, *type_emb;  // [V, H], [max_pos, H], [type_vocab, H]
  T *emb_ln_g, *emb_ln_b;            // [H]
  std::vector<BertLayerWeights<T>> layers;
  T *pooler_w, *pooler_b;          // [H, H], [H]
  T *classifier_w, *classifier_b;  // [C, H], [C]
};

// Pointers into `base`, a buffer laid out by `layout` (from bert_classifier_layout).
template <typename T>
BertWeights<T> bind_bert_weights(const ParamLayout& layout, int num_layers, T* base);

// bind_bert_weights for the buffer a model was last given, rebuilt only when the buffer moves, so that
// steady-state training steps allocate nothing.
template <typename T>
class BoundWeights {
 public:
  const BertWeights<T>& bind(const ParamLayout& layout, int num_layers, T* base) {
    if (base != base_) {
      views_ = bind_bert_weights(layout, num_layers, base);
      base_ = base;
    }
    return views_;
  }

 private:
  T* base_ = nullptr;
  BertWeights<T> views_{};
};

}  // namespace bertrain

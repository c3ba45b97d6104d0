// The parameters of a BERT-family sequence classifier: their Hugging Face names and shapes (the flat layout), and
// typed pointers into any buffer with that layout (parameters, gradients), so kernels get raw pointers.
#pragma once

#include <string>
#include <vector>

#include "core/param_store.h"
#include "model/bert_config.h"

namespace bertrain {

// Layout of the family's sequence classifier (BertForSequenceClassification, RobertaForSequenceClassification, ...)
// with `num_labels` outputs, every tensor named as transformers names it (model/model_family.h): the embeddings
// (and ELECTRA's embeddings_project), the layers, then the head's dense layer and output layer, so that a saved
// model loads with no missing or unexpected keys.
ParamLayout bert_classifier_layout(const BertConfig& config, int num_labels);

// The offsets at which the backward passes (BertClassifierGpu::backward) report finished gradients, in their
// order: the head from its dense weight up, then each layer from its query weight up, last layer first, then 0
// (the embeddings). Data-parallel gradient buckets are planned from this list alone.
std::vector<std::size_t> backward_ready_offsets(const ParamLayout& layout, const BertConfig& config);

template <typename T>
struct BertLayerWeights {
  T *qkv_w, *qkv_b;                                          // [3H, H], [3H]: query, key, value back to back
  T *attn_out_w, *attn_out_b, *attn_ln_g, *attn_ln_b;       // [H, H], [H], [H], [H]
  T *inter_w, *inter_b;                                      // [I, H], [I]
  T *out_w, *out_b, *out_ln_g, *out_ln_b;                    // [H, I], [H], [H], [H]
};

// E is the embedding width (config.embedding_width(): H except in an ELECTRA with embeddings_project).
template <typename T>
struct BertWeights {
  T *word_emb, *pos_emb, *type_emb;  // [V, E], [max_pos, E], [type_vocab, E]; type_emb null without token types
  T *emb_ln_g, *emb_ln_b;            // [E]
  T *emb_proj_w, *emb_proj_b;        // [H, E], [H]; null without a projection
  std::vector<BertLayerWeights<T>> layers;
  T *head_dense_w, *head_dense_b;  // [H, H], [H]: BERT's pooler, RoBERTa's classifier.dense, DistilBERT's pre_classifier
  T *classifier_w, *classifier_b;  // [C, H], [C]: the output layer (classifier, or classifier.out_proj)
};

// Pointers into `base`, a buffer laid out by `layout` (from bert_classifier_layout(config, ...)).
template <typename T>
BertWeights<T> bind_bert_weights(const ParamLayout& layout, const BertConfig& config, T* base);

// bind_bert_weights for the buffer a model was last given, rebuilt only when the buffer moves, so that
// steady-state training steps allocate nothing.
template <typename T>
class BoundWeights {
 public:
  const BertWeights<T>& bind(const ParamLayout& layout, const BertConfig& config, T* base) {
    if (base != base_) {
      views_ = bind_bert_weights(layout, config, base);
      base_ = base;
    }
    return views_;
  }

 private:
  T* base_ = nullptr;
  BertWeights<T> views_{};
};

}  // namespace bertrain

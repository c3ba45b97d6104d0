// BertForSequenceClassification on the CPU: forward and hand-derived backward as a sequence of kernel
// calls (kernels/*.h). All activations live in one arena sized at construction for the largest batch, so
// a training step allocates nothing. Templated on the scalar type: float for training, double for
// finite-difference gradient checks.
#pragma once

#include <cstdint>
#include <vector>

#include "core/param_store.h"
#include "core/philox.h"
#include "model/bert_config.h"
#include "model/bert_params.h"

namespace bertrain {

// One padded batch on the host. ids and mask are [B, S] row-major; mask is 1 for real tokens, 0 for padding.
struct BertBatch {
  const int32_t* input_ids = nullptr;
  const int32_t* attention_mask = nullptr;
  int batch = 0;
  int seq = 0;
  // Row of the global batch that row 0 is (data-parallel slices): dropout masks are drawn by global
  // row, so N ranks draw what one process draws (kernels/dropout.h).
  int64_t first_sample = 0;
};

// Dropout probabilities of one forward pass and the key of its masks. All zero: evaluation.
struct DropoutSetting {
  float hidden = 0.0f;      // embeddings, attention output, feed-forward output (config hidden_dropout_prob)
  float attention = 0.0f;   // attention probabilities (config attention_probs_dropout_prob)
  float classifier = 0.0f;  // before the classifier (config classifier_dropout, or the --dropout flag)
  uint64_t seed = 0;
  uint32_t step = 0;        // the optimizer step: a new mask every step

  // The stream of dropout site `site` (model/dropout_sites.h).
  RandomKey key(uint32_t site) const { return RandomKey{seed, step, site}; }

  // Training dropouts from the config; the classifier's falls back to hidden_dropout_prob as in HF.
  static DropoutSetting training(const BertConfig& config, uint64_t seed, uint32_t step);
};

template <typename T>
class BertClassifier {
 public:
  BertClassifier(const BertConfig& config, int num_labels, int max_batch, int max_seq);

  const BertConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  int num_labels() const { return num_labels_; }

  // Runs the model on `batch` with the parameters `params` (layout()); results: logits() and friends.
  void forward(const T* params, const BertBatch& batch, const DropoutSetting& dropout);
  // Gradients of the last forward (same params, same batch) given dL/dlogits [B, C]; grads (=) in layout().
  void backward(T* grads, const T* params, const T* dlogits);

  const T* logits() const { return logits_; }              // [B, C]
  const T* pooled_output() const { return pooled_; }       // [B, H], tanh(dense(CLS)) before dropout
  const T* sequence_output() const { return layer_in_.back(); }  // [B, S, H]
  std::size_t activation_bytes() const { return arena_.size() * sizeof(T); }

 private:
  struct LayerActivations {
    T *q, *k, *v, *probs, *ctx, *attn_out, *ln1_mean, *ln1_rstd, *ln1_out, *inter_pre, *out_dense, *ln2_mean,
        *ln2_rstd;
  };

  BertConfig config_;
  int num_labels_;
  int max_batch_, max_seq_;
  int threads_ = 1;  // OpenMP threads the attention scratch was sized for
  ParamLayout layout_;
  std::vector<T> arena_;

  // Saved by forward for backward ([T, H] unless noted; T = B·S tokens).
  T *emb_sum_, *emb_mean_, *emb_rstd_;      // [T, H], [T], [T]
  std::vector<T*> layer_in_;                // L + 1 tensors: the input of layer l; the last is the output
  std::vector<LayerActivations> layers_;
  T *cls_, *pool_pre_, *pooled_, *pooled_drop_, *logits_;  // [B, H] ×4, [B, C]
  // Scratch shared by all layers.
  T *act_scratch_, *d_inter_;               // [T, I]
  T *dy_, *d_a_, *d_b_, *d_c_, *d_d_, *d_e_;  // [T, H]
  T *d_small_a_, *d_small_b_;               // [B, H]
  T* attention_scratch_;

  // Typed views of the parameter and gradient buffers.
  BoundWeights<const T> weights_;
  BoundWeights<T> gradients_;

  // The batch and dropout of the last forward, reused by backward.
  BertBatch batch_;
  DropoutSetting dropout_;
};

}  // namespace bertrain

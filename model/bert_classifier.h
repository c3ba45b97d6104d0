// A BERT-family sequence classifier (BertForSequenceClassification, RoBERTa's, XLM-R's, DistilBERT's, ELECTRA's:
// model/model_family.h) on the CPU: forward and hand-derived backward as a sequence of kernel calls (kernels/*.h)
// over packed batches: every token-wise op runs on the T real tokens, attention runs per row over that row's
// tokens, the head reads each row's first ([CLS] / <s>) token. All activations live in one arena
// sized at construction for the largest batch (BatchLimits), so a training step allocates nothing. Templated on the scalar type: float for training, double for
// finite-difference gradient checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/param_store.h"
#include "core/philox.h"
#include "model/bert_config.h"
#include "model/bert_params.h"

namespace bertrain {

// One packed batch (DESIGN.md): the T tokens of B rows back to back, no padding. Host memory for the CPU model;
// the GPU model takes device ids and offsets with the same host-side counts.
struct BertBatch {
  const int32_t* input_ids = nullptr;   // [T]
  const int32_t* cu_seqlens = nullptr;  // [B + 1] row offsets: row b is tokens [cu_seqlens[b], cu_seqlens[b + 1])
  int batch = 0;                        // B
  int tokens = 0;                       // T = cu_seqlens[B]
  int longest = 0;                      // S = max_b L_b
  // Row of the global batch that row 0 is (data-parallel slices): dropout masks are drawn by global row and
  // position, so N ranks draw what one process draws (kernels/dropout.h).
  int64_t first_sample = 0;
};

// The batch over host arrays ids [T] and cu_seqlens [B + 1] (T and S read from the offsets).
BertBatch packed_batch(const int32_t* ids, const int32_t* cu_seqlens, int batch, int64_t first_sample = 0);

// The largest batch a model is built for. Activations are sized by the tokens, not by rows × longest row.
struct BatchLimits {
  int rows = 0;     // B
  int longest = 0;  // S
  int tokens = 0;   // T, at most rows · longest
};

// Throws Error unless `limits` describe batches that can exist: positive, T ≤ B·S, S within the position table.
void check_limits(const BatchLimits& limits, const BertConfig& config);
// Throws Error starting with `what` when `batch`'s counts exceed `limits` or are not positive.
void check_batch(const BertBatch& batch, const BatchLimits& limits, const char* what);
// check_batch, and the host row offsets against the counts: every row 1..longest tokens, T in all, the longest
// row as long as `longest` says.
void check_host_batch(const BertBatch& batch, const BatchLimits& limits, const char* what);
// check_host_batch, and every token id in [0, vocab_size): what a batch bound for the GPU must pass on the host,
// since a kernel cannot report an out-of-range id or a broken offset.
void check_batch_for_device(const BertBatch& batch, const BatchLimits& limits, int vocab_size, const char* what);

// Dropout probabilities of one forward pass and the key of its masks. All zero: evaluation.
struct DropoutSetting {
  float hidden = 0.0f;      // embeddings, attention output, feed-forward output (config hidden_dropout_prob)
  float attention = 0.0f;   // attention probabilities (config attention_probs_dropout_prob)
  float classifier = 0.0f;  // before the classifier, and before the head's dense layer where the family has that
                            // dropout (config classifier_dropout, or the --dropout flag)
  uint64_t seed = 0;
  uint32_t step = 0;        // the optimizer step: a new mask every step

  // The stream of dropout site `site` (model/dropout_sites.h).
  RandomKey key(uint32_t site) const { return RandomKey{seed, step, site}; }

  // Training dropouts from the config; the classifier's falls back to hidden_dropout_prob as in HF.
  static DropoutSetting training(const BertConfig& config, uint64_t seed, uint32_t step);
};

// What a BertClassifier is built for. Training keeps every layer's activations for backward; inference needs only
// the layer being run, so all layers share one set and the hidden states alternate between two buffers: the
// activations no longer grow with the layers (BERT-base at 4,096 tokens: ~2.6 GB for training, ~0.2 GB for this),
// and backward is refused. Training with recomputation (--gradient-checkpointing, Hugging Face's
// gradient_checkpointing) keeps every layer's input (T × H each) and one shared set of activations, which backward
// fills again for each layer from its input just before that layer's gradient: one more forward pass of the encoder
// for a fraction of the activation memory (the inputs and the backward's scratch stay: 3.2× less for MiniLM, 5.1× for
// BERT-base). The recomputed values are forward's bit for bit (the same operations
// on the same inputs; dropout masks are keyed by seed, step and site, not drawn from a stream), so the gradients are
// the kept-activation model's exactly.
enum class BertUse { kTraining, kTrainingRecompute, kInference };

template <typename T>
class BertClassifier {
 public:
  BertClassifier(const BertConfig& config, int num_labels, const BatchLimits& limits,
                 BertUse use = BertUse::kTraining);
  // Bytes of host memory a model with these sizes allocates for its activations and scratch (the arena and the
  // per-token tables), with OpenMP's current thread count, without allocating them: what a caller checks against
  // the memory it has before building one (engine/memory_fit.h).
  static std::size_t activation_bytes(const BertConfig& config, int num_labels, const BatchLimits& limits,
                                      BertUse use = BertUse::kTraining);

  const BertConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  int num_labels() const { return num_labels_; }
  const BatchLimits& limits() const { return limits_; }

  // Runs the model on `batch` with the parameters `params` (layout()); results: logits() and friends.
  void forward(const T* params, const BertBatch& batch, const DropoutSetting& dropout);
  // Gradients of the last forward (same params, same batch) given dL/dlogits [B, C]; grads (=) in layout(). Throws
  // Error for a model built for inference.
  void backward(T* grads, const T* params, const T* dlogits);

  const T* logits() const { return logits_; }              // [B, C]
  // [B, H] the head's hidden activation act(dense(first token)) before its dropout: BERT's pooled output.
  const T* pooled_output() const { return pooled_; }
  const T* sequence_output() const { return layer_in_.back(); }  // [T, H]
  // Host memory of the activations and scratch: what activation_bytes(config(), ...) said before it was built.
  std::size_t activation_bytes() const { return arena_.size() * sizeof(T) + token_table_bytes(limits_); }

 private:
  void layer_forward(int l, const BertLayerWeights<const T>& lw);
  static std::size_t token_table_bytes(const BatchLimits& limits) {
    return static_cast<std::size_t>(limits.tokens) * (sizeof(int32_t) + sizeof(int64_t));  // positions_, slots_
  }
  // allocate false: the arena is only planned (arena_elements_), for activation_bytes.
  BertClassifier(const BertConfig& config, int num_labels, const BatchLimits& limits, BertUse use, bool allocate);

  struct LayerActivations {
    // inter_act = act(inter_pre) is kept (not recomputed in backward): on the CPU memory is cheaper than the
    // activation's second pass.
    // qkv [T, 3H] (one GEMM, kernels/attention.h); lse [NH, T] the attention's saved softmax statistics.
    T *qkv, *lse, *ctx, *attn_out, *ln1_mean, *ln1_rstd, *ln1_out, *inter_pre, *inter_act, *out_dense, *ln2_mean,
        *ln2_rstd;
  };

  BertConfig config_;
  int num_labels_;
  BatchLimits limits_;
  BertUse use_;
  int threads_ = 1;  // OpenMP threads the attention scratch was sized for
  ParamLayout layout_;
  std::vector<T> arena_;
  std::size_t arena_elements_ = 0;  // what arena_ holds, or would hold (allocate false)
  std::vector<int32_t> positions_;  // [T] each token's row of the position table (embedding_positions_cpu)
  std::vector<int64_t> slots_;      // [T] each token's dropout row (kernels/packed.h)

  // Saved by forward for backward ([T, H] unless noted; E the embedding width).
  T *emb_sum_, *emb_mean_, *emb_rstd_;      // [T, E], [T], [T]
  T* emb_norm_;                             // [T, E] the projection's input (ELECTRA), else null
  T* d_emb_;                                // [T, E] scratch: the embedding LayerNorm's output gradient, when E != H
  std::vector<T*> layer_in_;                // L + 1 tensors: the input of layer l; the last is the output
                                            // (inference: two buffers, layer l's input is buffer l mod 2)
  std::vector<LayerActivations> layers_;    // L (inference, recomputing: L copies of one set)
  T *cls_, *cls_drop_, *pool_pre_, *pooled_, *pooled_drop_, *logits_;  // [B, H] ×5, [B, C]
  // Backward's scratch, shared by all layers (inference: null).
  T* d_inter_;                              // [T, I]
  T* d_qkv_;                                // [T, 3H]
  T *dy_, *d_a_, *d_b_, *d_c_;              // [T, H]
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

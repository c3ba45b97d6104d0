#include "model/bert_classifier.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/dropout.h"
#include "kernels/embedding.h"
#include "kernels/layernorm.h"
#include "kernels/linear.h"
#include "kernels/packed.h"
#include "model/dropout_sites.h"

namespace bertrain {

DropoutSetting DropoutSetting::training(const BertConfig& config, uint64_t seed, uint32_t step) {
  DropoutSetting d;
  d.hidden = static_cast<float>(config.hidden_dropout_prob);
  d.attention = static_cast<float>(config.attention_probs_dropout_prob);
  d.classifier = static_cast<float>(config.classifier_dropout.value_or(config.hidden_dropout_prob));
  d.seed = seed;
  d.step = step;
  return d;
}

BertBatch packed_batch(const int32_t* ids, const int32_t* cu_seqlens, int batch, int64_t first_sample) {
  BertBatch b;
  b.input_ids = ids;
  b.cu_seqlens = cu_seqlens;
  b.batch = batch;
  b.tokens = batch > 0 ? cu_seqlens[batch] : 0;
  b.longest = longest_row(cu_seqlens, batch);
  b.first_sample = first_sample;
  return b;
}

void check_limits(const BatchLimits& limits, const BertConfig& config) {
  BERTRAIN_CHECK(limits.rows > 0 && limits.longest > 0 && limits.tokens > 0,
                 "batch limits must be positive: " << limits.rows << " rows, longest " << limits.longest << ", "
                                                   << limits.tokens << " tokens");
  BERTRAIN_CHECK(limits.tokens <= static_cast<int64_t>(limits.rows) * limits.longest && limits.tokens >= limits.rows,
                 "batch limits: " << limits.tokens << " tokens cannot fill " << limits.rows << " rows of at most "
                                  << limits.longest);
  BERTRAIN_CHECK(limits.longest <= config.max_sequence_length(),
                 "sequence length " << limits.longest << " exceeds the model's " << config.max_sequence_length()
                                    << " positions (max_position_embeddings " << config.max_position_embeddings
                                    << (config.position_offset() > 0 ? " less the padding offset" : "") << ")");
}

void check_batch(const BertBatch& batch, const BatchLimits& limits, const char* what) {
  BERTRAIN_CHECK(batch.batch > 0 && batch.batch <= limits.rows,
                 what << ": batch of " << batch.batch << " rows is outside [1, " << limits.rows << "]");
  BERTRAIN_CHECK(batch.tokens > 0 && batch.tokens <= limits.tokens,
                 what << ": batch of " << batch.tokens << " tokens is outside [1, " << limits.tokens << "]");
  BERTRAIN_CHECK(batch.longest > 0 && batch.longest <= limits.longest,
                 what << ": longest row of " << batch.longest << " tokens is outside [1, " << limits.longest << "]");
}

void check_host_batch(const BertBatch& batch, const BatchLimits& limits, const char* what) {
  check_batch(batch, limits, what);
  check_row_offsets(batch.cu_seqlens, batch.batch, batch.tokens, batch.longest, what);
  const int longest = longest_row(batch.cu_seqlens, batch.batch);
  BERTRAIN_CHECK(longest == batch.longest,
                 what << ": the batch says its longest row has " << batch.longest << " tokens, it has " << longest);
}

void check_batch_for_device(const BertBatch& batch, const BatchLimits& limits, int vocab_size, const char* what) {
  check_host_batch(batch, limits, what);
  for (int i = 0; i < batch.tokens; ++i) {
    BERTRAIN_CHECK(batch.input_ids[i] >= 0 && batch.input_ids[i] < vocab_size,
                   "token id " << batch.input_ids[i] << " is outside the vocabulary [0, " << vocab_size << ")");
  }
}

template <typename T>
BertClassifier<T>::BertClassifier(const BertConfig& config, int num_labels, const BatchLimits& limits, BertUse use)
    : BertClassifier(config, num_labels, limits, use, /*allocate=*/true) {}

template <typename T>
std::size_t BertClassifier<T>::activation_bytes(const BertConfig& config, int num_labels, const BatchLimits& limits,
                                                BertUse use) {
  const BertClassifier dry(config, num_labels, limits, use, /*allocate=*/false);
  return dry.arena_elements_ * sizeof(T) + token_table_bytes(limits);
}

template <typename T>
BertClassifier<T>::BertClassifier(const BertConfig& config, int num_labels, const BatchLimits& limits, BertUse use,
                                  bool allocate)
    : config_(config), num_labels_(num_labels), limits_(limits), use_(use) {
  config_.validate("model config");
  BERTRAIN_CHECK(num_labels > 0, "the classifier needs at least one label, got " << num_labels);
  check_limits(limits, config_);
  layout_ = bert_classifier_layout(config_, num_labels);

  const std::size_t tokens = static_cast<std::size_t>(limits.tokens);
  const std::size_t h = config.hidden_size, i = config.intermediate_size, b = limits.rows, e = config.embedding_width();
  const int layers = config.num_hidden_layers;
  threads_ = omp_get_max_threads();
  if (allocate) {
    positions_.assign(tokens, 0);
    slots_.assign(tokens, 0);
  }

  // Every buffer is a slice of one arena: first collect the requests, then allocate once and hand out.
  std::vector<std::pair<T**, std::size_t>> plan;
  auto reserve = [&](T*& slot, std::size_t n) { plan.emplace_back(&slot, n); };
  const bool training = use != BertUse::kInference;
  const bool every_layer = use == BertUse::kTraining;  // every layer's activations kept, not one set shared
  reserve(emb_sum_, tokens * e);
  reserve(emb_mean_, tokens);
  reserve(emb_rstd_, tokens);
  emb_norm_ = d_emb_ = nullptr;
  if (config.has_embedding_projection()) {
    reserve(emb_norm_, tokens * e);
    if (training) reserve(d_emb_, tokens * e);
  }
  // Training keeps every layer's input and activations for backward; recomputing, every layer's input and one set
  // of activations, which backward fills again layer by layer. Inference runs layer l from buffer l mod 2 into the
  // other, through one set of activations: a layer reads nothing of the layers before it but its input.
  layer_in_.resize(layers + 1);
  const std::size_t hidden_buffers = training ? layer_in_.size() : 2;
  for (std::size_t l = 0; l < hidden_buffers; ++l) reserve(layer_in_[l], tokens * h);
  layers_.resize(every_layer ? layers : 1);
  for (LayerActivations& a : layers_) {
    reserve(a.qkv, tokens * 3 * h);
    for (T** p : {&a.ctx, &a.attn_out, &a.ln1_out, &a.out_dense}) reserve(*p, tokens * h);
    for (T** p : {&a.ln1_mean, &a.ln1_rstd, &a.ln2_mean, &a.ln2_rstd}) reserve(*p, tokens);
    reserve(a.lse, tokens * config.num_attention_heads);
    reserve(a.inter_pre, tokens * i);
    reserve(a.inter_act, tokens * i);
  }
  d_inter_ = d_qkv_ = dy_ = d_a_ = d_b_ = d_c_ = d_small_a_ = d_small_b_ = nullptr;
  for (T** p : {&cls_, &cls_drop_, &pool_pre_, &pooled_, &pooled_drop_}) reserve(*p, b * h);
  if (training) for (T** p : {&d_small_a_, &d_small_b_}) reserve(*p, b * h);
  reserve(logits_, b * num_labels);
  if (training) {
    reserve(d_inter_, tokens * i);
    reserve(d_qkv_, tokens * 3 * h);
    for (T** p : {&dy_, &d_b_, &d_c_}) reserve(*p, tokens * h);
    reserve(d_a_, tokens * std::max(h, e));  // also the embedding sum's gradient, E wide
  }
  reserve(attention_scratch_, attention_scratch_elements(limits.longest, threads_));

  // Every slice starts on a 64-byte boundary, whatever address the allocator returned: Eigen's vectorized
  // reductions (LayerNorm statistics, softmax and loss sums) peel the elements before the first aligned packet
  // into a scalar loop, so a buffer's address modulo the packet size would otherwise change their rounding,
  // and the same run would give other numbers with another heap layout.
  constexpr std::size_t kAlignBytes = 64, kAlignElements = kAlignBytes / sizeof(T);
  auto aligned_size = [](std::size_t n) { return (n + kAlignElements - 1) / kAlignElements * kAlignElements; };
  std::size_t total = 0;
  for (const auto& request : plan) total += aligned_size(request.second);
  arena_elements_ = total + kAlignElements;
  if (!allocate) return;
  arena_.assign(arena_elements_, T(0));
  const auto address = reinterpret_cast<std::uintptr_t>(arena_.data());
  std::size_t offset = (kAlignBytes - address % kAlignBytes) % kAlignBytes / sizeof(T);
  for (const auto& [slot, n] : plan) {
    *slot = arena_.data() + offset;
    offset += aligned_size(n);
  }
  if (!training) {
    for (std::size_t l = 2; l < layer_in_.size(); ++l) layer_in_[l] = layer_in_[l % 2];
  }
  if (!every_layer) layers_.resize(layers, layers_.front());
}

template <typename T>
void BertClassifier<T>::forward(const T* params, const BertBatch& batch, const DropoutSetting& dropout) {
  check_host_batch(batch, limits_, "BertClassifier::forward");
  // The attention scratch holds one slice per thread, sized when the model was built.
  BERTRAIN_CHECK(omp_get_max_threads() <= threads_, "OpenMP thread count grew from " << threads_ << " to "
                                                                                       << omp_get_max_threads()
                                                                                       << " after the model was built");
  batch_ = batch;
  dropout_ = dropout;
  const BertWeights<const T>& w = weights_.bind(layout_, config_, params);
  const BertConfig& c = config_;
  const ModelFamily& family = c.family();
  const int B = batch.batch, H = c.hidden_size, C = num_labels_, E = c.embedding_width();
  const int tokens = batch.tokens;
  const std::size_t te = static_cast<std::size_t>(tokens) * E;
  const T eps = T(c.layer_norm_eps);
  dropout_slots_cpu(slots_.data(), batch.cu_seqlens, B, batch.first_sample, c.max_position_embeddings);
  embedding_positions_cpu(positions_.data(), batch.input_ids, batch.cu_seqlens, B, c.position_padding_idx());
  const SiteLayouts layouts(batch.first_sample, c.max_position_embeddings, H, slots_.data());

  // With a projection (ELECTRA) the embeddings are E wide up to their dropout, then projected to H.
  T* emb_out = emb_norm_ != nullptr ? emb_norm_ : layer_in_[0];
  embedding_forward_cpu(emb_sum_, batch.input_ids, positions_.data(), nullptr, w.word_emb, w.pos_emb, w.type_emb,
                        tokens, E, c.vocab_size, c.max_position_embeddings, c.token_type_rows());
  layernorm_forward_cpu(emb_out, emb_mean_, emb_rstd_, emb_sum_, static_cast<const T*>(nullptr), w.emb_ln_g,
                        w.emb_ln_b, tokens, E, eps);
  const SiteLayouts embedding_layouts(batch.first_sample, c.max_position_embeddings, E, slots_.data());
  dropout_forward_cpu(emb_out, emb_out, te, dropout.hidden, dropout.key(kEmbeddings), embedding_layouts.tokens);
  if (emb_norm_ != nullptr) linear_forward_cpu(layer_in_[0], emb_norm_, w.emb_proj_w, w.emb_proj_b, tokens, E, H);

  for (int l = 0; l < c.num_hidden_layers; ++l) layer_forward(l, w.layers[l]);

  // The head on each row's first token: [dropout,] dense, activation, dropout, output layer (model_family.h).
  const std::size_t bh = static_cast<std::size_t>(B) * H;
  gather_first_tokens_cpu(cls_, static_cast<const T*>(layer_in_.back()), batch.cu_seqlens, B, H);
  const T* head_in = cls_;
  if (family.head_input_dropout) {
    dropout_forward_cpu(cls_drop_, cls_, bh, dropout.classifier, dropout.key(head_input_site(c.num_hidden_layers)),
                        layouts.pooled);
    head_in = cls_drop_;
  }
  linear_forward_cpu(pool_pre_, head_in, w.head_dense_w, w.head_dense_b, B, H, H);
  activation_forward_cpu(pooled_, pool_pre_, bh, family.head_activation);
  dropout_forward_cpu(pooled_drop_, pooled_, bh, dropout.classifier,
                      dropout.key(classifier_site(c.num_hidden_layers)), layouts.pooled);
  linear_forward_cpu(logits_, pooled_drop_, w.classifier_w, w.classifier_b, B, H, C);
}

// Encoder layer l: layer_in_[l] → layer_in_[l + 1] through layers_[l], with the batch and dropout of the last forward.
template <typename T>
void BertClassifier<T>::layer_forward(int l, const BertLayerWeights<const T>& lw) {
  const BertConfig& c = config_;
  const int B = batch_.batch, H = c.hidden_size, I = c.intermediate_size, tokens = batch_.tokens;
  const T eps = T(c.layer_norm_eps);
  const DropoutSetting& dropout = dropout_;
  const float attention_output_p = c.family().attention_output_dropout ? dropout.hidden : 0.0f;
  const SiteLayouts layouts(batch_.first_sample, c.max_position_embeddings, H, slots_.data());
  const Activation act = c.activation();
  const BertBatch& batch = batch_;
  const LayerActivations& a = layers_[l];
  const T* x = layer_in_[l];
  linear_forward_cpu(a.qkv, x, lw.qkv_w, lw.qkv_b, tokens, H, 3 * H);
  attention_forward_cpu(a.ctx, a.lse, a.qkv, batch.cu_seqlens, B, c.num_attention_heads, c.head_dim(),
                        dropout.attention, dropout.key(layer_site(l, kAttentionProbs)), attention_scratch_,
                        layouts.attention);
  // The dense outputs are kept before their dropout: the fused LayerNorm backward regenerates the mask.
  linear_forward_cpu(a.attn_out, a.ctx, lw.attn_out_w, lw.attn_out_b, tokens, H, H);
  dropout_residual_layernorm_forward_cpu(a.ln1_out, a.ln1_mean, a.ln1_rstd, static_cast<const T*>(a.attn_out), x,
                                         lw.attn_ln_g, lw.attn_ln_b, tokens, H, eps, attention_output_p,
                                         dropout.key(layer_site(l, kAttentionOutput)), layouts.tokens);
  linear_activation_forward_cpu(a.inter_act, a.inter_pre, static_cast<const T*>(a.ln1_out), lw.inter_w, lw.inter_b,
                                tokens, H, I, act);
  linear_forward_cpu(a.out_dense, a.inter_act, lw.out_w, lw.out_b, tokens, I, H);
  dropout_residual_layernorm_forward_cpu(layer_in_[l + 1], a.ln2_mean, a.ln2_rstd, static_cast<const T*>(a.out_dense),
                                         static_cast<const T*>(a.ln1_out), lw.out_ln_g, lw.out_ln_b, tokens, H, eps,
                                         dropout.hidden, dropout.key(layer_site(l, kFeedForwardOutput)),
                                         layouts.tokens);
}

template <typename T>
void BertClassifier<T>::backward(T* grads, const T* params, const T* dlogits) {
  BERTRAIN_CHECK(use_ != BertUse::kInference, "backward of a model built for inference (BertUse::kInference)");
  BERTRAIN_CHECK(batch_.batch > 0, "backward called before forward");
  const BertWeights<const T>& w = weights_.bind(layout_, config_, params);
  const BertWeights<T>& g = gradients_.bind(layout_, config_, grads);
  const BertConfig& c = config_;
  const ModelFamily& family = c.family();
  const DropoutSetting& dropout = dropout_;
  const int B = batch_.batch, H = c.hidden_size, I = c.intermediate_size, C = num_labels_, E = c.embedding_width();
  const int tokens = batch_.tokens;
  const std::size_t te = static_cast<std::size_t>(tokens) * E, bh = static_cast<std::size_t>(B) * H;
  const Activation act = c.activation();
  const float attention_output_p = family.attention_output_dropout ? dropout.hidden : 0.0f;
  const SiteLayouts layouts(batch_.first_sample, c.max_position_embeddings, H, slots_.data());

  // Head: output layer, dropout, activation, dense [, dropout]; its input gradient lands on the first-token rows.
  const T* head_in = family.head_input_dropout ? cls_drop_ : cls_;
  linear_backward_cpu(d_small_a_, g.classifier_w, g.classifier_b, dlogits, pooled_drop_, w.classifier_w, B, H, C,
                      false);
  dropout_backward_cpu(d_small_a_, d_small_a_, bh, dropout.classifier,
                       dropout.key(classifier_site(c.num_hidden_layers)), layouts.pooled);
  activation_backward_cpu(d_small_a_, d_small_a_, pool_pre_, bh, family.head_activation);
  linear_backward_cpu(d_small_b_, g.head_dense_w, g.head_dense_b, d_small_a_, head_in, w.head_dense_w, B, H, H, false);
  if (family.head_input_dropout) {
    dropout_backward_cpu(d_small_b_, d_small_b_, bh, dropout.classifier,
                         dropout.key(head_input_site(c.num_hidden_layers)), layouts.pooled);
  }
  scatter_first_tokens_cpu(dy_, static_cast<const T*>(d_small_b_), batch_.cu_seqlens, B, H);

  for (int l = c.num_hidden_layers - 1; l >= 0; --l) {
    const BertLayerWeights<const T>& lw = w.layers[l];
    const BertLayerWeights<T>& lg = g.layers[l];
    // Recomputing: the layer's activations again from its kept input (the last layer's are still those of forward).
    if (use_ == BertUse::kTrainingRecompute && l + 1 < c.num_hidden_layers) layer_forward(l, lw);
    const LayerActivations& a = layers_[l];
    const T* x = layer_in_[l];
    // Output LayerNorm: dy_ becomes dz2 (the gradient of the residual ln1_out and of the dropped dense output),
    // d_b_ the dense output's gradient dropout'(dz2).
    dropout_residual_layernorm_backward_cpu(dy_, d_b_, lg.out_ln_g, lg.out_ln_b, static_cast<const T*>(dy_),
                                            static_cast<const T*>(a.out_dense), static_cast<const T*>(a.ln1_out),
                                            static_cast<const T*>(a.ln2_mean), static_cast<const T*>(a.ln2_rstd),
                                            lw.out_ln_g, tokens, H, dropout.hidden,
                                            dropout.key(layer_site(l, kFeedForwardOutput)), layouts.tokens);
    // Feed-forward, as the GPU model runs it: the output dense's weight and bias gradients (its input act(inter_pre)
    // was kept by forward), its input gradient through act' with the intermediate bias gradient, then the
    // intermediate dense, whose input gradient accumulates onto dz2 (the residual around the block):
    // dy_ = dz2 + dinter · W.
    linear_backward_cpu(static_cast<T*>(nullptr), lg.out_w, lg.out_b, d_b_, a.inter_act, lw.out_w, tokens, I, H,
                        false);
    linear_activation_backward_data_cpu(d_inter_, lg.inter_b, static_cast<const T*>(d_b_), lw.out_w,
                                        static_cast<const T*>(a.inter_pre), tokens, I, H, act);
    linear_backward_cpu(dy_, lg.inter_w, static_cast<T*>(nullptr), d_inter_, a.ln1_out, lw.inter_w, tokens, H, I,
                        true);
    // Attention LayerNorm: dy_ becomes dz1, d_b_ the attention output's gradient; then the output dense.
    dropout_residual_layernorm_backward_cpu(dy_, d_b_, lg.attn_ln_g, lg.attn_ln_b, static_cast<const T*>(dy_),
                                            static_cast<const T*>(a.attn_out), x, static_cast<const T*>(a.ln1_mean),
                                            static_cast<const T*>(a.ln1_rstd), lw.attn_ln_g, tokens, H,
                                            attention_output_p, dropout.key(layer_site(l, kAttentionOutput)),
                                            layouts.tokens);
    T* dctx = d_c_;
    linear_backward_cpu(dctx, lg.attn_out_w, lg.attn_out_b, d_b_, a.ctx, lw.attn_out_w, tokens, H, H, false);
    // Self-attention, then the Q/K/V projection (one GEMM), whose input gradient accumulates onto dz1 (the residual
    // around the attention block): dy_ = dz1 + dqkv · Wqkv, the gradient of the layer's input.
    attention_backward_cpu(d_qkv_, dctx, a.ctx, a.lse, a.qkv, batch_.cu_seqlens, B, c.num_attention_heads,
                           c.head_dim(), dropout.attention, dropout.key(layer_site(l, kAttentionProbs)),
                           attention_scratch_, layouts.attention);
    linear_backward_cpu(dy_, lg.qkv_w, lg.qkv_b, d_qkv_, x, lw.qkv_w, tokens, H, 3 * H, true);
  }

  // Embeddings: [the projection,] dropout, LayerNorm (no residual), then the tables.
  T* d_emb_out = dy_;
  if (emb_norm_ != nullptr) {
    linear_backward_cpu(d_emb_, g.emb_proj_w, g.emb_proj_b, dy_, emb_norm_, w.emb_proj_w, tokens, E, H, false);
    d_emb_out = d_emb_;
  }
  const SiteLayouts embedding_layouts(batch_.first_sample, c.max_position_embeddings, E, slots_.data());
  dropout_backward_cpu(d_emb_out, d_emb_out, te, dropout.hidden, dropout.key(kEmbeddings), embedding_layouts.tokens);
  layernorm_backward_cpu(d_a_, g.emb_ln_g, g.emb_ln_b, d_emb_out, emb_sum_, static_cast<const T*>(nullptr), emb_mean_,
                         emb_rstd_, w.emb_ln_g, tokens, E);
  embedding_backward_cpu(g.word_emb, g.pos_emb, g.type_emb, d_a_, batch_.input_ids, positions_.data(),
                         static_cast<const int32_t*>(nullptr), tokens, E, c.vocab_size, c.max_position_embeddings,
                         c.token_type_rows(), c.pad_token_id, c.position_padding_idx());
}

template class BertClassifier<float>;
template class BertClassifier<double>;

}  // namespace bertrain

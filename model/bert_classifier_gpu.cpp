#include "model/bert_classifier_gpu.h"

#include <algorithm>
#include <type_traits>

#include "core/error.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/dropout.h"
#include "kernels/embedding.h"
#include "kernels/layernorm.h"
#include "kernels/linear.h"
#include "kernels/packed.h"
#include "kernels/tensor_ops.h"
#include "model/dropout_sites.h"

namespace bertrain {

namespace {

// Slices of the arena start on 256-byte boundaries (cuBLAS and vector loads like aligned operands).
constexpr std::size_t kSliceAlignment = 256;

// Hands out consecutive aligned slices of `base`; with a null base it only counts the bytes.
class ArenaCarver {
 public:
  explicit ArenaCarver(char* base) : base_(base) {}
  template <typename U>
  void take(U*& slot, std::size_t elements) {
    slot = reinterpret_cast<U*>(base_ + used_);
    used_ += (elements * sizeof(U) + kSliceAlignment - 1) / kSliceAlignment * kSliceAlignment;
  }
  void take_bytes(void*& slot, std::size_t bytes) {
    slot = base_ + used_;
    used_ += (bytes + kSliceAlignment - 1) / kSliceAlignment * kSliceAlignment;
  }
  // A float tensor and its T copy; for T = float one buffer serves as both.
  template <typename T>
  void take_stream(float*& stream, T*& copy, std::size_t elements) {
    take(stream, elements);
    if constexpr (std::is_same_v<T, float>) {
      copy = stream;
    } else {
      take(copy, elements);
    }
  }
  std::size_t used() const { return used_; }

 private:
  char* base_;
  std::size_t used_ = 0;
};

}  // namespace

template <typename T>
std::size_t BertClassifierGpu<T>::arena_bytes(const BertConfig& config, int num_labels, const BatchLimits& limits,
                                              BertUse use) {
  const BertClassifierGpu dry(config, num_labels, limits, GpuHandles{}, nullptr, 0, use);
  return dry.arena_used_;
}

template <typename T>
BertClassifierGpu<T>::BertClassifierGpu(const BertConfig& config, int num_labels, const BatchLimits& limits,
                                        const GpuHandles& handles, void* arena, std::size_t arena_size, BertUse use)
    : config_(config), num_labels_(num_labels), limits_(limits), use_(use), handles_(handles) {
  config_.validate("model config");
  BERTRAIN_CHECK(num_labels > 0, "the classifier needs at least one label, got " << num_labels);
  check_limits(limits, config_);
  layout_ = bert_classifier_layout(config_, num_labels);

  const std::size_t tokens = static_cast<std::size_t>(limits.tokens), b = static_cast<std::size_t>(limits.rows);
  const std::size_t h = config.hidden_size, i = config.intermediate_size, nh = config.num_attention_heads;
  const std::size_t e = config.embedding_width();
  const bool training = use != BertUse::kInference;
  const bool every_layer = use == BertUse::kTraining;  // every layer's activations kept, not one set shared
  ArenaCarver carve(static_cast<char*>(arena));
  carve.take(positions_, tokens);
  carve.take(slots_, tokens);
  carve.take(emb_sum_, tokens * e);
  carve.take(emb_mean_, tokens);
  carve.take(emb_rstd_, tokens);
  if (config.has_embedding_projection()) {
    carve.take_stream(emb_norm_, emb_norm_t_, tokens * e);
    if (training) carve.take(d_emb_norm_, tokens * e);
  }
  // Training keeps every layer's input and activations for backward; recomputing, every layer's input and one set
  // of activations that backward fills again layer by layer. Inference runs layer l from stream l mod 2 into the
  // other, through one set of activations (a layer reads nothing of the layers before it but its input), as the
  // CPU model does (model/bert_classifier.h).
  const std::size_t layers = static_cast<std::size_t>(config.num_hidden_layers);
  stream_.resize(layers + 1);
  stream_t_.resize(layers + 1);
  const std::size_t streams = training ? layers + 1 : 2;
  for (std::size_t l = 0; l < streams; ++l) carve.take_stream(stream_[l], stream_t_[l], tokens * h);
  for (std::size_t l = streams; l <= layers; ++l) {
    stream_[l] = stream_[l % 2];
    stream_t_[l] = stream_t_[l % 2];
  }
  layers_.resize(every_layer ? layers : 1);
  for (LayerActivations& a : layers_) {
    carve.take(a.qkv, tokens * 3 * h);
    for (T** p : {&a.ctx, &a.attn_out, &a.out_dense}) carve.take(*p, tokens * h);
    carve.take(a.lse, tokens * nh);
    carve.take_stream(a.ln1_out, a.ln1_out_t, tokens * h);
    for (float** p : {&a.ln1_mean, &a.ln1_rstd, &a.ln2_mean, &a.ln2_rstd}) carve.take(*p, tokens);
    carve.take(a.inter_pre, tokens * i);
    carve.take(a.inter_act, tokens * i);
    // The attention dropout mask the bf16 forward keeps for the backward: inference has neither dropout nor backward.
    if (!std::is_same_v<T, float> && training) {
      carve.take(a.attention_mask, attention_dropout_mask_words_cuda(limits.tokens, static_cast<int>(nh),
                                                                     limits.longest));
    }
  }
  const LayerActivations shared = layers_.front();
  layers_.resize(layers, shared);  // inference, recomputing: every layer runs through the one set
  // (The training model's slices keep their order of before the inference model.)
  for (T** p : {&cls_, &cls_drop_, &pool_pre_, &pooled_, &pooled_drop_}) carve.take(*p, b * h);
  if (training) {
    carve.take(d_small_a_, b * h);
    carve.take(d_small_b_, b * h);
  }
  carve.take(logits_, b * num_labels);
  if (training) {
    carve.take(dlogits_, b * num_labels);
    for (T** p : {&d_b_, &d_c_}) carve.take(*p, tokens * h);
    carve.take(dy_, tokens * h);
    carve.take(d_emb_, tokens * e);
    carve.take(d_qkv_, tokens * 3 * h);
    carve.take(d_inter_, tokens * i);
    carve.take(attention_workspace_,
               attention_workspace_floats_cuda(limits.tokens, config.num_attention_heads, limits.longest));
    // CUB's scratch size is a device query: models for training are only built (and sized) where there is a device.
    embedding_scratch_bytes_ = embedding_backward_scratch_bytes(static_cast<int>(tokens), config.embedding_width());
    carve.take_bytes(embedding_scratch_, embedding_scratch_bytes_);
  }
  arena_used_ = carve.used();
  BERTRAIN_CHECK(arena == nullptr || arena_size >= arena_used_,
                 "GPU activation arena of " << arena_size << " bytes, the model needs " << arena_used_);
}

template <typename T>
void BertClassifierGpu<T>::forward(const T* params, const BertBatch& batch, const DropoutSetting& dropout) {
  check_batch(batch, limits_, "BertClassifierGpu::forward");
  batch_ = batch;
  dropout_ = dropout;
  const GpuHandles& hd = handles_;
  const CudaStream stream = hd.stream;
  const BertWeights<const T>& w = weights_.bind(layout_, config_, params);
  const BertConfig& c = config_;
  const ModelFamily& family = c.family();
  const int B = batch.batch, H = c.hidden_size, C = num_labels_;
  const int E = c.embedding_width();
  const int tokens = batch.tokens;
  const std::size_t th = static_cast<std::size_t>(tokens) * H;
  const float eps = static_cast<float>(c.layer_norm_eps);
  dropout_slots_cuda(slots_, batch.cu_seqlens, B, batch.first_sample, c.max_position_embeddings, stream);
  embedding_positions_cuda(positions_, batch.input_ids, batch.cu_seqlens, B, c.position_padding_idx(), stream);
  const SiteLayouts layouts(batch.first_sample, c.max_position_embeddings, H, slots_);
  const SiteLayouts embedding_layouts(batch.first_sample, c.max_position_embeddings, E, slots_);

  embedding_forward_cuda(emb_sum_, batch.input_ids, positions_, static_cast<const int32_t*>(nullptr), w.word_emb,
                         w.pos_emb, w.type_emb, tokens, E, stream);
  if (emb_norm_ == nullptr) {
    // The embedding LayerNorm and the dropout after it (one kernel) write the float stream and its T copy.
    layernorm_dropout_forward_cuda(stream_[0], stream_t_[0], emb_mean_, emb_rstd_, static_cast<const T*>(emb_sum_),
                                   w.emb_ln_g, w.emb_ln_b, tokens, H, eps, dropout.hidden, dropout.key(kEmbeddings),
                                   layouts.tokens, stream);
  } else {
    // ELECTRA: LayerNorm and dropout at width E, then embeddings_project (a T GEMM, as autocast runs the Linear)
    // whose output, widened to float, starts the residual stream.
    layernorm_dropout_forward_cuda(emb_norm_, emb_norm_t_, emb_mean_, emb_rstd_, static_cast<const T*>(emb_sum_),
                                   w.emb_ln_g, w.emb_ln_b, tokens, E, eps, dropout.hidden, dropout.key(kEmbeddings),
                                   embedding_layouts.tokens, stream);
    linear_forward_cuda(hd, stream_t_[0], static_cast<const T*>(emb_norm_t_), w.emb_proj_w, w.emb_proj_b, tokens, E,
                        H);
    if constexpr (!std::is_same_v<T, float>) cast_cuda(stream_[0], static_cast<const T*>(stream_t_[0]), th, stream);
  }

  for (int l = 0; l < c.num_hidden_layers; ++l) layer_forward(l, w.layers[l]);

  // The head on each row's first token (read from the T copy: the dense's input): [dropout,] dense, activation,
  // dropout, output layer (model_family.h).
  const std::size_t bh = static_cast<std::size_t>(B) * H;
  gather_first_tokens_cuda(cls_, static_cast<const T*>(stream_t_.back()), batch.cu_seqlens, B, H, stream);
  const T* head_in = cls_;
  if (family.head_input_dropout) {
    dropout_forward_cuda(cls_drop_, static_cast<const T*>(cls_), bh, dropout.classifier,
                         dropout.key(head_input_site(c.num_hidden_layers)), layouts.pooled, stream);
    head_in = cls_drop_;
  }
  linear_forward_cuda(hd, pool_pre_, head_in, w.head_dense_w, w.head_dense_b, B, H, H);
  activation_forward_cuda(pooled_, static_cast<const T*>(pool_pre_), bh, family.head_activation, stream);
  dropout_forward_cuda(pooled_drop_, static_cast<const T*>(pooled_), bh, dropout.classifier,
                       dropout.key(classifier_site(c.num_hidden_layers)), layouts.pooled, stream);
  linear_forward_cuda(hd, logits_, static_cast<const T*>(pooled_drop_), w.classifier_w, w.classifier_b, B, H, C);
}

// Encoder layer l: stream l → stream l + 1 through layers_[l], with the batch and dropout of the last forward.
template <typename T>
void BertClassifierGpu<T>::layer_forward(int l, const BertLayerWeights<const T>& lw) {
  const GpuHandles& hd = handles_;
  const CudaStream stream = hd.stream;
  const BertConfig& c = config_;
  const BertBatch& batch = batch_;
  const DropoutSetting& dropout = dropout_;
  const int B = batch.batch, S = batch.longest, H = c.hidden_size, I = c.intermediate_size, tokens = batch.tokens;
  const float eps = static_cast<float>(c.layer_norm_eps);
  const Activation act = c.activation();
  const float attention_output_p = c.family().attention_output_dropout ? dropout.hidden : 0.0f;
  const SiteLayouts layouts(batch.first_sample, c.max_position_embeddings, H, slots_);
  const LayerActivations& a = layers_[l];
  const float* x = stream_[l];   // the residual of the attention block's LayerNorm
  const T* x_t = stream_t_[l];  // the Q/K/V GEMM's input
  linear_forward_cuda(hd, a.qkv, x_t, lw.qkv_w, lw.qkv_b, tokens, H, 3 * H);
  attention_forward_cuda(a.ctx, a.lse, static_cast<const T*>(a.qkv), batch.cu_seqlens, B, tokens, S,
                         c.num_attention_heads, c.head_dim(), dropout.attention,
                         dropout.key(layer_site(l, kAttentionProbs)), layouts.attention, stream,
                         a.attention_mask);
  linear_forward_cuda(hd, a.attn_out, a.ctx, lw.attn_out_w, lw.attn_out_b, tokens, H, H);
  // dropout(attn_out) (T) + x (float) in fp32, as autocast promotes bf16 + fp32, then LayerNorm.
  dropout_residual_layernorm_forward_cuda(a.ln1_out, a.ln1_out_t, a.ln1_mean, a.ln1_rstd,
                                          static_cast<const T*>(a.attn_out), x, lw.attn_ln_g, lw.attn_ln_b, tokens,
                                          H, eps, attention_output_p, dropout.key(layer_site(l, kAttentionOutput)),
                                          layouts.tokens, stream);
  linear_activation_forward_cuda(hd, a.inter_act, a.inter_pre, static_cast<const T*>(a.ln1_out_t), lw.inter_w,
                                 lw.inter_b, tokens, H, I, act);
  linear_forward_cuda(hd, a.out_dense, static_cast<const T*>(a.inter_act), lw.out_w, lw.out_b, tokens, I, H);
  dropout_residual_layernorm_forward_cuda(stream_[l + 1], stream_t_[l + 1], a.ln2_mean, a.ln2_rstd,
                                          static_cast<const T*>(a.out_dense), static_cast<const float*>(a.ln1_out),
                                          lw.out_ln_g, lw.out_ln_b, tokens, H, eps, dropout.hidden,
                                          dropout.key(layer_site(l, kFeedForwardOutput)), layouts.tokens, stream);
}

template <typename T>
void BertClassifierGpu<T>::backward(float* grads, const T* params, const T* dlogits,
                                    const std::function<void(std::size_t)>& on_gradients_ready) {
  BERTRAIN_CHECK(use_ != BertUse::kInference, "backward of a model built for inference (BertUse::kInference)");
  BERTRAIN_CHECK(batch_.batch > 0, "backward called before forward");
  const GpuHandles& hd = handles_;
  const CudaStream stream = hd.stream;
  const BertWeights<const T>& w = weights_.bind(layout_, config_, params);
  const BertWeights<float>& g = gradients_.bind(layout_, config_, grads);
  const BertConfig& c = config_;
  const ModelFamily& family = c.family();
  const DropoutSetting& dropout = dropout_;
  const int B = batch_.batch, S = batch_.longest, H = c.hidden_size, I = c.intermediate_size, C = num_labels_;
  const int E = c.embedding_width();
  const int tokens = batch_.tokens;
  const std::size_t th = static_cast<std::size_t>(tokens) * H;
  const std::size_t bh = static_cast<std::size_t>(B) * H;
  const Activation act = c.activation();
  const float attention_output_p = family.attention_output_dropout ? dropout.hidden : 0.0f;
  const SiteLayouts layouts(batch_.first_sample, c.max_position_embeddings, H, slots_);
  const SiteLayouts embedding_layouts(batch_.first_sample, c.max_position_embeddings, E, slots_);
  auto ready = [&](const float* first) {
    if (on_gradients_ready) on_gradients_ready(static_cast<std::size_t>(first - grads));
  };

  // Head: output layer, dropout, activation, dense [, dropout]; its input gradient lands on the first-token rows.
  const T* head_in = family.head_input_dropout ? cls_drop_ : cls_;
  linear_backward_cuda(hd, d_small_a_, g.classifier_w, g.classifier_b, dlogits, static_cast<const T*>(pooled_drop_),
                       w.classifier_w, B, H, C, false);
  dropout_backward_cuda(d_small_a_, static_cast<const T*>(d_small_a_), bh, dropout.classifier,
                        dropout.key(classifier_site(c.num_hidden_layers)), layouts.pooled, stream);
  activation_backward_cuda(d_small_a_, static_cast<const T*>(d_small_a_), static_cast<const T*>(pool_pre_), bh,
                           family.head_activation, stream);
  // The dense's input gradient in float: it lands in the float residual-stream gradient.
  linear_backward_cuda(hd, d_small_b_, g.head_dense_w, g.head_dense_b, static_cast<const T*>(d_small_a_), head_in,
                       w.head_dense_w, B, H, H, false);
  if (family.head_input_dropout) {
    dropout_backward_cuda(d_small_b_, static_cast<const float*>(d_small_b_), bh, dropout.classifier,
                          dropout.key(head_input_site(c.num_hidden_layers)), layouts.pooled, stream);
  }
  scatter_first_tokens_cuda(dy_, static_cast<const float*>(d_small_b_), batch_.cu_seqlens, B, tokens, H, stream);
  ready(g.head_dense_w);

  // dy_ (float) holds the gradient of layer l's output stream on entry to iteration l and of its input on exit;
  // every step below updates it in place.
  for (int l = c.num_hidden_layers - 1; l >= 0; --l) {
    const BertLayerWeights<const T>& lw = w.layers[l];
    const BertLayerWeights<float>& lg = g.layers[l];
    // Recomputing: the layer's activations again from its kept input (the last layer's are still those of forward).
    if (use_ == BertUse::kTrainingRecompute && l + 1 < c.num_hidden_layers) layer_forward(l, lw);
    const LayerActivations& a = layers_[l];
    const float* x = stream_[l];
    const T* x_t = stream_t_[l];
    // Output LayerNorm: dy_ becomes dz2 (the gradient of the residual ln1_out and of the dropped dense output),
    // d_b_ the dense output's gradient dropout'(dz2) in T, for the feed-forward GEMMs.
    dropout_residual_layernorm_backward_cuda(hd, dy_, d_b_, lg.out_ln_g, lg.out_ln_b, static_cast<const float*>(dy_),
                                             static_cast<const T*>(a.out_dense), static_cast<const float*>(a.ln1_out),
                                             a.ln2_mean, a.ln2_rstd, lw.out_ln_g, tokens, H, dropout.hidden,
                                             dropout.key(layer_site(l, kFeedForwardOutput)), layouts.tokens);
    // Output dense: its weight and bias gradients, then its input gradient through the activation's derivative
    // (one GEMM + epilogue), which also yields the intermediate bias gradient.
    linear_backward_cuda(hd, static_cast<T*>(nullptr), lg.out_w, lg.out_b, static_cast<const T*>(d_b_),
                         static_cast<const T*>(a.inter_act), lw.out_w, tokens, I, H, false);
    linear_activation_backward_data_cuda(hd, d_inter_, lg.inter_b, static_cast<const T*>(d_b_), lw.out_w,
                                         static_cast<const T*>(a.inter_pre), tokens, I, H, act);
    // Intermediate dense: weight gradient, and its input gradient accumulated onto dz2 in fp32 (the residual
    // around the feed-forward block): dy_ = dz2 + dinter · W.
    linear_backward_cuda(hd, dy_, lg.inter_w, static_cast<float*>(nullptr), static_cast<const T*>(d_inter_),
                         static_cast<const T*>(a.ln1_out_t), lw.inter_w, tokens, H, I, true);
    // Attention LayerNorm: dy_ becomes dz1, d_b_ the attention output's gradient.
    dropout_residual_layernorm_backward_cuda(hd, dy_, d_b_, lg.attn_ln_g, lg.attn_ln_b, static_cast<const float*>(dy_),
                                             static_cast<const T*>(a.attn_out), x, a.ln1_mean, a.ln1_rstd,
                                             lw.attn_ln_g, tokens, H, attention_output_p,
                                             dropout.key(layer_site(l, kAttentionOutput)), layouts.tokens);
    T* dctx = d_c_;
    linear_backward_cuda(hd, dctx, lg.attn_out_w, lg.attn_out_b, static_cast<const T*>(d_b_),
                         static_cast<const T*>(a.ctx), lw.attn_out_w, tokens, H, H, false);
    attention_backward_cuda(d_qkv_, static_cast<const T*>(dctx), static_cast<const T*>(a.ctx),
                            static_cast<const float*>(a.lse), static_cast<const T*>(a.qkv), batch_.cu_seqlens, B,
                            tokens, S, c.num_attention_heads, c.head_dim(), dropout.attention,
                            dropout.key(layer_site(l, kAttentionProbs)), layouts.attention, attention_workspace_,
                            stream, a.attention_mask);
    // The Q/K/V projection (one GEMM each way); its input gradient accumulates onto dz1 in fp32 (the residual
    // around the attention block): dy_ = dz1 + dqkv · Wqkv, the gradient of the layer's input.
    linear_backward_cuda(hd, dy_, lg.qkv_w, lg.qkv_b, static_cast<const T*>(d_qkv_), x_t, lw.qkv_w, tokens, H,
                         3 * H, true);
    ready(lg.qkv_w);
  }

  // Embeddings: [the projection,] dropout and LayerNorm (no residual; one kernel) in float, then the tables from the
  // float dz.
  float* d_norm = dy_;
  if (emb_norm_ != nullptr) {
    const T* dy_t;  // the projection's output gradient as its GEMM reads it
    if constexpr (std::is_same_v<T, float>) {
      dy_t = dy_;
    } else {
      cast_cuda(d_b_, static_cast<const float*>(dy_), th, stream);
      dy_t = d_b_;
    }
    linear_backward_cuda(hd, d_emb_norm_, g.emb_proj_w, g.emb_proj_b, dy_t, static_cast<const T*>(emb_norm_t_),
                         w.emb_proj_w, tokens, E, H, false);
    d_norm = d_emb_norm_;
  }
  layernorm_dropout_backward_cuda(hd, d_emb_, g.emb_ln_g, g.emb_ln_b, static_cast<const float*>(d_norm),
                                  static_cast<const T*>(emb_sum_), emb_mean_, emb_rstd_, w.emb_ln_g, tokens, E,
                                  dropout.hidden, dropout.key(kEmbeddings), embedding_layouts.tokens);
  embedding_backward_cuda(g.word_emb, g.pos_emb, g.type_emb, static_cast<const float*>(d_emb_), batch_.input_ids,
                          positions_, static_cast<const int32_t*>(nullptr), tokens, E, c.vocab_size,
                          c.max_position_embeddings, c.token_type_rows(), c.pad_token_id, c.position_padding_idx(),
                          embedding_scratch_, embedding_scratch_bytes_, stream);
  ready(grads);
}

template class BertClassifierGpu<float>;
template class BertClassifierGpu<bf16>;

}  // namespace bertrain

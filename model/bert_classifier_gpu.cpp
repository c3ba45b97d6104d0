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
std::size_t BertClassifierGpu<T>::arena_bytes(const BertConfig& config, int num_labels, const BatchLimits& limits) {
  const BertClassifierGpu dry(config, num_labels, limits, GpuHandles{}, nullptr, 0);
  return dry.arena_used_;
}

template <typename T>
BertClassifierGpu<T>::BertClassifierGpu(const BertConfig& config, int num_labels, const BatchLimits& limits,
                                        const GpuHandles& handles, void* arena, std::size_t arena_size)
    : config_(config), num_labels_(num_labels), limits_(limits), handles_(handles) {
  config_.validate("model config");
  BERTRAIN_CHECK(num_labels > 0, "the classifier needs at least one label, got " << num_labels);
  check_limits(limits, config_);
  layout_ = bert_classifier_layout(config_, num_labels);

  const std::size_t tokens = static_cast<std::size_t>(limits.tokens), b = static_cast<std::size_t>(limits.rows);
  const std::size_t h = config.hidden_size, i = config.intermediate_size;
  // The attention's padded internals: B·S tokens.
  const std::size_t padded = b * static_cast<std::size_t>(limits.longest);
  const std::size_t probs = b * config.num_attention_heads * limits.longest * limits.longest;
  ArenaCarver carve(static_cast<char*>(arena));
  carve.take(positions_, tokens);
  carve.take(slots_, tokens);
  carve.take(emb_sum_, tokens * h);
  carve.take(emb_mean_, tokens);
  carve.take(emb_rstd_, tokens);
  stream_.resize(config.num_hidden_layers + 1);
  stream_t_.resize(config.num_hidden_layers + 1);
  for (std::size_t l = 0; l < stream_.size(); ++l) carve.take_stream(stream_[l], stream_t_[l], tokens * h);
  layers_.resize(config.num_hidden_layers);
  for (LayerActivations& a : layers_) {
    for (T** p : {&a.qh, &a.kh, &a.vh}) carve.take(*p, padded * h);
    for (T** p : {&a.ctx, &a.attn_out, &a.out_dense}) carve.take(*p, tokens * h);
    carve.take_stream(a.ln1_out, a.ln1_out_t, tokens * h);
    for (float** p : {&a.ln1_mean, &a.ln1_rstd, &a.ln2_mean, &a.ln2_rstd}) carve.take(*p, tokens);
    carve.take(a.probs, probs);
    carve.take(a.inter_pre, tokens * i);
  }
  for (T** p : {&cls_, &pool_pre_, &pooled_, &pooled_drop_, &d_small_a_}) carve.take(*p, b * h);
  carve.take(d_small_b_, b * h);
  carve.take(logits_, b * num_labels);
  carve.take(dlogits_, b * num_labels);
  for (T** p : {&q_, &k_, &v_, &d_b_, &d_c_, &d_d_, &d_e_}) carve.take(*p, tokens * h);
  for (float** p : {&dy_, &d_ln1_}) carve.take(*p, tokens * h);
  carve.take(act_, tokens * i);
  carve.take(d_inter_, tokens * i);
  carve.take(attention_workspace_, attention_workspace_elements_cuda(limits.rows, limits.longest,
                                                                     config.num_attention_heads, config.head_dim()));
  // CUB's scratch size is a device query: models are only built (and sized) where there is a device.
  embedding_scratch_bytes_ = embedding_backward_scratch_bytes(static_cast<int>(tokens));
  carve.take_bytes(embedding_scratch_, embedding_scratch_bytes_);
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
  const BertWeights<const T>& w = weights_.bind(layout_, config_.num_hidden_layers, params);
  const BertConfig& c = config_;
  const int B = batch.batch, S = batch.longest, H = c.hidden_size, I = c.intermediate_size, C = num_labels_;
  const int tokens = batch.tokens;
  const std::size_t th = static_cast<std::size_t>(tokens) * H;
  const float eps = static_cast<float>(c.layer_norm_eps);
  const Activation act = c.activation();
  packed_positions_cuda(positions_, slots_, batch.cu_seqlens, B, batch.first_sample, c.max_position_embeddings, stream);
  const SiteLayouts layouts(batch.first_sample, c.max_position_embeddings, H, slots_);

  embedding_forward_cuda(emb_sum_, batch.input_ids, positions_, static_cast<const int32_t*>(nullptr), w.word_emb,
                         w.pos_emb, w.type_emb, tokens, H, stream);
  // The embedding LayerNorm writes the float stream only; the dropout after it writes the stream and its T copy.
  layernorm_forward_cuda(stream_[0], static_cast<T*>(nullptr), emb_mean_, emb_rstd_, emb_sum_,
                         static_cast<const float*>(nullptr), w.emb_ln_g, w.emb_ln_b, tokens, H, eps, stream);
  dropout_forward_cuda(stream_[0], stream_t_[0], stream_[0], th, dropout.hidden, dropout.key(kEmbeddings),
                       layouts.tokens, stream);

  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const BertLayerWeights<const T>& lw = w.layers[l];
    const LayerActivations& a = layers_[l];
    const float* x = stream_[l];   // the residual of the attention block's LayerNorm
    const T* x_t = stream_t_[l];  // the Q/K/V GEMMs' input
    linear_forward_cuda(hd, q_, x_t, lw.query_w, lw.query_b, tokens, H, H);
    linear_forward_cuda(hd, k_, x_t, lw.key_w, lw.key_b, tokens, H, H);
    linear_forward_cuda(hd, v_, x_t, lw.value_w, lw.value_b, tokens, H, H);
    attention_forward_cuda(hd, a.ctx, a.probs, a.qh, a.kh, a.vh, q_, k_, v_, batch.cu_seqlens, B, tokens, S,
                           c.num_attention_heads, c.head_dim(), dropout.attention,
                           dropout.key(layer_site(l, kAttentionProbs)), layouts.attention, attention_workspace_);
    linear_forward_cuda(hd, a.attn_out, a.ctx, lw.attn_out_w, lw.attn_out_b, tokens, H, H);
    dropout_forward_cuda(a.attn_out, a.attn_out, th, dropout.hidden, dropout.key(layer_site(l, kAttentionOutput)),
                         layouts.tokens, stream);
    // attn_out (T) + x (float) in fp32, as autocast promotes bf16 + fp32.
    layernorm_forward_cuda(a.ln1_out, a.ln1_out_t, a.ln1_mean, a.ln1_rstd, a.attn_out, x, lw.attn_ln_g, lw.attn_ln_b,
                           tokens, H, eps, stream);
    // Intermediate dense without its bias, then bias + activation in one pass (inter_pre keeps x·Wᵀ + b).
    linear_forward_cuda(hd, a.inter_pre, a.ln1_out_t, lw.inter_w, static_cast<const T*>(nullptr), tokens, H, I);
    bias_activation_forward_cuda(act_, a.inter_pre, lw.inter_b, tokens, I, act, stream);
    linear_forward_cuda(hd, a.out_dense, act_, lw.out_w, lw.out_b, tokens, I, H);
    dropout_forward_cuda(a.out_dense, a.out_dense, th, dropout.hidden, dropout.key(layer_site(l, kFeedForwardOutput)),
                         layouts.tokens, stream);
    layernorm_forward_cuda(stream_[l + 1], stream_t_[l + 1], a.ln2_mean, a.ln2_rstd, a.out_dense,
                           static_cast<const float*>(a.ln1_out), lw.out_ln_g, lw.out_ln_b, tokens, H, eps, stream);
  }

  // Pooler on the [CLS] token (read from the T copy: the pooler dense's input), then classifier dropout and the
  // linear head.
  gather_first_tokens_cuda(cls_, static_cast<const T*>(stream_t_.back()), batch.cu_seqlens, B, H, stream);
  linear_forward_cuda(hd, pool_pre_, cls_, w.pooler_w, w.pooler_b, B, H, H);
  activation_forward_cuda(pooled_, pool_pre_, static_cast<std::size_t>(B) * H, Activation::kTanh, stream);
  dropout_forward_cuda(pooled_drop_, pooled_, static_cast<std::size_t>(B) * H, dropout.classifier,
                       dropout.key(classifier_site(c.num_hidden_layers)), layouts.pooled, stream);
  linear_forward_cuda(hd, logits_, pooled_drop_, w.classifier_w, w.classifier_b, B, H, C);
}

template <typename T>
void BertClassifierGpu<T>::backward(float* grads, const T* params, const T* dlogits,
                                    const std::function<void(std::size_t)>& on_gradients_ready) {
  BERTRAIN_CHECK(batch_.batch > 0, "backward called before forward");
  const GpuHandles& hd = handles_;
  const CudaStream stream = hd.stream;
  const BertWeights<const T>& w = weights_.bind(layout_, config_.num_hidden_layers, params);
  const BertWeights<float>& g = gradients_.bind(layout_, config_.num_hidden_layers, grads);
  const BertConfig& c = config_;
  const DropoutSetting& dropout = dropout_;
  const int B = batch_.batch, S = batch_.longest, H = c.hidden_size, I = c.intermediate_size, C = num_labels_;
  const int tokens = batch_.tokens;
  const std::size_t th = static_cast<std::size_t>(tokens) * H, ti = static_cast<std::size_t>(tokens) * I;
  const Activation act = c.activation();
  const SiteLayouts layouts(batch_.first_sample, c.max_position_embeddings, H, slots_);
  auto ready = [&](const float* first) {
    if (on_gradients_ready) on_gradients_ready(static_cast<std::size_t>(first - grads));
  };

  // Head: classifier, dropout, tanh, pooler dense; the pooler's input gradient lands on the [CLS] rows.
  linear_backward_cuda(hd, d_small_a_, g.classifier_w, g.classifier_b, dlogits, pooled_drop_, w.classifier_w, B, H,
                       C, false);
  dropout_backward_cuda(d_small_a_, d_small_a_, static_cast<std::size_t>(B) * H, dropout.classifier,
                        dropout.key(classifier_site(c.num_hidden_layers)), layouts.pooled, stream);
  activation_backward_cuda(d_small_a_, d_small_a_, pool_pre_, static_cast<std::size_t>(B) * H, Activation::kTanh,
                           stream);
  // The pooler's input gradient in float: it lands in the float residual-stream gradient.
  linear_backward_cuda(hd, d_small_b_, g.pooler_w, g.pooler_b, static_cast<const T*>(d_small_a_),
                       static_cast<const T*>(cls_), w.pooler_w, B, H, H, false);
  scatter_first_tokens_cuda(dy_, static_cast<const float*>(d_small_b_), batch_.cu_seqlens, B, tokens, H, stream);
  ready(g.pooler_w);

  // dy_ (float) holds the gradient of layer l's output stream on entry to iteration l and of its input on exit.
  for (int l = c.num_hidden_layers - 1; l >= 0; --l) {
    const BertLayerWeights<const T>& lw = w.layers[l];
    const BertLayerWeights<float>& lg = g.layers[l];
    const LayerActivations& a = layers_[l];
    const float* x = stream_[l];
    const T* x_t = stream_t_[l];
    // dz2 in place over dy_, which is free until the Q/K/V dx GEMMs below.
    float* dz2 = dy_;
    layernorm_backward_cuda(hd, dz2, lg.out_ln_g, lg.out_ln_b, static_cast<const float*>(dy_),
                            static_cast<const T*>(a.out_dense), static_cast<const float*>(a.ln1_out), a.ln2_mean,
                            a.ln2_rstd, lw.out_ln_g, tokens, H);
    // The feed-forward's gradient rounded to T once, for its GEMMs.
    dropout_backward_cuda(d_b_, static_cast<const float*>(dz2), th, dropout.hidden,
                          dropout.key(layer_site(l, kFeedForwardOutput)), layouts.tokens, stream);
    // The output dense's input act(inter_pre) is recomputed rather than kept per layer.
    activation_forward_cuda(act_, a.inter_pre, ti, act, stream);
    linear_backward_cuda(hd, d_inter_, lg.out_w, lg.out_b, d_b_, act_, lw.out_w, tokens, I, H, false);
    activation_backward_cuda(d_inter_, d_inter_, a.inter_pre, ti, act, stream);
    // d_ln1 = dinter · W (bf16 operands, fp32 C) + dz2 (the residual around the feed-forward block), in fp32.
    float* d_ln1 = d_ln1_;
    linear_backward_cuda(hd, d_ln1, lg.inter_w, lg.inter_b, static_cast<const T*>(d_inter_),
                         static_cast<const T*>(a.ln1_out_t), lw.inter_w, tokens, H, I, false);
    add_inplace_cuda(d_ln1, static_cast<const float*>(dz2), th, stream);
    // dz1 in place over d_ln1.
    float* dz1 = d_ln1_;
    layernorm_backward_cuda(hd, dz1, lg.attn_ln_g, lg.attn_ln_b, static_cast<const float*>(d_ln1),
                            static_cast<const T*>(a.attn_out), x, a.ln1_mean, a.ln1_rstd, lw.attn_ln_g, tokens, H);
    dropout_backward_cuda(d_b_, static_cast<const float*>(dz1), th, dropout.hidden,
                          dropout.key(layer_site(l, kAttentionOutput)), layouts.tokens, stream);
    T* dctx = d_c_;
    linear_backward_cuda(hd, dctx, lg.attn_out_w, lg.attn_out_b, d_b_, a.ctx, lw.attn_out_w, tokens, H, H, false);
    T *dq = d_b_, *dk = d_d_, *dv = d_e_;
    attention_backward_cuda(hd, dq, dk, dv, dctx, a.probs, a.qh, a.kh, a.vh, batch_.cu_seqlens, B, tokens, S,
                            c.num_attention_heads, c.head_dim(), dropout.attention,
                            dropout.key(layer_site(l, kAttentionProbs)), layouts.attention, attention_workspace_);
    // The three branches that read x accumulate into the float dy_ (bf16 operands, fp32 C), then the residual
    // around the attention block, in fp32.
    linear_backward_cuda(hd, dy_, lg.query_w, lg.query_b, static_cast<const T*>(dq), x_t, lw.query_w, tokens, H, H,
                         false);
    linear_backward_cuda(hd, dy_, lg.key_w, lg.key_b, static_cast<const T*>(dk), x_t, lw.key_w, tokens, H, H, true);
    linear_backward_cuda(hd, dy_, lg.value_w, lg.value_b, static_cast<const T*>(dv), x_t, lw.value_w, tokens, H, H,
                         true);
    add_inplace_cuda(dy_, static_cast<const float*>(dz1), th, stream);
    ready(lg.query_w);
  }

  // Embeddings: dropout and LayerNorm (no residual) in float, then the three tables from the float dz.
  dropout_backward_cuda(dy_, static_cast<const float*>(dy_), th, dropout.hidden, dropout.key(kEmbeddings),
                        layouts.tokens, stream);
  layernorm_backward_cuda(hd, d_ln1_, g.emb_ln_g, g.emb_ln_b, static_cast<const float*>(dy_),
                          static_cast<const T*>(emb_sum_), static_cast<const float*>(nullptr), emb_mean_, emb_rstd_,
                          w.emb_ln_g, tokens, H);
  embedding_backward_cuda(g.word_emb, g.pos_emb, g.type_emb, static_cast<const float*>(d_ln1_), batch_.input_ids,
                          batch_.cu_seqlens, static_cast<const int32_t*>(nullptr), B, tokens, H, c.vocab_size,
                          c.max_position_embeddings, c.type_vocab_size, embedding_scratch_, embedding_scratch_bytes_,
                          stream);
  ready(grads);
}

template class BertClassifierGpu<float>;
template class BertClassifierGpu<bf16>;

}  // namespace bertrain

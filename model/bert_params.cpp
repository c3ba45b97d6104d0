#include "model/bert_params.h"

#include "core/bf16.h"
#include "core/error.h"

namespace bertrain {

namespace {

std::string layer_prefix(const ModelFamily& f, int layer) {
  return std::string(f.base) + f.layers + std::to_string(layer) + ".";
}
std::string embeddings(const ModelFamily& f, const char* table) { return std::string(f.base) + "embeddings." + table; }
std::string embedding_norm(const ModelFamily& f) { return embeddings(f, "LayerNorm"); }
std::string embedding_projection(const ModelFamily& f) { return std::string(f.base) + "embeddings_project"; }

}  // namespace

ParamLayout bert_classifier_layout(const BertConfig& c, int num_labels) {
  const ModelFamily& f = c.family();
  const int64_t h = c.hidden_size, i = c.intermediate_size, e = c.embedding_width();
  ParamLayout layout;
  layout.add(embeddings(f, "word_embeddings.weight"), {c.vocab_size, e});
  layout.add(embeddings(f, "position_embeddings.weight"), {c.max_position_embeddings, e});
  if (c.token_type_rows() > 0) layout.add(embeddings(f, "token_type_embeddings.weight"), {c.token_type_rows(), e});
  layout.add(embedding_norm(f) + ".weight", {e});
  layout.add(embedding_norm(f) + ".bias", {e});
  if (c.has_embedding_projection()) {
    layout.add(embedding_projection(f) + ".weight", {h, e});
    layout.add(embedding_projection(f) + ".bias", {h});
  }
  const LayerTensorNames& n = f.layer;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = layer_prefix(f, l);
    // Query, key and value back to back (weights [3H, H], then biases [3H]): one GEMM with N = 3H computes all
    // three (kernels/attention.h). The names on disk are Hugging Face's; only the order in the buffer differs.
    layout.add(p + n.query + ".weight", {h, h});
    layout.add_contiguous(p + n.key + ".weight", {h, h});
    layout.add_contiguous(p + n.value + ".weight", {h, h});
    layout.add(p + n.query + ".bias", {h});
    layout.add_contiguous(p + n.key + ".bias", {h});
    layout.add_contiguous(p + n.value + ".bias", {h});
    layout.add(p + n.attention_output + ".weight", {h, h});
    layout.add(p + n.attention_output + ".bias", {h});
    layout.add(p + n.attention_norm + ".weight", {h});
    layout.add(p + n.attention_norm + ".bias", {h});
    layout.add(p + n.intermediate + ".weight", {i, h});
    layout.add(p + n.intermediate + ".bias", {i});
    layout.add(p + n.output + ".weight", {h, i});
    layout.add(p + n.output + ".bias", {h});
    layout.add(p + n.output_norm + ".weight", {h});
    layout.add(p + n.output_norm + ".bias", {h});
  }
  layout.add(std::string(f.head_dense) + ".weight", {h, h});
  layout.add(std::string(f.head_dense) + ".bias", {h});
  layout.add(std::string(f.head_out) + ".weight", {num_labels, h});
  layout.add(std::string(f.head_out) + ".bias", {num_labels});
  return layout;
}

template <typename T>
BertWeights<T> bind_bert_weights(const ParamLayout& layout, const BertConfig& config, T* base) {
  const ModelFamily& f = config.family();
  auto at = [&](const std::string& name) { return base + layout.at(name).offset; };
  BertWeights<T> w;
  w.word_emb = at(embeddings(f, "word_embeddings.weight"));
  w.pos_emb = at(embeddings(f, "position_embeddings.weight"));
  w.type_emb = config.token_type_rows() > 0 ? at(embeddings(f, "token_type_embeddings.weight")) : nullptr;
  w.emb_ln_g = at(embedding_norm(f) + ".weight");
  w.emb_ln_b = at(embedding_norm(f) + ".bias");
  w.emb_proj_w = config.has_embedding_projection() ? at(embedding_projection(f) + ".weight") : nullptr;
  w.emb_proj_b = config.has_embedding_projection() ? at(embedding_projection(f) + ".bias") : nullptr;
  const LayerTensorNames& n = f.layer;
  for (int l = 0; l < config.num_hidden_layers; ++l) {
    const std::string p = layer_prefix(f, l);
    BertLayerWeights<T> lw;
    lw.qkv_w = at(p + n.query + ".weight");
    lw.qkv_b = at(p + n.query + ".bias");
    for (const char* part : {".weight", ".bias"}) {
      const ParamEntry& q = layout.at(p + n.query + part);
      BERTRAIN_CHECK(layout.at(p + n.key + part).offset == q.offset + q.numel &&
                         layout.at(p + n.value + part).offset == q.offset + 2 * q.numel,
                     "layer " << l << "'s query, key and value" << part << " are not contiguous in the layout");
    }
    lw.attn_out_w = at(p + n.attention_output + ".weight");
    lw.attn_out_b = at(p + n.attention_output + ".bias");
    lw.attn_ln_g = at(p + n.attention_norm + ".weight");
    lw.attn_ln_b = at(p + n.attention_norm + ".bias");
    lw.inter_w = at(p + n.intermediate + ".weight");
    lw.inter_b = at(p + n.intermediate + ".bias");
    lw.out_w = at(p + n.output + ".weight");
    lw.out_b = at(p + n.output + ".bias");
    lw.out_ln_g = at(p + n.output_norm + ".weight");
    lw.out_ln_b = at(p + n.output_norm + ".bias");
    w.layers.push_back(lw);
  }
  w.head_dense_w = at(std::string(f.head_dense) + ".weight");
  w.head_dense_b = at(std::string(f.head_dense) + ".bias");
  w.classifier_w = at(std::string(f.head_out) + ".weight");
  w.classifier_b = at(std::string(f.head_out) + ".bias");
  return w;
}

template BertWeights<float> bind_bert_weights<float>(const ParamLayout&, const BertConfig&, float*);
template BertWeights<double> bind_bert_weights<double>(const ParamLayout&, const BertConfig&, double*);
template BertWeights<const float> bind_bert_weights<const float>(const ParamLayout&, const BertConfig&, const float*);
template BertWeights<const double> bind_bert_weights<const double>(const ParamLayout&, const BertConfig&, const double*);
template BertWeights<const bf16> bind_bert_weights<const bf16>(const ParamLayout&, const BertConfig&, const bf16*);

std::vector<std::size_t> backward_ready_offsets(const ParamLayout& layout, const BertConfig& config) {
  const ModelFamily& f = config.family();
  std::vector<std::size_t> offsets{layout.at(std::string(f.head_dense) + ".weight").offset};
  for (int l = config.num_hidden_layers - 1; l >= 0; --l) {
    offsets.push_back(layout.at(layer_prefix(f, l) + f.layer.query + ".weight").offset);
  }
  offsets.push_back(0);
  return offsets;
}

}  // namespace bertrain

#include "model/bert_params.h"

#include "core/bf16.h"
#include "core/error.h"

namespace bertrain {

namespace {
std::string layer_prefix(int layer) { return "bert.encoder.layer." + std::to_string(layer) + "."; }
}  // namespace

ParamLayout bert_classifier_layout(const BertConfig& c, int num_labels) {
  const int64_t h = c.hidden_size, i = c.intermediate_size;
  ParamLayout layout;
  layout.add("bert.embeddings.word_embeddings.weight", {c.vocab_size, h});
  layout.add("bert.embeddings.position_embeddings.weight", {c.max_position_embeddings, h});
  layout.add("bert.embeddings.token_type_embeddings.weight", {c.type_vocab_size, h});
  layout.add("bert.embeddings.LayerNorm.weight", {h});
  layout.add("bert.embeddings.LayerNorm.bias", {h});
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = layer_prefix(l);
    // Query, key and value back to back (weights [3H, H], then biases [3H]): one GEMM with N = 3H computes all
    // three (kernels/attention.h). The names on disk are Hugging Face's; only the order in the buffer differs.
    layout.add(p + "attention.self.query.weight", {h, h});
    layout.add_contiguous(p + "attention.self.key.weight", {h, h});
    layout.add_contiguous(p + "attention.self.value.weight", {h, h});
    layout.add(p + "attention.self.query.bias", {h});
    layout.add_contiguous(p + "attention.self.key.bias", {h});
    layout.add_contiguous(p + "attention.self.value.bias", {h});
    layout.add(p + "attention.output.dense.weight", {h, h});
    layout.add(p + "attention.output.dense.bias", {h});
    layout.add(p + "attention.output.LayerNorm.weight", {h});
    layout.add(p + "attention.output.LayerNorm.bias", {h});
    layout.add(p + "intermediate.dense.weight", {i, h});
    layout.add(p + "intermediate.dense.bias", {i});
    layout.add(p + "output.dense.weight", {h, i});
    layout.add(p + "output.dense.bias", {h});
    layout.add(p + "output.LayerNorm.weight", {h});
    layout.add(p + "output.LayerNorm.bias", {h});
  }
  layout.add("bert.pooler.dense.weight", {h, h});
  layout.add("bert.pooler.dense.bias", {h});
  layout.add("classifier.weight", {num_labels, h});
  layout.add("classifier.bias", {num_labels});
  return layout;
}

template <typename T>
BertWeights<T> bind_bert_weights(const ParamLayout& layout, int num_layers, T* base) {
  auto at = [&](const std::string& name) { return base + layout.at(name).offset; };
  BertWeights<T> w;
  w.word_emb = at("bert.embeddings.word_embeddings.weight");
  w.pos_emb = at("bert.embeddings.position_embeddings.weight");
  w.type_emb = at("bert.embeddings.token_type_embeddings.weight");
  w.emb_ln_g = at("bert.embeddings.LayerNorm.weight");
  w.emb_ln_b = at("bert.embeddings.LayerNorm.bias");
  for (int l = 0; l < num_layers; ++l) {
    const std::string p = layer_prefix(l);
    BertLayerWeights<T> lw;
    lw.qkv_w = at(p + "attention.self.query.weight");
    lw.qkv_b = at(p + "attention.self.query.bias");
    for (const char* part : {"weight", "bias"}) {
      const std::string self = p + "attention.self.";
      const ParamEntry& q = layout.at(self + "query." + part);
      BERTRAIN_CHECK(layout.at(self + "key." + part).offset == q.offset + q.numel &&
                         layout.at(self + "value." + part).offset == q.offset + 2 * q.numel,
                     "layer " << l << "'s query, key and value " << part << "s are not contiguous in the layout");
    }
    lw.attn_out_w = at(p + "attention.output.dense.weight");
    lw.attn_out_b = at(p + "attention.output.dense.bias");
    lw.attn_ln_g = at(p + "attention.output.LayerNorm.weight");
    lw.attn_ln_b = at(p + "attention.output.LayerNorm.bias");
    lw.inter_w = at(p + "intermediate.dense.weight");
    lw.inter_b = at(p + "intermediate.dense.bias");
    lw.out_w = at(p + "output.dense.weight");
    lw.out_b = at(p + "output.dense.bias");
    lw.out_ln_g = at(p + "output.LayerNorm.weight");
    lw.out_ln_b = at(p + "output.LayerNorm.bias");
    w.layers.push_back(lw);
  }
  w.pooler_w = at("bert.pooler.dense.weight");
  w.pooler_b = at("bert.pooler.dense.bias");
  w.classifier_w = at("classifier.weight");
  w.classifier_b = at("classifier.bias");
  return w;
}

template BertWeights<float> bind_bert_weights<float>(const ParamLayout&, int, float*);
template BertWeights<double> bind_bert_weights<double>(const ParamLayout&, int, double*);
template BertWeights<const float> bind_bert_weights<const float>(const ParamLayout&, int, const float*);
template BertWeights<const double> bind_bert_weights<const double>(const ParamLayout&, int, const double*);
template BertWeights<const bf16> bind_bert_weights<const bf16>(const ParamLayout&, int, const bf16*);

std::vector<std::size_t> backward_ready_offsets(const ParamLayout& layout, int num_layers) {
  std::vector<std::size_t> offsets{layout.at("bert.pooler.dense.weight").offset};
  for (int l = num_layers - 1; l >= 0; --l) {
    offsets.push_back(layout.at("bert.encoder.layer." + std::to_string(l) + ".attention.self.query.weight").offset);
  }
  offsets.push_back(0);
  return offsets;
}

}  // namespace bertrain

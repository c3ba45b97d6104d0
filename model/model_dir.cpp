#include "model/model_dir.h"


#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/files.h"
#include "core/philox.h"
#include "model/bert_params.h"
#include "model/hf_names.h"
#include "model/safetensors.h"
#include "model/torch_checkpoint.h"

namespace bertrain {

namespace {

class SafetensorsTensors final : public CheckpointTensors {
 public:
  explicit SafetensorsTensors(const std::string& path) : file_(path) {
    for (const TensorInfo& t : file_.tensors()) entries_.push_back({t.name, t.shape});
  }
  const std::string& path() const override { return file_.path(); }
  const std::vector<Entry>& entries() const override { return entries_; }
  void read_float_into(const std::string& name, float* out, std::size_t count) const override {
    file_.read_float_into(name, out, count);
  }

 private:
  SafetensorsFile file_;
  std::vector<Entry> entries_;
};

class TorchTensors final : public CheckpointTensors {
 public:
  explicit TorchTensors(const std::string& path) : file_(path) {
    for (const TorchTensorInfo& t : file_.tensors()) entries_.push_back({t.name, t.shape});
  }
  const std::string& path() const override { return file_.path(); }
  const std::vector<Entry>& entries() const override { return entries_; }
  void read_float_into(const std::string& name, float* out, std::size_t count) const override {
    file_.read_float_into(name, out, count);
  }

 private:
  TorchCheckpoint file_;
  std::vector<Entry> entries_;
};

// A checkpoint transformers split into shards (save_pretrained past max_shard_size): model.safetensors.index.json's
// weight_map names each tensor's file, beside the index. The shards are read where they lie, as one checkpoint.
class ShardedSafetensors final : public CheckpointTensors {
 public:
  ShardedSafetensors(const std::string& dir, const std::string& index_path) : path_(index_path) {
    const nlohmann::json index = read_json_file(index_path);
    BERTRAIN_CHECK(index.is_object() && index.contains("weight_map") && index.at("weight_map").is_object() &&
                       !index.at("weight_map").empty(),
                   index_path << ": no weight_map object naming each tensor's shard");
    std::map<std::string, std::size_t> shard_index;
    for (const auto& [name, file] : index.at("weight_map").items()) {
      BERTRAIN_CHECK(file.is_string(), index_path << ": weight_map['" << name << "'] must be a file name, found "
                                                  << file.dump());
      const std::string shard = file.get<std::string>();
      // A shard lies beside the index: a name with a folder in it could point anywhere.
      BERTRAIN_CHECK(!shard.empty() && shard.find('/') == std::string::npos && shard != "." && shard != "..",
                     index_path << ": weight_map['" << name << "'] names '" << shard
                                << "', not a file beside the index");
      auto [it, added] = shard_index.emplace(shard, shards_.size());
      if (added) {
        const std::string shard_path = dir + "/" + shard;
        require_readable_file(shard_path, "weight shard named by " + index_path);
        shards_.emplace_back(shard_path);
      }
      const SafetensorsFile& f = shards_[it->second];
      BERTRAIN_CHECK(f.contains(name), f.path() << ": no tensor '" << name << "', which " << index_path << " puts there");
      shard_of_[name] = it->second;
      entries_.push_back({name, f.info(name).shape});
    }
  }
  const std::string& path() const override { return path_; }
  const std::vector<Entry>& entries() const override { return entries_; }
  void read_float_into(const std::string& name, float* out, std::size_t count) const override {
    const auto it = shard_of_.find(name);
    BERTRAIN_CHECK(it != shard_of_.end(), path_ << ": no tensor '" << name << "' in its weight_map");
    shards_[it->second].read_float_into(name, out, count);
  }

 private:
  std::string path_;
  std::vector<SafetensorsFile> shards_;
  std::map<std::string, std::size_t> shard_of_;
  std::vector<Entry> entries_;
};

}  // namespace

std::unique_ptr<CheckpointTensors> open_checkpoint(const std::string& dir) {
  // Whatever is at a weights file's name is meant as one: a directory there is named, not "not found".
  const std::string safetensors = dir + "/model.safetensors";
  if (path_exists(safetensors)) {
    require_readable_file(safetensors, "weights file");
    // A pytorch_model.bin saved under the safetensors name would otherwise be "header length 578712552184433488".
    BERTRAIN_CHECK(!looks_like_torch_checkpoint(safetensors),
                   safetensors << ": holds a torch checkpoint (torch.save's format), not safetensors: name it "
                                  "pytorch_model.bin, or write safetensors (save_pretrained, or bertrain convert)");
    return std::make_unique<SafetensorsTensors>(safetensors);
  }
  const std::string sharded = dir + "/model.safetensors.index.json";
  if (path_exists(sharded)) {
    require_readable_file(sharded, "weights index");
    return std::make_unique<ShardedSafetensors>(dir, sharded);
  }
  const std::string torch_bin = dir + "/pytorch_model.bin";
  if (path_exists(torch_bin)) {
    require_readable_file(torch_bin, "weights file");
    return std::make_unique<TorchTensors>(torch_bin);
  }
  BERTRAIN_CHECK(!path_exists(dir + "/pytorch_model.bin.index.json"),
                 dir << "/pytorch_model.bin.index.json: a checkpoint sharded in torch's format is not read; save it as "
                        "safetensors (transformers: model.save_pretrained(DIR), safe_serialization is the default)");
  BERTRAIN_FAIL(safetensors << ": not found, nor model.safetensors.index.json or pytorch_model.bin beside it (weights "
                              "in another format must be converted to one of these first)");
}

std::map<std::string, std::string> map_checkpoint_names(const CheckpointTensors& checkpoint, const ParamLayout& layout,
                                                        const BertConfig& config) {
  std::map<std::string, std::string> source_of;  // layout name -> checkpoint name
  for (const CheckpointTensors::Entry& entry : checkpoint.entries()) {
    const std::optional<std::string> name = canonical_param_name(entry.name, config.family());
    if (!name) continue;
    BERTRAIN_CHECK(layout.contains(*name), checkpoint.path() << ": unexpected tensor '" << entry.name << "' (not part of a "
                                                             << config.family().model_type << " classifier with "
                                                             << config.num_hidden_layers << " layers)");
    const auto [it, inserted] = source_of.emplace(*name, entry.name);
    BERTRAIN_CHECK(inserted, checkpoint.path() << ": tensors '" << it->second << "' and '" << entry.name
                                               << "' both map to '" << *name << "'");
  }
  return source_of;
}

std::vector<float> random_bert_parameters(const ParamLayout& layout, const BertConfig& config, uint64_t seed) {
  std::vector<float> params(layout.total(), 0.0f);
  uint32_t tensor = 0;
  for (const ParamEntry& e : layout.entries()) {
    float* p = params.data() + e.offset;
    const bool is_bias = e.name.size() > 5 && e.name.compare(e.name.size() - 5, 5, ".bias") == 0;
    if (e.name.find("LayerNorm.weight") != std::string::npos) {
      std::fill(p, p + e.numel, 1.0f);
    } else if (!is_bias) {
      fill_normal(p, e.numel, static_cast<float>(config.initializer_range), seed, ++tensor);
    }
  }
  return params;
}

void fill_normal(float* out, std::size_t n, float std, uint64_t seed, uint32_t tensor) {
  const RandomKey key{seed, 0, tensor};
  for (std::size_t i = 0; i < n; i += 2) {
    const Philox4 bits = philox_group(key, i / 2);
    // u1 in (0, 1] so the logarithm is finite; 32-bit uniforms in double for a smooth tail.
    const double u1 = (static_cast<double>(bits.v[0]) + 1.0) / 4294967296.0;
    const double u2 = static_cast<double>(bits.v[1]) / 4294967296.0;
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 2.0 * M_PI * u2;
    out[i] = static_cast<float>(std * radius * std::cos(angle));
    if (i + 1 < n) out[i + 1] = static_cast<float>(std * radius * std::sin(angle));
  }
}

void fill_uniform(float* out, std::size_t n, float bound, uint64_t seed, uint32_t tensor) {
  const RandomKey key{seed, 0, tensor};
  for (std::size_t i = 0; i < n; i += 4) {
    const Philox4 bits = philox_group(key, i / 4);
    for (std::size_t k = 0; k < 4 && i + k < n; ++k) {
      // (bits + 0.5) / 2^32 is in (0, 1), symmetric about 1/2: the open interval torch's uniform_ draws from.
      const double u = (static_cast<double>(bits.v[k]) + 0.5) / 4294967296.0;
      out[i + k] = static_cast<float>(bound * (2.0 * u - 1.0));
    }
  }
}

HeadInit parse_head_init(const std::string& name) {
  if (name == "torch") return HeadInit::kTorch;
  if (name == "hf") return HeadInit::kHf;
  BERTRAIN_FAIL("--head-init must be torch or hf, got '" << name << "'");
}

const char* head_init_name(HeadInit init) { return init == HeadInit::kTorch ? "torch" : "hf"; }

bool is_head_tensor(const std::string& name, const BertConfig& config) {
  const ModelFamily& f = config.family();
  auto in = [&](const std::string& module) { return name.rfind(module + ".", 0) == 0; };
  return in(f.head_out) || in(f.head_dense);
}

bool is_head_output(const std::string& name, const BertConfig& config) {
  return name.rfind(std::string(config.family().head_out) + ".", 0) == 0;
}

LoadedModel load_model_dir(const std::string& dir, const std::vector<std::string>& labels, uint64_t seed,
                           HeadInit head_init) {
  LoadedModel model;
  model.config = BertConfig::load(dir + "/config.json");
  const std::vector<std::string> checkpoint_labels = model.config.labels;
  if (labels.empty()) {
    BERTRAIN_CHECK(!checkpoint_labels.empty(), dir << "/config.json: no id2label, so the classifier's labels are "
                                                      "unknown (a base model, without a classifier? fine-tune it "
                                                      "first: bertrain train --model " << dir << " ...)");
  } else {
    model.config.labels = labels;
  }
  const int num_labels = model.config.num_labels();
  model.layout = bert_classifier_layout(model.config, num_labels);

  const std::unique_ptr<CheckpointTensors> file = open_checkpoint(dir);
  const std::string& weights_path = file->path();
  std::map<std::string, std::vector<int64_t>> shape_of;
  for (const CheckpointTensors::Entry& e : file->entries()) shape_of[e.name] = e.shape;
  const std::map<std::string, std::string> source_of = map_checkpoint_names(*file, model.layout, model.config);

  // The head's output layer is loaded when the checkpoint has it for exactly these labels; the head's dense layer
  // (BERT's pooler, RoBERTa's classifier.dense, DistilBERT's pre_classifier) is loaded whenever the checkpoint has
  // it, as transformers does when only the label count changes, and initialised as a new head's when it has none.
  bool output_in_file = true;
  for (const ParamEntry& entry : model.layout.entries()) {
    if (is_head_output(entry.name, model.config)) output_in_file = output_in_file && source_of.count(entry.name) > 0;
  }
  // The same labels in another order (a model whose integer labels an older bertrain ordered as text, or one trained
  // elsewhere) keep their trained rows, moved to this order: old_row[i] is label i's row in the file.
  std::vector<std::size_t> old_row;
  if (!labels.empty() && labels != checkpoint_labels && labels.size() == checkpoint_labels.size()) {
    for (const std::string& label : labels) {
      const auto at = std::find(checkpoint_labels.begin(), checkpoint_labels.end(), label);
      if (at == checkpoint_labels.end()) break;
      old_row.push_back(static_cast<std::size_t>(at - checkpoint_labels.begin()));
    }
    if (old_row.size() != labels.size()) old_row.clear();
  }
  model.classifier_loaded = output_in_file && (labels.empty() || labels == checkpoint_labels || !old_row.empty());
  if (labels.empty()) {
    BERTRAIN_CHECK(output_in_file, weights_path << ": " << model.config.family().head_out << ".weight / "
                                                << model.config.family().head_out << ".bias missing");
  }

  // A trained classifier (no labels given) must bring its whole head: a missing tensor is an error below.
  const auto fresh = [&](const ParamEntry& entry) {
    return !labels.empty() && is_head_tensor(entry.name, model.config) &&
           (is_head_output(entry.name, model.config) ? !model.classifier_loaded : source_of.count(entry.name) == 0);
  };
  // Every tensor read is checked against config.json before the parameters are allocated: a config.json whose sizes
  // are not the weights' is named here, not by a failed allocation of what those sizes imply.
  for (const ParamEntry& entry : model.layout.entries()) {
    if (fresh(entry)) continue;
    const auto it = source_of.find(entry.name);
    BERTRAIN_CHECK(it != source_of.end(), weights_path << ": missing tensor '" << entry.name << "' with shape "
                                                        << shape_string(entry.shape));
    const std::vector<int64_t>& shape = shape_of.at(it->second);
    BERTRAIN_CHECK(shape == entry.shape, weights_path << ": tensor '" << it->second << "' has shape "
                                                      << shape_string(shape) << " but config.json implies "
                                                      << shape_string(entry.shape));
  }
  model.params.assign(model.layout.total(), 0.0f);

  uint32_t new_tensor = 0;  // the Philox stream of each freshly initialised head tensor, in layout order
  for (const ParamEntry& entry : model.layout.entries()) {
    float* dst = model.params.data() + entry.offset;
    if (fresh(entry)) {
      const bool weight = entry.shape.size() == 2;
      if (head_init == HeadInit::kTorch) {
        // nn.Linear.reset_parameters: kaiming_uniform_(a=√5) gives bound gain·√(3/fan_in) = 1/√fan_in for the
        // weight, and the bias is uniform in the same ±1/√fan_in (fan_in = hidden size).
        const float bound = 1.0f / std::sqrt(static_cast<float>(model.config.hidden_size));
        fill_uniform(dst, entry.numel, bound, seed, new_tensor);
      } else if (weight) {
        fill_normal(dst, entry.numel, static_cast<float>(model.config.initializer_range), seed, new_tensor);
      }  // Hugging Face's bias stays zero
      ++new_tensor;
      continue;
    }
    file->read_float_into(source_of.at(entry.name), dst, entry.numel);
    if (!old_row.empty() && is_head_output(entry.name, model.config)) {
      const std::vector<float> read(dst, dst + entry.numel);
      const std::size_t row = static_cast<std::size_t>(entry.numel) / old_row.size();  // the weight's H, the bias's 1
      for (std::size_t i = 0; i < old_row.size(); ++i) {
        std::copy_n(read.begin() + static_cast<std::ptrdiff_t>(old_row[i] * row), row, dst + i * row);
      }
    }
    // A NaN or infinite weight would turn every prediction into NaN and every training step into a diverging loss
    // (exit 3, blaming --lr); it is the file's fault, named here.
    const float* bad = std::find_if(dst, dst + entry.numel, [](float v) { return !std::isfinite(v); });
    BERTRAIN_CHECK(bad == dst + entry.numel, weights_path << ": tensor '" << source_of.at(entry.name) << "' holds "
                                                          << *bad << " at element " << bad - dst
                                                          << " (weights must be finite)");
  }
  return model;
}

const std::vector<std::string>& tokenizer_file_names() {
  // transformers' tokenizer files: the fast tokenizer's tokenizer.json, the slow ones' vocabularies (WordPiece
  // vocab.txt, BPE vocab.json + merges.txt, SentencePiece models) and the settings beside them.
  static const std::vector<std::string> names = {
      "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "vocab.txt",
      "vocab.json",     "merges.txt",            "sentencepiece.bpe.model", "spiece.model"};
  return names;
}

void save_model_dir(const std::string& dir, const BertConfig& config, const ParamLayout& layout, const float* params,
                    const std::string& tokenizer_source) {
  make_directories(dir);
  SafetensorsWriter writer;
  for (const ParamEntry& entry : layout.entries()) writer.add_f32(entry.name, entry.shape, params + entry.offset);
  writer.set_metadata("format", "pt");  // transformers refuses safetensors files without it
  writer.write(dir + "/" + kModelWeightsFile);
  save_model_config(dir, config, tokenizer_source);
}

void save_model_config(const std::string& dir, const BertConfig& config, const std::string& tokenizer_source) {
  make_directories(dir);
  write_file_atomically(dir + "/config.json", config.to_classifier_json().dump(2) + "\n");
  if (tokenizer_source.empty() || tokenizer_source == dir) return;
  for (const std::string& name : tokenizer_file_names()) {
    const std::string from = tokenizer_source + "/" + name;
    if (file_exists(from)) write_file_atomically(dir + "/" + name, read_file(from, "tokenizer file"));
  }
}

}  // namespace bertrain

// A Hugging Face model directory (config.json, model.safetensors or pytorch_model.bin, the tokenizer's files) of
// any supported family (model/model_family.h) read into, and written from, our flat float32 parameter buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/param_store.h"
#include "model/bert_config.h"

namespace bertrain {

// The tensors of one checkpoint file, whatever its format (safetensors, or torch.save's zip or legacy
// pickle), so that one code path maps checkpoint names to our layout.
class CheckpointTensors {
 public:
  struct Entry {
    std::string name;  // as stored in the file
    std::vector<int64_t> shape;
  };
  virtual ~CheckpointTensors() = default;
  virtual const std::string& path() const = 0;
  virtual const std::vector<Entry>& entries() const = 0;
  // Floating tensors converted to float32; `count` must equal the element count. Throws for integer tensors.
  virtual void read_float_into(const std::string& name, float* out, std::size_t count) const = 0;
};

// `dir`/model.safetensors, else the shards `dir`/model.safetensors.index.json names (transformers' sharded
// checkpoints), else `dir`/pytorch_model.bin (torch.save, zip or legacy, told apart by its first bytes). Throws when
// none exists (naming a sharded pytorch_model.bin.index.json, which is not read).
std::unique_ptr<CheckpointTensors> open_checkpoint(const std::string& dir);

// Layout name -> checkpoint name for every tensor of `checkpoint` that maps into `layout` (hf_names.h: the family's
// prefix optional, gamma / beta; pre-training heads and position_ids ignored). A tensor outside the layout, or two
// mapping to one name, is an Error naming the file. Shapes are not checked here.
std::map<std::string, std::string> map_checkpoint_names(const CheckpointTensors& checkpoint, const ParamLayout& layout,
                                                        const BertConfig& config);

// The head tensors a checkpoint without a classifier may lack: the output layer, and the dense layer before it.
// (BERT's dense layer is the pooler, pre-trained with the encoder: a pre-training checkpoint has it and it is loaded,
// but BertForMaskedLM and BertModel(add_pooling_layer=False) checkpoints have none, and transformers initialises it.)
bool is_head_tensor(const std::string& layout_name, const BertConfig& config);
// The output layer's tensors (classifier.*, or classifier.out_proj.*), whose rows are the labels.
bool is_head_output(const std::string& layout_name, const BertConfig& config);

struct LoadedModel {
  BertConfig config;          // config.labels is the classifier's label set
  ParamLayout layout;         // bert_classifier_layout(config, labels)
  std::vector<float> params;  // layout.total() elements
  bool classifier_loaded = false;  // false: the head's output layer freshly initialised
};

// How a new classifier head is initialised.
enum class HeadInit {
  kTorch,  // PyTorch's nn.Linear default, Made-With-ML's head: weight and bias uniform in ±1/√hidden
  kHf,     // Hugging Face's _init_weights: weight normal(0, initializer_range), bias 0
};
// "torch" | "hf"; throws Error naming --head-init otherwise.
HeadInit parse_head_init(const std::string& name);
const char* head_init_name(HeadInit init);

// Loads `dir` (weights from open_checkpoint). With `labels` empty, the classifier comes from the checkpoint (config.json
// id2label and the head must be present). With `labels` given, the head's output layer is loaded when the checkpoint
// has it for exactly these labels in this order, a new head's dense layer (not BERT's pooler) whenever the checkpoint
// has it; head tensors not loaded are initialised as `head_init` says, drawn from `seed` (one stream per tensor).
// Every other tensor the config implies must be present with its shape; unknown tensors are an error, pre-training
// heads and position_ids are ignored.
LoadedModel load_model_dir(const std::string& dir, const std::vector<std::string>& labels, uint64_t seed,
                           HeadInit head_init = HeadInit::kTorch);

// The weights file save_model_dir writes.
inline constexpr const char* kModelWeightsFile = "model.safetensors";

// Writes the family's sequence-classifier directory (created if missing; each file replaced atomically):
// model.safetensors (every tensor of `layout` under its transformers name, F32), config.json
// (BertConfig::to_classifier_json) and, when `tokenizer_source` is a directory other than `dir`, copies of the
// tokenizer files it has (tokenizer_file_names), so the directory loads with AutoTokenizer too.
void save_model_dir(const std::string& dir, const BertConfig& config, const ParamLayout& layout, const float* params,
                    const std::string& tokenizer_source);
// save_model_dir's files but model.safetensors: config.json and the tokenizer files, for a directory whose weights
// are already there (a hard link to a file save_model_dir wrote).
void save_model_config(const std::string& dir, const BertConfig& config, const std::string& tokenizer_source);
// tokenizer.json, tokenizer_config.json, special_tokens_map.json, vocab.txt, vocab.json, merges.txt, ...
const std::vector<std::string>& tokenizer_file_names();

// Fills `out[0, n)` with normal(0, std) draws from Philox stream (seed, tensor) via Box–Muller:
// the same numbers on every machine, unlike std::normal_distribution.
void fill_normal(float* out, std::size_t n, float std, uint64_t seed, uint32_t tensor);
// Fills `out[0, n)` with uniform draws in (-bound, bound) from Philox stream (seed, tensor).
void fill_uniform(float* out, std::size_t n, float bound, uint64_t seed, uint32_t tensor);

// A randomly initialised model in `layout` as transformers initialises one: linear and embedding weights
// normal(0, initializer_range) (fill_normal, one stream per tensor), LayerNorm weights one, biases zero.
// For benchmarks and tests that need real-size weights without a checkpoint.
std::vector<float> random_bert_parameters(const ParamLayout& layout, const BertConfig& config, uint64_t seed);

}  // namespace bertrain

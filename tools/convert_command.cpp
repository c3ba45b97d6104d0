// `bertrain convert DIR [--out DIR2]`: rewrites a model directory's weights (pytorch_model.bin, read by our
// own restricted unpickler, or model.safetensors) as a float32 model.safetensors with the names
// save_model_dir writes (bert.*, classifier.*), plus config.json and vocab.txt, each replaced atomically.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/files.h"
#include "core/param_store.h"
#include "model/bert_config.h"
#include "model/bert_params.h"
#include "model/model_dir.h"
#include "model/safetensors.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace bertrain {

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  BERTRAIN_CHECK(in, path << ": cannot open");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

}  // namespace

int run_convert(const std::vector<std::string>& args) {
  ArgParser p("convert DIR",
              "Writes DIR's weights (pytorch_model.bin, or model.safetensors when DIR has one) as model.safetensors:\n"
              "float32, Hugging Face names as bertrain writes them (bert.*, classifier.* when DIR has a classifier),\n"
              "cls.* pre-training heads and position_ids dropped, LayerNorm gamma/beta renamed. config.json and\n"
              "vocab.txt are copied beside it. Each file is replaced atomically. transformers loads the result.\n"
              "pytorch_model.bin is read without Python and without executing its pickle (zip or legacy format).");
  p.option("out", "", "output directory (created if missing; default DIR)");
  std::vector<std::string> rest = args;
  std::string dir;
  if (!rest.empty() && rest[0].rfind("-", 0) != 0) {
    dir = rest[0];
    rest.erase(rest.begin());
  }
  if (!p.parse(rest)) return 0;
  if (dir.empty()) throw UsageError("convert: give the model directory (bertrain convert DIR [--out DIR2])");
  const std::string out = p.get("out").empty() ? dir : p.get("out");

  const BertConfig config = BertConfig::load(dir + "/config.json");
  const std::unique_ptr<CheckpointTensors> checkpoint = open_checkpoint(dir);
  // The classifier's row count comes from the checkpoint when it has one (BertForPreTraining has none).
  int num_labels = std::max(config.num_labels(), 1);
  for (const CheckpointTensors::Entry& e : checkpoint->entries()) {
    if (e.name == "classifier.weight" && e.shape.size() == 2 && e.shape[0] > 0) num_labels = static_cast<int>(e.shape[0]);
  }
  const ParamLayout layout = bert_classifier_layout(config, num_labels);
  const std::map<std::string, std::string> source_of = map_checkpoint_names(*checkpoint, layout, config.num_hidden_layers);
  std::map<std::string, std::vector<int64_t>> shape_of;
  for (const CheckpointTensors::Entry& e : checkpoint->entries()) shape_of[e.name] = e.shape;

  std::vector<float> params(layout.total(), 0.0f);
  SafetensorsWriter writer;
  int written = 0;
  for (const ParamEntry& entry : layout.entries()) {
    const auto it = source_of.find(entry.name);
    if (it == source_of.end() && entry.name.rfind("classifier.", 0) == 0) continue;  // no head: BertModel weights
    BERTRAIN_CHECK(it != source_of.end(), checkpoint->path() << ": missing tensor '" << entry.name << "' with shape "
                                                             << shape_string(entry.shape));
    const std::vector<int64_t>& shape = shape_of.at(it->second);
    BERTRAIN_CHECK(shape == entry.shape, checkpoint->path() << ": tensor '" << it->second << "' has shape "
                                                            << shape_string(shape) << " but config.json implies "
                                                            << shape_string(entry.shape));
    checkpoint->read_float_into(it->second, params.data() + entry.offset, entry.numel);
    writer.add_f32(entry.name, entry.shape, params.data() + entry.offset);
    ++written;
  }
  writer.set_metadata("format", "pt");  // transformers refuses safetensors files without it

  // Read everything before writing: DIR2 may be DIR.
  const std::string config_text = read_bytes(dir + "/config.json");
  const bool has_vocab = file_exists(dir + "/vocab.txt");
  const std::string vocab_text = has_vocab ? read_bytes(dir + "/vocab.txt") : std::string();
  make_directories(out);
  writer.write(out + "/model.safetensors");
  write_file_atomically(out + "/config.json", config_text);
  if (has_vocab) write_file_atomically(out + "/vocab.txt", vocab_text);
  std::printf("wrote %s/model.safetensors: %d tensors from %s%s\n", out.c_str(), written, checkpoint->path().c_str(),
              has_vocab ? "" : " (DIR has no vocab.txt)");
  return 0;
}

}  // namespace bertrain

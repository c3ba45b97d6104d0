// `bertrain convert DIR [--out DIR2]`: rewrites a model directory's weights (pytorch_model.bin, read by our
// own restricted unpickler, or model.safetensors) as a float32 model.safetensors with the names
// save_model_dir writes (the family's prefix, its head), plus config.json and the tokenizer's files: a DIR2 swapped in
// whole, atomically; in DIR itself each file replaced atomically.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/files.h"
#include "core/param_store.h"
#include "core/utf8.h"
#include "engine/predictor.h"
#include "engine/stop_signals.h"
#include "model/bert_config.h"
#include "model/bert_params.h"
#include "model/model_dir.h"
#include "model/safetensors.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace bertrain {

namespace {

// What convert reads from DIR: the weights in the layout bertrain writes (`present`: the entries DIR has; a
// base-model checkpoint has no classifier), and the bytes of config.json and of the tokenizer's files.
struct ConvertSource {
  ParamLayout layout;
  std::vector<float> params;
  std::vector<bool> present;  // per layout entry
  std::string weights_path, config_text;
  std::vector<std::pair<std::string, std::string>> tokenizer_files;  // name, bytes
};

// config.json's text for float32 weights: transformers loads weights in the dtype config.json records ("dtype", or
// "torch_dtype" before transformers 5), so an fp16 checkpoint's "float16" would load the float32 file as fp16 again.
// Unchanged when it records float32 or no dtype.
std::string config_for_float32(const std::string& text) {
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(text);  // BertConfig::load read it already
  bool changed = false;
  for (const char* key : {"dtype", "torch_dtype"}) {
    if (config.contains(key) && config[key] != "float32") {
      config[key] = "float32";
      changed = true;
    }
  }
  return changed ? config.dump(2) + "\n" : text;
}

ConvertSource read_source(const std::string& dir) {
  const BertConfig config = BertConfig::load(dir + "/config.json");
  const std::unique_ptr<CheckpointTensors> checkpoint = open_checkpoint(dir);
  // The classifier's row count comes from the checkpoint when it has one (BertForPreTraining has none).
  int num_labels = std::max(config.num_labels(), 1);
  const std::string head_out = std::string(config.family().head_out) + ".weight";
  for (const CheckpointTensors::Entry& e : checkpoint->entries()) {
    if (e.name == head_out && e.shape.size() == 2 && e.shape[0] > 0) num_labels = static_cast<int>(e.shape[0]);
  }
  ConvertSource source;
  source.layout = bert_classifier_layout(config, num_labels);
  source.weights_path = checkpoint->path();
  const std::map<std::string, std::string> source_of =
      map_checkpoint_names(*checkpoint, source.layout, config);
  std::map<std::string, std::vector<int64_t>> shape_of;
  for (const CheckpointTensors::Entry& e : checkpoint->entries()) shape_of[e.name] = e.shape;
  source.params.assign(source.layout.total(), 0.0f);
  for (const ParamEntry& entry : source.layout.entries()) {
    const auto it = source_of.find(entry.name);
    const bool no_head = it == source_of.end() && is_head_tensor(entry.name, config);  // base-model weights
    source.present.push_back(!no_head);
    if (no_head) continue;
    BERTRAIN_CHECK(it != source_of.end(), checkpoint->path() << ": missing tensor '" << entry.name << "' with shape "
                                                             << shape_string(entry.shape));
    const std::vector<int64_t>& shape = shape_of.at(it->second);
    BERTRAIN_CHECK(shape == entry.shape, checkpoint->path() << ": tensor '" << it->second << "' has shape "
                                                            << shape_string(shape) << " but config.json implies "
                                                            << shape_string(entry.shape));
    checkpoint->read_float_into(it->second, source.params.data() + entry.offset, entry.numel);
  }
  source.config_text = config_for_float32(read_file(dir + "/config.json", "config file"));
  for (const std::string& name : tokenizer_file_names()) {
    if (file_exists(dir + "/" + name)) source.tokenizer_files.emplace_back(name, read_file(dir + "/" + name, "tokenizer file"));
  }
  return source;
}

// A DIR2 other than DIR is replaced whole (below): it must be new, empty, or hold only what a model directory has
// (an earlier conversion), and be no folder of a training run, whose checkpoint it would break. Throws InputError.
void check_convert_out(const std::string& out, const std::string& dir) {
  std::error_code error;
  if (!std::filesystem::exists(out, error) || std::filesystem::equivalent(out, dir, error)) return;
  const std::filesystem::path folder = std::filesystem::absolute(out).lexically_normal();
  const std::filesystem::path parent = (folder.has_filename() ? folder : folder.parent_path()).parent_path();
  const bool in_run = std::filesystem::exists(parent / "results.json", error) ||
                      std::filesystem::exists(parent / "last" / "trainer_state.json", error) ||
                      parent.filename() == "checkpoints";
  if (in_run || std::filesystem::exists(folder / "last" / "trainer_state.json", error) ||
      std::filesystem::exists(folder / "results.json", error)) {
    throw InputError("convert: --out '" + out + "' is a training run's folder, whose checkpoint or model the "
                     "conversion would replace: write to another folder");
  }
  std::vector<std::string> model_files = {"config.json", "model.safetensors", "pytorch_model.bin"};
  model_files.insert(model_files.end(), tokenizer_file_names().begin(), tokenizer_file_names().end());
  std::vector<std::string> others;
  for (const auto& entry : std::filesystem::directory_iterator(out, error)) {
    const std::string name = entry.path().filename().string();
    if (std::find(model_files.begin(), model_files.end(), name) == model_files.end()) others.push_back(name);
  }
  if (!others.empty()) {
    std::sort(others.begin(), others.end());
    std::string shown = others[0];
    for (std::size_t i = 1; i < others.size() && i < 3; ++i) shown += ", " + others[i];
    if (others.size() > 3) shown += ", ...";
    throw InputError("convert: --out '" + out + "' holds what no model directory has (" + shown + "); convert " +
                     "replaces the folder whole: give a new or empty folder, or one convert wrote");
  }
}

// A signal (SIGTERM, SIGINT, SIGUSR1, SIGHUP) that came while convert wrote: it stops before the next file, and a DIR2
// being written is removed (replace_directory_atomically), so no temporary folder is left behind.
struct ConvertStopped {
  int signal;
};

}  // namespace

int run_convert(const std::vector<std::string>& args) {
  ArgParser p("convert",
              "Writes DIR's weights (pytorch_model.bin, or model.safetensors when DIR has one) as model.safetensors:\n"
              "float32, Hugging Face names as bertrain writes them (the family's prefix such as bert. or roberta.,\n"
              "the head when DIR has one), pre-training heads and position_ids dropped, LayerNorm gamma/beta\n"
              "renamed. config.json and the tokenizer's files (tokenizer.json, vocab.txt, ...) are copied beside\n"
              "it. DIR2 is replaced whole, atomically (it must be new, empty, or hold a model directory's files\n"
              "only, and be no folder of a training run); in DIR itself each file is replaced atomically.\n"
              "transformers loads the result.\n"
              "pytorch_model.bin is read without Python and without executing its pickle (zip or legacy format).");
  p.positionals("DIR", "a model directory, or a RUN_DIR (its best/)", 1, 1);
  p.option("out", "", "output directory (created if missing; default DIR)").value_name("DIR2");
  if (!p.parse(args)) return 0;
  p.refuse_empty("out", "give the output directory, or leave the flag out to write into DIR");
  // A RUN_DIR means its best/, as for evaluate and predict.
  const std::string dir = input_step([&] { return resolve_model_dir(p.positional_values()[0]); });
  const std::string out = p.get("out").empty() ? dir : p.get("out");
  input_step([&] {
    check_writable_directory(out, "--out");
    check_convert_out(out, dir);
  });

  // Everything is read and checked before anything is written (DIR2 may be DIR); what fails while reading is the
  // user's input (exit 2).
  const ConvertSource source = input_step([&] { return read_source(dir); });
  SafetensorsWriter writer;
  int written = 0;
  for (std::size_t i = 0; i < source.layout.entries().size(); ++i) {
    if (!source.present[i]) continue;
    const ParamEntry& entry = source.layout.entries()[i];
    writer.add_f32(entry.name, entry.shape, source.params.data() + entry.offset);
    ++written;
  }
  writer.set_metadata("format", "pt");  // transformers refuses safetensors files without it
  const auto stop_if_signalled = [] {
    if (StopSignals::received() != 0) throw ConvertStopped{StopSignals::received()};
  };
  // Test hook: BERTRAIN_TEST_SIGNAL_AFTER_WEIGHTS=N raises signal N once model.safetensors is written, as a signal
  // from outside would land while convert writes.
  const char* test_signal = std::getenv("BERTRAIN_TEST_SIGNAL_AFTER_WEIGHTS");
  const auto write_model = [&](const std::string& folder) {
    writer.write(folder + "/model.safetensors");
    if (test_signal != nullptr && std::atoi(test_signal) > 0) std::raise(std::atoi(test_signal));
    stop_if_signalled();
    write_file_atomically(folder + "/config.json", source.config_text);
    for (const auto& [name, bytes] : source.tokenizer_files) {
      stop_if_signalled();
      write_file_atomically(folder + "/" + name, bytes);
    }
    stop_if_signalled();
  };
  std::error_code error;
  const bool in_place = std::filesystem::equivalent(out, dir, error);
  // Says how a signal left DIR2 and ends the process by it.
  const auto stopped_by = [](int sig, const std::string& how) {
    std::fprintf(stderr, "bertrain: convert: stopped by %s %s\n", signal_name(sig).c_str(),
                 escape_for_message(how).c_str());
    return end_by_signal(sig);
  };
  const StopSignals stop_signals;
  try {
    if (in_place) {
      // Each file replaced atomically; config.json (its dtype made float32) and the tokenizer's after the weights.
      write_model(out);
    } else {
      // Another folder is swapped in whole (core/files.h): a reader, or a kill, never finds one model's weights
      // beside another's tokenizer, nor an earlier conversion's tokenizer.json beside this one's vocab.txt.
      std::filesystem::path folder = std::filesystem::path(out).lexically_normal();
      if (!folder.has_filename()) folder = folder.parent_path();  // "DIR2/": its temporary folder goes beside it
      make_directories(std::filesystem::absolute(folder).parent_path().string());
      replace_directory_atomically(folder.string(), write_model);
    }
  } catch (const ConvertStopped& stopped) {
    return stopped_by(stopped.signal, "before " + out + " was complete; " +
                                             (in_place ? "each file there is whole, the old or the new one"
                                                       : "it is as it was"));
  }
  std::printf("wrote %s/model.safetensors: %d tensors from %s%s\n", out.c_str(), written, source.weights_path.c_str(),
              source.tokenizer_files.empty() ? " (DIR has no tokenizer files)" : "");
  std::fflush(stdout);
  // A signal while the folder was swapped in, after the last file: the conversion is whole, and the exit says stopped.
  if (StopSignals::received() != 0) return stopped_by(StopSignals::received(), "after " + out + " was complete");
  return 0;
}

}  // namespace bertrain

// Reading and writing Hugging Face model directories: name variants, validation errors, fresh heads.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <set>

#include "core/error.h"
#include "model/model_dir.h"
#include "model/safetensors.h"
#include "tests/expect_error.h"
#include "tests/temp_dir.h"

namespace bertrain {
namespace {

const std::string kFixture = std::string(BERTRAIN_FIXTURES_DIR) + "/tiny_gelu_bce_adam";

class ModelDirTest : public ::testing::Test {
 protected:
  void SetUp() override { reference_ = load_model_dir(kFixture, {}, 0); }

  // Writes a directory with the fixture's config and the fixture's tensors renamed (nullopt: dropped),
  // plus `extra` tensors.
  std::string write_variant(const std::string& name,
                            const std::function<std::optional<std::string>(const std::string&)>& rename,
                            const std::vector<std::pair<std::string, std::vector<int64_t>>>& extra = {}) {
    const std::string dir = tmp_ + "/" + name;
    save_model_dir(dir, reference_.config, reference_.layout, reference_.params.data(), "");
    SafetensorsWriter writer;
    for (const ParamEntry& e : reference_.layout.entries()) {
      if (auto renamed = rename(e.name)) writer.add_f32(*renamed, e.shape, reference_.params.data() + e.offset);
    }
    static const std::vector<float> zeros(4096, 0.0f);
    for (const auto& [tensor, shape] : extra) writer.add_f32(tensor, shape, zeros.data());
    writer.write(dir + "/model.safetensors");
    return dir;
  }

  void expect_load_error(const std::string& dir, std::initializer_list<const char*> fragments) {
    try {
      load_model_dir(dir, {}, 0);
      FAIL() << "no error loading " << dir;
    } catch (const Error& e) {
      const std::string message = e.what();
      for (const char* f : fragments) EXPECT_NE(message.find(f), std::string::npos) << "'" << f << "' not in: " << message;
    }
  }

  testing::TempDir temp_{"bertrain_model_dir"};
  const std::string tmp_ = temp_.path().string();
  LoadedModel reference_;
};

TEST_F(ModelDirTest, LoadsTheFixtureAsWritten) {
  EXPECT_TRUE(reference_.classifier_loaded);
  EXPECT_EQ(reference_.config.num_labels(), 4);
  const SafetensorsFile file(kFixture + "/model.safetensors");
  for (const ParamEntry& e : reference_.layout.entries()) {
    const std::vector<float> expected = file.read_float(e.name);
    ASSERT_EQ(expected.size(), e.numel);
    for (std::size_t i = 0; i < e.numel; ++i) ASSERT_EQ(reference_.params[e.offset + i], expected[i]) << e.name;
  }
}

TEST_F(ModelDirTest, SaveThenLoadIsExact) {
  const std::string dir = tmp_ + "/saved/nested";
  save_model_dir(dir, reference_.config, reference_.layout, reference_.params.data(), kFixture);
  const LoadedModel back = load_model_dir(dir, {}, 0);
  EXPECT_EQ(back.params, reference_.params);
  EXPECT_EQ(back.config.labels, reference_.config.labels);
  std::ifstream a(kFixture + "/vocab.txt"), b(dir + "/vocab.txt");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(a), {}), std::string(std::istreambuf_iterator<char>(b), {}));
  const SafetensorsFile file(dir + "/model.safetensors");
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.tensors().size(), reference_.layout.entries().size());
}

TEST_F(ModelDirTest, AcceptsBertModelNamesGammaBetaAndIgnoresHeads) {
  const std::string dir = write_variant(
      "legacy",
      [](const std::string& name) -> std::optional<std::string> {
        std::string n = name.rfind("bert.", 0) == 0 ? name.substr(5) : name;
        if (n.size() > 17 && n.compare(n.size() - 17, 17, ".LayerNorm.weight") == 0) n.replace(n.size() - 6, 6, "gamma");
        if (n.size() > 15 && n.compare(n.size() - 15, 15, ".LayerNorm.bias") == 0) n.replace(n.size() - 4, 4, "beta");
        return n;
      },
      {{"cls.predictions.bias", {67}}, {"cls.seq_relationship.weight", {2, 32}}, {"embeddings.position_ids", {1, 40}}});
  const LoadedModel loaded = load_model_dir(dir, {}, 0);
  EXPECT_EQ(loaded.params, reference_.params);
}

TEST_F(ModelDirTest, MissingTensorIsNamed) {
  const std::string dir = write_variant("missing", [](const std::string& name) -> std::optional<std::string> {
    if (name == "bert.encoder.layer.1.intermediate.dense.bias") return std::nullopt;
    return name;
  });
  expect_load_error(dir, {"model.safetensors", "missing tensor 'bert.encoder.layer.1.intermediate.dense.bias'", "[64]"});
}

TEST_F(ModelDirTest, WrongShapeIsNamed) {
  const std::string dir = write_variant(
      "shape",
      [](const std::string& name) -> std::optional<std::string> {
        return name == "bert.pooler.dense.bias" ? std::nullopt : std::optional<std::string>(name);
      },
      {{"bert.pooler.dense.bias", {31}}});
  expect_load_error(dir, {"'bert.pooler.dense.bias'", "[31]", "[32]"});
}

TEST_F(ModelDirTest, UnexpectedTensorIsNamed) {
  const std::string dir =
      write_variant("extra", [](const std::string& name) { return std::optional<std::string>(name); },
                    {{"bert.encoder.layer.2.output.dense.bias", {32}}});
  expect_load_error(dir, {"unexpected tensor 'bert.encoder.layer.2.output.dense.bias'"});
}

TEST_F(ModelDirTest, TwoNamesForOneTensorAreRejected) {
  const std::string dir =
      write_variant("dup", [](const std::string& name) { return std::optional<std::string>(name); },
                    {{"pooler.dense.bias", {32}}});
  expect_load_error(dir, {"'bert.pooler.dense.bias'", "'pooler.dense.bias'", "both map"});
}

TEST_F(ModelDirTest, MissingWeightsFileSaysHowToConvert) {
  const std::string dir = tmp_ + "/no_weights";
  save_model_dir(dir, reference_.config, reference_.layout, reference_.params.data(), "");
  ASSERT_EQ(std::remove((dir + "/model.safetensors").c_str()), 0);
  expect_load_error(dir, {"model.safetensors", "not found", "convert"});
  expect_load_error(tmp_ + "/nowhere", {"config.json", "cannot open"});
}

// torch.save's file under the safetensors name is said to be one, not "header length 578712552184433488".
TEST_F(ModelDirTest, ATorchCheckpointNamedSafetensorsIsNamed) {
  const std::string dir = tmp_ + "/renamed";
  save_model_dir(dir, reference_.config, reference_.layout, reference_.params.data(), "");
  for (const char* torch_file : {"zip_f32.bin", "legacy_f32.bin"}) {
    std::ifstream in(std::string(BERTRAIN_FIXTURES_DIR) + "/torch_bin/" + torch_file, std::ios::binary);
    std::ofstream(dir + "/model.safetensors", std::ios::binary) << in.rdbuf();
    expect_load_error(dir, {"model.safetensors: holds a torch checkpoint", "name it pytorch_model.bin"});
  }
}

// A checkpoint in shards (transformers' save_pretrained past max_shard_size): model.safetensors.index.json names each
// tensor's file; loaded it gives the unsharded checkpoint's parameters exactly. Index mistakes are named.
TEST_F(ModelDirTest, ShardedCheckpointsLoadAsOne) {
  const std::string dir = tmp_ + "/sharded";
  save_model_dir(dir, reference_.config, reference_.layout, reference_.params.data(), "");
  ASSERT_EQ(std::remove((dir + "/model.safetensors").c_str()), 0);
  SafetensorsWriter first, second;
  nlohmann::json weight_map = nlohmann::json::object();
  std::size_t i = 0;
  for (const ParamEntry& e : reference_.layout.entries()) {
    const bool in_first = i++ % 2 == 0;
    (in_first ? first : second).add_f32(e.name, e.shape, reference_.params.data() + e.offset);
    weight_map[e.name] = in_first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  first.write(dir + "/model-00001-of-00002.safetensors");
  second.write(dir + "/model-00002-of-00002.safetensors");
  const auto write_index = [&](const nlohmann::json& map) {
    std::ofstream(dir + "/model.safetensors.index.json") << nlohmann::json{{"metadata", {{"total_size", 1}}}, {"weight_map", map}}.dump();
  };
  write_index(weight_map);
  const LoadedModel loaded = load_model_dir(dir, {}, 0);
  EXPECT_EQ(loaded.params, reference_.params);
  EXPECT_TRUE(loaded.classifier_loaded);

  nlohmann::json wrong = weight_map;
  wrong["classifier.bias"] = weight_map["classifier.bias"] == "model-00001-of-00002.safetensors"
                                 ? "model-00002-of-00002.safetensors"
                                 : "model-00001-of-00002.safetensors";  // the shard it is not in
  write_index(wrong);
  expect_load_error(dir, {wrong["classifier.bias"].get<std::string>().c_str(), "no tensor 'classifier.bias'", "index.json"});
  wrong = weight_map;
  wrong["classifier.bias"] = "../elsewhere.safetensors";
  write_index(wrong);
  expect_load_error(dir, {"index.json", "'../elsewhere.safetensors'", "not a file beside the index"});
  wrong = weight_map;
  wrong["classifier.bias"] = "model-00003-of-00002.safetensors";
  write_index(wrong);
  expect_load_error(dir, {"model-00003-of-00002.safetensors"});
  std::ofstream(dir + "/model.safetensors.index.json") << "{\"weight_map\": ";
  expect_load_error(dir, {"model.safetensors.index.json", "invalid JSON"});
}

TEST_F(ModelDirTest, ShardedTorchCheckpointsAreNamed) {
  const std::string dir = tmp_ + "/sharded_bin";
  save_model_dir(dir, reference_.config, reference_.layout, reference_.params.data(), "");
  ASSERT_EQ(std::remove((dir + "/model.safetensors").c_str()), 0);
  std::ofstream(dir + "/pytorch_model.bin.index.json") << "{}";
  expect_load_error(dir, {"pytorch_model.bin.index.json", "sharded", "safetensors"});
}

// Mean and standard deviation of n floats.
std::pair<double, double> moments(const float* v, std::size_t n) {
  double sum = 0, sq = 0;
  for (std::size_t i = 0; i < n; ++i) sum += v[i], sq += static_cast<double>(v[i]) * v[i];
  const double mean = sum / n;
  return {mean, std::sqrt(sq / n - mean * mean)};
}

TEST_F(ModelDirTest, NewLabelsGetAFreshSeededHead) {
  const std::vector<std::string> labels = {"x", "y", "z"};
  for (HeadInit init : {HeadInit::kTorch, HeadInit::kHf}) {
    SCOPED_TRACE(head_init_name(init));
    const LoadedModel a = load_model_dir(kFixture, labels, 7, init), b = load_model_dir(kFixture, labels, 7, init),
                      c = load_model_dir(kFixture, labels, 8, init);
    EXPECT_FALSE(a.classifier_loaded);
    EXPECT_EQ(a.config.labels, labels);
    const ParamEntry& w = a.layout.at("classifier.weight");
    const ParamEntry& bias = a.layout.at("classifier.bias");
    EXPECT_EQ(w.shape, (std::vector<int64_t>{3, 32}));
    for (std::size_t i = 0; i < w.numel; ++i) EXPECT_EQ(a.params[w.offset + i], b.params[w.offset + i]);  // same seed
    EXPECT_NE(a.params[w.offset], c.params[w.offset]);  // another seed, another head
    const auto [mean, std_dev] = moments(a.params.data() + w.offset, w.numel);
    if (init == HeadInit::kHf) {
      EXPECT_NEAR(std_dev, reference_.config.initializer_range, 0.25 * reference_.config.initializer_range);
      for (std::size_t i = 0; i < bias.numel; ++i) EXPECT_EQ(a.params[bias.offset + i], 0.0f);
    } else {
      // nn.Linear: weight and bias uniform in ±1/√hidden; a uniform's standard deviation is bound/√3.
      const double bound = 1.0 / std::sqrt(32.0);
      for (std::size_t i = 0; i < w.numel; ++i) EXPECT_LT(std::abs(a.params[w.offset + i]), bound);
      EXPECT_NEAR(std_dev, bound / std::sqrt(3.0), 0.25 * bound / std::sqrt(3.0));
      EXPECT_NEAR(mean, 0.0, 0.3 * bound);
      for (std::size_t i = 0; i < bias.numel; ++i) {
        EXPECT_LT(std::abs(a.params[bias.offset + i]), bound);
        EXPECT_NE(a.params[bias.offset + i], 0.0f);
      }
      EXPECT_NE(a.params[bias.offset], a.params[w.offset]);  // weight and bias are different streams
    }
    // The encoder is still the checkpoint's.
    const ParamEntry& pooler = a.layout.at("bert.pooler.dense.weight");
    const ParamEntry& ref_pooler = reference_.layout.at("bert.pooler.dense.weight");
    EXPECT_EQ(a.params[pooler.offset + 5], reference_.params[ref_pooler.offset + 5]);
  }
  // The same labels in the checkpoint's order keep the trained head.
  EXPECT_TRUE(load_model_dir(kFixture, reference_.config.labels, 7).classifier_loaded);
  // In another order too (a model whose integer labels an older bertrain ordered as text): each label's row moves
  // with it. Before, the head was initialised anew without a word.
  std::vector<std::string> reversed = reference_.config.labels;
  std::reverse(reversed.begin(), reversed.end());
  const LoadedModel moved = load_model_dir(kFixture, reversed, 7);
  EXPECT_TRUE(moved.classifier_loaded);
  const std::size_t n = reversed.size();
  for (const char* name : {"classifier.weight", "classifier.bias"}) {
    const ParamEntry& mine = moved.layout.at(name);
    const ParamEntry& theirs = reference_.layout.at(name);
    const std::size_t row = mine.numel / n;
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t k = 0; k < row; ++k) {
        ASSERT_EQ(moved.params[mine.offset + i * row + k], reference_.params[theirs.offset + (n - 1 - i) * row + k])
            << name << " row " << i;
      }
    }
  }
  // The same number of labels but not the same ones: a new head.
  std::vector<std::string> renamed = reference_.config.labels;
  renamed[0] = "renamed";
  EXPECT_FALSE(load_model_dir(kFixture, renamed, 7).classifier_loaded);
  EXPECT_EQ(parse_head_init("hf"), HeadInit::kHf);
  EXPECT_THROW(parse_head_init("xavier"), Error);
}

TEST(FillUniform, CoversTheIntervalEvenly) {
  std::vector<float> v(40001);
  fill_uniform(v.data(), v.size(), 0.5f, 3, 0);
  int below = 0;
  for (float x : v) {
    ASSERT_GT(x, -0.5f);
    ASSERT_LT(x, 0.5f);
    below += x < 0 ? 1 : 0;
  }
  EXPECT_NEAR(below / 40001.0, 0.5, 0.01);
  const auto [mean, std_dev] = moments(v.data(), v.size());
  EXPECT_NEAR(std_dev, 0.5 / std::sqrt(3.0), 0.005);
  EXPECT_NEAR(mean, 0.0, 0.01);
}

TEST_F(ModelDirTest, UnknownLabelsWithoutHeadIsAnError) {
  BertConfig no_labels = reference_.config;
  no_labels.labels.clear();
  const std::string dir = tmp_ + "/no_labels";
  save_model_dir(dir, no_labels, reference_.layout, reference_.params.data(), "");
  // to_classifier_json writes an empty id2label; loading without labels cannot know the classes.
  expect_load_error(dir, {"id2label", "labels are unknown"});
}

}  // namespace
}  // namespace bertrain

namespace bertrain {
namespace {

// Each family's fixture loads with every tensor under its transformers name, saves under exactly the names it was
// read from (what transformers' from_pretrained needs to report no missing or unexpected keys), and reloads bit for
// bit; a pre-training checkpoint of the family (no prefix, its pre-training head, no classifier) loads with a fresh
// head whose dense layer is loaded when the checkpoint has it and new when not.
class FamilyModelDirTest : public ::testing::TestWithParam<std::string> {
 protected:
  testing::TempDir temp_{"bertrain_family_dir"};
};

TEST_P(FamilyModelDirTest, SavesUnderTheNamesItReadAndLoadsBaseCheckpoints) {
  const std::string fixture = std::string(BERTRAIN_FIXTURES_DIR) + "/" + GetParam();
  const LoadedModel model = load_model_dir(fixture, {}, 0);
  const SafetensorsFile source(fixture + "/model.safetensors");
  std::set<std::string> source_names, layout_names;
  for (const TensorInfo& t : source.tensors()) source_names.insert(t.name);
  for (const ParamEntry& e : model.layout.entries()) layout_names.insert(e.name);
  EXPECT_EQ(layout_names, source_names);

  const std::string dir = temp_.path().string() + "/saved";
  save_model_dir(dir, model.config, model.layout, model.params.data(), fixture);
  const SafetensorsFile saved(dir + "/model.safetensors");
  std::set<std::string> saved_names;
  for (const TensorInfo& t : saved.tensors()) saved_names.insert(t.name);
  EXPECT_EQ(saved_names, source_names);
  const LoadedModel back = load_model_dir(dir, {}, 0);
  EXPECT_EQ(back.params, model.params);
  EXPECT_EQ(back.config.model_type, model.config.model_type);
  EXPECT_EQ(back.config.to_classifier_json(), model.config.to_classifier_json());

  // A pre-training checkpoint: the family's prefix dropped, a pre-training head beside it, no classifier; with the
  // head's dense layer (BERT's pooler in BertForPreTraining; another family's classifier re-labelled) it is loaded,
  // without it (BertForMaskedLM, BertModel(add_pooling_layer=False); the others' base models) it is new.
  const ModelFamily& family = model.config.family();
  if (family.type == ModelType::kBert) {  // the pooler is among what may be missing, so the loop drops it too
    EXPECT_TRUE(is_head_tensor("bert.pooler.dense.weight", model.config));
  }
  for (const bool with_dense : {true, false}) {
    SCOPED_TRACE(with_dense ? "with the head's dense layer" : "without it");
    const auto absent = [&](const std::string& name) {
      return is_head_output(name, model.config) || (!with_dense && is_head_tensor(name, model.config));
    };
    const std::string base_dir = temp_.path().string() + (with_dense ? "/base_dense" : "/base");
    save_model_dir(base_dir, model.config, model.layout, model.params.data(), "");
    SafetensorsWriter writer;
    for (const ParamEntry& e : model.layout.entries()) {
      if (absent(e.name)) continue;
      const std::string name =
          e.name.rfind(family.base, 0) == 0 ? e.name.substr(std::string(family.base).size()) : e.name;
      writer.add_f32(name, e.shape, model.params.data() + e.offset);
    }
    const std::vector<float> zeros(64, 0.0f);
    writer.add_f32(family.ignored.front() + "bias", {4}, zeros.data());
    writer.write(base_dir + "/model.safetensors");
    const LoadedModel fresh = load_model_dir(base_dir, {"x", "y"}, 3, HeadInit::kHf);
    EXPECT_FALSE(fresh.classifier_loaded);
    for (const ParamEntry& e : fresh.layout.entries()) {
      const ParamEntry& ref = model.layout.at(e.name);
      const auto begin = fresh.params.begin() + e.offset, end = begin + e.numel;
      const bool same = e.shape == ref.shape && std::equal(begin, end, model.params.begin() + ref.offset);
      EXPECT_EQ(same, !absent(e.name)) << e.name;
      // New tensors as --head-init hf makes them: weights of the initializer range's spread, biases 0.
      if (!absent(e.name)) continue;
      if (e.shape.size() == 1) {
        EXPECT_TRUE(std::all_of(begin, end, [](float v) { return v == 0.0f; })) << e.name;
      } else {
        double squares = 0;
        for (auto v = begin; v != end; ++v) squares += static_cast<double>(*v) * *v;
        EXPECT_NEAR(std::sqrt(squares / e.numel), model.config.initializer_range, 0.3 * model.config.initializer_range)
            << e.name;
      }
    }
    // A trained classifier must bring its whole head.
    testing::expect_error([&] { load_model_dir(base_dir, {}, 0); }, {"missing"});
  }
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyModelDirTest,
                         ::testing::Values("tiny_gelu_bce_adam", "tiny_roberta_bce_adam", "tiny_xlmr_ce_adamw",
                                           "tiny_distilbert_bce_adam", "tiny_electra_bce_adam",
                                           "tiny_electra_same_size_relu_ce_adam"));

}  // namespace
}  // namespace bertrain

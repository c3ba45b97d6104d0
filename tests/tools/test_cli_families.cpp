// The main job with every model family: a RoBERTa and a Data2VecText with a byte-level BPE tokenizer.json, an XLM-R
// and a CamemBERT with a Unigram one, a DistilBERT and an ELECTRA (with embeddings_project) with a WordPiece
// tokenizer.json, each trained,
// evaluated and asked for a prediction through the real binary exactly as a BERT is. Their weights are random
// (the tiny fixture shapes, the tokenizers' vocabularies): these tests are about the commands, not the accuracy;
// tests/model/test_golden.cpp checks the numbers against transformers.
#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <set>

#include "core/utf8.h"
#include "data/tokenizer_loader.h"
#include "model/bert_config.h"
#include "model/bert_params.h"
#include "model/model_dir.h"
#include "model/safetensors.h"
#include "tests/tools/cli_test.h"
#include "tests/tools/model_variants.h"

namespace bertrain {
namespace cli_test {
namespace {

struct FamilyCase {
  const char* fixture;    // tests/fixtures/<fixture>: the model's config
  const char* tokenizer;  // tests/fixtures/tokenizers/<tokenizer>/tokenizer.json
};

class CliFamilyTest : public CliTest, public ::testing::WithParamInterface<FamilyCase> {
 protected:
  // The fixture's config with the tokenizer's vocabulary and padding id, and random weights for two labels other
  // than the data's (so training starts from a fresh head), saved as the family's classifier with the tokenizer
  // beside it.
  static std::string tokenizer_dir() {
    return std::string(BERTRAIN_FIXTURES_DIR) + "/tokenizers/" + GetParam().tokenizer;
  }
  void make_family_model(const fs::path& dir) const {
    const FamilyCase& c = GetParam();
    const std::string fixture = std::string(BERTRAIN_FIXTURES_DIR) + "/" + c.fixture;
    BertConfig config = BertConfig::load(fixture + "/config.json");
    const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(tokenizer_dir());
    config.vocab_size = tokenizer->vocab_size();
    if (tokenizer->pad_id() >= 0) config.pad_token_id = tokenizer->pad_id();
    config.labels = {"a", "b"};
    const ParamLayout layout = bert_classifier_layout(config, config.num_labels());
    const std::vector<float> params = random_bert_parameters(layout, config, 5);
    save_model_dir(dir.string(), config, layout, params.data(), tokenizer_dir());
  }
};

TEST_P(CliFamilyTest, TrainEvaluatePredict) {
  const FamilyCase& c = GetParam();
  const fs::path family_model = dir_ / "family";
  make_family_model(family_model);
  ASSERT_TRUE(fs::exists(family_model / "tokenizer.json"));
  const std::string run_dir = path("run");
  const RunResult trained = run({"train", "--model", family_model.string(), "--train-data", data(), "--out", run_dir,
                                 "--epochs", "2", "--batch-size", "8", "--lr", "1e-3", "--quiet"});
  ASSERT_TRUE(succeeded(trained)) << trained.describe();
  const std::vector<json> metrics = read_jsonl(run_dir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 2u);
  for (const json& m : metrics) EXPECT_TRUE(std::isfinite(m.at("val_loss").get<double>())) << m.dump();

  // best/ is the family's classifier under the names it was read with, its config in the family's own field names,
  // its tokenizer copied along.
  const fs::path best = fs::path(run_dir) / "best";
  const json config = json::parse(slurp(best / "config.json"));
  const json source = json::parse(slurp(family_model / "config.json"));
  EXPECT_EQ(config.at("model_type"), source.at("model_type"));
  EXPECT_EQ(config.at("architectures"), source.at("architectures"));
  EXPECT_EQ(config.at("id2label").size(), kTags.size());
  EXPECT_EQ(slurp(best / "tokenizer.json"), slurp(family_model / "tokenizer.json"));
  const SafetensorsFile saved_file((best / "model.safetensors").string());
  const SafetensorsFile read_file((family_model / "model.safetensors").string());
  std::set<std::string> saved, read;
  for (const TensorInfo& t : saved_file.tensors()) saved.insert(t.name);
  for (const TensorInfo& t : read_file.tensors()) read.insert(t.name);
  EXPECT_EQ(saved, read);

  const RunResult evaluated = run({"evaluate", "--model", run_dir, "--data", data(), "--device", "cpu"});
  ASSERT_TRUE(succeeded(evaluated)) << evaluated.describe();
  EXPECT_NE(evaluated.out.find("\"f1\""), std::string::npos) << evaluated.out;

  const RunResult predicted = run({"predict", "--model", run_dir, "--title", "Image segmentation with résumé ✨",
                                   "--description", "a camera and video model"});
  ASSERT_TRUE(succeeded(predicted)) << predicted.describe();
  const json prediction = json::parse(predicted.out);
  EXPECT_NE(std::find(kTags.begin(), kTags.end(), prediction.at("prediction").get<std::string>()), kTags.end())
      << predicted.out << " (" << c.fixture << ")";
}

// A tokenizer.json that can produce ids past the model's embedding rows (it belongs to another model) is refused
// before any text is read, naming both sizes, by train and by predict.
TEST_F(CliTest, ATokenizerLargerThanTheModelIsRefused) {
  const fs::path dir = dir_ / "mismatch";
  fs::create_directories(dir);
  const fs::path fixture = fs::path(BERTRAIN_FIXTURES_DIR) / "tiny_roberta_bce_adam";  // vocab_size 67
  for (const char* name : {"config.json", "model.safetensors"}) fs::copy_file(fixture / name, dir / name);
  fs::copy_file(fs::path(BERTRAIN_FIXTURES_DIR) / "tokenizers/bpe_bytelevel/tokenizer.json", dir / "tokenizer.json");
  expect_error(run({"train", "--model", dir.string(), "--train-data", data(), "--out", path("run"), "--quiet"}),
               "vocab_size is 67");
  expect_no_run(path("run"));
  expect_error(run({"predict", "--model", dir.string(), "--title", "image"}), "vocab_size is 67");
}

// A classifier of one label without problem_type predicts with a sigmoid, as transformers' text-classification
// pipeline does (a softmax over one logit said 1 for every text): its probability is, to rounding, the second
// probability of a two-label softmax whose first logit is 0, softmax([0, z])[1] = sigmoid(z).
TEST_F(CliTest, AOneLabelModelPredictsWithASigmoid) {
  const auto weights = [](const ParamLayout& layout, std::vector<float>* params, int row) {
    const ParamEntry& w = layout.at("classifier.weight");
    const int hidden = static_cast<int>(w.shape[1]);
    for (int i = 0; i < hidden; ++i) (*params)[w.offset + row * hidden + i] = 0.05f * static_cast<float>(i % 7 - 3);
    (*params)[layout.at("classifier.bias").offset + row] = 0.3f;
  };
  save_bert_with_head(model(), dir_ / "one", {"relevant"}, [&](const ParamLayout& l, std::vector<float>* p) {
    weights(l, p, 0);
  });
  json config = json::parse(slurp(dir_ / "one/config.json"));
  config.erase("problem_type");  // as transformers saves a num_labels=1 model
  spit(dir_ / "one/config.json", config.dump());
  save_bert_with_head(model(), dir_ / "two", {"not", "relevant"}, [&](const ParamLayout& l, std::vector<float>* p) {
    weights(l, p, 1);
  });
  const RunResult one = run({"predict", "--model", path("one"), "--data", data(), "--out", path("one.jsonl")});
  ASSERT_TRUE(succeeded(one)) << one.describe();
  const RunResult two = run({"predict", "--model", path("two"), "--data", data(), "--out", path("two.jsonl")});
  ASSERT_TRUE(succeeded(two)) << two.describe();
  const std::vector<json> sigmoid = read_jsonl(dir_ / "one.jsonl"), softmax = read_jsonl(dir_ / "two.jsonl");
  ASSERT_EQ(sigmoid.size(), static_cast<std::size_t>(kRows));
  ASSERT_EQ(softmax.size(), sigmoid.size());
  double lowest = 1, highest = 0;
  for (std::size_t i = 0; i < sigmoid.size(); ++i) {
    const double p = sigmoid[i].at("probabilities").at("relevant").get<double>();
    EXPECT_NEAR(p, softmax[i].at("probabilities").at("relevant").get<double>(), 1e-6) << i;
    lowest = std::min(lowest, p);
    highest = std::max(highest, p);
  }
  EXPECT_LT(highest, 0.999);
  EXPECT_GT(highest - lowest, 1e-3);  // the texts are told apart
}

// An error is one line of valid UTF-8 whatever it quotes: a tensor name from a checkpoint with a line feed in it, a
// path with one and a byte that is not UTF-8 (written as \xHH).
TEST_F(CliTest, ErrorsAreOneLineOfUtf8WhateverTheyQuote) {
  const LoadedModel loaded = load_model_dir(model(), {}, 0);
  const fs::path dir = dir_ / "odd_names";
  save_model_dir(dir.string(), loaded.config, loaded.layout, loaded.params.data(), model());
  SafetensorsWriter writer;
  for (const ParamEntry& e : loaded.layout.entries()) writer.add_f32(e.name, e.shape, loaded.params.data() + e.offset);
  const float extra[2] = {0, 0};
  writer.add_f32("bert.extra\nsecond line", {2}, extra);
  writer.write((dir / "model.safetensors").string());
  const RunResult named = run({"predict", "--model", dir.string(), "--text", "a text"});
  EXPECT_EQ(named.exit_code, 2) << named.describe();
  EXPECT_NE(named.err.find("unexpected tensor 'bert.extra\\x0Asecond line'"), std::string::npos) << named.describe();
  const RunResult path_named = run({"predict", "--model", path("no\nsuch\xff"), "--text", "a text"});
  EXPECT_EQ(path_named.exit_code, 2) << path_named.describe();
  EXPECT_NE(path_named.err.find("no\\x0Asuch\\xFF"), std::string::npos) << path_named.describe();
  for (const RunResult* r : {&named, &path_named}) {
    EXPECT_EQ(std::count(r->err.begin(), r->err.end(), '\n'), 1) << r->err;
    EXPECT_TRUE(is_valid_utf8(r->err)) << r->err;
  }
}

// Two logits an ulp apart round to one probability. evaluate predicts the arg-max of the logits (Made-With-ML's
// evaluate.py: model.predict, torch.argmax of z), predict the first arg-max of the probabilities (its predict.py:
// prob.argmax()); before, evaluate took the probabilities' and scored class 0 where Made-With-ML scores class 1.
TEST_F(CliTest, EvaluatePredictsTheArgMaxOfTheLogits) {
  save_logit_tie_model(model(), dir_ / "tie");
  const RunResult predicted = run({"predict", "--model", path("tie"), "--text", "any text"});
  ASSERT_TRUE(succeeded(predicted)) << predicted.describe();
  const json line = json::parse(predicted.out);
  ASSERT_EQ(line["probabilities"][kTags[0]], line["probabilities"][kTags[1]]) << predicted.out;  // the tie
  EXPECT_EQ(line["prediction"], kTags[0]);
  const RunResult evaluated = run({"evaluate", "--model", path("tie"), "--data", data()});
  ASSERT_TRUE(succeeded(evaluated)) << evaluated.describe();
  const json e = json::parse(evaluated.out);
  const json& matrix = e["confusion_matrix"]["matrix"];
  for (std::size_t t = 0; t < kTags.size(); ++t) {
    for (std::size_t c = 0; c < kTags.size(); ++c) {
      EXPECT_EQ(matrix[t][c], c == 1 ? kRowsPerTag[t] : 0) << "true " << kTags[t] << ", predicted " << kTags[c];
    }
  }
  EXPECT_EQ(e["per_class"][kTags[1]]["recall"], 1.0) << evaluated.out;
}

// Checkpoints that transformers computes otherwise than bertrain's encoder classifier are refused by name, before
// any text is read: a decoder (causal attention), a regression head (numbers, not labels), and a RoBERTa whose
// config.json pads with a token that is not the tokenizer's (transformers numbers positions from it).
TEST_F(CliTest, CheckpointsTransformersComputesOtherwiseAreRefused) {
  fs::copy(model(), dir_ / "decoder");
  json config = json::parse(slurp(dir_ / "decoder/config.json"));
  config["is_decoder"] = true;
  spit(dir_ / "decoder/config.json", config.dump());
  expect_error(run({"predict", "--model", path("decoder"), "--title", "image"}), "is_decoder true is not supported");
  expect_error(run({"train", "--model", path("decoder"), "--train-data", data(), "--out", path("run"), "--quiet"}),
               "is_decoder true is not supported");
  expect_no_run(path("run"));

  fs::copy(model(), dir_ / "regression");
  config = json::parse(slurp(dir_ / "regression/config.json"));
  config["problem_type"] = "regression";
  spit(dir_ / "regression/config.json", config.dump());
  expect_error(run({"predict", "--model", path("regression"), "--title", "image"}), "problem_type regression");
  expect_error(run({"evaluate", "--model", path("regression"), "--data", data()}), "problem_type regression");

  const fs::path roberta = dir_ / "roberta";
  const std::string tokenizer = std::string(BERTRAIN_FIXTURES_DIR) + "/tokenizers/bpe_bytelevel";
  BertConfig c = BertConfig::load(std::string(BERTRAIN_FIXTURES_DIR) + "/tiny_roberta_bce_adam/config.json");
  c.vocab_size = load_tokenizer(tokenizer)->vocab_size();
  c.labels = {"a", "b"};
  c.pad_token_id = 0;  // <s>, which starts every row; the tokenizer pads with <pad> (1)
  const ParamLayout layout = bert_classifier_layout(c, c.num_labels());
  save_model_dir(roberta.string(), c, layout, random_bert_parameters(layout, c, 5).data(), tokenizer);
  expect_error(run({"predict", "--model", roberta.string(), "--title", "image"}),
               "pad_token_id 0 is not the tokenizer's padding token 1");
  expect_error(run({"train", "--model", roberta.string(), "--train-data", data(), "--out", path("run"), "--quiet"}),
               "pad_token_id 0 is not the tokenizer's padding token 1");
  expect_no_run(path("run"));
}

INSTANTIATE_TEST_SUITE_P(Families, CliFamilyTest,
                         ::testing::Values(FamilyCase{"tiny_roberta_bce_adam", "bpe_bytelevel"},
                                           FamilyCase{"tiny_xlmr_ce_adamw", "unigram_xlmr"},
                                           FamilyCase{"tiny_camembert_ce_adamw", "unigram_xlmr"},
                                           FamilyCase{"tiny_data2vec_bce_adam", "bpe_bytelevel"},
                                           FamilyCase{"tiny_distilbert_bce_adam", "wordpiece_cased"},
                                           FamilyCase{"tiny_electra_bce_adam", "wordpiece_cased"}),
                         [](const ::testing::TestParamInfo<FamilyCase>& info) {
                           std::string name = info.param.fixture;
                           name = name.substr(5, name.find('_', 5) - 5);  // tiny_<family>_...
                           return name;
                         });

}  // namespace
}  // namespace cli_test
}  // namespace bertrain

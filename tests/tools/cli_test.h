// The harness of the CLI suites (test_cli*.cpp): runs the real binary (BERTRAIN_BINARY) with stdout and stderr
// captured separately, on the tiny fixture model with a vocabulary of real words and a small synthetic
// Made-With-ML-like CSV. Each suite file derives its own fixture from CliTest (one name per file).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/run_process.h"
#include "tests/temp_dir.h"

#ifndef BERTRAIN_BINARY
#error "BERTRAIN_BINARY must name the bertrain executable"
#endif

namespace bertrain {
namespace cli_test {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

// ---- running the binary ---------------------------------------------------------------------------------

using ::bertrain::testing::RunResult;

// The binary under test: BERTRAIN_BINARY, or the environment variable of that name (to test another build).
inline std::string binary() {
  const char* from_env = std::getenv("BERTRAIN_BINARY");
  return from_env != nullptr && *from_env != '\0' ? from_env : BERTRAIN_BINARY;
}

// Runs bertrain. `train` runs on the CPU unless the test names a --device: the default (auto) would take a
// GPU where one is visible, and these tests are about the command-line contract, the same on every engine.
inline RunResult run(const std::vector<std::string>& args, const std::vector<std::string>& extra_env = {},
                     double timeout_s = 120) {
  std::vector<std::string> argv{binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  if (!args.empty() && args[0] == "train" && std::find(args.begin(), args.end(), "--device") == args.end()) {
    argv.insert(argv.end(), {"--device", "cpu"});
  }
  return ::bertrain::testing::run_process(argv, extra_env, timeout_s);
}

// bertrain with `args` as shell words, each single-quoted (the tests' paths and flags hold no quote), for a shell
// line that redirects, pipes or limits it.
inline std::string shell_command(const std::vector<std::string>& args) {
  std::string command = "'" + binary() + "'";
  for (const std::string& a : args) command += " '" + a + "'";
  return command;
}

// bertrain run from `cwd` (for relative paths and file:relative URIs).
inline RunResult run_in(const std::string& cwd, const std::vector<std::string>& args,
                        const std::vector<std::string>& env = {}) {
  return ::bertrain::testing::run_process({"/bin/sh", "-c", "cd '" + cwd + "' && exec " + shell_command(args)}, env);
}

// bash runs shell text `command` with its output piped into `head -n 1`, which goes away after the first line; the
// last line of stderr is "`label` exited N", N the command's own exit status.
inline RunResult run_into_head(const std::string& command, const std::string& label) {
  return ::bertrain::testing::run_process(
      {"/bin/bash", "-c", command + " | head -n 1; echo \"" + label + " exited ${PIPESTATUS[0]}\" >&2"});
}

// ---- files ----------------------------------------------------------------------------------------------

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void spit(const fs::path& p, const std::string& contents) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << contents;
  ASSERT_TRUE(out.good()) << p;
}

// Every regular file under `root` (relative path -> bytes).
inline std::map<std::string, std::string> snapshot(const fs::path& root) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file()) files[fs::relative(e.path(), root).string()] = slurp(e.path());
  }
  return files;
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A one-line diagnostic: non-empty, ends in one newline, no other newline.
inline ::testing::AssertionResult is_one_line(const std::string& err) {
  if (err.empty()) return ::testing::AssertionFailure() << "stderr is empty";
  if (err.back() != '\n' || err.find('\n') != err.size() - 1) {
    return ::testing::AssertionFailure() << "stderr is not exactly one line:\n" << err;
  }
  return ::testing::AssertionSuccess();
}

// ---- the synthetic model and data -----------------------------------------------------------------------

inline const std::vector<std::string> kTags = {"computer-vision", "mlops", "natural-language-processing", "other"};
inline const std::vector<int> kRowsPerTag = {12, 11, 9, 8};  // 40 rows; ceil(0.2·n) = 3, 3, 2, 2 → 10 validation rows
inline constexpr int kRows = 40;

// 15 words per tag (+ 2 shared), none an NLTK stopword: 62 words + 5 special tokens = the fixture's 67 rows.
inline const std::vector<std::vector<std::string>> kWords = {
    {"image", "images", "segmentation", "detection", "object", "pixel", "camera", "video", "convolutional", "resnet",
     "yolo", "vision", "face", "recognition", "pose"},
    {"deployment", "monitoring", "pipeline", "serving", "kubernetes", "docker", "mlflow", "tracking", "production",
     "feature", "store", "workflow", "orchestration", "versioning", "ci"},
    {"language", "text", "transformer", "bert", "translation", "sentiment", "tokenizer", "summarization", "chatbot",
     "llm", "gpt", "embeddings", "question", "answering", "named"},
    {"graph", "reinforcement", "learning", "tabular", "time", "series", "recommendation", "audio", "speech", "music",
     "survey", "tutorial", "dataset", "benchmark", "math"}};
inline const std::vector<std::string> kShared = {"model", "neural"};

struct Row {
  std::string title, description, tag;
};

inline std::vector<Row> synthetic_rows() {
  std::vector<Row> rows;
  std::vector<int> used(kTags.size(), 0);
  // Round-robin over the tags so that every tag is spread over the file.
  while (static_cast<int>(rows.size()) < kRows) {
    for (std::size_t t = 0; t < kTags.size(); ++t) {
      if (used[t] == kRowsPerTag[t]) continue;
      const int i = used[t]++;
      const std::vector<std::string>& w = kWords[t];
      Row row;
      row.tag = kTags[t];
      row.title = "The " + w[i % 15] + " " + w[(i + 4) % 15];
      if (i % 3 == 0) {
        row.description = w[(i + 2) % 15] + " " + kShared[i % 2];  // short_text slice (< 8 words in all)
      } else {
        row.description = "A " + w[(i + 1) % 15] + " with " + w[(i + 6) % 15] + " and the " + w[(i + 9) % 15] + " " +
                          kShared[i % 2] + " for " + w[(i + 11) % 15];
      }
      rows.push_back(row);
    }
  }
  // One quoted field with a comma, a doubled quote and a newline.
  rows[0].description = "pixel segmentation, \"with\" a camera\nand the video model";
  return rows;
}

// 50,000 rows of 32 words each (34 tokens with [CLS] and [SEP]): one batch of them holds more activations than a
// process under `ulimit -v 3000000` can map (the memory checks' tests).
inline std::vector<Row> many_long_rows() {
  std::vector<Row> rows;
  for (int i = 0; i < 50000; ++i) {
    const std::vector<std::string>& words = kWords[i % 4];
    Row row{words[i % 15] + " " + words[(i + 1) % 15], "", kTags[i % 4]};
    for (int w = 0; w < 30; ++w) row.description += words[(i + w) % 15] + " ";
    rows.push_back(row);
  }
  return rows;
}

// How often `needle` occurs in `text` (overlapping occurrences counted).
inline std::size_t count_occurrences(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

inline std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

inline std::string to_csv(const std::vector<Row>& rows, bool with_tag = true) {
  std::string text = with_tag ? "id,title,description,tag\n" : "id,title,description\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    text += std::to_string(i) + "," + csv_field(rows[i].title) + "," + csv_field(rows[i].description);
    if (with_tag) text += "," + csv_field(rows[i].tag);
    text += "\n";
  }
  return text;
}

inline const char* const kRequiredMetricKeys[] = {"epoch",         "lr",        "train_loss", "val_loss",
                                                  "samples_per_s", "elapsed_s", "grad_norm"};

class CliTest : public ::testing::Test {
 protected:
  // One trained run shared by the tests that only read it (evaluate, predict, the run layout), trained on first
  // use: ctest runs every test in its own process, so a suite-wide set-up would train it for every test.
  static const RunResult& suite_train() {
    if (suite_train_ == nullptr) {
      suite_temp_ = new testing::TempDir("bertrain_cli_suite");
      suite_dir_ = new fs::path(suite_temp_->path());
      make_model_dir(*suite_dir_ / "model");
      spit(*suite_dir_ / "data.csv", to_csv(synthetic_rows()));
      suite_train_ = new RunResult(run({"train", "--model", (*suite_dir_ / "model").string(), "--train-data",
                                        (*suite_dir_ / "data.csv").string(), "--out", (*suite_dir_ / "run").string(),
                                        "--epochs", "3", "--batch-size", "8", "--lr", "1e-3", "--quiet"}));
    }
    return *suite_train_;
  }
  static void TearDownTestSuite() {
    delete suite_temp_;
    suite_temp_ = nullptr;
    delete suite_dir_;
    delete suite_train_;
    suite_dir_ = nullptr;
    suite_train_ = nullptr;
  }

  void SetUp() override {
    make_model_dir(dir_ / "model");
    spit(dir_ / "data.csv", to_csv(synthetic_rows()));
  }
  // The fixture's weights and config with a vocabulary of real words (67 rows, as the embedding).
  // A run trained from path(`folder`) on a copy of data() given by the relative path "rel.csv", into "relrun" there:
  // a checkpoint whose recorded --train-data is relative to another folder than the test's.
  RunResult train_with_relative_data(const std::string& folder) const {
    fs::create_directories(path(folder));
    spit(path(folder + "/rel.csv"), slurp(data()));
    return run_in(path(folder), {"train", "--model", model(), "--train-data", "rel.csv", "--out", "relrun", "--epochs",
                                 "1", "--batch-size", "8", "--device", "cpu", "--quiet"});
  }
  static void make_model_dir(const fs::path& dir) {
    fs::create_directories(dir);
    const fs::path fixture = fs::path(BERTRAIN_FIXTURES_DIR) / "tiny_gelu_bce_adam";
    fs::copy_file(fixture / "config.json", dir / "config.json");
    fs::copy_file(fixture / "model.safetensors", dir / "model.safetensors");
    std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
    for (const auto& words : kWords) {
      for (const std::string& w : words) vocab += w + "\n";
    }
    for (const std::string& w : kShared) vocab += w + "\n";
    spit(dir / "vocab.txt", vocab);
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string model() const { return path("model"); }
  std::string data() const { return path("data.csv"); }
  static std::string suite_run() {
    suite_train();
    return (*suite_dir_ / "run").string();
  }
  static fs::path suite_model() {
    suite_train();
    return *suite_dir_ / "model";
  }

  std::vector<std::string> train_args(const std::string& out, std::vector<std::string> extra = {}) const {
    std::vector<std::string> a{"train", "--model", model(), "--train-data", data(), "--out", out,
                               "--epochs", "2", "--batch-size", "8", "--quiet"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  // `args` (e.g. train_args') without --quiet, for tests that read what train prints.
  static std::vector<std::string> without_quiet(std::vector<std::string> args) {
    args.erase(std::remove(args.begin(), args.end(), "--quiet"), args.end());
    return args;
  }

  // The run directory holds nothing of a run: no checkpoint, no metrics.
  static void expect_no_run(const fs::path& run_dir) {
    for (const char* name : {"best", "last", "metrics.jsonl", "results.json"}) {
      EXPECT_FALSE(fs::exists(run_dir / name)) << (run_dir / name) << " was written by a failed run";
    }
  }

  static std::vector<json> read_jsonl(const fs::path& p) {
    std::vector<json> objects;
    for (const std::string& line : lines_of(slurp(p))) {
      objects.push_back(json::parse(line));  // throws (fails the test) on invalid JSON
    }
    return objects;
  }

  testing::TempDir temp_{"bertrain_cli"};
  const fs::path dir_ = temp_.path();
  inline static testing::TempDir* suite_temp_ = nullptr;
  inline static fs::path* suite_dir_ = nullptr;
  inline static RunResult* suite_train_ = nullptr;
};

// Scales the embeddings' LayerNorm of the model.safetensors `file` by +-3e38, finite so that loading takes it:
// some of its outputs overflow to infinities of both signs, the first attention's sums of them are inf - inf = nan,
// and every score the model gives is nan (as in a run whose last update diverged). The file is replaced, not
// written through (a best/ shares its files with a checkpoint by hard links).
inline void make_scores_overflow(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  std::string weights((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, weights.data(), sizeof header_bytes);
  const nlohmann::json header = nlohmann::json::parse(weights.substr(8, header_bytes));
  const nlohmann::json& tensor = header.at("bert.embeddings.LayerNorm.weight");
  ASSERT_EQ(tensor.at("dtype"), "F32");
  const std::size_t begin = 8 + header_bytes + tensor.at("data_offsets")[0].get<std::size_t>();
  for (std::size_t i = 0; i < tensor.at("shape")[0].get<std::size_t>(); ++i) {
    const float huge = i % 2 == 0 ? 3e38f : -3e38f;
    std::memcpy(&weights[begin + i * sizeof huge], &huge, sizeof huge);
  }
  std::filesystem::remove(file);
  std::ofstream(file, std::ios::binary) << weights;
}

// A failure with one stderr line containing `needle`, exit `code` (not a signal): 2 for usage and input errors,
// 1 for failures while working.
inline void expect_error(const RunResult& r, const std::string& needle, int code = 2) {
  EXPECT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.signal, 0) << "killed by a signal\n" << r.describe();
  EXPECT_EQ(r.exit_code, code) << r.describe();
  EXPECT_TRUE(is_one_line(r.err)) << r.describe();
  EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr does not mention '" << needle << "'\n" << r.describe();
}

// Exit 0, no signal, no timeout (use as ASSERT_TRUE(succeeded(run(...)))).
inline ::testing::AssertionResult succeeded(const RunResult& r) {
  if (r.timed_out || r.signal != 0 || r.exit_code != 0) return ::testing::AssertionFailure() << r.describe();
  return ::testing::AssertionSuccess();
}

}  // namespace cli_test
}  // namespace bertrain

// CLI tests of what evaluate, predict, convert and --help promise a new user: predict's fallback label and its
// cleanup on a signal, outputs that never replace an input or a special file, a failed stdout, evaluate
// --mlflow-dir checked before anything is evaluated, convert of a RUN_DIR, and help texts with real placeholders
// and each default once.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "core/cpu_threads.h"
#include "engine/stop_signals.h"
#include "tests/tools/cli_test.h"

namespace bertrain {
namespace {

using namespace cli_test;

// Files in `dir` whose name starts with `prefix`.
std::vector<std::string> files_starting(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0) names.push_back(name);
  }
  return names;
}

// predict --data - answers the rows that have come down a pipe before it waits for more: a program that writes a row
// and waits for its answer gets it (here a shell writes the next row only once the previous answer is in the file).
// Before, predict waited for 32 KiB of input or a batch of 64 rows, and both sides waited until the deadline.
TEST_F(CliTest, PredictFromAPipeAnswersTheRowsThatHaveCome) {
  for (const std::string format : {"csv", "jsonl"}) {
    const std::string out = path("answers." + format);
    const std::vector<std::string> rows =
        format == "csv" ? std::vector<std::string>{"title,description\nimage,a photo", "graph,nodes", "text,words"}
                        : std::vector<std::string>{R"({"title": "image", "description": "a photo"})",
                                                   R"({"title": "graph"})", R"({"title": "text"})"};
    std::string script = "{ ";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      script += "printf '%s\\n' '" + rows[i] + "'; while [ \"$(cat '" + out + "' 2>/dev/null | wc -l)\" -lt " +
                std::to_string(i + 1) + " ]; do sleep 0.05; done; ";
    }
    script += "} | " + shell_command({"predict", "--model", suite_run(), "--data", "-", "--format", format,
                                      "--device", "cpu", "--quiet"}) + " > '" + out + "'";
    const RunResult r = testing::run_process({"/bin/sh", "-c", script}, {}, 30);
    ASSERT_TRUE(succeeded(r)) << format << ": " << r.describe();
    const std::vector<json> answers = read_jsonl(out);
    ASSERT_EQ(answers.size(), rows.size()) << format;
    for (std::size_t i = 0; i < answers.size(); ++i) EXPECT_EQ(answers[i]["id"], std::to_string(i)) << format;
  }
}

// Made-With-ML's serving rule predicts "other" below the threshold; a model without that label names its fallback.
// A batch whose activations cannot fit (here under ulimit -v) is refused as it would be allocated: one line naming the
// batch flags, exit 2. Before, std::bad_alloc's "out of memory", exit 1.
TEST_F(CliTest, PredictRefusesABatchTooLargeForMemory) {
#ifdef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "AddressSanitizer's shadow memory cannot be mapped under ulimit -v";
#endif
  spit(path("many.csv"), to_csv(many_long_rows()));
  const RunResult r = testing::run_process(
      {"/bin/sh", "-c",
       "ulimit -v 3000000 && exec " + shell_command({"predict", "--model", model(), "--data", path("many.csv"),
                                                     "--batch-size", "50000", "--device", "cpu", "--no-clean"})});
  expect_error(r, "the CPU engine needs ");
  for (const char* part : {"for the activations of batches of up to 65536 rows", "under ulimit -v (RLIMIT_AS)",
                           "--batch-size", "--max-length"}) {
    EXPECT_NE(r.err.find(part), std::string::npos) << part << "\n" << r.describe();
  }
}

TEST_F(CliTest, PredictThresholdFallsBackToOtherLabel) {
  std::vector<Row> rows;
  for (const Row& row : synthetic_rows()) {
    if (row.tag != "other") rows.push_back(row);
  }
  spit(path("no-other.csv"), to_csv(rows));
  ASSERT_TRUE(succeeded(run({"train", "--model", model(), "--train-data", path("no-other.csv"), "--out", path("run"),
                             "--epochs", "1", "--batch-size", "8", "--quiet"})));
  const RunResult refused = run({"predict", "--model", path("run"), "--text", "image", "--threshold", "0.9"});
  expect_error(refused, "--other-label NAME");
  EXPECT_NE(refused.err.find("\"computer-vision\""), std::string::npos) << refused.describe();
  // Every top probability of 3 labels is below 1.0: always the fallback, a name of the user's choosing.
  const RunResult fallback = run({"predict", "--model", path("run"), "--text", "image", "--threshold", "1.0",
                                  "--other-label", "needs-review"});
  ASSERT_TRUE(succeeded(fallback));
  EXPECT_EQ(json::parse(fallback.out)["prediction"], "needs-review");
  const RunResult low = run({"predict", "--model", path("run"), "--text", "image", "--threshold", "0.0",
                             "--other-label", "needs-review"});
  ASSERT_TRUE(succeeded(low));
  EXPECT_NE(json::parse(low.out)["prediction"], "needs-review");
  // A model with "other" needs no --other-label (Made-With-ML's rule).
  ASSERT_TRUE(succeeded(suite_train()));
  const RunResult other = run({"predict", "--model", suite_run(), "--text", "image", "--threshold", "1.0"});
  ASSERT_TRUE(succeeded(other));
  EXPECT_EQ(json::parse(other.out)["prediction"], "other");
  // An empty name would answer "" below the threshold.
  expect_error(run({"predict", "--model", suite_run(), "--text", "image", "--threshold", "0.9", "--other-label", ""}),
               "--other-label is empty");
}

// A signal stops predict --out between two batches: the temporary file goes, the process ends by that signal.
TEST_F(CliTest, PredictStoppedBySignalLeavesNoTemporaryFile) {
  ASSERT_TRUE(succeeded(suite_train()));
  const std::vector<Row> rows = synthetic_rows();
  std::string big = "id,title,description\n";
  for (int copy = 0; copy < 5000; ++copy) {  // 200 000 rows: far longer than the signal takes to come
    for (const Row& row : rows) big += std::to_string(copy) + "," + csv_field(row.title) + "," + csv_field(row.description) + "\n";
  }
  spit(path("big.csv"), big);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    const fs::path dir = path("predict-" + std::to_string(sig));
    fs::create_directories(dir);
    const auto writing = [&] { return !files_starting(dir, "p.jsonl.tmp").empty(); };
    const RunResult r = ::bertrain::testing::run_process(
        {binary(), "predict", "--model", suite_run(), "--data", path("big.csv"), "--out", (dir / "p.jsonl").string(),
         "--batch-size", "4", "--device", "cpu"},
        {}, 120, {{0.0, sig, writing}});
    EXPECT_EQ(r.signal, sig) << r.describe();
    EXPECT_NE(r.err.find("stopped by " + signal_name(sig)), std::string::npos) << r.describe();
    EXPECT_NE(r.err.find("p.jsonl not written"), std::string::npos) << r.describe();
    EXPECT_TRUE(files_starting(dir, "p.jsonl").empty()) << "left behind: " << files_starting(dir, "p.jsonl")[0];
  }
}

// An --out that is the command's own input (by any name) or not a regular file (a FIFO, which replacing would
// remove) is refused before anything is written; a symbolic link is written through: the link stays, its target is
// replaced.
TEST_F(CliTest, OutputsReplaceNeitherInputsNorSpecialFiles) {
  ASSERT_TRUE(succeeded(suite_train()));
  const std::string rows = slurp(data());
  const auto predict = [&](const std::string& out) {
    return run({"predict", "--model", suite_run(), "--data", data(), "--out", out, "--device", "cpu"});
  };
  expect_error(predict(data()), "--out '" + data() + "' is the input");
  fs::create_hard_link(data(), path("same.csv"));
  expect_error(run({"evaluate", "--model", suite_run(), "--data", data(), "--out", path("same.csv")}), "is the input");
  EXPECT_EQ(slurp(data()), rows);
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  expect_error(predict(path("fifo")), "not a regular file");
  EXPECT_TRUE(fs::is_fifo(path("fifo")));
  spit(path("target.jsonl"), "old\n");
  fs::create_symlink("target.jsonl", path("link.jsonl"));
  ASSERT_TRUE(succeeded(predict(path("link.jsonl"))));
  EXPECT_TRUE(fs::is_symlink(path("link.jsonl")));
  EXPECT_EQ(lines_of(slurp(path("target.jsonl"))).size(), synthetic_rows().size());
  // Nor a file of the model read or of its run (the weights, a checkpoint's, the run's results), by any name: they
  // were replaced by JSON Lines, and the run no longer loaded. evaluation.json is evaluate's to write.
  const std::string run_dir = suite_run();
  const std::string weights = slurp(run_dir + "/best/model.safetensors");
  for (const char* name : {"/best/model.safetensors", "/best/config.json", "/last/model.safetensors", "/results.json",
                           "/metrics.jsonl"}) {
    const std::string file = run_dir + name;
    expect_error(predict(file), "--out '" + file + "' is '" + file + "', a file of the model read or of its run");
  }
  expect_error(run({"predict", "--model", run_dir + "/best", "--data", data(), "--out", run_dir + "/last/config.json"}),
               "a file of the model read or of its run");
  fs::create_symlink(run_dir + "/best/model.safetensors", path("weights-link"));
  expect_error(run({"evaluate", "--model", run_dir, "--data", data(), "--out", path("weights-link")}),
               "a file of the model read or of its run");
  EXPECT_EQ(slurp(run_dir + "/best/model.safetensors"), weights);
  ASSERT_TRUE(succeeded(run({"evaluate", "--model", run_dir, "--data", data(), "--out", run_dir + "/evaluation.json"})));
  fs::remove(run_dir + "/evaluation.json");  // the suite's run, as the other tests find it
  // An empty --out (a script's unset variable) is refused, not taken as "no file".
  expect_error(predict(""), "predict: --out is empty");
  expect_error(run({"evaluate", "--model", run_dir, "--data", data(), "--out", ""}), "evaluate: --out is empty");
}

// Output that does not reach stdout (here /dev/full: every write fails) is a failure, exit 1 naming stdout, not a
// success with the output lost.
TEST_F(CliTest, AnUnwritableStdoutIsAFailure) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "SKIPPED: no /dev/full on this machine";
  const RunResult r = ::bertrain::testing::run_process(
      {"/bin/sh", "-c", "exec \"$0\" tokenize --vocab \"$1\" --text hello >/dev/full", binary(),
       model() + "/vocab.txt"},
      {}, 60);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("writing to stdout"), std::string::npos) << r.describe();
}

// A FIFO as data: train refuses it at once (it reads its data twice); predict, whose open() waits for a writer that
// never comes, still ends on SIGTERM (its stop handler is installed after the file is open).
TEST_F(CliTest, AFifoWithoutAWriterNeitherHangsNorOutlivesSigterm) {
  ASSERT_EQ(::mkfifo(path("fifo.csv").c_str(), 0600), 0);
  expect_error(run(train_args(path("run"), {"--train-data", path("fifo.csv")})), "is a pipe or FIFO");
  expect_no_run(path("run"));
  ASSERT_TRUE(succeeded(suite_train()));
  const RunResult r = ::bertrain::testing::run_process(
      {binary(), "predict", "--model", suite_run(), "--data", path("fifo.csv"), "--device", "cpu"}, {}, 60,
      {{1.0, SIGTERM}});
  EXPECT_EQ(r.signal, SIGTERM) << r.describe();
}

// --data - reads standard input (a pipe: `cat rows.csv | bertrain predict --data - --format csv`) as the file itself
// would be read; without --format there is no extension to tell the format by.
TEST_F(CliTest, DataFromStandardInputReadsAsTheFile) {
  ASSERT_TRUE(succeeded(suite_train()));
  const auto piped = [&](const std::string& command) {
    std::string line = "cat '" + data() + "' | '" + binary() + "' " + command;
    return ::bertrain::testing::run_process({"/bin/sh", "-c", line}, {}, 60);
  };
  const RunResult from_file = run({"predict", "--model", suite_run(), "--data", data()});
  ASSERT_TRUE(succeeded(from_file)) << from_file.describe();
  const RunResult from_pipe = piped("predict --model '" + suite_run() + "' --data - --format csv");
  ASSERT_TRUE(succeeded(from_pipe)) << from_pipe.describe();
  EXPECT_EQ(from_pipe.out, from_file.out);
  const RunResult ids_file = run({"tokenize", "--model", suite_run(), "--data", data()});
  const RunResult ids_pipe = piped("tokenize --model '" + suite_run() + "' --data - --format csv");
  ASSERT_TRUE(succeeded(ids_pipe)) << ids_pipe.describe();
  EXPECT_EQ(ids_pipe.out, ids_file.out);
  const RunResult scored_file = run({"evaluate", "--model", suite_run(), "--data", data()});
  const RunResult scored_pipe = piped("evaluate --model '" + suite_run() + "' --data - --format csv");
  ASSERT_TRUE(succeeded(scored_pipe)) << scored_pipe.describe();
  json file_json = json::parse(scored_file.out), pipe_json = json::parse(scored_pipe.out);
  EXPECT_EQ(pipe_json["data"], "-");
  for (json* j : {&file_json, &pipe_json}) {
    j->erase("timestamp");
    j->erase("data");
  }
  EXPECT_EQ(pipe_json, file_json);
  for (const char* command : {"predict", "tokenize", "evaluate"}) {
    expect_error(piped(std::string(command) + " --model '" + suite_run() + "' --data -"),
                 std::string(command) + ": --data - reads standard input, which has no extension: give --format", 2);
  }
}

// A text given as a flag must be UTF-8, as a dataset file's text must: refused naming the flag and quoting the bytes.
TEST_F(CliTest, TextFlagsMustBeUtf8) {
  expect_error(run({"tokenize", "--vocab", model() + "/vocab.txt", "--text", "ab\xff" "cd"}),
               "tokenize: --text is not UTF-8 text: \"ab\\xFFcd\"");
  ASSERT_TRUE(succeeded(suite_train()));
  expect_error(run({"predict", "--model", suite_run(), "--title", "image", "--description", "cut \xc3"}),
               "predict: --description is not UTF-8 text");
}

// evaluate --mlflow-dir checks the run it logs into before evaluating: a wrong store, experiment or run is an input
// error, and neither --out nor anything in the store is written.
TEST_F(CliTest, EvaluateChecksTheMlflowRunBeforeEvaluating) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "1", "--mlflow-dir", path("mlruns")}))));
  ASSERT_TRUE(succeeded(run(train_args(path("plain"), {"--epochs", "1"}))));
  const auto store = snapshot(path("mlruns"));
  const std::vector<std::vector<std::string>> bad{
      {"--model", path("run"), "--mlflow-dir", path("elsewhere")},
      {"--model", path("run"), "--mlflow-dir", path("mlruns"), "--experiment", "other"},
      {"--model", path("plain"), "--mlflow-dir", path("mlruns")},
      {"--model", path("run") + "/best", "--mlflow-dir", path("mlruns")}};
  const std::vector<std::string> why{"no MLflow file store", "no MLflow experiment named 'other'",
                                     "trained without --mlflow-dir", "needs --model RUN_DIR"};
  for (std::size_t i = 0; i < bad.size(); ++i) {
    std::vector<std::string> args{"evaluate", "--data", data(), "--out", path("eval.json")};
    args.insert(args.end(), bad[i].begin(), bad[i].end());
    const RunResult r = run(args);
    expect_error(r, why[i]);
    EXPECT_EQ(r.err.find("rows/s"), std::string::npos) << "it evaluated first\n" << r.describe();
    EXPECT_FALSE(fs::exists(path("eval.json"))) << i;
    EXPECT_FALSE(fs::exists(path("elsewhere"))) << i;
    EXPECT_EQ(snapshot(path("mlruns")), store) << i;
  }
  ASSERT_TRUE(succeeded(run({"evaluate", "--model", path("run"), "--data", data(), "--out", path("eval.json"),
                             "--mlflow-dir", path("mlruns")})));
  EXPECT_TRUE(fs::exists(path("eval.json")));
}

// Of more than 200 classes evaluate leaves the confusion matrix out and says so (10,000 classes: 1.1 GB of JSON,
// and 50,000 would not fit in memory); the per-class metrics are all there.
TEST_F(CliTest, EvaluateLeavesOutTheConfusionMatrixOfManyClasses) {
  std::string csv = "id,title,description,tag\n";
  for (int i = 0; i < 201 * 3; ++i) csv += std::to_string(i) + ",a title,a description,c" + std::to_string(i % 201) + "\n";
  spit(path("many.csv"), csv);
  ASSERT_TRUE(succeeded(run({"train", "--model", model(), "--train-data", path("many.csv"), "--out", path("run"),
                             "--max-steps", "1", "--batch-size", "64", "--quiet"})));
  ASSERT_TRUE(succeeded(run({"evaluate", "--model", path("run"), "--data", path("many.csv"), "--out", path("e.json")})));
  const json e = json::parse(slurp(path("e.json")));
  EXPECT_FALSE(e.contains("confusion_matrix"));
  EXPECT_EQ(e.at("confusion_matrix_omitted"), "201 classes, more than 200");
  EXPECT_EQ(e.at("per_class").size(), 201u);
}

// convert RUN_DIR converts its best/, as evaluate and predict read a RUN_DIR.
TEST_F(CliTest, ConvertOfARunDirectoryConvertsItsBest) {
  ASSERT_TRUE(succeeded(suite_train()));
  ASSERT_TRUE(succeeded(run({"convert", suite_run(), "--out", path("from-run")})));
  ASSERT_TRUE(succeeded(run({"convert", suite_run() + "/best", "--out", path("from-best")})));
  EXPECT_TRUE(slurp(path("from-run/model.safetensors")) == slurp(path("from-best/model.safetensors")));
  EXPECT_EQ(slurp(path("from-run/config.json")), slurp(suite_run() + "/best/config.json"));
  expect_error(run({"convert", suite_run(), path("second")}), "unexpected argument", 2);
}

// convert swaps another folder in whole: an earlier conversion's tokenizer.json is not left beside this model's
// vocab.txt (it would be read first), and a kill never leaves one model's weights beside another's tokenizer. So
// DIR2 may hold only a model directory's files, and be no folder of a training run (it put best/'s weights into
// last/'s checkpoint, exit 0).
TEST_F(CliTest, ConvertReplacesAnotherFolderWholeAndNoRunsFolder) {
  ASSERT_TRUE(succeeded(suite_train()));
  ASSERT_TRUE(succeeded(run({"convert", suite_run(), "--out", path("converted/")})));
  spit(path("converted/tokenizer.json"), "{}");  // as an earlier conversion of another model left it
  ASSERT_TRUE(succeeded(run({"convert", suite_run(), "--out", path("converted")})));
  EXPECT_FALSE(fs::exists(path("converted/tokenizer.json")));
  EXPECT_TRUE(fs::exists(path("converted/vocab.txt")));
  EXPECT_FALSE(fs::exists(path("converted.tmp-") + std::to_string(::getpid())));
  spit(path("converted/notes.txt"), "mine");
  expect_error(run({"convert", suite_run(), "--out", path("converted")}),
               "convert: --out '" + path("converted") + "' holds what no model directory has (notes.txt); convert "
               "replaces the folder whole: give a new or empty folder, or one convert wrote", 2);
  EXPECT_EQ(slurp(path("converted/notes.txt")), "mine");
  const std::string state = slurp(suite_run() + "/last/trainer_state.json");
  const std::string weights = slurp(suite_run() + "/last/model.safetensors");
  for (const std::string& out : {suite_run() + "/last", suite_run(), suite_run() + "/best/"}) {
    expect_error(run({"convert", path("converted"), "--out", out}), "is a training run's folder", 2);
  }
  EXPECT_EQ(slurp(suite_run() + "/last/trainer_state.json"), state);
  EXPECT_TRUE(slurp(suite_run() + "/last/model.safetensors") == weights);
}

// The weights convert writes are float32, and transformers loads them in the dtype config.json records: a
// checkpoint saved in fp16 ("dtype": "float16") would load as fp16 again. Its config says float32; a config that says
// float32 or no dtype is copied byte for byte.
TEST_F(CliTest, ConvertRecordsFloat32InConfig) {
  ASSERT_TRUE(succeeded(suite_train()));
  ASSERT_TRUE(succeeded(run({"convert", suite_run(), "--out", path("half")})));
  EXPECT_EQ(slurp(path("half/config.json")), slurp(suite_run() + "/best/config.json"));
  json config = json::parse(slurp(path("half/config.json")));
  config["dtype"] = "float16";
  config["torch_dtype"] = "bfloat16";
  spit(path("half/config.json"), config.dump());
  ASSERT_TRUE(succeeded(run({"convert", path("half"), "--out", path("full")})));
  const json converted = json::parse(slurp(path("full/config.json")));
  EXPECT_EQ(converted["dtype"], "float32");
  EXPECT_EQ(converted["torch_dtype"], "float32");
  config.erase("dtype");
  config.erase("torch_dtype");
  json rest = converted;
  rest.erase("dtype");
  rest.erase("torch_dtype");
  EXPECT_EQ(rest, config);
}

// A signal while convert writes stops it before the next file: another DIR2 stays as it was, and its temporary folder
// is removed (it was left for the next convert to clean up); in place, every file is whole.
TEST_F(CliTest, ConvertStoppedWhileWritingLeavesNoTemporaryFolder) {
  ASSERT_TRUE(succeeded(suite_train()));
  ASSERT_TRUE(succeeded(run({"convert", suite_run(), "--out", path("converted")})));
  const auto listing = [&] {
    std::vector<std::string> names;
    for (const auto& e : fs::recursive_directory_iterator(dir_)) names.push_back(e.path().string());
    std::sort(names.begin(), names.end());
    return names;
  };
  spit(path("converted/config.json"), slurp(path("converted/config.json")) + " ");  // this copy must stay
  const std::string config = slurp(path("converted/config.json"));
  const std::vector<std::string> before = listing();
  const RunResult r = run({"convert", suite_run(), "--out", path("converted")},
                          {"BERTRAIN_TEST_SIGNAL_AFTER_WEIGHTS=" + std::to_string(SIGTERM)});
  EXPECT_EQ(r.signal, SIGTERM) << r.describe();
  EXPECT_NE(r.err.find("convert: stopped by SIGTERM before " + path("converted") + " was complete; it is as it was"),
            std::string::npos) << r.describe();
  EXPECT_EQ(listing(), before);
  EXPECT_EQ(slurp(path("converted/config.json")), config);

  const RunResult in_place = run({"convert", path("converted")},
                                 {"BERTRAIN_TEST_SIGNAL_AFTER_WEIGHTS=" + std::to_string(SIGINT)});
  EXPECT_EQ(in_place.signal, SIGINT) << in_place.describe();
  EXPECT_NE(in_place.err.find("each file there is whole, the old or the new one"), std::string::npos)
      << in_place.describe();
  EXPECT_EQ(listing(), before);
  ASSERT_TRUE(succeeded(run({"predict", "--model", path("converted"), "--text", "a transformer"})));

  // Under `nohup` SIGHUP is ignored, and stays so: the conversion goes on to its end.
  const RunResult nohup = ::bertrain::testing::run_process(
      {"/bin/sh", "-c", "trap '' HUP; exec \"$0\" convert \"$1\" --out \"$2\"", binary(), suite_run(), path("again")},
      {"BERTRAIN_TEST_SIGNAL_AFTER_WEIGHTS=" + std::to_string(SIGHUP)}, 60);
  EXPECT_TRUE(succeeded(nohup)) << nohup.describe();
  EXPECT_TRUE(slurp(path("again/model.safetensors")) == slurp(path("converted/model.safetensors")));
}

// Counts read as English: "1 row", "1 epoch", not "1 rows".
TEST_F(CliTest, CountsOfOneAreSingular) {
  ASSERT_TRUE(succeeded(suite_train()));
  const std::vector<Row> rows = synthetic_rows();
  spit(path("one.csv"), to_csv({rows[1]}));
  const RunResult evaluated = run({"evaluate", "--model", suite_run(), "--data", path("one.csv")});
  ASSERT_TRUE(succeeded(evaluated));
  EXPECT_NE(evaluated.err.find("evaluate: 1 row in "), std::string::npos) << evaluated.err;
  const RunResult predicted = run({"predict", "--model", suite_run(), "--data", path("one.csv")});
  ASSERT_TRUE(succeeded(predicted));
  EXPECT_NE(predicted.err.find("predict: 1 row in "), std::string::npos) << predicted.err;
  const RunResult trained = run({"train", "--model", model(), "--train-data", data(), "--out", path("run"), "--epochs",
                                 "1", "--batch-size", "8"});
  ASSERT_TRUE(succeeded(trained));
  EXPECT_NE(trained.out.find(", 1 epoch (4 steps), "), std::string::npos) << trained.out;
  EXPECT_NE(trained.out.find("best: epoch 1 of 1 (step 4), val_loss "), std::string::npos) << trained.out;
}

// Without --batch-size, evaluate and predict take the engine's fastest measured batch (64 rows on the CPU).
TEST_F(CliTest, InferenceBatchSizeDefaultsPerDevice) {
  ASSERT_TRUE(succeeded(suite_train()));
  const RunResult cpu = run({"predict", "--model", suite_run(), "--data", data(), "--device", "cpu"});
  ASSERT_TRUE(succeeded(cpu));
  EXPECT_NE(cpu.err.find("on " + cpu_engine_description(1) + ", batches of 64"), std::string::npos) << cpu.err;
  const RunResult evaluated = run({"evaluate", "--model", suite_run(), "--data", data(), "--device", "cpu",
                                   "--batch-size", "auto"});
  ASSERT_TRUE(succeeded(evaluated));
  EXPECT_NE(evaluated.err.find(", batches of 64"), std::string::npos) << evaluated.err;
  const RunResult seven = run({"predict", "--model", suite_run(), "--data", data(), "--device", "cpu", "--batch-size", "7"});
  ASSERT_TRUE(succeeded(seven));
  EXPECT_NE(seven.err.find(", batches of 7"), std::string::npos) << seven.err;
  // The batch changes the speed, and the probabilities only by float32 rounding (other GEMM shapes).
  const std::vector<std::string> a = lines_of(seven.out), b = lines_of(cpu.out);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const json x = json::parse(a[i]), y = json::parse(b[i]);
    EXPECT_EQ(x["prediction"], y["prediction"]) << i;
    for (const auto& [label, p] : y["probabilities"].items()) {
      EXPECT_NEAR(x["probabilities"][label].get<double>(), p.get<double>(), 1e-6) << i << " " << label;
    }
  }
  expect_error(run({"predict", "--model", suite_run(), "--data", data(), "--batch-size", "0"}), "--batch-size", 2);
}

// Every --help: real placeholders (no VALUE), each default said once, one usage line.
TEST_F(CliTest, HelpTextsHaveRealPlaceholdersAndEachDefaultOnce) {
  for (const char* command : {"train", "evaluate", "predict", "tokenize", "convert", "launch", "report"}) {
    const RunResult r = run({command, "--help"});
    ASSERT_TRUE(succeeded(r));
    EXPECT_EQ(r.out.find("VALUE"), std::string::npos) << command << "\n" << r.out;
    EXPECT_EQ(r.out.find("usage:"), 0u) << command;
    EXPECT_EQ(r.out.find("usage:", 1), std::string::npos) << command << " prints usage twice\n" << r.out;
    for (const std::string& line : lines_of(r.out)) {
      const std::size_t first = line.find("default");
      if (first == std::string::npos) continue;
      EXPECT_EQ(line.find("(default", first + 1), std::string::npos) << command << ": two defaults in\n" << line;
    }
  }
  const std::string train = run({"train", "--help"}).out;
  for (const char* entry : {"--model DIR", "--train-data FILE", "--out DIR", "--epochs N", "--lr RATE",
                            "--device auto|cpu|cuda", "--text-columns A,B,..."}) {
    EXPECT_NE(train.find(entry), std::string::npos) << entry;
  }
  const std::string predict = run({"predict", "--help"}).out;
  // --threshold's default differs by problem type: each stated.
  EXPECT_NE(predict.find("Made-With-ML's serving rule uses 0.9; default: none"), std::string::npos) << predict;
  EXPECT_NE(predict.find("multi-label models: the probability a label needs (default 0.5)"), std::string::npos)
      << predict;
  EXPECT_EQ(run({"launch", "--help"}).out.rfind("usage: bertrain launch [--max-restarts N] [--restart-delay SECONDS] "
                                                "-- COMMAND [ARGS...]\n",
                                                0),
            0u);
  EXPECT_EQ(run({"convert", "--help"}).out.rfind("usage: bertrain convert [options] DIR\n", 0), 0u);
  // The exit statuses a launcher acts on, in the help of bertrain, train and launch.
  for (const std::vector<std::string>& help : std::vector<std::vector<std::string>>{{"--help"}, {"train", "--help"},
                                                                                    {"launch", "--help"}}) {
    const std::string out = run(help).out;
    for (const char* line : {"\n  0   done", "\n  1   a failure while working", "\n  2   a usage or input error",
                             "\n  3   train diverged", "\n  75  train stopped by SIGTERM"}) {
      EXPECT_NE(out.find(line), std::string::npos) << help[0] << ": " << line;
    }
  }
}

}  // namespace
}  // namespace bertrain

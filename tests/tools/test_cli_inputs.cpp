// What a new user hits with their own data and inputs (issue 25), end to end through the binary (harness:
// tests/tools/cli_test.h): flags given with empty values, text columns left empty, files that are not UTF-8
// text, a directory where a file belongs, hints that name only the running command's flags, and the label
// warnings of train.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/cpu_threads.h"
#include "tests/tools/cli_test.h"

namespace bertrain {
namespace {

using namespace cli_test;

// A plain `bertrain train` in the batch script of a Slurm allocation of several tasks (SLURM_NTASKS set, no srun):
// how it was started, which a retry cannot change, so exit 2 (`launch` used to retry its exit 1), naming the
// variables and what to do; a build without MPI says so, also exit 2. Nothing is written.
TEST_F(CliTest, ATaskOfAnAllocationStartedWithoutSrunIsAnInputError) {
  const RunResult r = run(train_args(path("run")), {"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_LOCALID=0"});
  expect_error(r, "(SLURM_PROCID=0, SLURM_NTASKS=4)");
  EXPECT_TRUE(r.err.find("MPI reports rank 0 of 1 but the environment says 0 of 4") != std::string::npos ||
              r.err.find("this build has no MPI support") != std::string::npos)
      << r.describe();
  if (r.err.find("MPI reports") != std::string::npos) {
    EXPECT_NE(r.err.find("start every rank with srun or mpirun (srun --ntasks 1 for one process)"), std::string::npos)
        << r.describe();
  }
  EXPECT_FALSE(fs::exists(path("run")));
}

// ---- flag values -----------------------------------------------------------------------------------------

// A flag given with an empty value is an error naming it, never its default in disguise (train used to read
// --text-columns "" as title,description and --label-column "" as tag).
TEST_F(CliTest, EmptyOrMalformedDataFlagsAreInputErrors) {
  const struct {
    std::vector<std::string> flags;
    const char* needle;
  } cases[] = {
      {{"--text-columns", ""}, "--text-columns names no column"},
      {{"--text-columns", " "}, "--text-columns names no column"},
      {{"--text-columns", ","}, "--text-columns ',' has an empty column name"},
      {{"--text-columns", "title,,description"}, "has an empty column name"},
      {{"--text-columns", "title,title"}, "names column 'title' twice"},
      {{"--label-column", ""}, "--label-column is empty"},
      {{"--multi-label", "--label-separator", ""}, "--label-separator is empty"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.needle);
    expect_error(run(train_args(path("run"), c.flags)), c.needle);
    expect_no_run(path("run"));
  }
  // evaluate and predict read an empty flag the same way (absent: as the model was trained).
  ASSERT_TRUE(succeeded(suite_train()));
  expect_error(run({"evaluate", "--model", suite_run(), "--data", data(), "--text-columns", ""}),
               "--text-columns names no column");
  expect_error(run({"predict", "--model", suite_run(), "--data", data(), "--label-column", ""}),
               "--label-column is empty");
  expect_error(run({"tokenize", "--vocab", path("model/vocab.txt"), "--data", data(), "--text-columns", ","}),
               "--text-columns ',' has an empty column name");
}

// ---- empty text columns ----------------------------------------------------------------------------------

json parse_lines(const std::string& text) {
  json out = json::array();
  for (const std::string& line : lines_of(text)) out.push_back(json::parse(line));
  return out;
}

// Batched and single predictions agree to float32 summation order (as in test_cli.cpp's PredictEveryRowInOrder).
void expect_same_probabilities(const json& a, const json& b) {
  ASSERT_EQ(a.size(), b.size()) << a.dump() << " vs " << b.dump();
  for (const auto& [tag, p] : a.items()) EXPECT_NEAR(p.get<double>(), b.at(tag).get<double>(), 1e-5) << tag;
}

std::size_t count_words(const std::string& text) {
  std::istringstream in(text);
  std::size_t n = 0;
  for (std::string word; in >> word;) ++n;
  return n;
}

// The synthetic rows with every third description left empty, as exports leave optional fields (and as
// Made-With-ML's own tests predict with "description": "").
std::vector<Row> rows_with_empty_descriptions() {
  std::vector<Row> rows = synthetic_rows();
  for (std::size_t i = 1; i < rows.size(); i += 3) rows[i].description = i % 2 == 0 ? "" : "   ";
  return rows;
}

// A row is bad only when all its text columns are empty: train, evaluate, predict and tokenize read a row with an
// empty description as its title alone, the text Made-With-ML's title + " " + "" cleans to.
TEST_F(CliTest, AnEmptyDescriptionIsNotABadRow) {
  const std::vector<Row> rows = rows_with_empty_descriptions();
  spit(path("gaps.csv"), to_csv(rows));
  spit(path("gaps_untagged.csv"), to_csv(rows, /*with_tag=*/false));

  const RunResult train = run({"train", "--model", model(), "--train-data", path("gaps.csv"), "--out", path("run"),
                               "--epochs", "1", "--batch-size", "8", "--quiet"});
  ASSERT_TRUE(succeeded(train));
  const json results = json::parse(slurp(path("run/results.json")));
  EXPECT_EQ(results["skipped_rows"].get<int>(), 0);
  EXPECT_EQ(results["num_train"].get<int>() + results["num_val"].get<int>(), kRows);

  ASSERT_TRUE(succeeded(suite_train()));
  const RunResult pred = run({"predict", "--model", suite_run(), "--data", path("gaps_untagged.csv")});
  ASSERT_TRUE(succeeded(pred));
  const json lines = parse_lines(pred.out);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(kRows)) << pred.err;
  for (std::size_t i : {std::size_t{1}, std::size_t{4}}) {  // "   " and "" descriptions
    SCOPED_TRACE(i);
    const RunResult one = run({"predict", "--model", suite_run(), "--title", rows[i].title, "--description",
                               rows[i].description});
    ASSERT_TRUE(succeeded(one));
    const RunResult title_only = run({"predict", "--model", suite_run(), "--text", rows[i].title});
    ASSERT_TRUE(succeeded(title_only));
    expect_same_probabilities(json::parse(one.out)["probabilities"], lines[i]["probabilities"]);
    expect_same_probabilities(json::parse(title_only.out)["probabilities"], lines[i]["probabilities"]);
  }

  // evaluate reads every row, and its short_text slice counts the words of the joined text.
  const RunResult eval = run({"evaluate", "--model", suite_run(), "--data", path("gaps.csv")});
  ASSERT_TRUE(succeeded(eval));
  const json e = json::parse(eval.out);
  EXPECT_EQ(e["num_rows"].get<int>(), kRows);
  EXPECT_EQ(e["skipped_rows"].get<int>(), 0);
  int short_rows = 0;
  for (const Row& row : rows) short_rows += count_words(row.title + " " + row.description) < 8 ? 1 : 0;
  EXPECT_EQ(e["slices"]["short_text"]["num_samples"].get<int>(), short_rows);

  // tokenize: the row's ids are its title's.
  const RunResult tok = run({"tokenize", "--vocab", path("model/vocab.txt"), "--data", path("gaps.csv")});
  ASSERT_TRUE(succeeded(tok));
  const RunResult title = run({"tokenize", "--vocab", path("model/vocab.txt"), "--text", rows[4].title});
  ASSERT_TRUE(succeeded(title));
  EXPECT_EQ(lines_of(tok.out).at(4), lines_of(title.out).at(0));

  // Empty --text / --title is no text to classify, not a missing flag.
  expect_error(run({"predict", "--model", suite_run(), "--title", "", "--description", " "}),
               "--title and --description are both empty");
  expect_error(run({"predict", "--model", suite_run(), "--text", ""}), "predict: --text is empty");
  expect_error(run({"predict", "--model", suite_run(), "--text", "image", "--id-column", "x"}),
               "predict: --id-column goes with --data");
  expect_error(run({"tokenize", "--vocab", path("model/vocab.txt"), "--text", ""}), "tokenize: --text is empty");
  const RunResult description_only = run({"predict", "--model", suite_run(), "--title", "", "--description",
                                          rows[4].title});
  ASSERT_TRUE(succeeded(description_only));
  expect_same_probabilities(json::parse(description_only.out)["probabilities"], lines[4]["probabilities"]);
  // Without --title, as serve's /predict/ body without "title".
  const RunResult no_title = run({"predict", "--model", suite_run(), "--description", rows[4].title});
  ASSERT_TRUE(succeeded(no_title)) << no_title.err;
  EXPECT_EQ(no_title.out, description_only.out);
  expect_error(run({"predict", "--model", suite_run(), "--description", "x", "--text", "y"}),
               "predict: give one of --text, --title / --description or --data");
}

// JSON Lines: an absent key or null is an empty value of that row; a row with no text at all is bad.
TEST_F(CliTest, JsonLinesAbsentOrNullTextColumns) {
  ASSERT_TRUE(succeeded(suite_train()));
  const std::vector<Row> rows = synthetic_rows();
  std::string text;
  text += json{{"id", "a"}, {"title", rows[2].title}}.dump() + "\n";
  text += json{{"id", "b"}, {"title", rows[2].title}, {"description", nullptr}}.dump() + "\n";
  text += json{{"id", "c"}, {"title", rows[2].title}, {"description", ""}}.dump() + "\n";
  text += json{{"id", "d"}, {"description", rows[2].title}}.dump() + "\n";
  spit(path("rows.jsonl"), text);
  const RunResult pred = run({"predict", "--model", suite_run(), "--data", path("rows.jsonl")});
  ASSERT_TRUE(succeeded(pred));
  const json lines = parse_lines(pred.out);
  ASSERT_EQ(lines.size(), 4u);
  for (const json& line : lines) expect_same_probabilities(line["probabilities"], lines[0]["probabilities"]);

  spit(path("bad.jsonl"), text + json{{"id", "e"}, {"title", nullptr}, {"description", " "}}.dump() + "\n");
  expect_error(run({"predict", "--model", suite_run(), "--data", path("bad.jsonl"), "--out", path("p.jsonl")}),
               path("bad.jsonl") + ":5: all text columns (title, description) are empty, absent or null");
  EXPECT_FALSE(fs::exists(path("p.jsonl")));
  // A text column in no row is a misspelt name, whatever --skip-bad-rows says (row d has no text then).
  expect_error(run({"predict", "--model", suite_run(), "--data", path("rows.jsonl"), "--text-columns",
                    "title,descripton", "--skip-bad-rows"}),
               "text column 'descripton' is in no row");
}

// ---- text that is not UTF-8 --------------------------------------------------------------------------------

// Every byte of stderr is printable ASCII but its one final newline (the paths here are ASCII): no raw byte of the
// file made it into the message.
::testing::AssertionResult printable_ascii(const std::string& err) {
  for (std::size_t i = 0; i + 1 < err.size(); ++i) {
    const auto c = static_cast<unsigned char>(err[i]);
    if (c < 0x20 || c >= 0x7F) return ::testing::AssertionFailure() << "byte " << int(c) << " at " << i << ": " << err;
  }
  return ::testing::AssertionSuccess();
}

// A dataset file that is not UTF-8 text stops every command with exit 2 and one line naming the file, the line and
// the byte offset, and saying how to convert it; --skip-bad-rows does not skip it (it used to be repaired to U+FFFD,
// then cleaned away: "café" in Latin-1 trained as "caf").
TEST_F(CliTest, DatasetFilesThatAreNotUtf8TextAreInputErrors) {
  std::string latin1 = to_csv(synthetic_rows());
  const std::size_t at = latin1.find("The image");
  latin1.replace(at, 3, "Caf\xE9");
  spit(path("latin1.csv"), latin1);
  const std::string where = path("latin1.csv") + ":2: invalid UTF-8 (byte \\xE9 at byte offset " +
                            std::to_string(at + 3) + " of the file, after \"0,Caf\")";
  for (const bool skip : {false, true}) {
    std::vector<std::string> args{"train", "--model", model(), "--train-data", path("latin1.csv"), "--out",
                                  path("run"), "--epochs", "1", "--quiet"};
    if (skip) args.push_back("--skip-bad-rows");
    const RunResult r = run(args);
    expect_error(r, where);
    EXPECT_NE(r.err.find("iconv -f latin1 -t utf-8 " + path("latin1.csv")), std::string::npos) << r.err;
    EXPECT_TRUE(printable_ascii(r.err));
    expect_no_run(path("run"));
  }
  ASSERT_TRUE(succeeded(suite_train()));
  expect_error(run({"predict", "--model", suite_run(), "--data", path("latin1.csv"), "--skip-bad-rows"}), where);
  expect_error(run({"evaluate", "--model", suite_run(), "--data", path("latin1.csv")}), where);
  expect_error(run({"tokenize", "--vocab", path("model/vocab.txt"), "--data", path("latin1.csv")}), where);

  // UTF-16, as Excel's "Unicode text" saves it: a byte-order mark; without one, NUL bytes.
  std::string utf16 = "\xFF\xFE";
  for (const char c : std::string("title\tdescription\ttag\n")) utf16 += std::string{c, '\0'};
  spit(path("excel.tsv"), utf16);
  RunResult r = run({"predict", "--model", suite_run(), "--data", path("excel.tsv")});
  expect_error(r, path("excel.tsv") + ":1: not UTF-8 text: the file starts with a UTF-16 byte-order mark (\\xFF\\xFE); "
                                      "convert it to UTF-8: iconv -f utf-16 -t utf-8");
  EXPECT_TRUE(printable_ascii(r.err));
  spit(path("excel.csv"), utf16.substr(2));
  r = run({"predict", "--model", suite_run(), "--data", path("excel.csv")});
  expect_error(r, path("excel.csv") + ":1: not a text file: a NUL byte at byte offset 1 of the file, after \"t\"");
  EXPECT_TRUE(printable_ascii(r.err));
}

// ---- a directory where a file belongs --------------------------------------------------------------------

// A directory given (or found) where a file belongs is named as one: not "basic_filebuf::underflow error reading
// the file: Is a directory", not "not found", not "cannot tell the format from the extension".
TEST_F(CliTest, ADirectoryWhereAFileBelongsIsNamed) {
  fs::create_directories(path("folder"));
  fs::create_directories(path("folder.csv"));
  const std::string is_dir = "': it is a directory, not a file";
  auto expect_named = [](const RunResult& r, const std::string& needle) {
    expect_error(r, needle);
    EXPECT_EQ(r.err.find("basic_filebuf"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("extension"), std::string::npos) << r.err;
  };
  expect_named(run(train_args(path("run"), {"--train-data", path("folder")})),
               "cannot open dataset file '" + path("folder") + is_dir);
  expect_named(run(train_args(path("run"), {"--val-data", path("folder.csv")})),
               "cannot open CSV file '" + path("folder.csv") + is_dir);
  expect_named(run(train_args(path("run"), {"--train-data", path("nothing")})),
               "cannot open dataset file '" + path("nothing") + "': No such file or directory");
  expect_no_run(path("run"));
  expect_named(run({"tokenize", "--vocab", path("model"), "--text", "image"}),
               "cannot open vocabulary file '" + path("model") + is_dir);
  expect_named(run({"tokenize", "--vocab", path("model/vocab.txt"), "--data", path("folder")}),
               "cannot open dataset file '" + path("folder") + is_dir);
  ASSERT_TRUE(succeeded(suite_train()));
  expect_named(run({"predict", "--model", suite_run(), "--data", path("folder.csv")}),
               "cannot open CSV file '" + path("folder.csv") + is_dir);
  expect_named(run({"evaluate", "--model", suite_run(), "--data", path("folder")}),
               "cannot open dataset file '" + path("folder") + is_dir);

  // A model directory whose config.json, vocab.txt or weights are directories.
  for (const char* name : {"config.json", "vocab.txt", "model.safetensors"}) {
    SCOPED_TRACE(name);
    const fs::path broken = path(std::string("broken_") + name);
    make_model_dir(broken);
    fs::remove(broken / name);
    fs::create_directories(broken / name);
    const std::string needle = "'" + (broken / name).string() + is_dir;
    expect_named(run({"train", "--model", broken.string(), "--train-data", data(), "--out", path("run2"), "--epochs",
                      "1", "--quiet"}),
                 needle);
    expect_no_run(path("run2"));
    expect_named(run({"evaluate", "--model", broken.string(), "--data", data()}), needle);
  }
  // --model naming a file.
  expect_named(run({"train", "--model", data(), "--train-data", data(), "--out", path("run3"), "--epochs", "1"}),
               data() + ": a file, not a directory");
  expect_named(run({"predict", "--model", data(), "--text", "image"}), data() + ": a file, not a directory");
}

// A Hugging Face hub id as --model (what transformers' from_pretrained takes) is not found here: the error says that
// bertrain does not download, and how to. tokenize said "no tokenizer" for any missing --model. A missing path that
// cannot be a hub id (absolute, or with a folder of its first name here) gets the plain message.
TEST_F(CliTest, AHubIdAsModelSaysHowToDownloadIt) {
  for (const std::string hub_id : {"no-such-org/scibert_scivocab_uncased", "no-such-bert-base-uncased"}) {
    ASSERT_FALSE(fs::exists(hub_id.substr(0, hub_id.find('/'))));
    const std::string advice = hub_id + ": not found (expected a model directory or a training run's RUN_DIR; if it "
                                        "is a Hugging Face hub id: bertrain does not download, get it with hf "
                                        "download " + hub_id + " --local-dir DIR";
    expect_error(run({"train", "--model", hub_id, "--train-data", data(), "--out", path("run"), "--quiet"}), advice);
    expect_no_run(path("run"));
    expect_error(run({"predict", "--model", hub_id, "--text", "image"}), advice);
    expect_error(run({"evaluate", "--model", hub_id, "--data", data()}), advice);
    expect_error(run({"tokenize", "--model", hub_id, "--text", "image"}), advice);
  }
  for (const std::string& missing : {path("model/nothing"), path("nothing")}) {
    const RunResult r = run({"predict", "--model", missing, "--text", "image"});
    expect_error(r, missing + ": not found (expected a model directory or a training run's RUN_DIR)");
    expect_error(run({"tokenize", "--model", missing, "--text", "image"}), missing + ": not found (");
  }
}

// A mistyped or foreign flag or command gets the nearest names the command has (an edit or two, a name's start, or
// another tool's name for it: Hugging Face's --learning-rate, Made-With-ML's --num-epochs); a flag of train given to
// tune or launch before their --, or a word where a flag belongs, says where it goes; missing required flags are
// named together with the usage line. Before, each was "unknown option '--X' (see --help)", one missing flag a run.
TEST_F(CliTest, MistypedFlagsAndCommandsSuggestWhatWasMeant) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"train", "--epoch", "1"}, "train: unknown option '--epoch' (did you mean --epochs?)"},
      {{"train", "--text-column", "text"}, "train: unknown option '--text-column' (did you mean --text-columns?)"},
      {{"train", "--learning_rate", "2e-5"}, "train: unknown option '--learning_rate' (did you mean --lr?)"},
      {{"train", "--num-epochs", "2"}, "train: unknown option '--num-epochs' (did you mean --epochs?)"},
      {{"train", "--data", data()}, "train: unknown option '--data' (did you mean --train-data?)"},
      {{"train", "--batch_size", "8"}, "train: unknown option '--batch_size' (did you mean --batch-size?)"},
      {{"train", "--max-len", "8"}, "train: unknown option '--max-len' (did you mean --max-length?)"},
      {{"predict", "--dataset-loc", data()}, "predict: unknown option '--dataset-loc' (did you mean --data?)"},
      {{"serve", "--hots", "x"}, "serve: unknown option '--hots' (did you mean --host?)"},
      {{"train", "--xyzzy", "3"}, "train: unknown option '--xyzzy' (see --help)"},
      {{"trian"}, "unknown command 'trian' (did you mean train?)"},
      {{"tune", "--space", "s.json", "--out", "d", "--model", model()},
       "tune: --model is not a tune option: train's flags go after --: bertrain tune --space FILE --out DIR [options] "
       "-- TRAIN FLAGS... (or tune's own --mode?)"},
      {{"tune", "--space", "s.json", "--out", "d", "--device", "0"},
       "tune: --device is not a tune option: train's flags go after --: bertrain tune --space FILE --out DIR [options] "
       "-- TRAIN FLAGS... (or tune's own --devices?)"},
      {{"predict", "-m", model()}, "predict: unknown option '-m' (options have two dashes: see --help)"},
      {{"predict", "-model", model()}, "predict: unknown option '-model' (did you mean --model?)"},
      {{"predict", "--model", model(), "--text", "object", "detection"},
       "predict: unexpected argument 'detection' (a text of several words needs quotes: --text 'object detection')"},
      {{"launch", "--out", "run", "--", "true"},
       "launch: --out is not a launch option: COMMAND and its flags go after --"},
      {{"launch", "bertrain", "train"},
       "launch: unexpected argument 'bertrain' (usage: bertrain launch [--max-restarts N] [--restart-delay SECONDS] -- "
       "COMMAND [ARGS...])"},
      {{"predict", model(), "--text", "image"},
       "predict: unexpected argument '" + model() + "' (did you mean --model " + model() + "?)"},
      {{"predict", "--model", model(), data()},
       "predict: unexpected argument '" + data() + "' (did you mean --data " + data() + "?)"},
      {{"predict", "--model", model(), "object detection"},
       "predict: unexpected argument 'object detection' (did you mean --text 'object detection'?)"},
      {{"train"}, "train: --model, --train-data and --out are required (usage: bertrain train --model DIR --train-data "
                  "FILE --out DIR [options] (or, to continue a run with the settings its checkpoint recorded: "
                  "bertrain train --resume --out DIR [options]))"},
      {{"train", "--model", model(), "--out", path("run")},
       "train: --train-data is required (usage: bertrain train --model DIR --train-data FILE"},
      {{"tune"}, "tune: --space and --out are required (usage: bertrain tune --space FILE --out DIR [options] -- TRAIN "
                 "FLAGS...)"},
  };
  for (const auto& [args, message] : cases) expect_error(run(args), "bertrain: " + message);
  const std::string usage = "usage: bertrain train --model DIR --train-data FILE --out DIR [options] (or, to continue a "
                            "run with the settings its checkpoint recorded: bertrain train --resume --out DIR "
                            "[options])\n";
  EXPECT_EQ(run({"train", "--help"}).out.rfind(usage, 0), 0u);
  expect_no_run(path("run"));
}

// The data settings training recorded in config.json, damaged: the field is named (the library's type error named
// neither it nor which of the two settings it was in).
TEST_F(CliTest, ATrainedModelsDamagedDataSettingsAreNamed) {
  ASSERT_TRUE(succeeded(suite_train()));
  fs::copy(suite_run() + "/best", path("damaged"), fs::copy_options::recursive);
  const json config = json::parse(slurp(path("damaged/config.json")));
  const std::pair<std::string, json> damages[] = {{"bertrain_clean_text", 1}, {"bertrain_data", "x"}};
  for (const auto& [field, value] : damages) {
    json damaged = config;
    damaged[field] = value;
    spit(path("damaged/config.json"), damaged.dump());
    expect_error(run({"predict", "--model", path("damaged"), "--text", "image"}),
                 path("damaged/config.json") + ": field '" + field + "'");
  }
  json damaged = config;
  damaged["bertrain_data"]["text_columns"] = 5;
  spit(path("damaged/config.json"), damaged.dump());
  expect_error(run({"evaluate", "--model", path("damaged"), "--data", data()}),
               path("damaged/config.json") + ": field 'bertrain_data.text_columns': ");
}

// ---- where outputs go ------------------------------------------------------------------------------------

// An output that cannot be written is the user's input error (exit 2, never retried by launch), found before any
// work: train used to train its first epoch into a folder it could not write and then exit 1 (which launch
// retried, epoch and all), and evaluate to evaluate everything before failing to save it.
TEST_F(CliTest, OutputsThatCannotBeWrittenAreRefusedBeforeAnyWork) {
  ASSERT_TRUE(succeeded(suite_train()));
  spit(path("afile"), "not a folder\n");
  const std::string not_dir = "'" + path("afile") + "' is a file, not a directory";
  expect_error(run(train_args(path("afile/run"))), not_dir);
  expect_error(run(train_args(path("afile/deeper/run"))), not_dir);
  expect_error(run({"evaluate", "--model", suite_run(), "--data", data(), "--out", path("afile/e.json")}), not_dir);
  expect_error(run({"evaluate", "--model", suite_run(), "--data", data(), "--out", path("no_folder/e.json")}),
               "folder '" + path("no_folder") + "' does not exist");
  expect_error(run({"evaluate", "--model", suite_run(), "--data", data(), "--out", path("model")}),
               "it is a directory, not a file");
  expect_error(run({"predict", "--model", suite_run(), "--data", data(), "--out", path("afile/p.jsonl")}), not_dir);
  expect_error(run({"report", suite_run(), "--out", path("afile/r.html")}), not_dir);
  expect_error(run({"convert", suite_run(), "--out", path("afile")}), not_dir);
  EXPECT_FALSE(fs::exists(path("no_folder")));
  // A folder nobody can create files in: /proc for every user (root too), a read-only folder for the others.
  if (fs::is_directory("/proc")) {
    expect_error(run(train_args("/proc/bertrain-run")), "cannot create files in '/proc'");
    expect_error(run({"convert", suite_run(), "--out", "/proc/bertrain-model"}), "cannot create files in '/proc'");
  }
  if (::geteuid() != 0) {
    fs::create_directories(path("read_only"));
    fs::permissions(path("read_only"), fs::perms::owner_read | fs::perms::owner_exec);
    expect_error(run(train_args(path("read_only"))), "cannot create files in '" + path("read_only") + "'");
    expect_error(run(train_args(path("read_only/run"))), "cannot create files in '" + path("read_only") + "'");
    fs::permissions(path("read_only"), fs::perms::owner_all);
  }
  // launch does not retry it.
  const RunResult launched = run({"launch", "--restart-delay", "0", "--", binary(), "train", "--model", model(),
                                  "--train-data", data(), "--out", path("afile/run"), "--device", "cpu", "--quiet"});
  EXPECT_EQ(launched.exit_code, 2) << launched.describe();
  EXPECT_EQ(launched.err.find("restart 1"), std::string::npos) << launched.describe();
}

// Numbers given to flags: a seed is what results.json records (0 to 2^64 - 1; a negative one used to wrap to
// 2^64 - N), and a number out of an integer flag's range says so instead of "expects an integer".
TEST_F(CliTest, SeedsAndIntegerRangesAreCheckedAsWritten) {
  expect_error(run(train_args(path("run"), {"--seed", "-1"})), "train: --seed must be 0 or more, got -1");
  expect_error(run(train_args(path("run"), {"--split-seed", "18446744073709551616"})),
               "--split-seed must be at most 18446744073709551615");
  expect_error(run(train_args(path("run"), {"--seed", "4x"})), "--seed expects an integer, got '4x'");
  // Past an int: said as a double past its range is ("must be between -2147483647 and 2147483647" read as if a
  // negative count were allowed).
  expect_error(run(train_args(path("run"), {"--epochs", "99999999999"})),
               "--epochs is out of an integer's range (-2147483647 to 2147483647), got '99999999999'");
  expect_error(run(train_args(path("run"), {"--batch-size", "-4294967297"})),
               "--batch-size is out of an integer's range");
  // A number is its text alone, in decimal: the C library also read " 3" (but not "3 ") and hexadecimal "0x10".
  expect_error(run(train_args(path("run"), {"--epochs", " 3"})), "--epochs expects an integer, got ' 3'");
  expect_error(run(train_args(path("run"), {"--lr", " 1e-4"})), "--lr expects a number, got ' 1e-4'");
  expect_error(run(train_args(path("run"), {"--lr", "0x10"})), "--lr expects a number, got '0x10'");
  // A number beyond a double's range is named so, not "expects a number".
  expect_error(run(train_args(path("run"), {"--lr", "1e400"})), "--lr is out of a double's range, got '1e400'");
  // The largest seed parses: the command goes on to its next check (the run directory, here a file's child).
  spit(path("afile"), "x\n");
  expect_error(run(train_args(path("afile/run"), {"--seed", "18446744073709551615"})), "is a file, not a directory");
  expect_no_run(path("run"));
}

// The same file means the same to every command: a header without rows is refused by predict as by evaluate.
TEST_F(CliTest, AHeaderWithoutRowsIsRefusedByPredictToo) {
  ASSERT_TRUE(succeeded(suite_train()));
  spit(path("header.csv"), "id,title,description,tag\n");
  expect_error(run({"predict", "--model", suite_run(), "--data", path("header.csv"), "--out", path("p.jsonl")}),
               path("header.csv") + ": no data rows");
  EXPECT_FALSE(fs::exists(path("p.jsonl")));
  const RunResult to_stdout = run({"predict", "--model", suite_run(), "--data", path("header.csv")});
  expect_error(to_stdout, "no data rows");
  EXPECT_EQ(to_stdout.out, "");
}

// tokenize prints what the model is given: cut at the model's max_length (40 for the fixture, as the suite's run
// was trained), not at 512.
TEST_F(CliTest, TokenizeCutsWhereTheModelDoes) {
  ASSERT_TRUE(succeeded(suite_train()));
  std::string text = "image";
  for (int i = 1; i < 100; ++i) text += " image";  // 100 tokens of the fixture's vocabulary, 102 with [CLS] and [SEP]
  // A RUN_DIR is its best/, as predict takes it.
  for (const std::string& dir : {model(), suite_run() + "/best", suite_run()}) {
    SCOPED_TRACE(dir);
    const RunResult r = run({"tokenize", "--model", dir, "--text", text});
    ASSERT_TRUE(succeeded(r)) << r.describe();
    EXPECT_EQ(json::parse(r.out).size(), 40u) << r.out;
    EXPECT_NE(r.err.find("longer than 40 tokens"), std::string::npos) << r.err;
    expect_error(run({"tokenize", "--model", dir, "--text", text, "--max-length", "41"}),
                 "--max-length 41 is more than the 40 tokens");
  }
  // A bare vocabulary has no model to ask: 512 tokens, or --max-length.
  const RunResult vocab = run({"tokenize", "--vocab", path("model/vocab.txt"), "--text", text});
  ASSERT_TRUE(succeeded(vocab)) << vocab.describe();
  EXPECT_EQ(json::parse(vocab.out).size(), 102u) << vocab.out;
  const RunResult cut = run({"tokenize", "--vocab", path("model/vocab.txt"), "--text", text, "--max-length", "10"});
  ASSERT_TRUE(succeeded(cut)) << cut.describe();
  EXPECT_EQ(json::parse(cut.out).size(), 10u) << cut.out;
  const RunResult bench = run({"bench", "tokenize", "--model", suite_run(), "--data", data(), "--rows", "10"});
  EXPECT_TRUE(succeeded(bench)) << bench.describe();
  // bench tokenize reads CSV: another format is named, not parsed as CSV until a row fails.
  spit(path("rows.jsonl"), "{\"title\": \"image\", \"description\": \"x, y\"}\n");
  expect_error(run({"bench", "tokenize", "--model", suite_run(), "--data", path("rows.jsonl")}),
               "bench tokenize reads CSV only (title and description columns), not .jsonl files");
}

// An unknown label in --val-data is named with its line, as evaluate names it.
TEST_F(CliTest, AnUnknownValidationLabelNamesItsLine) {
  std::vector<Row> rows = synthetic_rows();
  rows.resize(6);
  rows[3].tag = "quantum-computing";
  spit(path("val.csv"), to_csv(rows));
  // Line 1 is the header, row 0 spans lines 2-3 (its description holds a newline), so row 3 starts on line 6.
  expect_error(run(train_args(path("run"), {"--val-data", path("val.csv")})),
               "unknown tag 'quantum-computing' in " + path("val.csv") + ":6");
  expect_no_run(path("run"));
}

// bench's input errors exit 2, as every command's do.
TEST_F(CliTest, BenchInputErrorsAreExitStatusTwo) {
  expect_error(run({"bench", "step", "--hidden", "30", "--heads", "4", "--steps", "1"}), "is not divisible by");
  expect_error(run({"bench", "tokenize", "--model", model(), "--data", path("nothing.csv")}), "nothing.csv");
}

// ---- hints name only the running command's flags -----------------------------------------------------------

// Every "--flag" an error message mentions.
std::vector<std::string> flags_in(const std::string& text) {
  std::vector<std::string> flags;
  for (std::size_t at = text.find("--"); at != std::string::npos; at = text.find("--", at + 2)) {
    std::size_t end = at + 2;
    while (end < text.size() && (std::islower(static_cast<unsigned char>(text[end])) || text[end] == '-')) ++end;
    if (end > at + 2) flags.push_back(text.substr(at, end - at));
  }
  return flags;
}

// An error of `command` that suggests only flags its --help lists.
void expect_error_naming_own_flags(const std::string& command, const RunResult& r, const std::string& needle) {
  expect_error(r, needle);
  const RunResult help = run({command, "--help"});
  ASSERT_TRUE(succeeded(help));
  for (const std::string& flag : flags_in(r.err)) {
    EXPECT_NE(help.out.find("  " + flag + " "), std::string::npos) << command << " has no " << flag << ": " << r.err;
  }
}

// Flags that only mean something beside another are refused alone instead of being ignored: the MLflow run's names
// without an MLflow store, a label separator of a single-label run. Nothing is trained.
TEST_F(CliTest, FlagsThatNeedAnotherAreRefusedAlone) {
  for (const std::vector<std::string>& extra : std::vector<std::vector<std::string>>{{"--experiment", "e"}, {"--run-name", "r"}}) {
    const RunResult r = run(train_args(path("run"), extra));
    expect_error(r, extra[0] + " names the MLflow run: give --mlflow-dir too (or set MLFLOW_TRACKING_URI)");
    expect_no_run(path("run"));
  }
  // MLFLOW_TRACKING_URI is the store when no --mlflow-dir is given.
  ASSERT_TRUE(succeeded(run(train_args(path("env"), {"--epochs", "1", "--run-name", "named"}),
                            {"MLFLOW_TRACKING_URI=" + path("mlruns")})));
  std::vector<std::string> run_names;
  for (const auto& e : fs::recursive_directory_iterator(path("mlruns"))) {
    if (e.path().filename() == "mlflow.runName") run_names.push_back(slurp(e.path()));
  }
  EXPECT_EQ(run_names, std::vector<std::string>{"named"});
  const RunResult sep = run(train_args(path("run"), {"--label-separator", "|"}));
  expect_error(sep, "--label-separator splits a label field into several labels: give --multi-label too");
  expect_no_run(path("run"));
}

// --metric-for-best and tune's --metric take each other's names for a metric; the run records one spelling, so a
// resume under the other one is the same run.
TEST_F(CliTest, MetricNamesOfTrainAndTuneAreOne) {
  ASSERT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "1", "--metric-for-best", "val_f1"}))));
  const json results = json::parse(slurp(path("run/results.json")));
  EXPECT_EQ(results["params"]["metric_for_best"], "f1");
  EXPECT_EQ(results["best_metric"]["name"], "f1");
  EXPECT_TRUE(succeeded(run(train_args(path("run"), {"--epochs", "1", "--metric-for-best", "f1", "--resume"}))));
  expect_error(run(train_args(path("x"), {"--metric-for-best", "val_f2"})),
               "--metric-for-best must be val_loss, f1 or accuracy (or val_f1, val_accuracy), got \"val_f2\"");
}

// Data flags that cannot mean anything are refused by name in every command, exit 2: a --max-length that cannot hold
// [CLS] and [SEP] also where no file is read (predict --text exited 1 naming no flag), and an empty --val-data or
// --format (an unset variable in --val-data "$VAL" trained on a split without a word).
TEST_F(CliTest, DataFlagsThatCannotMeanAnythingAreRefusedByName) {
  ASSERT_TRUE(succeeded(suite_train()));
  const std::string max_length = ": --max-length must be 0 (the model's) or at least 2 ([CLS] and [SEP]), got ";
  for (const char* value : {"1", "-1"}) {
    expect_error(run({"predict", "--model", suite_run(), "--text", "deep", "--max-length", value}),
                 "predict" + max_length + value);
  }
  expect_error(run({"evaluate", "--model", suite_run(), "--data", data(), "--max-length", "1"}),
               "evaluate" + max_length + "1");
  expect_error(run(train_args(path("run"), {"--max-length", "1"})), "train" + max_length + "1");
  expect_no_run(path("run"));
  expect_error(run(train_args(path("run"), {"--val-data", ""})), "train: --val-data is empty");
  expect_error(run(train_args(path("run"), {"--val-data", data(), "--val-fraction", "0.3"})),
               "train: --val-fraction holds out part of --train-data when there is no --val-data");
  expect_no_run(path("run"));
  expect_error(run(train_args(path("run"), {"--format", ""})), "--format is empty");
  expect_no_run(path("run"));
  expect_error(run({"predict", "--model", suite_run(), "--data", data(), "--format", ""}), "--format is empty");
}

// evaluate and predict run the CPU engine on --threads threads, as train and serve do.
TEST_F(CliTest, EvaluateAndPredictTakeThreads) {
  ASSERT_TRUE(succeeded(suite_train()));
  const RunResult two = run({"evaluate", "--model", suite_run(), "--data", data(), "--device", "cpu", "--threads", "2"});
  ASSERT_TRUE(succeeded(two));
  EXPECT_NE(two.err.find("on " + cpu_engine_description(2)), std::string::npos) << two.describe();
  const RunResult one = run({"predict", "--model", suite_run(), "--data", data(), "--device", "cpu", "--threads", "1",
                             "--out", path("predictions.jsonl")});
  ASSERT_TRUE(succeeded(one));
  EXPECT_NE((one.out + one.err).find(cpu_engine_description(1)), std::string::npos) << one.describe();
  // Thousands of threads crashed libgomp (a segfault at 100000): every command bounds the count.
  const std::string bounds = ": --threads must be between 0 (all cores) and 1024, got ";
  expect_error(run({"predict", "--model", suite_run(), "--text", "x", "--threads", "-1"}), "predict" + bounds + "-1");
  expect_error(run({"evaluate", "--model", suite_run(), "--data", data(), "--threads", "100000"}),
               "evaluate" + bounds + "100000");
  expect_error(run(train_args(path("run"), {"--threads", "1025"})), "train" + bounds + "1025");
  expect_no_run(path("run"));
  expect_error(run({"serve", "--model", suite_run(), "--threads", "100000"}), "serve" + bounds + "100000");
  expect_error(run({"bench", "step", "--threads", "100000"}), "bench step" + bounds + "100000");
}

// --quiet, as train, tune and serve have it: evaluate and predict drop their throughput line, and print the same
// results.
TEST_F(CliTest, EvaluateAndPredictQuietDropTheThroughputLine) {
  ASSERT_TRUE(succeeded(suite_train()));
  for (const char* command : {"evaluate", "predict"}) {
    SCOPED_TRACE(command);
    const std::vector<std::string> args{command, "--model", suite_run(), "--data", data(), "--device", "cpu"};
    const RunResult loud = run(args);
    std::vector<std::string> quiet_args = args;
    quiet_args.push_back("--quiet");
    const RunResult quiet = run(quiet_args);
    ASSERT_TRUE(succeeded(loud));
    ASSERT_TRUE(succeeded(quiet));
    EXPECT_NE(loud.err.find(std::string(command) + ": " + std::to_string(synthetic_rows().size()) + " rows in "),
              std::string::npos)
        << loud.err;
    EXPECT_EQ(quiet.err, "");
    if (std::string(command) == "predict") {
      EXPECT_EQ(quiet.out, loud.out);
    }
  }
}

TEST_F(CliTest, HintsNameOnlyFlagsOfTheCommandThatRuns) {
  ASSERT_TRUE(succeeded(suite_train()));
  spit(path("gap.csv"), "title,description,tag\nimage camera,video,computer-vision\n, ,mlops\n");
  spit(path("lists.jsonl"), "{\"title\": \"image\", \"description\": \"camera\", \"tag\": [\"computer-vision\"]}\n");
  spit(path("notjson.jsonl"), "title,description,tag\nimage,camera,computer-vision\n");
  const std::string vocab = path("model/vocab.txt");

  // tokenize has no --skip-bad-rows, no --label-column, no --multi-label.
  RunResult r = run({"tokenize", "--vocab", vocab, "--data", path("gap.csv")});
  expect_error_naming_own_flags("tokenize", r, path("gap.csv") + ":3: all text columns (title, description) are empty");
  EXPECT_EQ(r.err.find("--skip-bad-rows"), std::string::npos) << r.err;
  expect_error_naming_own_flags("tokenize", run({"tokenize", "--vocab", vocab, "--data", path("gap.csv"),
                                                 "--text-columns", "abstract"}),
                                "missing text column 'abstract' (columns: title, description, tag; choose with "
                                "--text-columns)");
  expect_error_naming_own_flags("tokenize", run({"tokenize", "--vocab", vocab, "--data", path("notjson.jsonl")}),
                                "(the first row already: is the file JSON Lines, as its extension says? --format "
                                "chooses the format)");
  // evaluate and predict have --skip-bad-rows but not --multi-label: the model says whether labels are sets.
  r = run({"evaluate", "--model", suite_run(), "--data", path("gap.csv")});
  expect_error_naming_own_flags("evaluate", r, ":3: all text columns (title, description) are empty (--skip-bad-rows skips "
                                               "such rows)");
  r = run({"evaluate", "--model", suite_run(), "--data", path("lists.jsonl")});
  expect_error_naming_own_flags("evaluate", r, ":1: label column 'tag' is a list, expected one label");
  expect_error_naming_own_flags("predict", run({"predict", "--model", suite_run(), "--data", path("gap.csv")}),
                                "(--skip-bad-rows skips such rows)");
  // train has them all.
  r = run({"train", "--model", model(), "--train-data", path("lists.jsonl"), "--out", path("run")});
  expect_error_naming_own_flags("train", r, ":1: label column 'tag' is a list (pass --multi-label for label sets)");
}

// ---- label warnings ---------------------------------------------------------------------------------------

// train warns, on stderr and once, about labels it cannot learn: with --quiet too, which silences progress, not
// problems.
TEST_F(CliTest, TrainWarnsAboutLabelsWithoutTrainingRows) {
  std::vector<Row> rows = synthetic_rows();
  rows.push_back({"The camera survey", "a dataset", "rare"});  // ceil(0.2 · 1) = 1: its one row goes to validation
  spit(path("rare.csv"), to_csv(rows));
  const std::string warning = "bertrain: warning: label 'rare' has no training rows (1 row for validation): the model "
                              "cannot learn it\n";
  for (const bool quiet : {true, false}) {
    SCOPED_TRACE(quiet);
    const std::string out = path(quiet ? "quiet" : "verbose");
    std::vector<std::string> args{"train", "--model", model(), "--train-data", path("rare.csv"), "--out", out,
                                  "--epochs", "1", "--batch-size", "8"};
    if (quiet) args.push_back("--quiet");
    const RunResult r = run(args);
    ASSERT_TRUE(succeeded(r));
    EXPECT_EQ(count_occurrences(r.err, "bertrain: warning: label "), 1u) << r.err;
    EXPECT_NE(r.err.find(warning), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("warning"), std::string::npos) << r.out;
    if (quiet) {
      EXPECT_EQ(r.out, "");
    }
  }
  // Made-With-ML's data as it is: no warning.
  const RunResult plain = run(train_args(path("plain"), {"--epochs", "1"}));
  ASSERT_TRUE(succeeded(plain));
  EXPECT_EQ(plain.err.find("warning: label"), std::string::npos) << plain.err;
  // Every label with a single row: nothing left to train on, and the error says why.
  expect_error(run(train_args(path("titles"), {"--label-column", "title"})),
               "need at least one training and one validation row, got 0 and 40 (each of the 40 labels has a single "
               "row, which the split holds out for validation; is --label-column 'title' the label?)");
}

// With --multi-label and no --label-separator, labels that hold '|' or ';' are likely lists: one warning naming the
// label and the separator; none once --label-separator is given.
TEST_F(CliTest, TrainWarnsAboutLabelsThatLookLikeLists) {
  const std::vector<Row> rows = synthetic_rows();
  std::string text;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string topics = rows[i].tag + "|uses-model";
    text += json{{"text", rows[i].title + " " + rows[i].description}, {"topics", topics}}.dump() + "\n";
  }
  spit(path("pipes.jsonl"), text);
  std::vector<std::string> args{"train", "--model", model(), "--train-data", path("pipes.jsonl"), "--out", path("run"),
                                "--epochs", "1", "--batch-size", "8", "--quiet", "--multi-label", "--text-columns",
                                "text", "--label-column", "topics"};
  const RunResult r = run(args);
  ASSERT_TRUE(succeeded(r));
  EXPECT_EQ(count_occurrences(r.err, "bertrain: warning: label "), 1u) << r.err;
  EXPECT_NE(r.err.find("bertrain: warning: label 'computer-vision|uses-model' contains '|' (as do 3 more of the 4 "
                       "labels): labels are split at ','; if '|' separates labels, pass --label-separator '|'\n"),
            std::string::npos)
      << r.err;
  for (const char* separator : {"|", ","}) {
    SCOPED_TRACE(separator);
    std::vector<std::string> given = args;
    given[6] = path(std::string("run_") + (separator[0] == '|' ? "pipe" : "comma"));
    given.insert(given.end(), {"--label-separator", separator});
    const RunResult g = run(given);
    ASSERT_TRUE(succeeded(g));
    EXPECT_EQ(g.err.find("contains '|'"), std::string::npos) << g.err;
  }
  EXPECT_EQ(json::parse(slurp(path("run_pipe/results.json")))["labels"].size(), 5u);
  // Without --multi-label each combination is a class: said once, with the flags that read them as lists.
  std::vector<std::string> single = args;
  single[6] = path("run_single");
  single.erase(std::find(single.begin(), single.end(), "--multi-label"));
  const RunResult s = run(single);
  ASSERT_TRUE(succeeded(s));
  EXPECT_EQ(count_occurrences(s.err, "bertrain: warning: label "), 1u) << s.err;
  EXPECT_NE(s.err.find("bertrain: warning: label 'computer-vision|uses-model' (and 3 more of the 4 labels) reads as a "
                       "list of labels: 'uses-model' stands in 4 labels, parts between '|'; each is trained as one "
                       "class. If a row has several labels, pass --multi-label --label-separator '|'\n"),
            std::string::npos)
      << s.err;
}

}  // namespace
}  // namespace bertrain

// Labelled text datasets (data/dataset.h): text and label columns in the three formats, label sets, bad rows
// (an error naming file, line and column, or skipped and counted), truncation counts, the id column.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/dataset.h"
#include "data/hf_tokenizer.h"
#include "tests/temp_dir.h"

namespace bertrain {
namespace {

BertTokenizer tiny_tokenizer() {
  return BertTokenizer(Vocab::from_tokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "red", "green", "blue",
                                           "cat", "dog"}));
}

// The dataset flags of train, all of which messages may suggest.
const std::vector<std::string> kTrainFlags = {"format", "text-columns", "label-column", "multi-label",
                                              "label-separator", "skip-bad-rows", "max-length"};

class DatasetTest : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = dir_.path(name);
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  void expect_error(const std::string& path, const DatasetOptions& options, const std::string& needle) {
    try {
      load_text_dataset(path, tokenizer_, nullptr, options);
      ADD_FAILURE() << "no error for " << path;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
  testing::TempDir dir_{"bertrain_dataset"};
  BertTokenizer tokenizer_ = tiny_tokenizer();
};

// TEI's truncation_direction "left": a text too long keeps its last tokens between the template's special tokens, for
// both kinds of tokenizer (vocab.txt's [CLS] ... [SEP], and a tokenizer.json's framing); one that fits is as
// encode_text gives it.
TEST_F(DatasetTest, KeepingTheEndCutsTheTextFromTheLeft) {
  DatasetOptions options;
  options.clean = false;
  options.max_length = 5;
  bool cut = false;
  EXPECT_EQ(encode_text_keeping_end("red green blue cat dog", tokenizer_, options, &cut).ids,
            (std::vector<int32_t>{2, 7, 8, 9, 3}));  // [CLS] blue cat dog [SEP]
  EXPECT_TRUE(cut);
  EXPECT_EQ(encode_text("red green blue cat dog", tokenizer_, options, nullptr).ids,
            (std::vector<int32_t>{2, 5, 6, 7, 3}));  // the start, as a right cut
  EXPECT_EQ(encode_text_keeping_end("red cat", tokenizer_, options, &cut).ids,
            encode_text("red cat", tokenizer_, options, nullptr).ids);
  EXPECT_FALSE(cut);
  const HfTokenizer bpe = HfTokenizer::load(std::string(BERTRAIN_FIXTURES_DIR) + "/tokenizers/bpe_bytelevel/tokenizer.json");
  const std::string text = "one two three four five six seven eight nine ten eleven twelve";
  const Encoding whole = bpe.encode(text, 1000);
  ASSERT_GT(whole.ids.size(), 8u);
  ASSERT_EQ(bpe.prefix_specials() + bpe.suffix_specials(), 2);
  options.max_length = 8;
  std::vector<int32_t> want{whole.ids.front()};  // <s>, the last six tokens of the text, </s>
  want.insert(want.end(), whole.ids.end() - 7, whole.ids.end());
  EXPECT_EQ(encode_text_keeping_end(text, bpe, options, &cut).ids, want);
  EXPECT_TRUE(cut);
}

TEST_F(DatasetTest, MadeWithMlDefaultsJoinTitleAndDescription) {
  const std::string path = write("d.csv", "id,title,description,tag\n7,red cat,blue dog,pets\n8,green,cat,pets\n");
  DatasetOptions options;
  options.read_labels = true;
  const TextDataset data = load_text_dataset(path, tokenizer_, nullptr, options);
  ASSERT_EQ(data.examples.size(), 2u);
  EXPECT_EQ(data.raw_text[0], "red cat blue dog");
  EXPECT_EQ(data.ids, (std::vector<std::string>{"7", "8"}));
  EXPECT_EQ(data.tags[1], (std::vector<std::string>{"pets"}));
  EXPECT_EQ(data.examples[0].ids, (std::vector<int32_t>{2, 5, 8, 7, 9, 3}));
  const LabelSet labels({"other", "pets"});
  EXPECT_EQ(load_text_dataset(path, tokenizer_, &labels, options).examples[1].labels, (std::vector<int>{1}));
}

TEST_F(DatasetTest, MultiLabelFromArraysAndSeparators) {
  const std::string jsonl = write("d.jsonl",
                                  "{\"text\": \"red\", \"labels\": [\"b\", \"a\", \"b\"]}\n"
                                  "{\"text\": \"cat\", \"labels\": []}\n"
                                  "{\"text\": \"dog\", \"labels\": \" c | a |\\u00a0|\"}\n");
  DatasetOptions options;
  options.command_flags = kTrainFlags;
  options.text_columns = {"text"};
  options.label_column = "labels";
  options.read_labels = options.multi_label = true;
  options.label_separator = "|";
  const LabelSet labels({"a", "b", "c"});
  const TextDataset data = load_text_dataset(jsonl, tokenizer_, &labels, options);
  EXPECT_EQ(data.tags[0], (std::vector<std::string>{"b", "a"}));  // repeats dropped
  EXPECT_TRUE(data.tags[1].empty());                                // [] is a row without labels
  EXPECT_EQ(data.tags[2], (std::vector<std::string>{"c", "a"}));  // split, trimmed, empty and blank pieces dropped
  EXPECT_EQ(data.examples[0].labels, (std::vector<int>{0, 1}));     // sorted class indices
  EXPECT_EQ(data.examples[2].labels, (std::vector<int>{0, 2}));
  EXPECT_EQ(data.ids, (std::vector<std::string>{"0", "1", "2"}));  // no id column: the row number
  // A field of 100,000 labels, each twice: repeats dropped in one pass (a scan per label took 57 s at 200,000).
  std::string field;
  for (int i = 0; i < 200000; ++i) field += (i ? "|" : "") + std::string("t") + std::to_string(i % 100000);
  const std::string wide = write("wide.jsonl", "{\"text\": \"red\", \"labels\": \"" + field + "\"}\n");
  const TextDataset many = load_text_dataset(wide, tokenizer_, nullptr, options);
  ASSERT_EQ(many.tags[0].size(), 100000u);
  EXPECT_EQ(many.tags[0][99999], "t99999");
  // Single-label reading refuses a list.
  options.multi_label = false;
  expect_error(jsonl, options, "is a list (pass --multi-label");
}

TEST_F(DatasetTest, BadRowsAreErrorsOrSkippedAndCounted) {
  const std::string tsv = write("d.tsv",
                                "text\tlabel\n"
                                "red cat\tx\n"
                                "  \ty\n"      // line 3: empty text
                                "blue\n"       // line 4: one field
                                "dog\t\n"      // line 5: empty label
                                "cow\t\xc2\xa0\n"  // line 6: a label of a no-break space, blank as text would be
                                "green dog\tz\n");
  DatasetOptions options;
  options.command_flags = kTrainFlags;
  options.text_columns = {"text"};
  options.label_column = "label";
  options.read_labels = true;
  expect_error(tsv, options, tsv + ":3: text column 'text' is empty (--skip-bad-rows");
  options.skip_bad_rows = true;
  const TextDataset data = load_text_dataset(tsv, tokenizer_, nullptr, options);
  EXPECT_EQ(data.raw_text, (std::vector<std::string>{"red cat", "green dog"}));
  EXPECT_EQ(data.skipped, 4);
  ASSERT_EQ(data.skip_reasons.size(), 4u);
  EXPECT_NE(data.skip_reasons[1].find(tsv + ":4: has 1 field"), std::string::npos) << data.skip_reasons[1];
  EXPECT_NE(data.skip_reasons[2].find(":5: label column 'label' is empty"), std::string::npos) << data.skip_reasons[2];
  EXPECT_NE(data.skip_reasons[3].find(":6: label column 'label' is empty"), std::string::npos) << data.skip_reasons[3];
  // Without read_labels the label is not needed: lines 5 and 6 are good.
  options.read_labels = false;
  EXPECT_EQ(load_text_dataset(tsv, tokenizer_, nullptr, options).skipped, 2);
  // A column the header lacks is always an error; so is a file of bad rows only.
  options.text_columns = {"body"};
  expect_error(tsv, options, "missing text column 'body' (columns: text, label; choose with --text-columns)");
  // A name that differs by spaces, a byte-order mark (a second one, after the file's own) or case is pointed at.
  const std::string near = write("near.csv", "\xEF\xBB\xBF\xEF\xBB\xBFtext, Label\nred,x\n");
  options.text_columns = {"text"};
  expect_error(near, options, "missing text column 'text' (columns: \\uFEFFtext,  Label; the header has "
                              "'\\uFEFFtext' (names are matched as written: spaces, case and a byte-order mark count)");
  options.text_columns = {"Label"};
  options.label_column = "label";
  expect_error(near, options, "missing text column 'Label' (columns: \\uFEFFtext,  Label; the header has ' Label'");
  options.text_columns = {"\xEF\xBB\xBFtext"};
  options.read_labels = true;
  expect_error(near, options, "missing label column 'label' (columns: \\uFEFFtext,  Label; the header has ' Label'");
  options.read_labels = false;
  const std::string bad = write("bad.tsv", "text\tlabel\n\tx\n");
  options.text_columns = {"text"};
  expect_error(bad, options, "no data rows (all 1 rows were bad and skipped)");
}

// Made-With-ML's text is title + " " + description, whose cleaning drops the space an empty description leaves;
// exports leave optional fields empty, so a row is bad only when all its text columns are.
TEST(JoinTextColumns, LeavesOutEmptyValues) {
  EXPECT_EQ(join_text_columns({"red cat", "blue"}), "red cat blue");
  EXPECT_EQ(join_text_columns({"red cat", ""}), "red cat");
  EXPECT_EQ(join_text_columns({"", "blue"}), "blue");
  EXPECT_EQ(join_text_columns({"a", " \t\n", "b"}), "a b");  // whitespace only counts as empty
  EXPECT_EQ(join_text_columns({" a ", "b"}), " a  b");          // values are kept as written
  EXPECT_EQ(join_text_columns({"", "  "}), "");
  EXPECT_EQ(join_text_columns({}), "");
  // Unicode's whitespace is whitespace too (NBSP, ideographic space, line separator, NEL): a text of it was a row
  // the model saw as [CLS] [SEP], where the same row of spaces was refused by name.
  for (const char* blank : {"\u00a0", "\u3000 \u2028", "\u0085\t", "\u2009\u202f\u205f"}) {
    EXPECT_TRUE(is_blank_text(blank)) << blank;
    EXPECT_EQ(join_text_columns({"a", blank, "b"}), "a b") << blank;
    EXPECT_EQ(join_text_columns({blank, blank}), "") << blank;
  }
  for (const char* text : {"\u00a0x", "\u200b", "\xff", "\u00e9"}) EXPECT_FALSE(is_blank_text(text)) << text;
}

TEST_F(DatasetTest, EmptyTextColumnsAreLeftOutAndOnlyARowWithNoTextIsBad) {
  const std::string csv = write("d.csv",
                                "id,title,description,tag\n"
                                "1,red cat,,pets\n"      // Made-With-ML's tests predict with "description": ""
                                "2,,blue dog,pets\n"
                                "3,green,\"  \",pets\n"
                                "4,, ,pets\n"            // line 5: no text at all
                                "5,red,cat,pets\n");
  DatasetOptions options;
  options.command_flags = kTrainFlags;
  options.read_labels = true;
  expect_error(csv, options, csv + ":5: all text columns (title, description) are empty (--skip-bad-rows");
  options.skip_bad_rows = true;
  const TextDataset data = load_text_dataset(csv, tokenizer_, nullptr, options);
  EXPECT_EQ(data.raw_text, (std::vector<std::string>{"red cat", "blue dog", "green", "red cat"}));
  EXPECT_EQ(data.ids, (std::vector<std::string>{"1", "2", "3", "5"}));
  EXPECT_EQ(data.skipped, 1);
  // The ids are the ones of Made-With-ML's joining, title + " " + "", cleaned.
  EXPECT_EQ(data.examples[0].ids, encode_text("red cat ", tokenizer_, options, nullptr).ids);
  EXPECT_EQ(data.examples[0].ids, (std::vector<int32_t>{2, 5, 8, 3}));
  EXPECT_EQ(data.examples[0].ids, data.examples[3].ids);
  // One text column: its own name in the message.
  const std::string one = write("one.csv", "text,tag\nred,x\n ,x\n");
  options.text_columns = {"text"};
  options.skip_bad_rows = false;
  expect_error(one, options, one + ":3: text column 'text' is empty");
}

// A JSON object has no header: an absent key or null is an empty value of that row.
TEST_F(DatasetTest, JsonLinesAbsentOrNullTextIsEmpty) {
  const std::string jsonl = write("d.jsonl",
                                  "{\"title\": \"red\", \"description\": null, \"tag\": \"x\"}\n"
                                  "{\"title\": \"cat\", \"tag\": \"x\"}\n"
                                  "{\"description\": \"dog\", \"tag\": \"x\"}\n"
                                  "{\"title\": \"\", \"description\": null, \"tag\": \"x\"}\n"
                                  "{\"title\": [\"red\"], \"tag\": \"x\"}\n"
                                  "{\"title\": 42, \"description\": \"blue\", \"tag\": \"x\"}\n");
  DatasetOptions options;
  options.read_labels = true;
  expect_error(jsonl, options, jsonl + ":4: all text columns (title, description) are empty, absent or null");
  options.skip_bad_rows = true;
  const TextDataset data = load_text_dataset(jsonl, tokenizer_, nullptr, options);
  EXPECT_EQ(data.raw_text, (std::vector<std::string>{"red", "cat", "dog", "42 blue"}));
  EXPECT_EQ(data.skipped, 2);
  ASSERT_EQ(data.skip_reasons.size(), 2u);
  EXPECT_NE(data.skip_reasons[1].find(":5: text column 'title' is a list, not a text"), std::string::npos)
      << data.skip_reasons[1];
}

// ... but a text column that no row has is a misspelt --text-columns, not a file of empty values.
TEST_F(DatasetTest, JsonLinesTextColumnInNoRowIsAnError) {
  const std::string jsonl = write("d.jsonl",
                                  "{\"title\": \"red\", \"description\": null, \"tag\": \"x\"}\n"
                                  "{\"title\": \"cat\", \"tag\": \"x\"}\n");
  DatasetOptions options;
  options.text_columns = {"title", "descripton"};
  expect_error(jsonl, options, jsonl + ": text column 'descripton' is in no row (absent or null in all 2 readable rows");
  options.text_columns = {"title", "description"};  // null in one row, absent in the other
  expect_error(jsonl, options, "text column 'description' is in no row");
  const std::string some = write("some.jsonl", "{\"title\": \"red\"}\n{\"title\": \"cat\", \"description\": \"\"}\n");
  EXPECT_EQ(load_text_dataset(some, tokenizer_, nullptr, options).raw_text, (std::vector<std::string>{"red", "cat"}));
  // A column counts as seen in a row that is bad for another column (found by fuzz_records).
  const std::string bad_first = write("bad_first.jsonl", "{\"title\": [\"red\"], \"description\": \"x\"}\n"
                                                         "{\"title\": \"cat\"}\n");
  options.skip_bad_rows = true;
  const TextDataset data = load_text_dataset(bad_first, tokenizer_, nullptr, options);
  EXPECT_EQ(data.raw_text, (std::vector<std::string>{"cat"}));
  EXPECT_EQ(data.skipped, 1);
}

// Text that is not UTF-8 is never repaired (café in Latin-1 became "caf" after cleaning) nor skipped as a bad row:
// a wrongly encoded file would lose exactly its rows with accented characters.
TEST_F(DatasetTest, TextThatIsNotUtf8IsAnErrorEvenWithSkipBadRows) {
  const std::string tsv = write("d.tsv", "text\tlabel\nred cat\tx\ncaf\xE9 dog\ty\nblue\tz\n");
  DatasetOptions options;
  options.text_columns = {"text"};
  options.label_column = "label";
  options.read_labels = true;
  options.skip_bad_rows = true;
  expect_error(tsv, options, tsv + ":3: invalid UTF-8 (byte \\xE9 at byte offset 24 of the file, after \"caf\")");
  const std::string jsonl = write("d.jsonl", std::string("{\"text\": \"red\"}\n{\"text\": \"a\0b\"}\n", 32));
  options.label_column = "tag";
  options.read_labels = false;
  expect_error(jsonl, options, jsonl + ":2: not a text file: a NUL byte at byte offset 27 of the file");
}

TEST_F(DatasetTest, MissingJsonKeysAndUnknownLabels) {
  const std::string jsonl = write("d.jsonl", "{\"text\": \"red\", \"tag\": \"a\"}\n{\"tag\": \"a\"}\n{\"text\": \"cat\", \"tag\": \"q\"}\n");
  DatasetOptions options;
  options.text_columns = {"text"};
  options.read_labels = true;
  expect_error(jsonl, options, jsonl + ":2: text column 'text' is absent or null");
  options.skip_bad_rows = true;
  const LabelSet labels({"a", "b"});
  try {
    load_text_dataset(jsonl, tokenizer_, &labels, options);
    ADD_FAILURE() << "an unknown label must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown tag 'q' in " + jsonl + ":3"), std::string::npos) << e.what();
  }
}

// A message suggests only flags the running command has (DatasetOptions::command_flags): tokenize has no
// --skip-bad-rows, evaluate and predict no --multi-label (the model says it).
TEST_F(DatasetTest, HintsNameOnlyTheCommandsFlags) {
  const std::string tsv = write("d.tsv", "text\tlabel\nred\t[\"x\"]\n\tx\n");
  const std::string jsonl = write("d.jsonl", "{\"text\": \"red\", \"label\": [\"x\"]}\n");
  DatasetOptions options;
  options.text_columns = {"body"};
  options.label_column = "label";
  options.read_labels = true;
  auto message = [&](const std::string& path) {
    try {
      load_text_dataset(path, tokenizer_, nullptr, options);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "no error for " << path;
    return std::string();
  };
  for (const auto& flags : {std::vector<std::string>{}, kTrainFlags}) {
    SCOPED_TRACE(flags.size());
    options.command_flags = flags;
    const bool all = !flags.empty();
    options.text_columns = {"body"};
    const std::string missing = message(tsv);
    EXPECT_NE(missing.find("missing text column 'body' (columns: text, label"), std::string::npos) << missing;
    EXPECT_EQ(missing.find("--text-columns") != std::string::npos, all) << missing;
    options.text_columns = {"text"};
    options.label_column = "tag";
    EXPECT_EQ(message(tsv).find("--label-column") != std::string::npos, all);
    options.label_column = "label";
    const std::string list = message(jsonl);
    EXPECT_NE(list.find(":1: label column 'label' is a list"), std::string::npos) << list;
    EXPECT_EQ(list.find("--multi-label") != std::string::npos, all) << list;
    const std::string bad = message(tsv);
    EXPECT_NE(bad.find(":3: text column 'text' is empty"), std::string::npos) << bad;
    EXPECT_EQ(bad.find("--skip-bad-rows") != std::string::npos, all) << bad;
    if (!all) {
      EXPECT_EQ(bad.find("--"), std::string::npos) << bad;
    }
  }
}

// A first row the format cannot read says the format may be wrong, not that --skip-bad-rows would skip it.
TEST_F(DatasetTest, AnUnreadableFirstRowQuestionsTheFormat) {
  const std::string csv_named_jsonl = write("d.jsonl", "title,description,tag\nred,cat,x\n");
  DatasetOptions options;
  options.command_flags = kTrainFlags;
  expect_error(csv_named_jsonl, options,
               ":1: invalid JSON: syntax error while parsing value - invalid literal; last read: 'ti' (at byte 2 of the "
               "line) (the first row already: is the file JSON Lines, as its extension says? --format chooses the "
               "format)");
  options.format = "jsonl";
  expect_error(csv_named_jsonl, options, "(the first row already: is the file JSON Lines, as --format says?)");
  // Later rows are bad rows like any other, and so is a first row the format reads with a value of the wrong type.
  const std::string later = write("later.jsonl", "{\"title\": \"red\"}\nnot json\n");
  expect_error(later, options, later + ":2: invalid JSON: ");
  expect_error(later, options, "(--skip-bad-rows skips such rows)");
  const std::string object = write("object.jsonl", "{\"title\": {\"en\": \"red\"}}\n");
  expect_error(object, options, object + ":1: column 'title' is an object (expected a string, a number, a boolean or an "
                                         "array of them) (--skip-bad-rows skips such rows)");
  // A column the first row lacks, or holds as a list where one label is expected, names the flag to check, not
  // --skip-bad-rows (which would skip every row); a later row's is a bad row.
  const std::string misnamed = write("misnamed.jsonl", "{\"text\": \"red\", \"tag\": \"x\"}\n");
  DatasetOptions jsonl = options;
  jsonl.text_columns = {"txt"};
  expect_error(misnamed, jsonl, misnamed + ":1: text column 'txt' is absent or null (the first row already: check "
                                           "--text-columns)");
  const std::string lists = write("lists.jsonl", "{\"title\": \"red\", \"tag\": [\"x\"]}\n");
  options.read_labels = true;
  expect_error(lists, options, lists + ":1: label column 'tag' is a list (pass --multi-label for label sets) (the "
                                       "first row already)");
  const std::string second = write("second.jsonl", "{\"title\": \"red\", \"tag\": \"x\"}\n{\"tag\": \"y\"}\n");
  expect_error(second, options, second + ":2: all text columns (title, description) are empty, absent or null "
                                         "(--skip-bad-rows skips such rows)");
  options.read_labels = false;
  // CSV: a first row with another number of fields than the header.
  const std::string tsv_named_csv = write("tabs.csv", "title,description\nred\tcat,x,y\n");
  options.format = "auto";
  expect_error(tsv_named_csv, options, ":2: has 3 fields, the header has 2 (the first row already: is the file CSV, as "
                                       "its extension says? --format chooses the format)");
}

// A header of one column holding another delimiter says so instead of only listing that one column.
TEST_F(DatasetTest, AHeaderOfOneColumnNamesTheDelimiter) {
  DatasetOptions options;
  options.command_flags = kTrainFlags;
  expect_error(write("tabs.csv", "title\tdescription\ttag\nred\tcat\tx\n"), options,
               "missing text column 'title' (columns: title\\x09description\\x09tag; the header is one column: the "
               "file is tab-separated, read it as TSV (--format or a .tsv name))");
  expect_error(write("commas.tsv", "title,description,tag\nred,cat,x\n"), options,
               "the header is one column: the file is comma-separated, read it as CSV (--format or a .csv name)");
  expect_error(write("semicolons.csv", "title;description;tag\nred;cat;x\n"), options,
               "the header is one column: fields separated by ';' are neither CSV nor TSV, save the file with commas "
               "or tabs");
  // JSON Lines read as TSV or CSV: named as such (as TSV the advice was "comma-separated, read it as CSV").
  const std::string lines = "{\"title\": \"red\", \"description\": \"cat\", \"tag\": \"x\"}\n";
  for (const char* name : {"lines.tsv", "lines.csv"}) {
    expect_error(write(name, lines), options,
                 "; the first line is a JSON object: the file is JSON Lines, read it as such (--format jsonl or a "
                 ".jsonl name)");
  }
}

TEST_F(DatasetTest, TruncationIsCountedAndRowsStream) {
  const std::string csv = write("d.csv", "title,description\nred green blue cat dog,red\nred,cat\n");
  DatasetOptions options;
  options.max_length = 4;
  TextRowReader reader(csv, tokenizer_, options);
  TextRow row;
  ASSERT_TRUE(reader.next(&row));
  EXPECT_TRUE(row.truncated);
  EXPECT_EQ(row.example.ids, (std::vector<int32_t>{2, 5, 6, 3}));
  EXPECT_EQ(row.line, 2);
  ASSERT_TRUE(reader.next(&row));
  EXPECT_FALSE(row.truncated);
  EXPECT_FALSE(reader.next(&row));
  EXPECT_EQ(reader.truncated(), 1);
  EXPECT_EQ(reader.rows_read(), 2);
  options.max_length = 1;
  EXPECT_THROW(TextRowReader(csv, tokenizer_, options), Error);
}

TEST(ParseColumnList, SplitsAndTrims) {
  EXPECT_EQ(parse_column_list("title, description", "--text-columns"),
            (std::vector<std::string>{"title", "description"}));
  EXPECT_THROW(parse_column_list("title,,body", "--text-columns"), Error);
  EXPECT_THROW(parse_column_list("", "--text-columns"), Error);
  EXPECT_THROW(parse_column_list(" , ", "--text-columns"), Error);
  try {
    parse_column_list("title, body,title", "--text-columns");
    ADD_FAILURE() << "a column named twice must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--text-columns 'title, body,title' names column 'title' twice"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace bertrain

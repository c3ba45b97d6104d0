// The streaming record reader (records.h): format choice, CSV / TSV / JSON Lines rows and their errors, files
// larger than the read chunk with characters and quoted fields cut by chunk ends, agreement with read_csv,
// and the CSV state machine fed in chunks of a few bytes against the same text read whole.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/utf8.h"
#include "data/chunked_input.h"
#include "data/csv.h"
#include "data/csv_parser.h"
#include "data/records.h"
#include "tests/data_dir.h"
#include "tests/temp_dir.h"

namespace bertrain {
namespace {

using testing::TempDir;

std::string write_file(const TempDir& dir, const std::string& name, const std::string& content) {
  const std::string path = dir.path(name);
  std::ofstream out(path, std::ios::binary);
  out << content;
  return path;
}

std::vector<Record> read_all(const std::string& path, RecordFormat format, const std::vector<std::string>& columns) {
  RecordReader reader(path, format, columns);
  std::vector<Record> records;
  Record record;
  while (reader.next(&record)) records.push_back(record);
  return records;
}

// Expects `run` to throw an Error whose message contains every fragment.
void expect_error(const std::function<void()>& run, std::initializer_list<std::string> fragments) {
  try {
    run();
    ADD_FAILURE() << "no error; expected one containing '" << *fragments.begin() << "'";
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& f : fragments)
      EXPECT_NE(message.find(f), std::string::npos) << "'" << f << "' not in: " << message;
  }
}

// The texts of a good row's fields, "<absent>" for a field that is not present.
std::vector<std::string> texts(const Record& r) {
  EXPECT_EQ(r.error, "") << "line " << r.line;
  std::vector<std::string> out;
  for (const RecordField& f : r.fields) out.push_back(f.present ? f.text : "<absent>");
  return out;
}

using Texts = std::vector<std::string>;

TEST(RecordFormat, FromExtensionCaseInsensitive) {
  EXPECT_EQ(record_format("data/train.csv", ""), RecordFormat::kCsv);
  EXPECT_EQ(record_format("TRAIN.CSV", "auto"), RecordFormat::kCsv);
  EXPECT_EQ(record_format("x.tsv", "auto"), RecordFormat::kTsv);
  EXPECT_EQ(record_format("x.Tab", ""), RecordFormat::kTsv);
  EXPECT_EQ(record_format("x.jsonl", "auto"), RecordFormat::kJsonl);
  EXPECT_EQ(record_format("dir.v2/x.NDJSON", ""), RecordFormat::kJsonl);
  EXPECT_STREQ(record_format_name(RecordFormat::kCsv), "csv");
  EXPECT_STREQ(record_format_name(RecordFormat::kTsv), "tsv");
  EXPECT_STREQ(record_format_name(RecordFormat::kJsonl), "jsonl");
}

TEST(RecordFormat, FlagOverridesExtension) {
  EXPECT_EQ(record_format("rows.txt", "tsv"), RecordFormat::kTsv);
  EXPECT_EQ(record_format("rows.csv", "jsonl"), RecordFormat::kJsonl);
  EXPECT_EQ(record_format("rows", "csv"), RecordFormat::kCsv);
}

TEST(RecordFormat, Errors) {
  TempDir dir("bertrain_records");
  for (const std::string name : {"rows.txt", "rows", "rows.json", "csv"}) {
    const std::string path = write_file(dir, name, "a\n1\n");
    expect_error([&] { record_format(path, "auto"); },
                 {path + ": cannot tell the format from the extension; pass --format csv|tsv|jsonl"});
  }
  // A path that is no file is that, not a question of format.
  expect_error([&] { record_format(dir.path("missing"), "auto"); },
               {"cannot open dataset file '" + dir.path("missing") + "': No such file or directory"});
  expect_error([&] { record_format(dir.path().string(), "auto"); },
               {"cannot open dataset file '" + dir.path().string() + "': it is a directory, not a file"});
  expect_error([] { record_format("rows.csv", "xml"); }, {"--format must be auto, csv, tsv or jsonl, got 'xml'"});
  expect_error([] { record_format("rows.csv", "CSV"); }, {"got 'CSV'"});
}

TEST(RecordCsv, QuotesNewlinesCrlfBomAndAMissingColumn) {
  TempDir dir("bertrain_records");
  const std::string path = write_file(dir, "d.csv",
                                      "\xEF\xBB\xBFid,title,text\r\n"
                                      "1,\"a, b\",\"line one\r\nline \"\"two\"\"\"\r\n"
                                      "2,plain,5\" screen\r\n"
                                      "3,\"\",\"tab\there\"\r\n");
  RecordReader reader(path, RecordFormat::kCsv, {"text", "id", "tag"});
  EXPECT_EQ(reader.path(), path);
  EXPECT_EQ(reader.format(), RecordFormat::kCsv);
  EXPECT_EQ(reader.header(), (Texts{"id", "title", "text"}));  // the BOM is not part of "id"
  EXPECT_TRUE(reader.has_column(0));
  EXPECT_TRUE(reader.has_column(1));
  EXPECT_FALSE(reader.has_column(2));
  expect_error([&] { reader.has_column(3); }, {"only 3 columns requested"});
  Record r;
  ASSERT_TRUE(reader.next(&r));
  EXPECT_EQ(r.line, 2);
  EXPECT_EQ(texts(r), (Texts{"line one\r\nline \"two\"", "1", "<absent>"}));
  ASSERT_TRUE(reader.next(&r));
  EXPECT_EQ(r.line, 4);  // the quoted newline moved the reader on
  EXPECT_EQ(texts(r), (Texts{"5\" screen", "2", "<absent>"}));
  EXPECT_FALSE(r.fields[0].is_list);
  ASSERT_TRUE(reader.next(&r));
  EXPECT_EQ(r.line, 5);
  EXPECT_EQ(texts(r), (Texts{"tab\there", "3", "<absent>"}));
  EXPECT_FALSE(reader.next(&r));
  EXPECT_FALSE(reader.next(&r));  // stays at the end
}

// A column asked for twice (the text column as the id, as `predict --id-column title` asks) gives its value to both,
// row after row: the reader hands the row's field over to its last use and copies it for the others.
TEST(RecordCsv, AColumnAskedForTwiceFillsBoth) {
  TempDir dir("bertrain_records");
  const std::string path = write_file(dir, "d.csv", "title,tag\nfirst title,a\n" + std::string(100000, 'x') + ",b\nshort,c\n");
  EXPECT_EQ(read_all(path, RecordFormat::kCsv, {"title", "tag", "title"}).size(), 3u);
  RecordReader reader(path, RecordFormat::kCsv, {"title", "tag", "title"});
  Record r;
  ASSERT_TRUE(reader.next(&r));
  EXPECT_EQ(texts(r), (Texts{"first title", "a", "first title"}));
  ASSERT_TRUE(reader.next(&r));
  EXPECT_EQ(texts(r), (Texts{std::string(100000, 'x'), "b", std::string(100000, 'x')}));
  ASSERT_TRUE(reader.next(&r));
  EXPECT_EQ(texts(r), (Texts{"short", "c", "short"}));
}

TEST(RecordTsv, TabDelimiterWithQuotesAsPythonsCsvModule) {
  TempDir dir("bertrain_records");
  const std::string path = write_file(dir, "d.tsv",
                                      "\xEF\xBB\xBFid\ttext\ttag\r\n"
                                      "1\t\"has\ta tab\nand a newline\"\tnlp\r\n"
                                      "2\ta, b, \"c\"\tcv\n"
                                      "3\t\"p \"\"q\"\"\"\t\n");
  RecordReader reader(path, RecordFormat::kTsv, {"id", "text", "tag"});
  EXPECT_EQ(reader.header(), (Texts{"id", "text", "tag"}));
  const std::vector<Record> rows = [&] {
    std::vector<Record> all;
    Record r;
    while (reader.next(&r)) all.push_back(r);
    return all;
  }();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(texts(rows[0]), (Texts{"1", "has\ta tab\nand a newline", "nlp"}));
  EXPECT_EQ(texts(rows[1]), (Texts{"2", "a, b, \"c\"", "cv"}));  // commas and a quote mid-field are data
  EXPECT_EQ(texts(rows[2]), (Texts{"3", "p \"q\"", ""}));        // an empty last field is present, empty
  EXPECT_EQ(rows[0].line, 2);
  EXPECT_EQ(rows[1].line, 4);
  EXPECT_EQ(rows[2].line, 5);
}

TEST(RecordCsv, WrongFieldCountsAreRowErrorsAndBlankLinesAreSkipped) {
  TempDir dir("bertrain_records");
  for (const char delimiter : {',', '\t'}) {
    std::string text =
        "a,b,c,d\n"
        "1,2,3,4\n"
        "\n"
        "1,2,3\n"
        "\"x\ny\",2,3,4,5\n"
        "\r\n"
        "5,6,7,8\n"
        "9\n"
        "1,2,3,4,\n";
    std::replace(text.begin(), text.end(), ',', delimiter);
    const std::string path = write_file(dir, delimiter == ',' ? "d.csv" : "d.tsv", text);
    const std::vector<Record> rows =
        read_all(path, delimiter == ',' ? RecordFormat::kCsv : RecordFormat::kTsv, {"d", "a"});
    ASSERT_EQ(rows.size(), 6u);
    EXPECT_EQ(rows[0].line, 2);
    EXPECT_EQ(texts(rows[0]), (Texts{"4", "1"}));
    EXPECT_EQ(rows[1].line, 4);
    EXPECT_EQ(rows[1].error, "has 3 fields, the header has 4");
    EXPECT_TRUE(rows[1].fields.empty());
    EXPECT_EQ(rows[2].line, 5);
    EXPECT_EQ(rows[2].error, "has 5 fields, the header has 4");
    EXPECT_EQ(rows[3].line, 8);
    EXPECT_EQ(texts(rows[3]), (Texts{"8", "5"}));
    EXPECT_EQ(rows[4].line, 9);
    EXPECT_EQ(rows[4].error, "has 1 field, the header has 4");
    EXPECT_TRUE(rows[4].malformed);
    // A trailing delimiter is said as such, and says nothing against the format (no "is the file CSV?" then).
    EXPECT_EQ(rows[5].error, std::string("has 5 fields, the header has 4 (the line ends with a ") +
                                 (delimiter == ',' ? "comma" : "tab") + ", which starts one more, empty, field)");
    EXPECT_FALSE(rows[5].malformed);
  }
}

TEST(RecordCsv, StructuralErrorsThrowWithFileLineAndColumn) {
  TempDir dir("bertrain_records");
  const std::string unterminated = write_file(dir, "u.csv", "a,b\n1,2\n3,\"never closed\n4,5\n");
  RecordReader reader(unterminated, RecordFormat::kCsv, {"a"});
  Record r;
  ASSERT_TRUE(reader.next(&r));  // the rows before the broken one still come
  EXPECT_EQ(texts(r), (Texts{"1"}));
  expect_error([&] { reader.next(&r); },
               {unterminated + ":3:", "unterminated quoted field starting at line 3", "character column 3"});

  const std::string after_quote = write_file(dir, "q.tsv", "a\tb\n\xC3\xA9\t\"x\ny\" z\n");
  RecordReader tsv(after_quote, RecordFormat::kTsv, {"a"});
  expect_error([&] { tsv.next(&r); }, {after_quote + ":3:", "unexpected character ' '",
                                       "opened at line 2, character column 3", "at line 3, character column 3"});
}

TEST(RecordCsv, HeaderErrorsNameTheFile) {
  TempDir dir("bertrain_records");
  for (const std::string text : {"", "\n\r\n", "\xEF\xBB\xBF"}) {
    const std::string path = write_file(dir, "empty.csv", text);
    expect_error([&] { RecordReader(path, RecordFormat::kCsv, {"a"}); },
                 {path + ": empty file (expected a header row)"});
  }
  const std::string blank_first = write_file(dir, "blank.csv", "\na,b\n1,2\n");
  expect_error([&] { RecordReader(blank_first, RecordFormat::kCsv, {"a"}); }, {blank_first + ":1: line 1 is empty"});
  const std::string duplicate = write_file(dir, "dup.tsv", "id\ttag\tid\n1\t2\t3\n");
  expect_error([&] { RecordReader(duplicate, RecordFormat::kTsv, {"id"}); },
               {duplicate + ":1: duplicate column name 'id'", "field 3"});
  // A header-only file is no error: it has no rows.
  const std::string header_only = write_file(dir, "h.csv", "a,b\n");
  EXPECT_TRUE(read_all(header_only, RecordFormat::kCsv, {"a"}).empty());
}

TEST(RecordJsonl, ValuesNullsMissingKeysAndArrays) {
  TempDir dir("bertrain_records");
  const std::string path = write_file(dir, "d.jsonl",
                                      "{\"text\": \"caf\\u00e9 \\\"q\\\"\\tx\", \"tag\": \"nlp\", \"n\": 3}\n"
                                      "{\"text\": \"t\", \"tag\": null, \"n\": -2.5, \"ok\": true}\n"
                                      "{\"text\": \"  spaced  \", \"tag\": [\"cv\", \"nlp\", 7, false], \"n\": 0}\n"
                                      "{\"tag\": [], \"ok\": false, \"extra\": {\"nested\": 1}}\n");
  RecordReader reader(path, RecordFormat::kJsonl, {"text", "tag", "n", "ok"});
  EXPECT_TRUE(reader.header().empty());
  EXPECT_TRUE(reader.has_column(3));
  std::vector<Record> rows;
  Record r;
  while (reader.next(&r)) rows.push_back(r);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(texts(rows[0]), (Texts{"caf\xC3\xA9 \"q\"\tx", "nlp", "3", "<absent>"}));
  EXPECT_EQ(texts(rows[1]), (Texts{"t", "<absent>", "-2.5", "true"}));  // null is absent
  EXPECT_EQ(texts(rows[2])[0], "  spaced  ");                           // strings as they are
  EXPECT_TRUE(rows[2].fields[1].present);
  EXPECT_TRUE(rows[2].fields[1].is_list);
  EXPECT_EQ(rows[2].fields[1].items, (Texts{"cv", "nlp", "7", "false"}));
  EXPECT_FALSE(rows[2].fields[0].is_list);
  EXPECT_EQ(texts(rows[2])[2], "0");
  EXPECT_FALSE(rows[3].fields[0].present);  // missing key
  EXPECT_TRUE(rows[3].fields[1].present);   // an empty array is present, a list with no items
  EXPECT_TRUE(rows[3].fields[1].is_list);
  EXPECT_TRUE(rows[3].fields[1].items.empty());
  EXPECT_EQ(rows[3].fields[3].text, "false");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(rows[static_cast<std::size_t>(i)].line, i + 1);
}

TEST(RecordJsonl, BadLinesAreRowErrorsAndLaterLinesStillRead) {
  TempDir dir("bertrain_records");
  const std::string path = write_file(dir, "d.jsonl",
                                      "{\"text\": \"a\"\n"
                                      "[1, 2]\n"
                                      "\"just a string\"\n"
                                      "{\"text\": {\"k\": 1}}\n"
                                      "{\"text\": \"b\", \"tag\": [\"x\", [\"y\"]]}\n"
                                      "{\"text\": \"c\", \"tag\": [\"x\", null]}\n"
                                      "{\"text\": \"d\", \"tag\": \"ok\"}\n"
                                      "{\"text\": \"e\", \"other\": {\"ignored\": [1]}}\n"
                                      "{\"text\": nope}\n");
  const std::vector<Record> rows = read_all(path, RecordFormat::kJsonl, {"text", "tag"});
  ASSERT_EQ(rows.size(), 9u);
  for (std::size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i].line, static_cast<int>(i) + 1);
  EXPECT_EQ(rows[0].error.rfind("invalid JSON: ", 0), 0u) << rows[0].error;
  EXPECT_NE(rows[0].error.find("unexpected end of input"), std::string::npos) << rows[0].error;
  EXPECT_EQ(rows[1].error, "expected a JSON object, found an array");
  EXPECT_EQ(rows[2].error, "expected a JSON object, found a string");
  EXPECT_EQ(rows[3].error.rfind("column 'text' is an object", 0), 0u) << rows[3].error;
  EXPECT_EQ(rows[4].error.rfind("column 'tag': element 2 of its array is an array", 0), 0u) << rows[4].error;
  EXPECT_EQ(rows[5].error.rfind("column 'tag': element 2 of its array is null", 0), 0u) << rows[5].error;
  for (std::size_t i = 0; i < 6; ++i) EXPECT_TRUE(rows[i].fields.empty()) << i;
  EXPECT_EQ(texts(rows[6]), (Texts{"d", "ok"}));
  EXPECT_EQ(texts(rows[7]), (Texts{"e", "<absent>"}));  // unrequested keys may hold anything
  EXPECT_EQ(rows[8].error.rfind("invalid JSON: ", 0), 0u) << rows[8].error;
  EXPECT_LT(rows[8].error.size(), 200u);
}

// An integer beyond 64 bits is kept by the JSON parser only as a double, so two such labels would read as one text
// (1e+26): refused as a bad row, saying to quote it. Integers within 64 bits and ordinary reals read as before.
TEST(RecordJsonl, IntegersTooLargeToReadExactlyAreBadRows) {
  TempDir dir("bertrain_records");
  const std::string path = write_file(dir, "d.jsonl",
                                      "{\"text\": \"a\", \"tag\": 100000000000000000000000001}\n"
                                      "{\"text\": \"b\", \"tag\": [\"x\", -100000000000000000000000000]}\n"
                                      "{\"text\": \"c\", \"tag\": 18446744073709551615}\n"
                                      "{\"text\": \"d\", \"tag\": -9223372036854775808}\n"
                                      "{\"text\": \"e\", \"tag\": 2.5}\n");
  const std::vector<Record> rows = read_all(path, RecordFormat::kJsonl, {"text", "tag"});
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0].error, "column 'tag': 1e+26 is a number too large to read exactly (write it as a string)");
  EXPECT_EQ(rows[1].error, "column 'tag': element 2 of its array, -1e+26, is a number too large to read exactly "
                           "(write it as a string)");
  EXPECT_EQ(texts(rows[2]), (Texts{"c", "18446744073709551615"}));
  EXPECT_EQ(texts(rows[3]), (Texts{"d", "-9223372036854775808"}));
  EXPECT_EQ(texts(rows[4]), (Texts{"e", "2.5"}));
}

TEST(RecordJsonl, LongInvalidLineGivesAShortMessage) {
  TempDir dir("bertrain_records");
  const std::string path = write_file(dir, "d.jsonl", "{\"text\": \"" + std::string(100000, 'x') + "\n");
  const std::vector<Record> rows = read_all(path, RecordFormat::kJsonl, {"text"});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].error.rfind("invalid JSON: ", 0), 0u) << rows[0].error.substr(0, 300);
  EXPECT_LT(rows[0].error.size(), 300u);
}

// Found by fuzz_records: nlohmann's "last read: '...'" could end inside a character (a CJK one): escaped, the
// message stays one line of valid UTF-8.
TEST(RecordJsonl, ErrorMessagesStayValidUtf8) {
  TempDir dir("bertrain_records");
  const std::string path = write_file(dir, "d.jsonl", "{\"text\": \"b\",\xe6\x97\xa5: 1}\n{\"text\": \"b\"\x01}\n");
  const std::vector<Record> rows = read_all(path, RecordFormat::kJsonl, {"text", "label"});
  ASSERT_EQ(rows.size(), 2u);
  for (const Record& r : rows) {
    EXPECT_FALSE(r.error.empty());
    EXPECT_EQ(escape_for_message(r.error), r.error);
  }
  EXPECT_NE(rows[0].error.find("\\xE6"), std::string::npos) << rows[0].error;
}

TEST(RecordJsonl, BlankLinesCrlfAndBom) {
  TempDir dir("bertrain_records");
  const std::string path = write_file(dir, "d.jsonl",
                                      "\xEF\xBB\xBF{\"text\": \"first\"}\r\n"
                                      "\r\n"
                                      "   \t \n"
                                      "\n"
                                      "{\"text\": \"caf\xC3\xA9, \xE2\x82\xAC\"}\r\n"
                                      "{\"text\": \"last, no newline\"}");
  const std::vector<Record> rows = read_all(path, RecordFormat::kJsonl, {"text"});
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].line, 1);
  EXPECT_EQ(texts(rows[0]), (Texts{"first"}));
  EXPECT_EQ(rows[1].line, 5);
  EXPECT_EQ(texts(rows[1]), (Texts{"caf\xC3\xA9, \xE2\x82\xAC"}));
  EXPECT_EQ(rows[2].line, 6);
  EXPECT_EQ(texts(rows[2]), (Texts{"last, no newline"}));
  // The BOM is no text even on a line of its own (nlohmann would skip it only before a value).
  const std::vector<Record> bom_line =
      read_all(write_file(dir, "b.jsonl", "\xEF\xBB\xBF\r\n{\"text\": \"x\"}\n"), RecordFormat::kJsonl, {"text"});
  ASSERT_EQ(bom_line.size(), 1u);
  EXPECT_EQ(bom_line[0].line, 2);
  EXPECT_EQ(texts(bom_line[0]), (Texts{"x"}));
  // An empty file has no rows and no error.
  EXPECT_TRUE(read_all(write_file(dir, "e.jsonl", ""), RecordFormat::kJsonl, {"text"}).empty());
}

// A file that is not UTF-8 text is an Error in every format, naming the line and the byte offset in the file
// (not a bad row: the whole file's encoding is wrong), wherever the read chunks end.
TEST(RecordReader, TextThatIsNotUtf8IsAnErrorInEveryFormat) {
  TempDir dir("bertrain_records");
  const struct {
    const char* name;
    RecordFormat format;
    std::string text;
  } files[] = {
      {"d.csv", RecordFormat::kCsv, "text,label\nfirst,a\n\"caf\xE9\",b\n"},
      {"d.tsv", RecordFormat::kTsv, "text\tlabel\nfirst\ta\n\"caf\xE9\"\tb\n"},
      {"d.jsonl", RecordFormat::kJsonl, "{\"text\": \"first\"}\n\n{\"text\": \"caf\xE9\"}\n"},
  };
  for (const auto& f : files) {
    SCOPED_TRACE(f.name);
    const std::string path = write_file(dir, f.name, f.text);
    const std::size_t offset = f.text.find('\xE9');
    expect_error([&] { read_all(path, f.format, {"text"}); },
                 {path + ":3: invalid UTF-8 (byte \\xE9 at byte offset " + std::to_string(offset) + " of the file",
                  "iconv -f latin1 -t utf-8 " + path});
  }
  // Past the first chunk, and a NUL byte.
  std::string big = "text\n";
  while (big.size() < 3 * ChunkedInput::kChunkSize) big += "plain row\n";
  const std::size_t at = big.size();
  const std::string nul_path = write_file(dir, "big.csv", big + std::string("a\0b\n", 4));
  expect_error([&] { read_all(nul_path, RecordFormat::kCsv, {"text"}); },
               {nul_path + ":" + std::to_string(std::count(big.begin(), big.end(), '\n') + 1) +
                    ": not a text file: a NUL byte at byte offset " + std::to_string(at + 1) + " of the file, after \"a\""});
}

// ---- Files larger than the read chunk --------------------------------------------------------------------

constexpr int kIdBase = 1000000;  // every id has 7 digits, so a row's length does not depend on which row it is

struct Special {
  std::string raw;     // the text field as written in the file
  std::string value;   // what reading it must give
  std::string marker;  // a byte sequence of the row ...
  std::size_t delta;   // ... whose byte at marker + delta is made the last byte of a chunk
};

struct BigFile {
  std::string content;
  struct Row {
    int line;
    std::string id, text;
  };
  std::vector<Row> rows;
};

// Rows made by make_row(id, raw text), with specials[k] placed across the end of chunk k + 1; over 3 MiB in all.
BigFile big_file(const std::string& head,
                 const std::function<std::string(const std::string&, const std::string&)>& make_row,
                 const std::vector<Special>& specials) {
  const std::size_t chunk = ChunkedInput::kChunkSize;
  BigFile f;
  f.content = head;
  int line = head.empty() ? 1 : 2, id = kIdBase;
  auto add = [&](const std::string& raw, const std::string& value) {
    const std::string row = make_row(std::to_string(id), raw);
    f.rows.push_back({line, std::to_string(id), value});
    f.content += row;
    line += static_cast<int>(std::count(row.begin(), row.end(), '\n'));
    ++id;
  };
  auto add_plain = [&] {
    const std::string text = "na\xC3\xAFve generated row " + std::to_string(id) + " with some plain words";
    add(text, text);
  };
  const std::size_t pad_base = make_row(std::to_string(id), "").size();
  for (std::size_t k = 0; k < specials.size(); ++k) {
    const Special& s = specials[k];
    const std::string row = make_row(std::to_string(id), s.raw);
    const std::size_t start = (k + 1) * chunk - 1 - (row.find(s.marker) + s.delta);
    while (f.content.size() + 300 < start) add_plain();
    const std::string pad(start - f.content.size() - pad_base, 'x');
    add(pad, pad);
    EXPECT_EQ(f.content.size(), start);
    add(s.raw, s.value);
  }
  while (f.content.size() < (std::size_t{3} << 20) + 100000) add_plain();  // over 3 MiB
  return f;
}

void expect_big_file_reads_back(const BigFile& f, const std::string& path, RecordFormat format,
                                const std::vector<std::string>& straddlers) {
  // The generator put each straddler across a chunk end.
  for (std::size_t k = 0; k < straddlers.size(); ++k) {
    const std::size_t end = (k + 1) * ChunkedInput::kChunkSize;
    EXPECT_EQ(f.content.substr(end - 1, straddlers[k].size()), straddlers[k]) << "chunk " << k + 1;
  }
  RecordReader reader(path, format, {"text", "id"});
  Record r;
  std::size_t n = 0;
  while (reader.next(&r)) {
    ASSERT_LT(n, f.rows.size());
    const BigFile::Row& want = f.rows[n++];
    ASSERT_EQ(r.error, "") << "line " << r.line;
    ASSERT_EQ(r.line, want.line) << "row " << n;
    ASSERT_EQ(r.fields[0].text, want.text) << "line " << want.line;
    ASSERT_EQ(r.fields[1].text, want.id) << "line " << want.line;
  }
  EXPECT_EQ(n, f.rows.size());
}

TEST(RecordLargeFile, CsvAndTsvAcrossChunkEnds) {
  TempDir dir("bertrain_records");
  const std::vector<Special> specials = {
      // é's two bytes in two chunks, inside a quoted field with a comma
      {"\"caf\xC3\xA9 au lait, quoted\"", "caf\xC3\xA9 au lait, quoted", "\xC3\xA9", 0},
      // an emoji cut 2 | 2, then a newline inside the quotes
      {"\"smile \xF0\x9F\x98\x80\nsecond line\"", "smile \xF0\x9F\x98\x80\nsecond line", "\xF0", 1},
      // a doubled quote cut between its two quotes
      {"\"say \"\"hi\"\"\tthere\"", "say \"hi\"\tthere", "\"\"", 0},
      // a euro sign cut 1 | 2 in an unquoted field
      {"plain \xE2\x82\xAC field", "plain \xE2\x82\xAC field", "\xE2", 0},
  };
  for (const char delimiter : {',', '\t'}) {
    const std::string d(1, delimiter);
    const BigFile f = big_file(
        "id" + d + "text\n", [&](const std::string& id, const std::string& raw) { return id + d + raw + "\n"; },
        specials);
    ASSERT_GT(f.content.size(), std::size_t{3} << 20);
    const bool csv = delimiter == ',';
    const std::string path = write_file(dir, csv ? "big.csv" : "big.tsv", f.content);
    expect_big_file_reads_back(f, path, csv ? RecordFormat::kCsv : RecordFormat::kTsv,
                               {"\xC3\xA9", "\x9F\x98", "\"\"", "\xE2\x82"});
  }
}

TEST(RecordLargeFile, JsonlAcrossChunkEnds) {
  TempDir dir("bertrain_records");
  const std::vector<Special> specials = {
      {"caf\xC3\xA9 au lait", "caf\xC3\xA9 au lait", "\xC3\xA9", 0},                     // cut 1 | 1
      {"smile \xF0\x9F\x98\x80 \\n done", "smile \xF0\x9F\x98\x80 \n done", "\xF0", 2},  // cut 3 | 1
      {"a line ending at the chunk end", "a line ending at the chunk end", "\n", 0},
      {"CRLF cut \xE2\x82\xAC", "CRLF cut \xE2\x82\xAC", "\"}", 2},  // the row's CR ends the chunk, LF starts the next
  };
  const BigFile f = big_file(
      "",
      [](const std::string& id, const std::string& raw) {
        return "{\"id\": " + id + ", \"tags\": [\"x\", 1], \"text\": \"" + raw + "\"}\r\n";
      },
      specials);
  const std::string path = write_file(dir, "big.jsonl", f.content);
  expect_big_file_reads_back(f, path, RecordFormat::kJsonl, {"\xC3\xA9", "\x98\x80", "\n{", "\r\n"});
}

// ---- Agreement with read_csv ----------------------------------------------------------------------------

// Made-With-ML's layout and its quirks: quoted titles with commas, a description ending in a quoted newline,
// doubled quotes, non-ASCII text, an empty field.
const char kMadeWithMlLike[] =
    "id,created_on,title,description,tag\n"
    "6,2020-02-20 06:43:18,Comparison between YOLO and RCNN on real world videos,Bringing theory to experiment "
    "is cool.,computer-vision\n"
    "7,2020-02-20 06:47:21,\"Show, Infer & Tell: Contextual Inference for Creative Captioning\",\"The beauty of "
    "the work lies in the way it architects the fundamental idea.\n\",computer-vision\n"
    "9,2020-02-24 16:24:45,Awesome Graph Classification,\"A collection of important graph embedding, "
    "classification and representation learning papers with implementations.\",other\n"
    "15,2020-02-28 23:55:26,Graph Wavelet Neural Network,\"A PyTorch implementation of \"\"Graph Wavelet Neural "
    "Network\"\" (ICLR 2019) \",natural-language-processing\n"
    "19,2020-03-03 13:54:31,Diffusion to Vector,Reference implementation of Diffusion2Vec (Complenet 2018) "
    "built on Gensim and NetworkX. ,other\n"
    "25,2020-03-07 23:11:58,Attention Is All You Need (Na\xC3\xAFve r\xC3\xA9sum\xC3\xA9 \xE2\x80\x94 \xE5\x9F\xBA"
    "\xE4\xBA\x8E),\"Multi-line\r\ndescription, CRLF inside quotes\",\n"
    "28,2020-03-08 00:00:00,\"\",\"\"\"quoted\"\" start\",mlops\n";

void expect_agrees_with_read_csv(const std::string& path) {
  const CsvTable table = read_csv(path);
  RecordReader reader(path, RecordFormat::kCsv, table.header);
  EXPECT_EQ(reader.header(), table.header);
  Record r;
  std::size_t n = 0;
  while (reader.next(&r)) {
    ASSERT_LT(n, table.rows.size());
    EXPECT_EQ(r.line, table.row_lines[n]);
    EXPECT_EQ(texts(r), table.rows[n]) << "line " << r.line;
    ++n;
  }
  EXPECT_EQ(n, table.rows.size());
}

TEST(RecordCsv, AgreesWithReadCsv) {
  TempDir dir("bertrain_records");
  const std::string path = write_file(dir, "madewithml_like.csv", kMadeWithMlLike);
  expect_agrees_with_read_csv(path);
  EXPECT_EQ(read_csv(path).rows.size(), 7u);
}

TEST(RecordCsv, AgreesWithReadCsvOnTheMadeWithMlFiles) {
  for (const char* name : {"madewithml/dataset.csv", "madewithml/holdout.csv"}) {
    const testing::DataFile csv = testing::find_data_file(name);
    if (!csv.found) GTEST_SKIP() << csv.skip_message;
    expect_agrees_with_read_csv(csv.path);
  }
}

TEST(RecordReader, UnreadablePathIsAnErrorNamingIt) {
  TempDir dir("bertrain_records");
  const std::string missing = dir.path("missing.jsonl");
  expect_error([&] { RecordReader(missing, RecordFormat::kJsonl, {"text"}); },
               {"cannot open JSON Lines file '" + missing + "'", "No such file"});
  expect_error([&] { RecordReader(dir.path("missing.csv"), RecordFormat::kCsv, {"text"}); },
               {"cannot open CSV file '" + dir.path("missing.csv") + "'"});
  expect_error([&] { RecordReader(dir.path().string(), RecordFormat::kTsv, {"text"}); },
               {"cannot open TSV file '" + dir.path().string() + "': it is a directory, not a file"});
}

// A pipe's rows are read as they arrive (a read returns what has come, not a whole chunk), and ready() says whether
// the next row can be read without waiting: what predict --data - asks before it waits for more rows.
TEST(RecordReader, RowsFromAPipeAreReadAsTheyArrive) {
  for (const RecordFormat format : {RecordFormat::kCsv, RecordFormat::kJsonl}) {
    SCOPED_TRACE(record_format_name(format));
    const bool csv = format == RecordFormat::kCsv;
    int ends[2];
    ASSERT_EQ(::pipe(ends), 0);
    const auto send = [&](const std::string& text) {
      ASSERT_EQ(::write(ends[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
    };
    send(csv ? "text\nfirst\n" : "{\"text\": \"first\"}\n");
    RecordReader reader("/proc/self/fd/" + std::to_string(ends[0]), format, {"text"});
    Record row;
    ASSERT_TRUE(reader.next(&row));  // a whole 32 KiB chunk would wait here
    EXPECT_EQ(row.fields[0].text, "first");
    EXPECT_FALSE(reader.ready());
    send(csv ? "sec" : "{\"text\": ");  // a part of a line: read, not a row yet
    EXPECT_TRUE(reader.ready());
    send(csv ? "ond\nthird\n" : "\"second\"}\n{\"text\": \"third\"}\n");
    ASSERT_TRUE(reader.next(&row));
    EXPECT_EQ(row.fields[0].text, "second");
    EXPECT_TRUE(reader.ready());  // the third line is loaded
    ASSERT_TRUE(reader.next(&row));
    EXPECT_EQ(row.fields[0].text, "third");
    EXPECT_FALSE(reader.ready());
    ::close(ends[1]);
    EXPECT_TRUE(reader.ready());  // the end: next() answers at once
    EXPECT_FALSE(reader.next(&row));
    ::close(ends[0]);
  }
  // A regular file is always ready.
  TempDir dir("bertrain_records");
  RecordReader file(write_file(dir, "t.csv", "text\na\n"), RecordFormat::kCsv, {"text"});
  EXPECT_TRUE(file.ready());
}

// ---- The state machine fed in small chunks ----------------------------------------------------------------

// Every row (fields, line, blank) or the error message, for the text read through chunks of `chunk` bytes.
std::string parse_in_chunks(const std::string& text, char delimiter, std::size_t chunk) {
  std::string out;
  CsvRow row;
  try {
    ChunkedInput input(&text, "t.csv", chunk);
    CsvParser parser(&input, delimiter, "t.csv");  // reads the first chunk: may find text that is not UTF-8
    while (parser.next(&row)) {
      out += std::to_string(row.line) + (row.blank ? " blank:" : ":");
      for (const std::string& f : row.fields) out += " [" + f + "]";
      out += "\n";
    }
  } catch (const Error& e) {
    out += std::string("error: ") + e.what();
  }
  return out;
}

TEST(CsvParserChunks, SmallChunksReadWhatTheWholeTextGives) {
  const std::vector<std::string> texts = {
      "a,b\n1,2\n3,4\n",
      "a,b\n1,2\n3,4",
      "id,text\n1,\"line one\nline \"\"two\"\"\n\"\n2,\"\"\"\"\n3,\"\"\n",
      "a,b\r\n\"x, y\r\nz\",2\r\n3,\"p,q\"\r\n",
      "\xEF\xBB\xBFid,tag\n1,nlp\n",
      "\xEF\xBB",
      "a,b,c\n,,\n1,,3\n4,5,",
      "a\nx\n\ny\n\n",
      "a,b\n\xFF,\"x\xE2\x82\"\n\xE2\x82,\"\xE2\"\"\x82\xAC\"\n",
      "a,b\n\xC3\xA9\xF0\x9F\x98\x80,\"\xE2\x82\xAC\"\n",
      kMadeWithMlLike,
      // errors
      "a,b\n1,2\n3,\"never closed\n4,5\n",
      "a,b\n\xC3\xA9,\"x",
      "a,b\n1,\"x\"y\n",
      "a,b\n1,\"x\ny\" z\n",
      "a,b\n1,\"x\"\xC3\xA9\n",
      "a,b\n\x80\x80\xE5\x9F,\"x\"\xF0\x9F\x98\x80\n",
      "a,b\r1,2\r",
      "a,b\n\"x\",2\r",
  };
  for (const std::string& raw : texts) {
    for (const char delimiter : {',', '\t'}) {
      std::string text = raw;
      if (delimiter == '\t') std::replace(text.begin(), text.end(), ',', '\t');
      const std::string whole = parse_in_chunks(text, delimiter, 0);  // all at once, as parse_csv reads
      // Text that is not UTF-8 is found as its chunk arrives: rows before it stream out first, the error is the same.
      const bool not_text = whole.find("UTF-8") != std::string::npos;
      auto seen = [not_text](const std::string& out) { return not_text ? out.substr(out.find("error: ")) : out; };
      for (const std::size_t chunk : {1, 2, 3, 5, 7, 64}) {
        EXPECT_EQ(seen(parse_in_chunks(text, delimiter, chunk)), seen(whole)) << "chunk " << chunk << ", text: " << text;
      }
    }
  }
  // The whole-text reading is parse_csv's, checked in test_csv.cpp; spot-check that it is what is compared.
  EXPECT_EQ(parse_in_chunks("a,b\n1,\"x\ny\"\n", ',', 1), "1: [a] [b]\n2: [1] [x\ny]\n");
  EXPECT_NE(parse_in_chunks("a,b\n1,\"x\"\xC3\xA9\n", ',', 1).find("unexpected character '\xC3\xA9'"),
            std::string::npos);
  // Columns count characters: three (of 2, 3 and 4 bytes), ',', then the quote.
  const std::string bad = parse_in_chunks("a,b\n\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80,\"x\"!\n", ',', 2);
  EXPECT_NE(bad.find("opened at line 2, character column 5 (at line 2, character column 8)"), std::string::npos) << bad;
  // Text that is not UTF-8 is found at the same byte whatever the chunks, a character cut by a chunk end is not.
  EXPECT_NE(parse_in_chunks("a,b\n\xFF,\"x\xE2\x82\"\n", ',', 1).find("t.csv:2: invalid UTF-8 (byte \\xFF at byte offset 4"),
            std::string::npos);
  EXPECT_NE(parse_in_chunks("a,b\n\xE2\x82\xAC,\"x\xE2\x82\"\n", ',', 2)
                .find("t.csv:2: invalid UTF-8 (bytes \\xE2\\x82 at byte offset 10 of the file, after \"\xE2\x82\xAC,\"x\")"),
            std::string::npos);
  EXPECT_NE(parse_in_chunks("a,b\n1,\"x\"\x01\n", ',', 1).find("unexpected character '\\x01'"), std::string::npos);
}

}  // namespace
}  // namespace bertrain

// The RFC 4180 reader: quoting, line ends, BOM, UTF-8 repair, every error with its position, and the real
// Made-With-ML files when $BERTRAIN_DATA_DIR holds them.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/csv.h"
#include "tests/data_dir.h"

namespace bertrain {
namespace {

using Rows = std::vector<std::vector<std::string>>;

// Expects parse_csv to throw an Error whose message contains every fragment.
void expect_error(const std::string& text, std::initializer_list<const char*> fragments) {
  try {
    const CsvTable t = parse_csv(text, "data.csv");
    FAIL() << "no error for: " << text << " (parsed " << t.rows.size() << " rows)";
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const char* f : fragments) EXPECT_NE(message.find(f), std::string::npos) << "'" << f << "' not in: " << message;
  }
}

TEST(Csv, PlainTableWithAndWithoutFinalNewline) {
  for (const std::string text : {"a,b\n1,2\n3,4\n", "a,b\n1,2\n3,4"}) {
    const CsvTable t = parse_csv(text, "x.csv");
    EXPECT_EQ(t.source, "x.csv");
    EXPECT_EQ(t.header, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(t.rows, (Rows{{"1", "2"}, {"3", "4"}}));
    EXPECT_EQ(t.row_lines, (std::vector<int>{2, 3}));
  }
}

TEST(Csv, MultilineQuotedFieldsAndDoubledQuotes) {
  const CsvTable t = parse_csv("id,text\n1,\"line one\nline \"\"two\"\"\n\"\n2,\"\"\"\"\n3,\"\"\n", "x.csv");
  EXPECT_EQ(t.rows, (Rows{{"1", "line one\nline \"two\"\n"}, {"2", "\""}, {"3", ""}}));
  // Rows start where their first field starts, counting the newlines inside quotes.
  EXPECT_EQ(t.row_lines, (std::vector<int>{2, 5, 6}));
}

TEST(Csv, CrlfLineEndsAndCrlfInsideQuotesKept) {
  const CsvTable t = parse_csv("a,b\r\n\"x, y\r\nz\",2\r\n3,\"p,q\"\r\n", "x.csv");
  EXPECT_EQ(t.header, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(t.rows, (Rows{{"x, y\r\nz", "2"}, {"3", "p,q"}}));
  EXPECT_EQ(t.row_lines, (std::vector<int>{2, 4}));
}

TEST(Csv, ByteOrderMarkStripped) {
  const CsvTable t = parse_csv("\xEF\xBB\xBFid,tag\n1,nlp\n", "x.csv");
  EXPECT_EQ(t.header, (std::vector<std::string>{"id", "tag"}));
  EXPECT_EQ(t.column("id"), 0);
  // Only a leading BOM is a marker; elsewhere U+FEFF is text.
  const CsvTable u = parse_csv("id\n\xEF\xBB\xBFx\n", "x.csv");
  EXPECT_EQ(u.rows, (Rows{{"\xEF\xBB\xBFx"}}));
}

TEST(Csv, EmptyFieldsAndTrailingComma) {
  const CsvTable t = parse_csv("a,b,c\n,,\n1,,3\n4,5,", "x.csv");
  EXPECT_EQ(t.rows, (Rows{{"", "", ""}, {"1", "", "3"}, {"4", "5", ""}}));
}

TEST(Csv, QuoteInsideUnquotedFieldIsData) {
  const CsvTable t = parse_csv("a,b\n5\" screen,x\n", "x.csv");
  EXPECT_EQ(t.rows, (Rows{{"5\" screen", "x"}}));
}

TEST(Csv, TrailingEmptyLinesIgnored) {
  const CsvTable t = parse_csv("a,b\n1,2\n\n\n", "x.csv");
  EXPECT_EQ(t.rows, (Rows{{"1", "2"}}));
  const CsvTable crlf = parse_csv("a,b\r\n1,2\r\n\r\n", "x.csv");
  EXPECT_EQ(crlf.rows, (Rows{{"1", "2"}}));
  const CsvTable header_only = parse_csv("a,b\n", "x.csv");
  EXPECT_TRUE(header_only.rows.empty());
}

TEST(Csv, EmptyLineInsideOneColumnDataIsAnEmptyRow) {
  const CsvTable t = parse_csv("a\nx\n\ny\n", "x.csv");
  EXPECT_EQ(t.rows, (Rows{{"x"}, {""}, {"y"}}));
  // A quoted empty field on the last line is a row, not a blank line.
  const CsvTable q = parse_csv("a\nx\n\"\"\n", "x.csv");
  EXPECT_EQ(q.rows, (Rows{{"x"}, {""}}));
}

TEST(Csv, ColumnLookup) {
  const CsvTable t = parse_csv("id,title,tag\n1,t,nlp\n", "dataset.csv");
  EXPECT_EQ(t.column("tag"), 2);
  EXPECT_EQ(t.column("missing"), -1);
  EXPECT_EQ(t.require_column("title"), 1);
  try {
    t.require_column("description");
    FAIL() << "no error for a missing column";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("dataset.csv: missing column 'description' (columns: id, title, tag)"), std::string::npos)
        << message;
  }
}

TEST(Csv, UnterminatedQuoteNamesWhereItStarted) {
  expect_error("a,b\n1,2\n3,\"never closed\n4,5\n", {"data.csv:3:", "unterminated quoted field starting at line 3",
                                                          "character column 3"});
  // Columns count characters, not bytes: "é" is two bytes, one character.
  expect_error("a,b\n\xC3\xA9,\"x", {"data.csv:2:", "line 2, character column 3"});
}

TEST(Csv, CharacterAfterClosingQuote) {
  expect_error("a,b\n1,\"x\"y\n", {"data.csv:2:", "unexpected character 'y' after the closing quote",
                                   "opened at line 2, character column 3", "at line 2, character column 6"});
  // Found on a later line when the quoted field spans lines.
  expect_error("a,b\n1,\"x\ny\" z\n", {"data.csv:3:", "unexpected character ' '", "opened at line 2",
                                       "at line 3, character column 3"});
}

TEST(Csv, BareCarriageReturnOutsideQuotes) {
  expect_error("a,b\r1,2\r", {"data.csv:1:", "carriage return not followed by a line feed", "character column 4"});
}

TEST(Csv, ShortAndLongRows) {
  expect_error("a,b,c\n1,2,3\n4,5\n", {"data.csv:3:", "short row", "expected 3 fields", "found 2"});
  expect_error("a,b\n1,2\n3,4,5\n", {"data.csv:3:", "long row", "expected 2 fields", "found 3"});
  // A row's line is where it starts, even when a quoted field moved the reader on.
  expect_error("a,b\n1,2\n\"x\ny\"\n", {"data.csv:3:", "short row", "found 1"});
  // An empty line in the middle of two-column data is a short row, not skipped.
  expect_error("a,b\n1,2\n\n3,4\n", {"data.csv:3:", "short row", "expected 2 fields", "found 1"});
}

TEST(Csv, EmptyFile) {
  expect_error("", {"data.csv: empty file"});
  expect_error("\n\n", {"data.csv: empty file"});
  expect_error("\xEF\xBB\xBF", {"data.csv: empty file"});
  expect_error("\na,b\n1,2\n", {"data.csv:1:", "line 1 is empty"});
}

TEST(Csv, DuplicateHeader) {
  expect_error("id,tag,id\n1,2,3\n", {"data.csv:1:", "duplicate column name 'id'", "field 3"});
}

TEST(Csv, ReadCsvFileAndMissingFile) {
  const std::string path = ::testing::TempDir() + "bertrain_test_csv.csv";
  {
    std::ofstream out(path, std::ios::binary);
    out << "a,b\n1,\"two\nlines\"\n";
  }
  const CsvTable t = read_csv(path);
  EXPECT_EQ(t.source, path);
  EXPECT_EQ(t.rows, (Rows{{"1", "two\nlines"}}));
  std::remove(path.c_str());
  try {
    read_csv(path);
    FAIL() << "no error for a missing file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

// Expected strings computed with Python 3: bytes.decode("utf-8", errors="replace").encode("utf-8").
TEST(Utf8, ReplacementMatchesPython) {
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a\xFF" "b", "a" + r + "b"},                     // byte that never occurs in UTF-8
      {"\xE2\x82", r},                                  // truncated 3-byte sequence at the end: one U+FFFD
      {"\xE2\x82x", r + "x"},                           // truncated, then ASCII
      {"\xF0\x9F\x98", r},                              // truncated 4-byte sequence
      {"\xED\xA0\x80", r + r + r},                      // surrogate U+D800: lead's range excludes A0
      {"\xC0\xAF", r + r},                              // overlong '/': C0 never leads
      {"\xF4\x90\x80\x80", r + r + r + r},              // above U+10FFFF
      {"\xE0\x80\xAF", r + r + r},                      // overlong 3-byte form
      {"caf\xC3\xA9 \x80\x80", "caf\xC3\xA9 " + r + r}, // lone continuation bytes: one each
      {"\xC3", r},                                      // truncated 2-byte sequence
      {"\xF1\x80\x80\xE2\x82\xAC", r + "\xE2\x82\xAC"},  // maximal subpart F1 80 80, then a valid euro sign
  };
  for (const auto& [in, expected] : cases) EXPECT_EQ(sanitize_utf8(in), expected) << "input bytes: " << in.size();
}

TEST(Utf8, ValidTextUnchanged) {
  const std::string valid = "plain ASCII, caf\xC3\xA9, \xE5\x9F\xBA\xE4\xBA\x8E, \xF0\x9F\x98\x80, \xF4\x8F\xBF\xBF";
  EXPECT_EQ(sanitize_utf8(valid), valid);
  EXPECT_EQ(sanitize_utf8(""), "");
}

TEST(Utf8, CsvFieldsAreSanitized) {
  const CsvTable t = parse_csv("a,b\n\xFF,\"x\xE2\x82\"\n", "x.csv");
  EXPECT_EQ(t.rows, (Rows{{"\xEF\xBF\xBD", "x\xEF\xBF\xBD"}}));
}

// The Made-With-ML files ($BERTRAIN_DATA_DIR/madewithml), read in place; skipped with a message where they are
// absent.

std::map<std::string, int> tag_counts(const CsvTable& t) {
  std::map<std::string, int> counts;
  const int tag = t.require_column("tag");
  for (const auto& row : t.rows) ++counts[row[static_cast<std::size_t>(tag)]];
  return counts;
}

const std::vector<std::string> kColumns = {"id", "created_on", "title", "description", "tag"};

TEST(CsvMadeWithMl, Dataset) {
  const testing::DataFile csv = testing::find_data_file("madewithml/dataset.csv");
  if (!csv.found) GTEST_SKIP() << csv.skip_message;
  const CsvTable t = read_csv(csv.path);
  EXPECT_EQ(t.header, kColumns);
  ASSERT_EQ(t.rows.size(), 764u);
  const std::map<std::string, int> expected = {
      {"natural-language-processing", 310}, {"computer-vision", 285}, {"other", 106}, {"mlops", 63}};
  EXPECT_EQ(tag_counts(t), expected);
  // Row 1 (id 7) ends its description with a newline inside quotes, so row 2 starts two lines later.
  EXPECT_EQ(t.rows[1][0], "7");
  EXPECT_EQ(t.rows[1][3].back(), '\n');
  EXPECT_EQ(t.row_lines[0], 2);
  EXPECT_EQ(t.row_lines[1], 3);
  EXPECT_EQ(t.row_lines[2], 5);
  int multiline = 0;
  for (const auto& row : t.rows) {
    bool has_newline = false;
    for (const auto& field : row) has_newline = has_newline || field.find('\n') != std::string::npos;
    multiline += has_newline;
  }
  EXPECT_EQ(multiline, 32);  // data/README.md: 32 rows have newlines inside quoted fields
}

TEST(CsvMadeWithMl, Holdout) {
  const testing::DataFile csv = testing::find_data_file("madewithml/holdout.csv");
  if (!csv.found) GTEST_SKIP() << csv.skip_message;
  const CsvTable t = read_csv(csv.path);
  EXPECT_EQ(t.header, kColumns);
  ASSERT_EQ(t.rows.size(), 191u);
  const std::map<std::string, int> expected = {
      {"natural-language-processing", 78}, {"computer-vision", 71}, {"other", 26}, {"mlops", 16}};
  EXPECT_EQ(tag_counts(t), expected);
  EXPECT_EQ(t.rows[1][3], "A PyTorch implementation of \"Graph Wavelet Neural Network\" (ICLR 2019) ");
}

}  // namespace
}  // namespace bertrain

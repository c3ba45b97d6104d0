// The RFC 4180 reader: quoting, line ends, BOM, text that is not UTF-8, every error with its position, and the
// real Made-With-ML files when $BERTRAIN_DATA_DIR holds them.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/utf8.h"
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
    EXPECT_EQ(t.row_lines, (std::vector<long long>{2, 3}));
  }
}

TEST(Csv, MultilineQuotedFieldsAndDoubledQuotes) {
  const CsvTable t = parse_csv("id,text\n1,\"line one\nline \"\"two\"\"\n\"\n2,\"\"\"\"\n3,\"\"\n", "x.csv");
  EXPECT_EQ(t.rows, (Rows{{"1", "line one\nline \"two\"\n"}, {"2", "\""}, {"3", ""}}));
  // Rows start where their first field starts, counting the newlines inside quotes.
  EXPECT_EQ(t.row_lines, (std::vector<long long>{2, 5, 6}));
}

TEST(Csv, CrlfLineEndsAndCrlfInsideQuotesKept) {
  const CsvTable t = parse_csv("a,b\r\n\"x, y\r\nz\",2\r\n3,\"p,q\"\r\n", "x.csv");
  EXPECT_EQ(t.header, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(t.rows, (Rows{{"x, y\r\nz", "2"}, {"3", "p,q"}}));
  EXPECT_EQ(t.row_lines, (std::vector<long long>{2, 4}));
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

// Messages quote bytes of a user's file: valid characters as they are, control characters and invalid bytes as
// \xHH, so the message stays one line of valid UTF-8.
TEST(Utf8, EscapeForMessage) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"caf\xE9", "caf\\xE9"},                            // Latin-1 é
      {"a\xFF" "b", "a\\xFFb"},                           // a byte that never occurs in UTF-8
      {"\xE2\x82", "\\xE2\\x82"},                         // a character cut short
      {"\xED\xA0\x80", "\\xED\\xA0\\x80"},                // surrogate U+D800
      {"\xC0\xAF", "\\xC0\\xAF"},                         // overlong '/'
      {"\xF1\x80\x80\xE2\x82\xAC", "\\xF1\\x80\\x80\xE2\x82\xAC"},  // maximal subpart F1 80 80, then a euro sign
      {std::string("a\tb\nc\r\x01\x7F\0", 9), "a\\x09b\\x0Ac\\x0D\\x01\\x7F\\x00"},  // C0 controls and DEL
      {"\xC2\x85|\xC2\xA0|\xC3\xA9", "\\xC2\\x85|\xC2\xA0|\xC3\xA9"},  // C1 control NEL; NBSP and é are text
  };
  for (const auto& [in, expected] : cases) EXPECT_EQ(escape_for_message(in), expected) << "input bytes: " << in.size();
  const std::string valid = "plain ASCII, caf\xC3\xA9, \xE5\x9F\xBA\xE4\xBA\x8E, \xF0\x9F\x98\x80, \xF4\x8F\xBF\xBF";
  EXPECT_EQ(escape_for_message(valid), valid);
  EXPECT_EQ(escape_for_message(""), "");
}

// parse_csv's message for `text`, "" when it parses.
std::string csv_error(const std::string& text, const std::string& source = "x.csv") {
  try {
    parse_csv(text, source);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Text that is not UTF-8 is an error naming the line, the byte offset in the file and the bytes, escaped, and
// saying how to convert the file; it used to be repaired to U+FFFD, which cleaning then removed (café -> caf).
TEST(Csv, TextThatIsNotUtf8IsAnErrorNamingLineAndOffset) {
  const std::string latin1 = csv_error("a,b\ncaf\xE9,x\n");
  EXPECT_NE(latin1.find("x.csv:2: invalid UTF-8 (byte \\xE9 at byte offset 7 of the file, after \"caf\"): the file is "
                        "not UTF-8 text; convert it, e.g. from Latin-1: iconv -f latin1 -t utf-8 x.csv > x.utf8.csv"),
            std::string::npos)
      << latin1;
  // A character cut short, inside quotes and at the very end; the bytes named are the maximal invalid subpart.
  EXPECT_NE(csv_error("a,b\n1,\"x\n\xE2\x82\"\n").find("x.csv:3: invalid UTF-8 (bytes \\xE2\\x82 at byte offset 9 of the "
                                                     "file)"),
            std::string::npos);
  EXPECT_NE(csv_error("a,b\n1,x\xF0\x9F\x98").find("x.csv:2: invalid UTF-8 (bytes \\xF0\\x9F\\x98 at byte offset 7 of "
                                                  "the file, after \"1,x\")"),
            std::string::npos);
  // What precedes the byte is quoted from its line only, at most 32 bytes of it, control characters escaped.
  const std::string long_line = csv_error("a,b\n" + std::string(40, 'y') + "\tz\xFF\n");
  EXPECT_NE(long_line.find("x.csv:2: invalid UTF-8 (byte \\xFF at byte offset 46 of the file, after \"..." +
                           std::string(30, 'y') + "\\x09z\")"),
            std::string::npos)
      << long_line;
  // A NUL byte: not a text file at all.
  const std::string nul = csv_error(std::string("a,b\n1,x\0y\n", 10));
  EXPECT_NE(nul.find("x.csv:2: not a text file: a NUL byte at byte offset 7 of the file, after \"1,x\"; a dataset must be "
                     "UTF-8 text (a UTF-16 file converts with iconv -f utf-16 -t utf-8 x.csv > x.utf8.csv)"),
            std::string::npos)
      << nul;
  // UTF-16 with its byte-order mark, in either byte order; the path is quoted for the shell where it needs to be.
  for (const std::string bom : {"\xFF\xFE", "\xFE\xFF"}) {
    const std::string utf16 = csv_error(bom + std::string("a\0,\0b\0\n\0", 8), "my data.csv");
    EXPECT_NE(utf16.find("my data.csv:1: not UTF-8 text: the file starts with a UTF-16 byte-order mark (" +
                         escape_for_message(bom) + "); convert it to UTF-8: iconv -f utf-16 -t utf-8 'my data.csv' > "
                                                   "'my data.utf8.csv'"),
              std::string::npos)
        << utf16;
  }
  // No message carries a raw control character or invalid byte.
  for (const std::string& message : {latin1, long_line, nul}) EXPECT_EQ(escape_for_message(message), message);
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

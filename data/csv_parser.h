// Internal to data/: the one RFC 4180 state machine behind parse_csv (csv.h) and RecordReader's CSV and TSV
// (records.h). It reads a ChunkedInput so a file streams through it row by row, and tracks the physical
// line and character column for error messages. The ChunkedInput checks that the input is UTF-8 text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/chunked_input.h"

namespace bertrain {

struct CsvRow {
  std::vector<std::string> fields;  // UTF-8 text (ChunkedInput checks it)
  long long line = 0;               // 1-based line on which the row starts
  bool blank = false;               // an empty physical line: one empty, unquoted field
};

class CsvParser {
 public:
  // Skips a leading byte-order mark of `input`, which must outlive the parser. `delimiter` is ',' for CSV
  // or '\t' for TSV; `source` names the input in errors.
  CsvParser(ChunkedInput* input, char delimiter, const std::string& source);

  // Next row into *out (its storage reused); false at the end of the input. Throws Error naming source,
  // line and character column for an unterminated quote, a character after a closing quote or a carriage
  // return without a line feed outside quotes: the rest of the input cannot be read after those; and
  // ChunkedInput's Error for input that is not UTF-8 text.
  bool next(CsvRow* out);
  // Where the next row starts (after next(): just past the last row's line end).
  std::uint64_t position() const { return pos_; }

 private:
  int column_at(std::uint64_t pos);
  void new_line(std::uint64_t next_line_start);
  void end_record();
  void read_unquoted(std::string* field);
  void read_quoted(std::string* field);
  std::string printable(std::uint64_t pos);

  ChunkedInput* in_;
  std::string source_;
  char delimiter_;
  char stops_[4];  // what ends an unquoted field: the delimiter, CR, LF
  std::uint64_t pos_ = 0;
  std::uint64_t line_start_ = 0;
  long long line_ = 1;
  // Character column of column_pos_ on the current line: columns are counted on from the last one asked
  // for, so a long line with many quoted fields costs one pass, not one per field.
  std::uint64_t column_pos_ = 0;
  int column_ = 1;
};

// "a, b, c", for messages listing column names.
std::string join_names(const std::vector<std::string>& names);

// Throws Error "<source>:1: duplicate column name ..." when two header columns share a name.
void check_unique_header(const std::vector<std::string>& header, const std::string& source);

}  // namespace bertrain

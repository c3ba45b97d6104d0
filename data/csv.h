// RFC 4180 CSV reading: quoted fields with embedded newlines and doubled quotes, LF or CRLF line ends,
// an optional UTF-8 byte-order mark, a header row, columns found by name. The text must be UTF-8: a NUL byte
// or invalid UTF-8 is an Error naming the line and byte offset (chunked_input.h). The whole table is held in
// memory; RecordReader (records.h) streams the same dialect row by row.
#pragma once

#include <string>
#include <vector>

namespace bertrain {

struct CsvTable {
  std::string source;                          // file name, for messages
  std::vector<std::string> header;             // column names
  std::vector<std::vector<std::string>> rows;  // every row has header.size() fields
  std::vector<long long> row_lines;            // 1-based line on which each row starts

  // Index of the column named `name`, or -1.
  int column(const std::string& name) const;
  // Index of the column named `name`; throws Error "<source>: missing column 'name' (columns: ...)".
  int require_column(const std::string& name) const;
};

// Parses `text`; `source` names it in errors. Throws Error naming source, line and column for an
// unterminated quote, a character after a closing quote, a row with fewer or more fields than the
// header, an empty file, duplicate column names, or text that is not UTF-8.
CsvTable parse_csv(const std::string& text, const std::string& source);
// Reads and parses a file; throws Error naming the path when it cannot be read.
CsvTable read_csv(const std::string& path);

}  // namespace bertrain

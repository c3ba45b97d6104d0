// RFC 4180 CSV reading: quoted fields with embedded newlines and doubled quotes, LF or CRLF line ends,
// an optional UTF-8 byte-order mark, a header row, columns found by name. Invalid UTF-8 is replaced by
// U+FFFD (one per maximal invalid subsequence, as Python's errors="replace"), never an error. The whole
// table is held in memory; RecordReader (records.h) streams the same dialect row by row.
#pragma once

#include <string>
#include <vector>

#include "data/utf8.h"  // sanitize_utf8, part of this header's interface since before it had its own file

namespace bertrain {

struct CsvTable {
  std::string source;                          // file name, for messages
  std::vector<std::string> header;             // column names
  std::vector<std::vector<std::string>> rows;  // every row has header.size() fields
  std::vector<int> row_lines;                  // 1-based line on which each row starts

  // Index of the column named `name`, or -1.
  int column(const std::string& name) const;
  // Index of the column named `name`; throws Error "<source>: missing column 'name' (columns: ...)".
  int require_column(const std::string& name) const;
};

// Parses `text`; `source` names it in errors. Throws Error naming source, line and column for an
// unterminated quote, a character after a closing quote, a row with fewer or more fields than the
// header, an empty file or duplicate column names.
CsvTable parse_csv(const std::string& text, const std::string& source);
// Reads and parses a file; throws Error naming the path when it cannot be read.
CsvTable read_csv(const std::string& path);

}  // namespace bertrain

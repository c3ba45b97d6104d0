// Streaming reader of labelled-text files, one row at a time, in the formats users keep datasets in:
// RFC 4180 CSV (csv.h's dialect), TSV (the same with a tab delimiter, quotes allowed, as Python's csv module
// and pandas read it) and JSON Lines (one object per line). The file is read in fixed-size chunks and never
// held whole, so prediction over a million-row file costs the memory of one row. A row the format cannot
// read is reported in the row (Record::error) and the reader goes on, so a caller can skip bad rows; only
// what leaves the rest of a CSV/TSV file unreadable (an unterminated quote, a character after a closing
// quote) throws, and so does a file that is not UTF-8 text (a NUL byte or invalid UTF-8; chunked_input.h): it
// is the whole file's encoding that is wrong, not one row. Empty lines are skipped in every format.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace bertrain {

enum class RecordFormat { kCsv, kTsv, kJsonl };

// format_flag "csv" | "tsv" | "jsonl" picks the format; "" or "auto" picks it from path's extension
// (case-insensitive): .csv -> csv; .tsv, .tab -> tsv; .jsonl, .ndjson -> jsonl. Anything else throws Error
// "<path>: cannot tell the format from the extension; pass --format csv|tsv|jsonl" (or, when path is no file,
// require_readable_file's Error saying why); an unknown flag value
// throws Error "--format must be auto, csv, tsv or jsonl, got 'x'".
RecordFormat record_format(const std::string& path, const std::string& format_flag);
// The format path's extension names, as above; none for any other extension.
std::optional<RecordFormat> extension_format(const std::string& path);
const char* record_format_name(RecordFormat format);  // "csv", "tsv", "jsonl"

struct RecordField {
  bool present = false;            // CSV/TSV: the header has the column; JSONL: the key exists and is not null
  std::string text;                // CSV/TSV field; JSON string value; JSON number / bool as its JSON text (e.g. 3,
                                   // true); empty for a list
  bool is_list = false;            // JSONL: the value is an array
  std::vector<std::string> items;  // the array's elements (strings; numbers / bools as their JSON text)
};

struct Record {
  long long line = 0;               // 1-based line on which the row starts
  std::vector<RecordField> fields;  // one per requested column, in the requested order
  std::string error;                // non-empty: this row cannot be read (fields is then empty); says why, without
                                    // file or line
  bool malformed = false;           // with error: the format's own syntax failed (invalid JSON, not a JSON object, a
                                    // wrong number of fields), as a file in another format would; not a value's type
};

class RecordReader {
 public:
  // Opens path (Error naming it when it cannot be opened / read). CSV and TSV read the header row now
  // (Error naming the file on an empty file or duplicate column names, as parse_csv does).
  RecordReader(const std::string& path, RecordFormat format, std::vector<std::string> columns);
  ~RecordReader();
  RecordReader(RecordReader&&) noexcept;
  RecordReader& operator=(RecordReader&&) noexcept;

  const std::string& path() const;
  RecordFormat format() const;
  const std::vector<std::string>& header() const;  // CSV/TSV column names; empty for JSONL
  bool has_column(std::size_t i) const;            // CSV/TSV: header has columns[i]; JSONL: always true
  // Next row into *out (its storage reused); false at the end of the file. After an Error the reader is
  // spent: the file's remaining rows cannot be told apart.
  bool next(Record* out);
  // Whether next() can read a line without waiting for input (ChunkedInput::ready): for a pipe, whether a row has
  // arrived; always for a regular file.
  bool ready() const;

 private:
  struct State;  // the open file and the format's parser (records.cpp)
  std::unique_ptr<State> state_;
};

}  // namespace bertrain

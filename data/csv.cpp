// RFC 4180 reader (see csv.h): the rows of CsvParser (csv_parser.h) collected into a table, then checked as
// a whole, so a structural error anywhere in the text is reported before a ragged row.
#include "data/csv.h"


#include "core/error.h"
#include "core/files.h"
#include "data/chunked_input.h"
#include "data/csv_parser.h"

namespace bertrain {

namespace {

void check_field_count(std::size_t found, std::size_t expected, long long line, const std::string& source) {
  BERTRAIN_CHECK(found == expected, source << ":" << line << ": " << (found < expected ? "short" : "long")
                                           << " row starting at line " << line << ": expected " << expected
                                           << " fields (the header's columns), found " << found);
}

}  // namespace

int CsvTable::column(const std::string& name) const {
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return static_cast<int>(i);
  }
  return -1;
}

int CsvTable::require_column(const std::string& name) const {
  const int index = column(name);
  BERTRAIN_CHECK(index >= 0, source << ": missing column '" << name << "' (columns: " << join_names(header) << ")");
  return index;
}

CsvTable parse_csv(const std::string& text, const std::string& source) {
  ChunkedInput input(&text, source);
  CsvParser parser(&input, ',', source);
  std::vector<CsvRow> records;
  CsvRow record;
  while (parser.next(&record)) records.push_back(std::move(record));
  // Trailing empty lines are an editor's artefact, not rows.
  while (!records.empty() && records.back().blank) records.pop_back();
  BERTRAIN_CHECK(!records.empty(), source << ": empty file (expected a header row)");
  BERTRAIN_CHECK(!records.front().blank, source << ":1: line 1 is empty (expected the header row)");

  CsvTable table;
  table.source = source;
  table.header = std::move(records.front().fields);
  check_unique_header(table.header, source);
  table.rows.reserve(records.size() - 1);
  table.row_lines.reserve(records.size() - 1);
  for (std::size_t r = 1; r < records.size(); ++r) {
    check_field_count(records[r].fields.size(), table.header.size(), records[r].line, source);
    table.rows.push_back(std::move(records[r].fields));
    table.row_lines.push_back(records[r].line);
  }
  return table;
}

CsvTable read_csv(const std::string& path) {
  return parse_csv(read_file(path, "CSV file"), path);
}

}  // namespace bertrain

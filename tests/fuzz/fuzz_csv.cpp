// libFuzzer target: bytes -> parse_csv (the in-memory core of read_csv) -> every row and field, plus
// sanitize_utf8 on the raw bytes. bertrain::Error (unterminated quote, stray character after a quote,
// ragged row, empty file, duplicate column) is the documented rejection.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "data/csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string clean = bertrain::sanitize_utf8(text);
  if (bertrain::sanitize_utf8(clean) != clean) __builtin_trap();  // replacing must be idempotent
  try {
    const bertrain::CsvTable table = bertrain::parse_csv(text, "fuzz.csv");
    if (table.rows.size() != table.row_lines.size()) __builtin_trap();
    volatile std::size_t sink = 0;
    for (const auto& row : table.rows) {
      if (row.size() != table.header.size()) __builtin_trap();
      for (const std::string& field : row) sink = sink + field.size();
    }
    for (const std::string& name : table.header) {
      if (table.column(name) < 0) __builtin_trap();
    }
    (void)table.column("title");
    (void)sink;
  } catch (const bertrain::Error&) {
    // Rejected cleanly.
  }
  return 0;
}

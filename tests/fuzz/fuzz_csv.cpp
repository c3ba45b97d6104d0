// libFuzzer target: bytes -> parse_csv (the in-memory core of read_csv) -> every row and field. bertrain::Error
// (unterminated quote, stray character after a quote, ragged row, empty file, duplicate column, text that is not
// UTF-8) is the documented rejection; input that is not UTF-8 text must be rejected, and every field read is
// UTF-8 text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "data/csv.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const bertrain::CsvTable table = bertrain::parse_csv(text, "fuzz.csv");
    if (!bertrain_fuzz::is_text(text)) __builtin_trap();  // bytes that are not text were read as if they were
    if (table.rows.size() != table.row_lines.size()) __builtin_trap();
    volatile std::size_t sink = 0;
    for (const auto& row : table.rows) {
      if (row.size() != table.header.size()) __builtin_trap();
      for (const std::string& field : row) {
        if (!bertrain_fuzz::is_text(field)) __builtin_trap();
        sink = sink + field.size();
      }
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

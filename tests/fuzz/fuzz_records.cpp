// libFuzzer target: bytes -> a dataset file (a path, so through a scratch file) -> RecordReader (CSV, TSV or
// JSON Lines, read in 32 KiB chunks) -> every record, then TextRowReader (data/dataset.h) over the same file
// with a tiny tokenizer. bertrain::Error is the documented rejection: RecordReader's constructor (empty file,
// duplicate column), CSV/TSV's next() (unterminated quote, a character after a closing quote, a bare CR), either
// of them in every format for a file that is not UTF-8 text (a NUL byte, invalid UTF-8), TextRowReader's
// constructor (a missing text or label column), its next() without skip_bad_rows, and its last next() when a
// JSON Lines text column is in no readable row.
//
// The first byte picks the case; the rest is the file. Byte b: b % 3 is the format (csv, tsv, jsonl); v = b / 3:
//   bit 0     the columns: {"text", "label", "id"} or {"title", "description", "tag", "id"}
//   bits 1-2  both set: the rest is repeated to over 32 KiB, so rows cross the reader's chunk boundaries (then
//             TextRowReader reads it once, with labels, skipping bad rows; else four times: single- and
//             multi-label, without labels, and single-label without skipping)
//   bits 3-4  TextRowReader's max_length: 2, 3, 8 or 64
//   bit 5     labels: "," separated, single-label first; or "|" separated, multi-label first
//   bit 6     TextRowReader cleans the text (Made-With-ML's clean_text) or not
// Invariants checked (__builtin_trap otherwise): a record with no error has one field per requested column, one
// with an error none (and is malformed for a CSV/TSV syntax error, as for JSONL's); lines strictly increase and lie in the file; text, items, header names and error messages
// are valid UTF-8; a file that is not UTF-8 text never reads to its end without an Error; a JSONL list has no
// text; CSV/TSV fields are never lists; JSONL of UTF-8 text yields exactly one record per non-blank line and never
// throws; CSV (and TSV without commas, read as CSV) streamed agrees with parse_csv on the whole text;
// TextRowReader throws up front exactly for a missing column, with skip_bad_rows consumes exactly the records
// RecordReader gave (and throws exactly when it did, or when a JSONL text column is in no readable record), and
// every row it returns is 2..max_length ids framed by [CLS] ... [SEP], with a non-blank text and well-formed
// labels.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/csv.h"
#include "data/dataset.h"
#include "data/records.h"
#include "data/tokenizer.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

using bertrain::Record;
using bertrain::RecordFormat;

using bertrain_fuzz::valid_utf8;

bool blank(const std::string& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }

const bertrain::BertTokenizer& tokenizer() {
  static const bertrain::BertTokenizer t(bertrain::Vocab::from_tokens(
      {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "text", "label", "hello", "world", "news", "##s",
       "##ing", ",", ".", "\xC3\xA9", "\xE6\x97\xA5"}));
  return t;
}

// What parse_csv makes of a CSV file (or of a TSV file without commas, its tabs read as commas): the whole text
// in one chunk, against which the streamed records are checked. parse_csv keeps interior blank lines as rows
// (RecordReader skips them), so rows are compared only when it has no row that could be one.
struct WholeText {
  bool parsed = false;        // parse_csv accepted the text
  bool compare_rows = false;  // and its rows are RecordReader's records
  bool tabs = false;          // TSV: ',' in the table is '\t' in the file
  bertrain::CsvTable table;
};

WholeText parse_whole(const std::string& content, RecordFormat format) {
  WholeText whole;
  std::string text = content;
  if (format == RecordFormat::kTsv) {
    if (text.find(',') != std::string::npos) return whole;
    std::replace(text.begin(), text.end(), '\t', ',');
    whole.tabs = true;
  }
  try {
    whole.table = bertrain::parse_csv(text, "fuzz.csv");
  } catch (const bertrain::Error&) {
    return whole;  // a ragged row is per record in RecordReader; a structural error is checked below
  }
  whole.parsed = true;
  whole.compare_rows = std::none_of(whole.table.rows.begin(), whole.table.rows.end(),
                                    [](const std::vector<std::string>& row) { return row.size() == 1 && row[0].empty(); });
  return whole;
}

// What RecordReader gave: each record's line and whether it was bad, and whether it threw.
struct FirstPass {
  bool ctor_threw = false;
  bool next_threw = false;
  std::vector<bool> has_column;
  std::vector<std::string> header;
  std::vector<long long> lines;
  std::vector<bool> bad;
  bool any_error = false;
  std::vector<bool> present;  // columns[i] has a value in some record without an error
  bool any_readable = false;  // some record has no error
};

FirstPass read_records(const std::string& path, const std::string& content, RecordFormat format,
                       const std::vector<std::string>& columns, const WholeText& whole) {
  FirstPass pass;
  const bool text = bertrain_fuzz::is_text(content);
  // Every record starts on its own line, so a reader that returns more records than the file has lines loops.
  const std::size_t lines = static_cast<std::size_t>(std::count(content.begin(), content.end(), '\n')) + 1;
  auto as_read = [&whole](std::string s) {
    if (whole.tabs) std::replace(s.begin(), s.end(), ',', '\t');
    return s;
  };
  try {
    bertrain::RecordReader reader(path, format, columns);
    if (reader.format() != format || reader.path() != path) __builtin_trap();
    if (reader.header().empty() != (format == RecordFormat::kJsonl)) __builtin_trap();  // CSV: at least one column
    for (std::size_t i = 0; i < columns.size(); ++i) pass.has_column.push_back(reader.has_column(i));
    pass.header = reader.header();
    for (const std::string& name : pass.header) {
      if (!valid_utf8(name)) __builtin_trap();
    }
    if (whole.parsed) {
      if (pass.header.size() != whole.table.header.size()) __builtin_trap();
      for (std::size_t c = 0; c < pass.header.size(); ++c) {
        if (pass.header[c] != as_read(whole.table.header[c])) __builtin_trap();
      }
    }
    pass.present.assign(columns.size(), false);
    Record record;
    long long last_line = 0;
    try {
      while (reader.next(&record)) {
        if (record.line <= last_line || record.line < 1 || static_cast<std::size_t>(record.line) > lines) {
          __builtin_trap();
        }
        last_line = record.line;
        if (record.malformed && record.error.empty()) __builtin_trap();
        if (!record.error.empty() && !record.malformed && format != RecordFormat::kJsonl) __builtin_trap();
        if (record.error.empty()) {
          if (record.fields.size() != columns.size()) __builtin_trap();
          pass.any_readable = true;
          for (std::size_t i = 0; i < columns.size(); ++i) pass.present[i] = pass.present[i] || record.fields[i].present;
        } else {
          if (!record.fields.empty() || !valid_utf8(record.error)) __builtin_trap();
          pass.any_error = true;
        }
        for (std::size_t i = 0; i < record.fields.size(); ++i) {
          const bertrain::RecordField& field = record.fields[i];
          if (!valid_utf8(field.text)) __builtin_trap();
          for (const std::string& item : field.items) {
            if (!valid_utf8(item)) __builtin_trap();
          }
          if (field.is_list && (!field.present || !field.text.empty())) __builtin_trap();
          if (!field.is_list && !field.items.empty()) __builtin_trap();
          if (!field.present && !field.text.empty()) __builtin_trap();
          if (format != RecordFormat::kJsonl && (field.is_list || field.present != pass.has_column[i])) {
            __builtin_trap();
          }
        }
        if (whole.compare_rows) {
          const std::size_t r = pass.lines.size();
          if (r >= whole.table.rows.size() || record.line != whole.table.row_lines[r] || !record.error.empty()) {
            __builtin_trap();
          }
          for (std::size_t i = 0; i < columns.size(); ++i) {
            const int at = whole.table.column(columns[i]);  // the names have neither ',' nor a tab
            if (at >= 0 && as_read(whole.table.rows[r][static_cast<std::size_t>(at)]) != record.fields[i].text) {
              __builtin_trap();
            }
          }
        }
        pass.lines.push_back(record.line);
        pass.bad.push_back(!record.error.empty());
        if (pass.lines.size() > lines) __builtin_trap();
      }
    } catch (const bertrain::Error&) {
      // JSONL reports every bad line in its record: only a file that is not text stops it.
      if (format == RecordFormat::kJsonl && text) __builtin_trap();
      pass.next_threw = true;
    }
  } catch (const bertrain::Error&) {
    if (format == RecordFormat::kJsonl && text) __builtin_trap();  // no header to reject
    pass.ctor_threw = true;
  }
  if (!text && !pass.ctor_threw && !pass.next_threw) __builtin_trap();  // bytes that are not text were read as text
  if (whole.parsed && (pass.ctor_threw || pass.next_threw)) __builtin_trap();  // parse_csv read the whole text
  if (whole.compare_rows && pass.lines.size() != whole.table.rows.size()) __builtin_trap();
  return pass;
}

// JSON Lines: one record per non-blank physical line, on that line (a leading BOM is not text).
void check_jsonl_lines(const std::string& content, const FirstPass& pass) {
  std::size_t start = content.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  std::vector<long long> expected;
  for (long long line = 1;; ++line) {
    const std::size_t nl = content.find('\n', start);
    if (!blank(content.substr(start, nl == std::string::npos ? std::string::npos : nl - start))) {
      expected.push_back(line);
    }
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  if (expected != pass.lines) __builtin_trap();
}

// TextRowReader over the same file; `pass` is what RecordReader gave for the same columns.
void check_text_rows(const std::string& path, const bertrain::DatasetOptions& options, const FirstPass& pass) {
  const bertrain::BertTokenizer& tok = tokenizer();
  bool missing = pass.ctor_threw;
  for (std::size_t i = 0; !missing && i < options.text_columns.size(); ++i) missing = !pass.has_column[i];
  if (!missing && options.read_labels) missing = !pass.has_column[options.text_columns.size()];
  // JSON Lines: a text column that no readable record has stops the reader at the end of the file.
  bool in_no_row = false;
  for (std::size_t i = 0; !pass.ctor_threw && pass.any_readable && i < options.text_columns.size(); ++i) {
    in_no_row = in_no_row || !pass.present[i];
  }
  try {
    bertrain::TextRowReader reader(path, tok, options);
    if (missing) __builtin_trap();
    bertrain::TextRow row;
    int rows = 0, truncated = 0, last_line = 0;
    std::size_t next_record = 0;  // rows come from RecordReader's good records, in order
    bool threw = false;
    try {
      while (reader.next(&row)) {
        ++rows;
        truncated += row.truncated ? 1 : 0;
        while (next_record < pass.lines.size() && pass.lines[next_record] < row.line) ++next_record;
        if (next_record == pass.lines.size() || pass.lines[next_record] != row.line) __builtin_trap();
        if (pass.bad[next_record] || row.line <= last_line) __builtin_trap();
        last_line = row.line;
        const std::vector<int32_t>& ids = row.example.ids;
        if (ids.size() < 2 || ids.size() > static_cast<std::size_t>(options.max_length)) __builtin_trap();
        if (ids.front() != tok.cls_id() || ids.back() != tok.sep_id()) __builtin_trap();
        for (int32_t id : ids) {
          if (id < 0 || id >= tok.vocab().size()) __builtin_trap();
        }
        if (!row.example.labels.empty() || row.id.empty()) __builtin_trap();
        if (blank(row.raw_text) || !valid_utf8(row.raw_text) || !valid_utf8(row.id)) __builtin_trap();
        if (!options.read_labels && !row.tags.empty()) __builtin_trap();
        if (options.read_labels && !options.multi_label && (row.tags.size() != 1 || blank(row.tags[0]))) {
          __builtin_trap();
        }
        for (std::size_t t = 0; t < row.tags.size(); ++t) {
          if (!valid_utf8(row.tags[t])) __builtin_trap();
          if (options.multi_label) {
            const std::string& tag = row.tags[t];
            if (tag.empty() || blank(tag.substr(0, 1)) || blank(tag.substr(tag.size() - 1))) __builtin_trap();
            if (std::find(row.tags.begin(), row.tags.begin() + static_cast<std::ptrdiff_t>(t), tag) !=
                row.tags.begin() + static_cast<std::ptrdiff_t>(t)) {
              __builtin_trap();  // duplicates are dropped
            }
          }
        }
      }
    } catch (const bertrain::Error&) {
      threw = true;
    }
    if (rows != reader.rows_read() || truncated != reader.truncated()) __builtin_trap();
    if (options.skip_bad_rows) {
      // Every record RecordReader gave is consumed, good or skipped; only what stopped it (or a text column in no
      // row) stops this reader.
      if (threw != (pass.next_threw || in_no_row)) __builtin_trap();
      if (static_cast<std::size_t>(rows + reader.skipped()) != pass.lines.size()) __builtin_trap();
      if (reader.skip_reasons().size() > static_cast<std::size_t>(reader.skipped())) __builtin_trap();
    } else {
      if (reader.skipped() != 0 || static_cast<std::size_t>(rows) > pass.lines.size()) __builtin_trap();
      if (pass.any_error && !threw) __builtin_trap();  // a record RecordReader could not read stops this reader
      if (!threw && (pass.next_threw || in_no_row || static_cast<std::size_t>(rows) != pass.lines.size())) {
        __builtin_trap();
      }
    }
  } catch (const bertrain::Error&) {
    if (!missing) __builtin_trap();  // the constructor rejects only what RecordReader's header check finds
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const unsigned selector = data[0];
  const RecordFormat format =
      selector % 3 == 0 ? RecordFormat::kCsv : selector % 3 == 1 ? RecordFormat::kTsv : RecordFormat::kJsonl;
  const unsigned v = selector / 3;
  const bool news = (v & 1) != 0;
  std::string content(reinterpret_cast<const char*>(data + 1), size - 1);
  const bool big = (v >> 1 & 3) == 3 && !content.empty();
  if (big) {
    const std::size_t body = content.size();
    while (content.size() < (std::size_t{32} << 10) + body) content.append(content, 0, body);
  }
  const std::string& path = bertrain_fuzz::write_scratch("records", reinterpret_cast<const uint8_t*>(content.data()),
                                                         content.size());

  bertrain::DatasetOptions options;
  options.format = bertrain::record_format_name(format);
  options.text_columns = news ? std::vector<std::string>{"title", "description"} : std::vector<std::string>{"text"};
  options.label_column = news ? "tag" : "label";
  static const int kMaxLengths[] = {2, 3, 8, 64};
  options.max_length = kMaxLengths[v >> 3 & 3];
  options.label_separator = (v >> 5 & 1) != 0 ? "|" : ",";
  options.clean = (v >> 6 & 1) == 0;
  // TextRowReader's columns: the text columns, the label column, then "id".
  std::vector<std::string> columns = options.text_columns;
  columns.push_back(options.label_column);
  columns.push_back("id");

  const WholeText whole = format == RecordFormat::kJsonl ? WholeText() : parse_whole(content, format);
  const FirstPass pass = read_records(path, content, format, columns, whole);
  if (format == RecordFormat::kJsonl && bertrain_fuzz::is_text(content)) check_jsonl_lines(content, pass);

  options.skip_bad_rows = true;
  options.read_labels = true;
  options.multi_label = (v >> 5 & 1) != 0;
  check_text_rows(path, options, pass);
  if (big) return 0;  // the copies' rows are alike: one pass over them is enough (tokenizing is most of the time)
  options.multi_label = !options.multi_label;
  check_text_rows(path, options, pass);
  options.read_labels = false;
  check_text_rows(path, options, pass);
  options.skip_bad_rows = false;
  options.read_labels = true;
  options.multi_label = false;
  check_text_rows(path, options, pass);
  return 0;
}

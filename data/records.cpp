// Streaming record reader (see records.h): CSV and TSV through CsvParser, JSON Lines one physical line at a
// time through nlohmann::json, both over a ChunkedInput.
#include "data/records.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/ascii.h"
#include "core/count_text.h"
#include "core/error.h"
#include "core/files.h"
#include "core/utf8.h"
#include "data/chunked_input.h"
#include "data/csv_parser.h"

namespace bertrain {

namespace {

// nlohmann's messages quote the text read so far, which on a long line is most of the line.
constexpr std::size_t kMaxJsonDetail = 160;

const char* file_kind(RecordFormat format) {
  switch (format) {
    case RecordFormat::kCsv:
      return "CSV file";
    case RecordFormat::kTsv:
      return "TSV file";
    case RecordFormat::kJsonl:
      return "JSON Lines file";
  }
  return "file";
}

void reset(RecordField* field) {
  field->present = false;
  field->text.clear();
  field->is_list = false;
  field->items.clear();
}

// "an array", "a string", "null", ... for messages.
std::string json_kind(const nlohmann::json& value) {
  const std::string name = value.type_name();
  if (value.is_null()) return name;
  return (name == "array" || name == "object" ? "an " : "a ") + name;
}

// nlohmann's message without its "[json.exception...] parse error at line 1, column N: " prefix, shortened.
std::string json_error_detail(const nlohmann::json::exception& e) {
  std::string detail = e.what();
  const std::size_t bracket = detail.find("] ");
  if (bracket != std::string::npos) detail.erase(0, bracket + 2);
  if (detail.rfind("parse error", 0) == 0) {
    const std::size_t colon = detail.find(": ");
    if (colon != std::string::npos) detail.erase(0, colon + 2);
  }
  if (detail.size() > kMaxJsonDetail) {
    std::size_t cut = kMaxJsonDetail;
    while (cut > 0 && (static_cast<unsigned char>(detail[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
    detail = detail.substr(0, cut) + "...";
  }
  // "last read: '...'" can end inside a character (where the lexer stopped in one): escaped, the message stays
  // one line of valid UTF-8.
  detail = escape_for_message(detail);
  if (const auto* parse = dynamic_cast<const nlohmann::json::parse_error*>(&e)) {
    detail += " (at byte " + std::to_string(parse->byte) + " of the line)";
  }
  return detail;
}

bool is_blank_line(const std::string& line) { return line.find_first_not_of(" \t\r\n") == std::string::npos; }

// An integer too large for 64 bits, which the JSON parser keeps only as a double: 10^26 and 10^26 + 1 would read as
// the same text, 1e+26 (two labels merged without a word). Such a value must be quoted.
bool inexact_integer(const nlohmann::json& value) {
  if (!value.is_number_float()) return false;
  const double v = value.get<double>();
  return std::isfinite(v) && std::abs(v) >= 9223372036854775808.0 && v == std::floor(v);
}

// A JSON scalar as text: strings as they are, numbers and booleans as their JSON text.
bool scalar_text(const nlohmann::json& value, std::string* out) {
  if (value.is_string()) {
    *out = value.get_ref<const std::string&>();
    return true;
  }
  if (value.is_number() || value.is_boolean()) {
    *out = value.dump();
    return true;
  }
  return false;
}

// Fills *field from `value` (the key exists); the reason when the value cannot be a field, else "".
std::string json_field(const nlohmann::json& value, const std::string& column, RecordField* field) {
  if (value.is_null()) return "";  // null counts as absent
  if (value.is_array()) {
    field->present = field->is_list = true;
    field->items.resize(value.size());
    for (std::size_t k = 0; k < value.size(); ++k) {
      if (inexact_integer(value[k])) {
        return "column '" + column + "': element " + std::to_string(k + 1) + " of its array, " + value[k].dump() +
               ", is a number too large to read exactly (write it as a string)";
      }
      if (!scalar_text(value[k], &field->items[k])) {
        return "column '" + column + "': element " + std::to_string(k + 1) + " of its array is " + json_kind(value[k]) +
               " (expected strings, numbers or booleans)";
      }
    }
    return "";
  }
  if (inexact_integer(value)) {
    return "column '" + column + "': " + value.dump() + " is a number too large to read exactly (write it as a string)";
  }
  if (!scalar_text(value, &field->text)) {
    return "column '" + column + "' is " + json_kind(value) +
           " (expected a string, a number, a boolean or an array of them)";
  }
  field->present = true;
  return "";
}

}  // namespace

std::optional<RecordFormat> extension_format(const std::string& path) {
  const std::string extension = ascii_lower(std::filesystem::path(path).extension().string());
  if (extension == ".csv") return RecordFormat::kCsv;
  if (extension == ".tsv" || extension == ".tab") return RecordFormat::kTsv;
  if (extension == ".jsonl" || extension == ".ndjson") return RecordFormat::kJsonl;
  return std::nullopt;
}

RecordFormat record_format(const std::string& path, const std::string& format_flag) {
  if (format_flag == "csv") return RecordFormat::kCsv;
  if (format_flag == "tsv") return RecordFormat::kTsv;
  if (format_flag == "jsonl") return RecordFormat::kJsonl;
  BERTRAIN_CHECK(format_flag.empty() || format_flag == "auto",
                 "--format must be auto, csv, tsv or jsonl, got '" << format_flag << "'");
  if (const std::optional<RecordFormat> format = extension_format(path)) return *format;
  // A directory or a missing path is that, not a question of format.
  require_readable_file(path, "dataset file");
  BERTRAIN_FAIL(path << ": cannot tell the format from the extension; pass --format csv|tsv|jsonl");
}

const char* record_format_name(RecordFormat format) {
  switch (format) {
    case RecordFormat::kCsv:
      return "csv";
    case RecordFormat::kTsv:
      return "tsv";
    case RecordFormat::kJsonl:
      return "jsonl";
  }
  return "?";
}

struct RecordReader::State {
  State(const std::string& path_, RecordFormat format_, std::vector<std::string> columns_)
      : path(path_), format(format_), columns(std::move(columns_)), input(path_, file_kind(format_)) {}

  bool next_csv(Record* out);
  bool next_jsonl(Record* out);
  void read_header();

  std::string path;
  RecordFormat format;
  std::vector<std::string> columns;
  std::vector<std::string> header;
  std::vector<int> header_index;  // CSV/TSV: columns[i]'s position in the header, or -1
  std::vector<bool> last_use;     // whether no later column is at columns[i]'s position
  ChunkedInput input;
  // CSV/TSV
  std::unique_ptr<CsvParser> csv;
  CsvRow row;
  // JSONL
  std::uint64_t pos = 0;
  long long line = 1;
  std::string text;
};

// The first row is the header; the checks and messages are parse_csv's.
void RecordReader::State::read_header() {
  csv = std::make_unique<CsvParser>(&input, format == RecordFormat::kTsv ? '\t' : ',', path);
  bool found = csv->next(&row);
  const bool first_blank = found && row.blank;
  while (found && row.blank) found = csv->next(&row);
  BERTRAIN_CHECK(found, path << ": empty file (expected a header row)");
  BERTRAIN_CHECK(!first_blank, path << ":1: line 1 is empty (expected the header row)");
  header = row.fields;
  check_unique_header(header, path);
  for (const std::string& name : columns) {
    const auto at = std::find(header.begin(), header.end(), name);
    header_index.push_back(at == header.end() ? -1 : static_cast<int>(at - header.begin()));
  }
  for (std::size_t i = 0; i < columns.size(); ++i) {
    last_use.push_back(std::find(header_index.begin() + static_cast<long>(i) + 1, header_index.end(), header_index[i]) ==
                       header_index.end());
  }
}

bool RecordReader::State::next_csv(Record* out) {
  while (csv->next(&row)) {
    if (row.blank) continue;
    out->line = row.line;
    out->error.clear();
    if (row.fields.size() != header.size()) {
      out->fields.clear();
      out->error = "has " + count_of(static_cast<long long>(row.fields.size()), "field") + ", the header has " +
                   std::to_string(header.size());
      // One more, empty, field: the line ends with the delimiter, which says nothing against the format.
      const bool trailing = row.fields.size() == header.size() + 1 && row.fields.back().empty();
      if (trailing) {
        out->error += std::string(" (the line ends with a") + (format == RecordFormat::kTsv ? " tab" : " comma") +
                      ", which starts one more, empty, field)";
      }
      out->malformed = !trailing;
      return true;
    }
    out->malformed = false;
    out->fields.resize(columns.size());
    for (std::size_t i = 0; i < columns.size(); ++i) {
      RecordField& field = out->fields[i];
      reset(&field);
      if (header_index[i] < 0) continue;
      field.present = true;
      // The row's field is taken, not copied (a field of hundreds of megabytes was held twice), and gets the
      // record's old buffer to fill next; a column asked for twice (text and id) is copied for its earlier uses.
      std::string& value = row.fields[static_cast<std::size_t>(header_index[i])];
      if (last_use[i]) {
        field.text.swap(value);
      } else {
        field.text = value;
      }
    }
    return true;
  }
  return false;
}

bool RecordReader::State::next_jsonl(Record* out) {
  for (;;) {
    if (!input.has(pos)) return false;
    // The physical line, copied out chunk by chunk so the window never holds more than one chunk.
    text.clear();
    for (;;) {
      const std::uint64_t stop = input.find_loaded("\n", pos);
      input.append(&text, pos, stop);
      pos = stop;
      if (stop < input.end()) {
        ++pos;
        break;
      }
      input.release(pos);
      if (!input.fill()) break;
    }
    input.release(pos);
    const long long this_line = line++;
    if (is_blank_line(text)) continue;

    out->line = this_line;
    out->error.clear();
    out->fields.clear();
    out->malformed = true;
    nlohmann::json value;
    try {
      value = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      out->error = "invalid JSON: " + json_error_detail(e);
      return true;
    }
    if (!value.is_object()) {
      out->error = "expected a JSON object, found " + json_kind(value);
      return true;
    }
    out->malformed = false;
    out->fields.resize(columns.size());
    for (std::size_t i = 0; i < columns.size(); ++i) {
      RecordField& field = out->fields[i];
      reset(&field);
      const auto it = value.find(columns[i]);
      if (it == value.end()) continue;
      std::string why = json_field(*it, columns[i], &field);
      if (!why.empty()) {
        out->fields.clear();
        out->error = std::move(why);
        return true;
      }
    }
    return true;
  }
}

RecordReader::RecordReader(const std::string& path, RecordFormat format, std::vector<std::string> columns)
    : state_(std::make_unique<State>(path, format, std::move(columns))) {
  if (format == RecordFormat::kJsonl) {
    state_->pos = state_->input.skip_bom();
    state_->input.release(state_->pos);
  } else {
    state_->read_header();
  }
}

RecordReader::~RecordReader() = default;
RecordReader::RecordReader(RecordReader&&) noexcept = default;
RecordReader& RecordReader::operator=(RecordReader&&) noexcept = default;

const std::string& RecordReader::path() const { return state_->path; }

bool RecordReader::ready() const {
  return state_->input.ready(state_->csv ? state_->csv->position() : state_->pos);
}
RecordFormat RecordReader::format() const { return state_->format; }
const std::vector<std::string>& RecordReader::header() const { return state_->header; }

bool RecordReader::has_column(std::size_t i) const {
  BERTRAIN_CHECK(i < state_->columns.size(),
                 "RecordReader::has_column(" << i << "): only " << state_->columns.size() << " columns requested");
  return state_->format == RecordFormat::kJsonl || state_->header_index[i] >= 0;
}

bool RecordReader::next(Record* out) {
  return state_->format == RecordFormat::kJsonl ? state_->next_jsonl(out) : state_->next_csv(out);
}

}  // namespace bertrain

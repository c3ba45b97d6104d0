// RFC 4180 reader (see csv.h). The text is made valid UTF-8 first, then cut into records by a small
// state machine that tracks the physical line and character column for error messages.
#include "data/csv.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include "core/error.h"

namespace bertrain {

namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

bool in_range(unsigned char b, unsigned char lo, unsigned char hi) { return b >= lo && b <= hi; }

// Allowed range of the first continuation byte after lead byte `lead`, and the number of continuation
// bytes; the narrower first ranges exclude overlong forms, surrogates and code points above U+10FFFF
// (Unicode Table 3-7). Returns false for bytes that can never start a sequence.
bool utf8_lead(unsigned char lead, int* continuations, unsigned char* lo, unsigned char* hi) {
  *lo = 0x80, *hi = 0xBF;
  if (in_range(lead, 0xC2, 0xDF)) {
    *continuations = 1;
  } else if (in_range(lead, 0xE0, 0xEF)) {
    *continuations = 2;
    if (lead == 0xE0) *lo = 0xA0;
    if (lead == 0xED) *hi = 0x9F;
  } else if (in_range(lead, 0xF0, 0xF4)) {
    *continuations = 3;
    if (lead == 0xF0) *lo = 0x90;
    if (lead == 0xF4) *hi = 0x8F;
  } else {
    return false;
  }
  return true;
}

// Length of the valid sequence at `i`, or of the maximal invalid subpart (>= 1 byte) with *valid false.
// A maximal subpart is the longest prefix of a well-formed sequence; Python's errors="replace" and the
// WHATWG decoder emit one U+FFFD for each, so our output matches theirs byte for byte.
std::size_t utf8_sequence(const std::string& s, std::size_t i, bool* valid) {
  const auto lead = static_cast<unsigned char>(s[i]);
  *valid = true;
  if (lead < 0x80) return 1;
  int continuations = 0;
  unsigned char lo = 0, hi = 0;
  if (!utf8_lead(lead, &continuations, &lo, &hi)) {
    *valid = false;
    return 1;
  }
  std::size_t length = 1;
  for (int k = 0; k < continuations; ++k) {
    if (i + length >= s.size() || !in_range(static_cast<unsigned char>(s[i + length]), lo, hi)) {
      *valid = false;
      return length;
    }
    ++length;
    lo = 0x80, hi = 0xBF;  // only the first continuation has a narrowed range
  }
  return length;
}

// Reads the records of a sanitized CSV text. Lines and character columns are 1-based; columns count
// code points, so they match what an editor shows.
class CsvParser {
 public:
  CsvParser(const std::string& text, const std::string& source) : text_(text), source_(source) {}

  struct Record {
    std::vector<std::string> fields;
    int line = 0;
    bool blank = false;  // an empty physical line: one empty, unquoted field
  };

  // Next record into `out`; false at the end of the text.
  bool next(Record* out) {
    if (pos_ >= text_.size()) return false;
    out->fields.clear();
    out->line = line_;
    bool quoted_any = false;
    for (;;) {
      std::string field;
      if (text_[pos_] == '"') {
        quoted_any = true;
        read_quoted(&field);
      } else {
        read_unquoted(&field);
      }
      out->fields.push_back(std::move(field));
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        // A ',' as the very last character still opens one final (empty) field.
        if (pos_ >= text_.size()) {
          out->fields.emplace_back();
          break;
        }
        continue;
      }
      end_record();
      break;
    }
    out->blank = !quoted_any && out->fields.size() == 1 && out->fields[0].empty();
    return true;
  }

 private:
  int column_at(std::size_t pos) const {
    int column = 1;
    for (std::size_t i = line_start_; i < pos; ++i) {
      if ((static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80) ++column;  // skip continuation bytes
    }
    return column;
  }

  void new_line(std::size_t next_line_start) {
    ++line_;
    line_start_ = next_line_start;
  }

  // Consumes the record terminator: LF, CRLF or the end of the text.
  void end_record() {
    if (pos_ >= text_.size()) return;
    if (text_[pos_] == '\r') {
      // A bare CR would be the line end of an old Mac file; reading it as data would silently merge
      // lines into one record, so it is refused where it is.
      BERTRAIN_CHECK(pos_ + 1 < text_.size() && text_[pos_ + 1] == '\n',
                     source_ << ":" << line_ << ": carriage return not followed by a line feed outside quotes at line "
                             << line_ << ", character column " << column_at(pos_));
      ++pos_;
    }
    ++pos_;  // '\n'
    new_line(pos_);
  }

  // An unquoted field runs to ',', CR, LF or the end. A '"' inside it is kept as data, as Python's csv
  // module does (RFC 4180 forbids it, but refusing such files helps nobody).
  void read_unquoted(std::string* field) {
    const std::size_t end = text_.find_first_of(",\r\n", pos_);
    const std::size_t stop = end == std::string::npos ? text_.size() : end;
    field->assign(text_, pos_, stop - pos_);
    pos_ = stop;
  }

  // A quoted field: everything up to the closing quote, "" standing for one quote; newlines inside are
  // data (kept as they are, CRLF included) but still advance the line count.
  void read_quoted(std::string* field) {
    const int open_line = line_, open_column = column_at(pos_);
    ++pos_;
    for (;;) {
      const std::size_t quote = text_.find('"', pos_);
      BERTRAIN_CHECK(quote != std::string::npos, source_ << ":" << open_line
                                                         << ": unterminated quoted field starting at line " << open_line
                                                         << ", character column " << open_column);
      for (std::size_t nl = text_.find('\n', pos_); nl < quote; nl = text_.find('\n', nl + 1)) new_line(nl + 1);
      field->append(text_, pos_, quote - pos_);
      pos_ = quote + 1;
      if (pos_ < text_.size() && text_[pos_] == '"') {
        field->push_back('"');
        ++pos_;
        continue;
      }
      break;
    }
    if (pos_ >= text_.size()) return;
    const char c = text_[pos_];
    BERTRAIN_CHECK(c == ',' || c == '\n' || c == '\r',
                   source_ << ":" << line_ << ": unexpected character '" << printable(pos_)
                           << "' after the closing quote of the field opened at line " << open_line
                           << ", character column " << open_column << " (at line " << line_ << ", character column "
                           << column_at(pos_) << ")");
  }

  // The (UTF-8) character at `pos`, for a message.
  std::string printable(std::size_t pos) const {
    bool valid = true;
    return text_.substr(pos, utf8_sequence(text_, pos, &valid));
  }

  const std::string& text_;
  const std::string& source_;
  std::size_t pos_ = 0;
  std::size_t line_start_ = 0;
  int line_ = 1;
};

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

void check_unique_header(const std::vector<std::string>& header, const std::string& source) {
  std::unordered_set<std::string> seen;
  for (std::size_t i = 0; i < header.size(); ++i) {
    BERTRAIN_CHECK(seen.insert(header[i]).second, source << ":1: duplicate column name '" << header[i]
                                                         << "' (field " << i + 1 << " of the header: " << join(header)
                                                         << ")");
  }
}

void check_field_count(std::size_t found, std::size_t expected, int line, const std::string& source) {
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
  BERTRAIN_CHECK(index >= 0, source << ": missing column '" << name << "' (columns: " << join(header) << ")");
  return index;
}

std::string sanitize_utf8(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    bool valid = true;
    const std::size_t length = utf8_sequence(text, i, &valid);
    if (valid) {
      out.append(text, i, length);
    } else {
      out += kReplacement;
    }
    i += length;
  }
  return out;
}

CsvTable parse_csv(const std::string& raw, const std::string& source) {
  // The BOM is a marker, not part of the first column name.
  const bool bom = raw.compare(0, 3, "\xEF\xBB\xBF") == 0;
  const std::string text = sanitize_utf8(bom ? raw.substr(3) : raw);

  CsvParser parser(text, source);
  std::vector<CsvParser::Record> records;
  CsvParser::Record record;
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
  // A folder opens as a stream on Linux and reads as nothing, which would be reported as an empty file.
  std::error_code ignored;
  BERTRAIN_CHECK(!std::filesystem::is_directory(path, ignored), "cannot read CSV file '" << path << "': it is a folder");
  std::ifstream in(path, std::ios::binary);
  BERTRAIN_CHECK(in, "cannot open CSV file '" << path << "': " << std::strerror(errno));
  std::ostringstream contents;
  contents << in.rdbuf();
  BERTRAIN_CHECK(!in.bad(), "cannot read CSV file '" << path << "': " << std::strerror(errno));
  return parse_csv(contents.str(), path);
}

}  // namespace bertrain

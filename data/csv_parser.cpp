// The RFC 4180 state machine (see csv_parser.h). Lines and character columns are 1-based; columns count
// code points (the input is UTF-8 text, checked by ChunkedInput), so they match what an editor shows.
#include "data/csv_parser.h"

#include <algorithm>
#include <unordered_set>

#include "core/error.h"
#include "core/utf8.h"

namespace bertrain {

CsvParser::CsvParser(ChunkedInput* input, char delimiter, const std::string& source)
    : in_(input), source_(source), delimiter_(delimiter), stops_{delimiter, '\r', '\n', '\0'} {
  pos_ = line_start_ = column_pos_ = in_->skip_bom();
  in_->release(pos_);
}

bool CsvParser::next(CsvRow* out) {
  if (!in_->has(pos_)) return false;
  out->line = line_;
  std::size_t count = 0;
  bool quoted_any = false;
  for (;;) {
    if (count == out->fields.size()) out->fields.emplace_back();
    std::string& field = out->fields[count++];
    field.clear();
    if (in_->at(pos_) == '"') {
      quoted_any = true;
      read_quoted(&field);
    } else {
      read_unquoted(&field);
    }
    if (in_->has(pos_) && in_->at(pos_) == delimiter_) {
      ++pos_;
      // A delimiter as the very last character still opens one final (empty) field.
      if (!in_->has(pos_)) {
        if (count == out->fields.size()) out->fields.emplace_back();
        out->fields[count++].clear();
        break;
      }
      continue;
    }
    end_record();
    break;
  }
  out->fields.resize(count);
  out->blank = !quoted_any && count == 1 && out->fields[0].empty();
  return true;
}

int CsvParser::column_at(std::uint64_t pos) {
  // pos is always at or just after an ASCII byte, so [column_pos_, pos) holds whole characters.
  if (pos < column_pos_) column_pos_ = line_start_, column_ = 1;
  while (column_pos_ < pos) {
    bool valid = true;
    column_pos_ += utf8_sequence(in_->data(column_pos_), static_cast<std::size_t>(pos - column_pos_), &valid);
    ++column_;
  }
  return column_;
}

void CsvParser::new_line(std::uint64_t next_line_start) {
  ++line_;
  line_start_ = column_pos_ = next_line_start;
  column_ = 1;
  // The window keeps the current line (for columns in messages); what came before can go.
  in_->release(next_line_start);
}

// Consumes the record terminator: LF, CRLF or the end of the input.
void CsvParser::end_record() {
  if (!in_->has(pos_)) return;
  if (in_->at(pos_) == '\r') {
    // A bare CR would be the line end of an old Mac file; reading it as data would silently merge lines
    // into one record, so it is refused where it is.
    BERTRAIN_CHECK(in_->has(pos_ + 1) && in_->at(pos_ + 1) == '\n',
                   source_ << ":" << line_ << ": carriage return not followed by a line feed outside quotes at line "
                           << line_ << ", character column " << column_at(pos_));
    ++pos_;
  }
  ++pos_;  // '\n'
  new_line(pos_);
}

// An unquoted field runs to the delimiter, CR, LF or the end. A '"' inside it is kept as data, as Python's
// csv module does (RFC 4180 forbids it, but refusing such files helps nobody).
void CsvParser::read_unquoted(std::string* field) {
  for (;;) {
    const std::uint64_t stop = in_->find_loaded(stops_, pos_);
    in_->append(field, pos_, stop);
    pos_ = stop;
    if (stop < in_->end() || !in_->fill()) return;
  }
}

// A quoted field: everything up to the closing quote, "" standing for one quote; newlines inside are data
// (kept as they are, CRLF included) but still advance the line count.
void CsvParser::read_quoted(std::string* field) {
  const long long open_line = line_;
  const int open_column = column_at(pos_);
  ++pos_;
  std::uint64_t scan = pos_;
  for (;;) {
    const std::uint64_t stop = in_->find_loaded("\"\n", scan);
    if (stop == in_->end()) {
      // Keep what was read before loading more: the window drops bytes before the current line.
      in_->append(field, pos_, stop);
      pos_ = scan = stop;
      BERTRAIN_CHECK(in_->fill(), source_ << ":" << open_line << ": unterminated quoted field starting at line "
                                          << open_line << ", character column " << open_column);
      continue;
    }
    if (in_->at(stop) == '\n') {
      new_line(stop + 1);
      scan = stop + 1;
      continue;
    }
    in_->append(field, pos_, stop);
    pos_ = stop + 1;
    if (in_->has(pos_) && in_->at(pos_) == '"') {
      field->push_back('"');
      scan = ++pos_;
      continue;
    }
    break;
  }
  if (!in_->has(pos_)) return;
  const char c = in_->at(pos_);
  BERTRAIN_CHECK(c == delimiter_ || c == '\n' || c == '\r',
                 source_ << ":" << line_ << ": unexpected character '" << printable(pos_)
                         << "' after the closing quote of the field opened at line " << open_line
                         << ", character column " << open_column << " (at line " << line_ << ", character column "
                         << column_at(pos_) << ")");
}

// The character at `pos`, escaped for a message (a control character as \xHH).
std::string CsvParser::printable(std::uint64_t pos) {
  in_->has(pos + 3);  // the longest sequence, where the input has it
  const std::size_t available = static_cast<std::size_t>(std::min<std::uint64_t>(4, in_->end() - pos));
  bool valid = true;
  const std::size_t length = utf8_sequence(in_->data(pos), available, &valid);
  return escape_for_message(std::string(in_->data(pos), length));
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

void check_unique_header(const std::vector<std::string>& header, const std::string& source) {
  std::unordered_set<std::string> seen;
  for (std::size_t i = 0; i < header.size(); ++i) {
    BERTRAIN_CHECK(seen.insert(header[i]).second, source << ":1: duplicate column name '" << header[i] << "' (field "
                                                         << i + 1 << " of the header: " << join_names(header) << ")");
  }
}

}  // namespace bertrain

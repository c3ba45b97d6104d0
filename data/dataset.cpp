#include "data/dataset.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

#include "core/ascii.h"
#include "core/count_text.h"
#include "core/error.h"
#include "core/utf8.h"
#include "data/csv_parser.h"
#include "data/hf_unicode.h"
#include "data/text_clean.h"

namespace bertrain {

namespace {

// Rows whose skip reasons are kept for the log; the rest are only counted.
constexpr std::size_t kSkipReasonsKept = 5;

}  // namespace

std::vector<std::string> parse_column_list(const std::string& text, const char* flag) {
  BERTRAIN_CHECK(!ascii_trim(text).empty(), flag << " names no column (expected column names separated by commas, e.g. "
                                            << flag << " title,description)");
  std::vector<std::string> columns;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    const std::string name =
        ascii_trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    BERTRAIN_CHECK(!name.empty(), flag << " '" << text << "' has an empty column name (expected column names "
                                       << "separated by commas, e.g. " << flag << " title,description)");
    BERTRAIN_CHECK(std::find(columns.begin(), columns.end(), name) == columns.end(),
                   flag << " '" << text << "' names column '" << name << "' twice");
    columns.push_back(name);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return columns;
}

bool is_blank_text(const std::string& text) {
  for (std::size_t i = 0; i < text.size();) {
    std::size_t length = 1;
    const int32_t c = hf::decode_utf8(text.data() + i, text.size() - i, &length);
    if (!hf::is_whitespace(c)) return false;
    i += length;
  }
  return true;
}

std::string join_text_columns(const std::vector<std::string>& values) {
  std::string text;
  for (const std::string& value : values) {
    if (is_blank_text(value)) continue;
    if (!text.empty()) text += ' ';
    text += value;
  }
  return text;
}

// Words of the cleaned text past what --max-length can hold change no encoding: the tokenizers bertrain reads all
// split on whitespace first, so each word gives at least one token. Cleaning stops past eight times that many (a
// margin that costs a few kilobytes), so that a 100 MB field is not cleaned and tokenized whole for its first tokens
// (it took 2 GB and 7 s).
constexpr std::size_t kWordsPerToken = 8;

Example encode_text(const std::string& text, const Tokenizer& tokenizer, const DatasetOptions& options,
                    bool* truncated) {
  const std::size_t enough_words = kWordsPerToken * static_cast<std::size_t>(std::max(options.max_length, 1));
  Encoding encoding = tokenizer.encode(options.clean ? clean_text(text, enough_words) : text, options.max_length);
  if (truncated != nullptr) *truncated = encoding.truncated;
  Example example;
  example.ids = std::move(encoding.ids);
  return example;
}

Example encode_text_keeping_end(const std::string& text, const Tokenizer& tokenizer, const DatasetOptions& options,
                                bool* truncated) {
  Encoding whole = tokenizer.encode(options.clean ? clean_text(text) : text, std::numeric_limits<int>::max());
  const std::size_t prefix = static_cast<std::size_t>(tokenizer.prefix_specials());
  const std::size_t suffix = static_cast<std::size_t>(tokenizer.suffix_specials());
  const std::size_t keep = static_cast<std::size_t>(std::max(options.max_length, 0));
  BERTRAIN_CHECK(keep >= prefix + suffix, "encode: max_length must be >= " << prefix + suffix
                                                                           << " to hold the special tokens, got " << keep);
  const bool cut = whole.ids.size() > keep;
  if (truncated != nullptr) *truncated = cut;
  Example example;
  if (cut) {  // the specials before, the last tokens of the text, the specials after
    const auto first_kept = whole.ids.end() - static_cast<std::ptrdiff_t>(keep - prefix);
    whole.ids.erase(whole.ids.begin() + static_cast<std::ptrdiff_t>(prefix), first_kept);
  }
  example.ids = std::move(whole.ids);
  return example;
}

namespace {

bool offers(const DatasetOptions& options, const char* flag) {
  return std::find(options.command_flags.begin(), options.command_flags.end(), flag) != options.command_flags.end();
}

// `text` when the command has --`flag`, else "".
std::string hint(const DatasetOptions& options, const char* flag, const std::string& text) {
  return offers(options, flag) ? text : std::string();
}

const char* format_title(RecordFormat format) {
  switch (format) {
    case RecordFormat::kCsv:
      return "CSV";
    case RecordFormat::kTsv:
      return "TSV";
    case RecordFormat::kJsonl:
      return "JSON Lines";
  }
  return "?";
}

// A column name as a message shows it: a tab as \x09, a byte-order mark (invisible, yet part of the name after the
// file's own) as \uFEFF.
std::string visible_name(const std::string& name) {
  std::string shown = escape_for_message(name);
  for (std::size_t at = shown.find("\xEF\xBB\xBF"); at != std::string::npos; at = shown.find("\xEF\xBB\xBF", at)) {
    shown.replace(at, 3, "\\uFEFF");
  }
  return shown;
}

// The columns of a header, for a message.
std::string header_names(const std::vector<std::string>& header) {
  std::vector<std::string> shown;
  for (const std::string& name : header) shown.push_back(visible_name(name));
  return join_names(shown);
}

// Why a CSV/TSV header may lack every column asked for: the file is JSON Lines (its first line a JSON object), or the
// header is one column holding another delimiter.
std::string delimiter_hint(const std::vector<std::string>& header, RecordFormat format, const DatasetOptions& options) {
  const std::size_t first = header.empty() ? std::string::npos : header[0].find_first_not_of(" \t\xEF\xBB\xBF");
  if (first != std::string::npos && header[0][first] == '{') {
    return "; the first line is a JSON object: the file is JSON Lines, read it as such (" +
           hint(options, "format", "--format jsonl or ") + "a .jsonl name)";
  }
  if (header.size() != 1) return "";
  const std::string& only = header[0];
  const std::string format_flag = hint(options, "format", "--format or ");
  if (format == RecordFormat::kCsv && only.find('\t') != std::string::npos) {
    return "; the header is one column: the file is tab-separated, read it as TSV (" + format_flag + "a .tsv name)";
  }
  if (format == RecordFormat::kTsv && only.find(',') != std::string::npos) {
    return "; the header is one column: the file is comma-separated, read it as CSV (" + format_flag + "a .csv name)";
  }
  for (const char delimiter : {';', '|'}) {
    if (only.find(delimiter) != std::string::npos) {
      return std::string("; the header is one column: fields separated by '") + delimiter +
             "' are neither CSV nor TSV, save the file with commas or tabs";
    }
  }
  return "";
}

// A header name that is `wanted` but for surrounding spaces, a byte-order mark or case (` title`, "\xEF\xBB\xBFtitle"
// after a second BOM, `Title`): "; the header has ' title' (names are matched as written)", else "".
std::string near_name_hint(const std::vector<std::string>& header, const std::string& wanted) {
  const auto plain = [](std::string name) {
    static const std::string edges[] = {" ", "\t", "\xEF\xBB\xBF"};
    const auto strip = [&name](const std::string& edge) {  // one edge off either end; whether there was one
      if (name.size() < edge.size()) return false;
      if (name.compare(0, edge.size(), edge) == 0) {
        name.erase(0, edge.size());
        return true;
      }
      if (name.compare(name.size() - edge.size(), edge.size(), edge) == 0) {
        name.erase(name.size() - edge.size());
        return true;
      }
      return false;
    };
    while (std::any_of(std::begin(edges), std::end(edges), strip)) {
    }
    return ascii_lower(name);
  };
  for (const std::string& name : header) {
    if (name != wanted && plain(name) == plain(wanted)) {
      return "; the header has '" + visible_name(name) +
             "' (names are matched as written: spaces, case and a byte-order mark count)";
    }
  }
  return "";
}

// The columns a reader asks for: the text columns, then the label column, then the id column.
std::vector<std::string> requested_columns(const DatasetOptions& options) {
  BERTRAIN_CHECK(!options.text_columns.empty(), "--text-columns names no column");
  std::vector<std::string> columns = options.text_columns;
  columns.push_back(options.label_column);
  columns.push_back(options.id_column);
  return columns;
}

}  // namespace

TextRowReader::TextRowReader(const std::string& path, const Tokenizer& tokenizer, const DatasetOptions& options)
    : tokenizer_(tokenizer),
      options_(options),
      records_(path, record_format(path, options.format), requested_columns(options)),
      label_field_(options.text_columns.size()),
      id_field_(options.text_columns.size() + 1),
      text_values_(options.text_columns.size()),
      text_seen_(options.text_columns.size(), false) {
  BERTRAIN_CHECK(options.max_length >= 2, "--max-length must be at least 2 ([CLS] and [SEP]), got "
                                              << options.max_length);
  BERTRAIN_CHECK(!options.multi_label || !options.label_separator.empty(), "--label-separator must not be empty");
  // A CSV/TSV header without a needed column fails every row: one error up front instead.
  const std::string why_not = delimiter_hint(records_.header(), records_.format(), options);
  const std::string columns = "(columns: " + header_names(records_.header());
  for (std::size_t i = 0; i < options.text_columns.size(); ++i) {
    BERTRAIN_CHECK(records_.has_column(i),
                   path << ": missing text column '" << options.text_columns[i] << "' " << columns
                        << near_name_hint(records_.header(), options.text_columns[i])
                        << (why_not.empty() ? hint(options, "text-columns", "; choose with --text-columns") : why_not)
                        << ")");
  }
  if (options.id_column_given) {
    BERTRAIN_CHECK(records_.has_column(id_field_), path << ": missing id column '" << options.id_column << "' "
                                                        << columns << near_name_hint(records_.header(), options.id_column)
                                                        << "; choose with --id-column)");
  }
  if (options.read_labels) {
    BERTRAIN_CHECK(records_.has_column(label_field_),
                   path << ": missing label column '" << options.label_column << "' " << columns
                        << near_name_hint(records_.header(), options.label_column)
                        << (why_not.empty() ? hint(options, "label-column", "; choose with --label-column") : why_not)
                        << ")");
  }
}

std::vector<std::string> TextRowReader::split_labels(const RecordField& field) const {
  std::vector<std::string> labels;
  std::unordered_set<std::string> seen;  // a field may hold thousands of labels: no scan per label
  auto add = [&](const std::string& label) {
    if (!is_blank_text(label) && seen.insert(label).second) labels.push_back(label);  // blank: as text, no value
  };
  if (field.is_list) {
    for (const std::string& item : field.items) add(ascii_trim(item));
    return labels;
  }
  const std::string& sep = options_.label_separator;
  std::size_t start = 0;
  for (;;) {
    const std::size_t at = field.text.find(sep, start);
    add(ascii_trim(field.text.substr(start, at == std::string::npos ? std::string::npos : at - start)));
    if (at == std::string::npos) break;
    start = at + sep.size();
  }
  return labels;
}

std::string TextRowReader::read_row(const Record& record, TextRow* row, std::string* column_flag) {
  column_flag->clear();
  if (!record.error.empty()) return record.error;
  ++readable_;
  bool absent = false;  // JSON Lines: some text column's key is absent or null
  for (std::size_t i = 0; i < options_.text_columns.size(); ++i) {
    absent |= !record.fields[i].present;
    text_seen_[i] = text_seen_[i] || record.fields[i].present;  // every column of a readable row, even a bad one
  }
  for (std::size_t i = 0; i < options_.text_columns.size(); ++i) {
    const RecordField& field = record.fields[i];
    if (field.is_list) {
      *column_flag = "text-columns";
      return "text column '" + options_.text_columns[i] + "' is a list, not a text";
    }
    text_values_[i] = field.text;
  }
  row->raw_text = join_text_columns(text_values_);
  if (row->raw_text.empty()) {
    if (absent) *column_flag = "text-columns";
    if (options_.text_columns.size() == 1) {
      return "text column '" + options_.text_columns[0] + "' is " + (absent ? "absent or null" : "empty");
    }
    return "all text columns (" + join_names(options_.text_columns) + ") are " +
           (absent ? "empty, absent or null" : "empty");
  }
  row->tags.clear();
  if (options_.read_labels) {
    const RecordField& field = record.fields[label_field_];
    const std::string& name = options_.label_column;
    if (!field.present) {
      *column_flag = "label-column";
      return "label column '" + name + "' is missing";
    }
    if (options_.multi_label) {
      row->tags = split_labels(field);
      // An explicit empty JSON array is a row with no labels; an empty string is a missing value.
      if (row->tags.empty() && !(field.is_list && field.items.empty())) return "label column '" + name + "' is empty";
    } else {
      if (field.is_list) {
        *column_flag = "multi-label";
        return "label column '" + name + "' is a list" +
               (offers(options_, "multi-label") ? " (pass --multi-label for label sets)" : ", expected one label");
      }
      // Blank as text is (Unicode White_Space: a no-break space alone is no label either).
      if (is_blank_text(field.text)) return "label column '" + name + "' is empty";
      row->tags.push_back(field.text);
    }
  }
  const RecordField& id = record.fields[id_field_];
  row->id = id.present && !id.is_list && !id.text.empty() ? id.text : std::to_string(index_);
  row->line = record.line;
  row->example = encode_text(row->raw_text, tokenizer_, options_, &row->truncated);
  return "";
}

bool TextRowReader::next(TextRow* row) {
  while (records_.next(&record_)) {
    std::string column_flag;
    const std::string why = read_row(record_, row, &column_flag);
    ++index_;
    if (why.empty()) {
      ++good_;
      truncated_ += row->truncated ? 1 : 0;
      return true;
    }
    const std::string where = records_.path() + ":" + std::to_string(record_.line);
    if (!options_.skip_bad_rows) {
      // A first row the format cannot read says more about the format than about the row: skipping it would
      // skip them all.
      if (index_ == 1 && record_.malformed) {
        const bool by_extension = options_.format == "auto" || options_.format.empty();
        const std::string as_said =
            by_extension ? ", as its extension says?" + hint(options_, "format", " --format chooses the format")
                         : std::string(", as --format says?");
        BERTRAIN_FAIL(where << ": " << why << " (the first row already: is the file " << format_title(records_.format())
                            << as_said << ")");
      }
      // So does a column the first row lacks or holds in another kind: skipping such rows may skip them all.
      if (index_ == 1 && !column_flag.empty()) {
        const bool said = why.find("--" + column_flag) != std::string::npos;
        BERTRAIN_FAIL(where << ": " << why << " (the first row already"
                            << (said ? std::string() : hint(options_, column_flag.c_str(), ": check --" + column_flag))
                            << ")");
      }
      BERTRAIN_FAIL(where << ": " << why << hint(options_, "skip-bad-rows", " (--skip-bad-rows skips such rows)"));
    }
    ++skipped_;
    if (skip_reasons_.size() < kSkipReasonsKept) skip_reasons_.push_back(where + ": " + why);
  }
  // A JSON object has no header to check up front: a text column no row has is a misspelt name, not a file of
  // empty values, and would otherwise leave the text to the other columns unnoticed.
  for (std::size_t i = 0; i < text_seen_.size() && readable_ > 0; ++i) {
    BERTRAIN_CHECK(text_seen_[i], records_.path() << ": text column '" << options_.text_columns[i]
                                                  << "' is in no row (absent or null in all " << readable_
                                                  << " readable rows"
                                                  << hint(options_, "text-columns", "; check --text-columns") << ")");
  }
  return false;
}

void TextRowReader::require_rows() const {
  BERTRAIN_CHECK(good_ > 0, path() << ": no data rows"
                                   << (skipped_ > 0 ? " (all " + std::to_string(skipped_) + " rows were bad and skipped)"
                                                    : std::string()));
}

std::string reading_notes(const std::string& who, int skipped, const std::vector<std::string>& skip_reasons,
                          int truncated, int max_length) {
  std::string notes;
  if (skipped > 0) {
    notes += who + ": skipped " + count_of(skipped, "bad row") + " (--skip-bad-rows); the first:\n";
    for (const std::string& why : skip_reasons) notes += "  " + why + "\n";
  }
  if (truncated > 0) {
    notes += who + ": " + count_of(truncated, "row") + " longer than " + std::to_string(max_length) + " tokens " +
             (truncated == 1 ? "was" : "were") + " truncated\n";
  }
  return notes;
}

TextDataset load_text_dataset(const std::string& path, const Tokenizer& tokenizer, const LabelSet* labels,
                              const DatasetOptions& options) {
  TextRowReader reader(path, tokenizer, options);
  TextDataset data;
  data.source = path;
  TextRow row;
  while (reader.next(&row)) {
    if (labels != nullptr) row.example.labels = labels->require_all(row.tags, path + ":" + std::to_string(row.line));
    data.ids.push_back(std::move(row.id));
    data.lines.push_back(row.line);
    data.raw_text.push_back(std::move(row.raw_text));
    data.tags.push_back(std::move(row.tags));
    data.examples.push_back(std::move(row.example));
    data.cut.push_back(row.truncated);
    row = TextRow{};
  }
  reader.require_rows();
  data.truncated = reader.truncated();
  data.skipped = reader.skipped();
  data.skip_reasons = reader.skip_reasons();
  return data;
}

}  // namespace bertrain

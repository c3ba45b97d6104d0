// Labelled text datasets as the workflow uses them: rows of a CSV, TSV or JSON Lines file (data/records.h),
// their text (the --text-columns that are not empty joined with one space: title + " " + description by
// default, as Made-With-ML; join_text_columns), their labels (one per row, or a set with --multi-label), and
// the tokenized examples the model consumes. Read whole (training, evaluation) or row by row (prediction over
// files of any size).
#pragma once

#include <string>
#include <vector>

#include "data/batcher.h"
#include "data/labels.h"
#include "data/records.h"
#include "data/tokenizer.h"

namespace bertrain {

struct DatasetOptions {
  bool clean = true;          // Made-With-ML's clean_text before tokenizing (--no-clean turns it off)
  int max_length = 512;       // tokens per row, [CLS] and [SEP] included; longer texts are truncated
  std::string format = "auto";                                   // --format: auto | csv | tsv | jsonl
  std::vector<std::string> text_columns = {"title", "description"};  // join_text_columns
  std::string label_column = "tag";
  std::string id_column = "id";     // a row's id (predict's output); rows without one are numbered
  bool id_column_given = false;     // --id-column was on the command line: the column must exist
  bool read_labels = false;   // training / evaluation: every row needs its labels
  bool multi_label = false;   // labels are sets: JSON arrays, or strings split at label_separator
  std::string label_separator = ",";
  bool label_separator_given = false;  // --label-separator was on the command line (train warns about labels that
                                       // look like lists only when it was not; data/label_checks.h)
  bool skip_bad_rows = false;  // count and skip a bad row instead of stopping at it
  // The running command's flags (names without "--") that messages may suggest, e.g. "(--skip-bad-rows skips such
  // rows)"; a message suggests no other, so tokenize is never told of a flag it does not have. Commands fill it
  // from their parser (tools/data_flags.h); empty: messages suggest no flag.
  std::vector<std::string> command_flags;
};

// "a, b" -> {"a", "b"} for --text-columns (names trimmed); throws Error naming the flag on an empty list, an
// empty name or a name given twice.
std::vector<std::string> parse_column_list(const std::string& text, const char* flag);

// The text of one row from its text columns' values, in --text-columns order: the values that are not empty
// (whitespace only counts as empty: is_blank_text) joined with one space, so that title "A" with an empty description is "A",
// which cleans to what Made-With-ML's "A" + " " + "" does; "" when every value is empty, a row with no text.
// Every reader of text columns builds the text with it: dataset files, predict --title/--description, serving.
std::string join_text_columns(const std::vector<std::string>& values);

// Whether `text` is nothing but whitespace, Unicode's White_Space included (NBSP, U+3000, U+2028, NEL, ...), as
// Python's str.isspace() and the tokenizers see it: such a text is empty ([CLS] [SEP] alone to a model).
bool is_blank_text(const std::string& text);

// One good row of a dataset file.
struct TextRow {
  long long line = 0;             // 1-based line where the row starts
  std::string id;                 // the id column (--id-column, default "id") when present, else the row number (0-based, bad rows counted)
  std::string raw_text;           // join_text_columns of the text columns, before cleaning
  std::vector<std::string> tags;  // its labels as written (read_labels only): one, or a set with multi_label
  Example example;                // token ids; labels left empty (LabelSet assigns them)
  bool truncated = false;         // the text had more than max_length tokens
};

// Reads a dataset file row by row. A bad row — one the format cannot read, one whose text columns are all empty
// (JSON Lines: an absent key or null is an empty value, since a JSON object has no header), a text column that
// is a JSON array, or with read_labels a missing or empty label (multi-label: a JSON [] is a row with no label,
// not a bad one) — is an Error naming the file, line and what is wrong, or with skip_bad_rows is counted and
// skipped. A text column missing from a CSV/TSV header, and in JSON Lines one that no row of the file has (a
// misspelt --text-columns, reported at the end of the file), are always an Error.
class TextRowReader {
 public:
  TextRowReader(const std::string& path, const Tokenizer& tokenizer, const DatasetOptions& options);
  // The next good row; false at the end of the file.
  bool next(TextRow* row);
  // Whether next() can read a row without waiting for input (RecordReader::ready).
  bool ready() const { return records_.ready(); }
  const std::string& path() const { return records_.path(); }
  int rows_read() const { return good_; }
  int skipped() const { return skipped_; }
  int truncated() const { return truncated_; }
  // The first few skipped rows' reasons ("file:line: ..."), for the log.
  const std::vector<std::string>& skip_reasons() const { return skip_reasons_; }
  // At the end of the file: an Error "<path>: no data rows" (saying when every row was bad and skipped) unless some
  // row was good. A file of a header alone is refused by every command alike.
  void require_rows() const;

 private:
  // Why `record` is bad ("" when it is good); fills `row` otherwise. `column_flag` is then the flag that names the
  // column at fault when a column is absent or of the wrong kind ("text-columns", "label-column", "multi-label"),
  // else "".
  std::string read_row(const Record& record, TextRow* row, std::string* column_flag);
  std::vector<std::string> split_labels(const RecordField& field) const;

  const Tokenizer& tokenizer_;
  DatasetOptions options_;
  RecordReader records_;
  std::size_t label_field_ = 0, id_field_ = 0;  // indices in Record::fields
  std::vector<std::string> text_values_;        // one row's text columns (storage reused)
  std::vector<bool> text_seen_;                 // JSON Lines: text column i had a value in some row
  int readable_ = 0;                            // rows the format could read
  Record record_;
  int index_ = 0, good_ = 0, skipped_ = 0, truncated_ = 0;
  std::vector<std::string> skip_reasons_;
};

struct TextDataset {
  std::string source;                         // file path
  std::vector<std::string> ids;               // see TextRow
  std::vector<long long> lines;                   // where each row starts in the file (1-based), for messages
  std::vector<std::string> raw_text;
  std::vector<std::vector<std::string>> tags;
  std::vector<Example> examples;              // labels assigned when a LabelSet was given
  std::vector<bool> cut;                      // each row's TextRow::truncated
  int truncated = 0;                          // rows cut to max_length tokens
  int skipped = 0;                            // bad rows skipped (skip_bad_rows)
  std::vector<std::string> skip_reasons;      // the first few
};

// Reads every good row of `path`. Labels are assigned when `labels` is non-null; a label outside it is an
// Error naming the file, line and label. An empty result is an Error.
TextDataset load_text_dataset(const std::string& path, const Tokenizer& tokenizer, const LabelSet* labels,
                              const DatasetOptions& options);

// What a command says after reading a file, one line each, starting with `who` ("note", "predict"): the bad rows it
// skipped, with the reasons of the first few (TextRowReader::skip_reasons) on lines of their own, and the rows it
// truncated to max_length tokens. "" when there is nothing to say.
std::string reading_notes(const std::string& who, int skipped, const std::vector<std::string>& skip_reasons,
                          int truncated, int max_length);

// One example from a text (prediction from the command line), cleaned as `options` say.
Example encode_text(const std::string& text, const Tokenizer& tokenizer, const DatasetOptions& options,
                    bool* truncated);
// The same, but a text with more tokens than options.max_length keeps its last tokens instead of its first (the
// template's special tokens stay at both ends): text-embeddings-inference's truncation_direction "left". The whole
// text is cleaned and tokenized (the request's size bounds it).
Example encode_text_keeping_end(const std::string& text, const Tokenizer& tokenizer, const DatasetOptions& options,
                                bool* truncated);

}  // namespace bertrain

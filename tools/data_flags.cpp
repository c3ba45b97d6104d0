#include "tools/data_flags.h"

#include "core/error.h"
#include "core/utf8.h"

namespace bertrain {

void add_data_flags(ArgParser& p, bool training) {
  // Training's defaults are Made-With-ML's; evaluate and predict read files as the model was trained (config.json).
  const std::string as_trained = " (default: as the model was trained)";
  p.option("format", "auto", "auto: from the extension (.csv; .tsv, .tab; .jsonl, .ndjson)").value_name("csv|tsv|jsonl");
  p.option("text-columns", training ? "title,description" : "",
           "columns joined with one space into the text, empty ones left out" + (training ? std::string() : as_trained))
      .value_name("A,B,...");
  p.option("label-column", training ? "tag" : "", "column with the label(s)" + (training ? std::string() : as_trained))
      .value_name("NAME");
  p.option("label-separator", training ? "," : "",
           "multi-label: separator of the labels in a text field; a JSON array needs none" +
               (training ? std::string() : as_trained))
      .value_name("SEP");
  p.flag("skip-bad-rows", "skip bad rows (every text column empty, a missing or empty label, a row the format "
                          "cannot read) instead of stopping with an error; they are counted and reported");
  p.option("max-length", training ? "0" : "",
           "tokens per text, [CLS] and [SEP] included; longer texts are truncated" +
               (training ? std::string(" (default 0: the model's max_position_embeddings, less RoBERTa's padding offset)") : as_trained))
      .value_name("N");
  if (!training) add_no_clean_flag(p);
}

void add_no_clean_flag(ArgParser& p) {
  p.flag("no-clean", "give the model the text as it is, not cleaned as Made-With-ML's clean_text (default: as the "
                     "model's training did, which its config.json records; a model without that record is cleaned)");
}

std::vector<std::string> dataset_flags_of(const ArgParser& p) {
  std::vector<std::string> flags;
  for (const char* name : {"format", "text-columns", "label-column", "multi-label", "label-separator", "skip-bad-rows",
                           "max-length"}) {
    if (p.has_option(name)) flags.push_back(name);
  }
  return flags;
}

std::string data_file(const ArgParser& p, const std::string& command) {
  if (p.get("data") != "-") return p.get("data");
  if (p.get("format") == "auto") {
    throw UsageError(command + ": --data - reads standard input, which has no extension: give --format csv, tsv or "
                     "jsonl");
  }
  return "/dev/stdin";
}

void apply_data_flags(const ArgParser& p, DatasetOptions* options) {
  options->command_flags = dataset_flags_of(p);
  // A flag given with an empty value is a mistake, not "the default": --text-columns "" must not train on
  // title and description. Flag values are the user's input: errors exit 2.
  input_step([&] {
    BERTRAIN_CHECK(!p.get("format").empty(), "--format is empty: give csv, tsv or jsonl, or leave it out (auto)");
    options->format = p.get("format");
    if (p.given("text-columns")) options->text_columns = parse_column_list(p.get("text-columns"), "--text-columns");
    if (p.given("label-column")) {
      BERTRAIN_CHECK(!p.get("label-column").empty(), "--label-column is empty: name the column of the labels");
      options->label_column = p.get("label-column");
    }
    if (p.given("label-separator")) {
      BERTRAIN_CHECK(!p.get("label-separator").empty(), "--label-separator is empty: give the text between two labels, "
                                                        "e.g. --label-separator '|'");
      options->label_separator = p.get("label-separator");
      options->label_separator_given = true;
    }
    if (p.has_option("id-column") && p.given("id-column")) {
      BERTRAIN_CHECK(!p.get("id-column").empty(), "--id-column is empty: name the column of the row ids");
      options->id_column = p.get("id-column");
      options->id_column_given = true;
    }
  });
  options->skip_bad_rows = p.get_flag("skip-bad-rows");
  if (p.has_option("no-clean") && p.get_flag("no-clean")) options->clean = false;
  if (!p.get("max-length").empty()) {
    const int max_length = p.get_int("max-length");
    // Checked here, not only where a file's rows are read: predict --text encodes without a reader.
    if (max_length < 0 || max_length == 1) {
      throw UsageError(p.command() + ": --max-length must be 0 (the model's) or at least 2 ([CLS] and [SEP]), got " +
                       p.get("max-length"));
    }
    if (max_length != 0) options->max_length = max_length;
  }
}

void require_utf8_text(const std::string& text, const std::string& command, const std::string& flag) {
  if (is_valid_utf8(text)) return;
  throw UsageError(command + ": " + flag + " is not UTF-8 text: \"" + escape_for_message(text) +
                   "\" (convert it, e.g. with iconv, as a dataset file's text must be)");
}

void add_inference_flags(ArgParser& p) {
  p.option("device", "auto", "auto: CUDA when a device is visible").value_name("auto|cpu|cuda");
  p.option("precision", "fp32", "bf16: on CUDA only").value_name("fp32|bf16");
  p.option("batch-size", "auto", "rows per forward pass; auto: " + std::to_string(kCpuInferenceBatch) +
                                      " on the CPU, " + std::to_string(kGpuInferenceBatch) + " on a GPU (the fastest measured)")
      .value_name("N");
  p.option("threads", "0", "CPU threads of the CPU engine (0: all cores, or OMP_NUM_THREADS)");
}

InferenceOptions inference_options(const ArgParser& p) {
  InferenceOptions options;
  options.device = p.get("device");
  options.precision = p.get("precision");
  options.batch_size = p.get("batch-size") == "auto" ? 0 : p.get_int("batch-size");
  if (p.get("batch-size") != "auto" && options.batch_size < 1) throw UsageError(p.command() + ": --batch-size must be >= 1 or auto");
  options.threads = p.get_threads();
  return options;
}

}  // namespace bertrain

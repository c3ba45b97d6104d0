// `bertrain tokenize`: shows what the model sees: the token ids of a text or of every CSV row.
#include <cstdio>
#include <optional>
#include <string>

#include "core/count_text.h"
#include "core/error.h"
#include "core/files.h"
#include "data/dataset.h"
#include "data/tokenizer.h"
#include "data/tokenizer_loader.h"
#include "engine/predictor.h"
#include "model/bert_config.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/data_flags.h"

namespace bertrain {

namespace {
void print_ids(const std::vector<int32_t>& ids, std::string* line) {
  line->assign("[");
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i) line->append(", ");
    line->append(std::to_string(ids[i]));
  }
  line->append("]\n");
  std::fputs(line->c_str(), stdout);
}
}  // namespace

int run_tokenize(const std::vector<std::string>& args) {
  ArgParser p("tokenize",
              "Prints one JSON array of token ids per input on its own line, framed by the tokenizer's special\n"
              "tokens ([CLS] ... [SEP], <s> ... </s>). The tokenizer: --model DIR (its tokenizer.json, else its\n"
              "older tokenizer files) or --vocab FILE (vocab.txt: BERT's uncased WordPiece; a .json file:\n"
              "tokenizer.json).\n"
              "For a dataset file (CSV, TSV or JSON Lines), the text of a row is its --text-columns joined with\n"
              "one space (title + \" \" + description by default), rows in file order.\n"
              "The text is cleaned as Made-With-ML's clean_text first unless --no-clean. With --model DIR the text is\n"
              "read as predict reads it for that model: the columns, cleaning and max_length its training used (a\n"
              "model trained by bertrain), else the defaults and the model's max_position_embeddings.");
  p.option("vocab", "", "vocab.txt (or tokenizer.json) of the model").value_name("FILE");
  p.option("model", "", "model directory (RUN_DIR: its best/): its tokenizer.json, else the older files transformers "
                        "reads (vocab.txt, vocab.json + merges.txt, sentencepiece.bpe.model)").value_name("DIR");
  p.option("text", "", "one text").value_name("TEXT");
  p.option("data", "", "dataset file (CSV, TSV or JSON Lines; - for standard input, with --format)").value_name("FILE");
  p.option("format", "auto", "auto: from the extension (.csv; .tsv, .tab; .jsonl, .ndjson)").value_name("csv|tsv|jsonl");
  p.option("text-columns", "", "columns joined with one space into the text, empty ones left out (default: as --model "
                                "was trained, else title,description)").value_name("A,B,...");
  p.flag("no-clean", "tokenize the text as given");
  p.option("max-length", "", "tokens per text, [CLS] and [SEP] included; longer texts are truncated (default: as "
                             "--model reads text, else 512)").value_name("N");
  if (!p.parse(args)) return 0;
  const bool has_text = p.given("text"), has_data = p.given("data");
  if (has_text == has_data) throw UsageError("tokenize: give either --text or --data");
  if (has_text) require_utf8_text(p.get("text"), "tokenize", "--text");
  if (has_text && join_text_columns({p.get("text")}).empty()) throw UsageError("tokenize: --text is empty");
  if (has_data && p.get("data").empty()) throw UsageError("tokenize: --data is empty");
  const std::string data_path = has_data ? data_file(p, "tokenize") : std::string();
  if (p.given("vocab") == p.given("model")) throw UsageError("tokenize: give either --vocab or --model");
  if (p.given("max-length") && p.get_int("max-length") < 2) throw UsageError("tokenize: --max-length must be >= 2");

  // A model directory's inputs as predict prepares them (a tokenizer's folder without config.json: the defaults).
  const std::string model_dir = p.given("model") ? input_step([&] { return resolve_tokenizer_dir(p.get("model")); })
                                                 : std::string();
  const std::string config_path = model_dir + "/config.json";
  std::optional<BertConfig> config;
  DatasetOptions options;
  if (p.given("model") && path_exists(config_path)) {
    config = input_step([&] { return BertConfig::load(config_path); });
    options = input_step([&] { return trained_dataset_options(*config, config_path); });
  }
  if (p.get_flag("no-clean")) options.clean = false;
  if (p.given("max-length")) options.max_length = p.get_int("max-length");
  if (config) input_step([&] { check_max_length(options, *config); });
  options.format = p.get("format");
  options.command_flags = dataset_flags_of(p);
  if (p.given("text-columns")) {
    options.text_columns = input_step([&] { return parse_column_list(p.get("text-columns"), "--text-columns"); });
  }

  // Every failure here is in the input (the vocabulary, the file or a row): exit 2.
  const std::unique_ptr<Tokenizer> loaded = input_step([&] {
    return p.given("model") ? load_tokenizer(model_dir) : load_tokenizer_file(p.get("vocab"));
  });
  const Tokenizer& tokenizer = *loaded;
  std::string line;
  int truncated = 0;
  if (has_text) {
    bool cut = false;
    print_ids(encode_text(p.get("text"), tokenizer, options, &cut).ids, &line);
    truncated += cut ? 1 : 0;
  } else {
    const TextDataset data = input_step([&] { return load_text_dataset(data_path, tokenizer, nullptr, options); });
    for (const Example& e : data.examples) print_ids(e.ids, &line);
    truncated = data.truncated;
  }
  if (truncated > 0) {
    std::fprintf(stderr, "tokenize: %s longer than %d tokens %s truncated\n", count_of(truncated, "input").c_str(),
                 options.max_length, truncated == 1 ? "was" : "were");
  }
  return 0;
}

}  // namespace bertrain

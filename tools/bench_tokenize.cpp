// `bertrain bench tokenize`: single-threaded throughput of Made-With-ML's clean_text and of the WordPiece
// tokenizer on a CSV's title + " " + description, its rows repeated to --rows. Three variants: clean only,
// tokenize only (on text cleaned beforehand) and clean + tokenize. Each prints rows/s and MB/s (of the
// variant's input text) and one JSON line; the total token count and id sum are printed so that runs
// can be checked against each other and against tests/reference/bench_hf_tokenizer.py (same numbers
// for the same rows), and the two tokenizing variants must agree or the benchmark fails.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/csv.h"
#include "data/records.h"
#include "data/text_clean.h"
#include "data/tokenizer.h"
#include "data/tokenizer_loader.h"
#include "engine/predictor.h"
#include "tools/args.h"

namespace bertrain {

namespace {

struct Result {
  double seconds = 0;        // best pass
  uint64_t tokens = 0;       // ids produced in one pass, [CLS] and [SEP] included
  uint64_t id_sum = 0;       // sum of those ids
  uint64_t clean_bytes = 0;  // bytes of cleaned text produced in one pass (clean variants)
};

// Runs `pass` `repeats` times and keeps the fastest time; `pass` returns its counters.
template <class Pass>
Result best_of(int repeats, Pass&& pass) {
  Result best;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    Result got = pass();
    got.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r == 0 || got.seconds < best.seconds) best = got;
  }
  return best;
}

void report(const char* variant, const Result& r, std::size_t rows, uint64_t input_bytes) {
  const double rows_per_s = static_cast<double>(rows) / r.seconds;
  const double mb_per_s = static_cast<double>(input_bytes) / 1e6 / r.seconds;
  std::printf("%-16s %10.0f rows/s %8.2f MB/s  (%.3f s, %zu rows, %llu input bytes)\n", variant, rows_per_s, mb_per_s,
              r.seconds, rows, static_cast<unsigned long long>(input_bytes));
  std::printf("{\"bench\": \"tokenize\", \"impl\": \"bertrain\", \"variant\": \"%s\", \"threads\": 1, \"rows\": %zu, "
              "\"input_bytes\": %llu, \"seconds\": %.6f, \"rows_per_s\": %.1f, \"mb_per_s\": %.3f, \"tokens\": %llu, "
              "\"id_sum\": %llu}\n",
              variant, rows, static_cast<unsigned long long>(input_bytes), r.seconds, rows_per_s, mb_per_s,
              static_cast<unsigned long long>(r.tokens), static_cast<unsigned long long>(r.id_sum));
  std::fflush(stdout);
}

}  // namespace

int run_bench_tokenize(const std::vector<std::string>& args) {
  ArgParser parser("bench tokenize",
                   "Times Made-With-ML's clean_text and a tokenizer (--vocab FILE or --model DIR) on one thread:\n"
                   "clean only, tokenize only (text cleaned beforehand) and clean + tokenize, over a CSV's\n"
                   "title + \" \" + description with its rows repeated. Compare with tests/reference/bench_hf_tokenizer.py.");
  parser.option("vocab", "", "WordPiece vocabulary (vocab.txt; a .json file is read as tokenizer.json)").value_name("FILE");
  parser.option("model", "", "model directory (RUN_DIR: its best/): its tokenizer.json, else the older files transformers "
                        "reads (vocab.txt, vocab.json + merges.txt, sentencepiece.bpe.model)").value_name("DIR");
  parser.option("data", "", "CSV with title and description columns", true).value_name("FILE");
  parser.option("rows", "100000", "rows per timed pass (the CSV's rows, repeated)");
  parser.option("max-length", "512", "max_length of every encoding");
  parser.option("repeats", "3", "timed passes per variant; the fastest is reported");
  if (!parser.parse(args)) return 0;
  const int rows_arg = parser.get_int("rows"), max_length = parser.get_int("max-length");
  const int repeats = parser.get_int("repeats");
  if (rows_arg < 1 || repeats < 1 || max_length < 2) {
    throw UsageError("bench tokenize: --rows and --repeats must be >= 1, --max-length >= 2");
  }

  if (parser.given("vocab") == parser.given("model")) throw UsageError("bench tokenize: give either --vocab or --model");
  // The tokenizer and the data are the user's input: what fails here exits 2.
  const std::unique_ptr<Tokenizer> loaded = input_step([&] {
    return parser.given("model") ? load_tokenizer(resolve_tokenizer_dir(parser.get("model"))) : load_tokenizer_file(parser.get("vocab"));
  });
  const Tokenizer& tokenizer = *loaded;
  const CsvTable table = input_step([&] {
    // A TSV or JSON Lines file read as CSV would fail on some row with a CSV error: say what is read instead.
    const std::string& path = parser.get("data");
    const std::optional<RecordFormat> format = extension_format(path);
    BERTRAIN_CHECK(!format || *format == RecordFormat::kCsv,
                   path << ": bench tokenize reads CSV only (title and description columns), not "
                        << std::filesystem::path(path).extension().string() << " files");
    return read_csv(path);
  });
  std::size_t title = 0, description = 0;
  input_step([&] {
    title = static_cast<std::size_t>(table.require_column("title"));
    description = static_cast<std::size_t>(table.require_column("description"));
    BERTRAIN_CHECK(!table.rows.empty(), table.source << ": no rows");
  });

  const std::size_t rows = static_cast<std::size_t>(rows_arg);
  std::vector<std::string> raw, cleaned;
  raw.reserve(rows);
  cleaned.reserve(rows);
  uint64_t raw_bytes = 0, cleaned_bytes = 0;
  for (std::size_t i = 0; i < rows; ++i) {
    const std::vector<std::string>& row = table.rows[i % table.rows.size()];
    raw.push_back(row[title] + " " + row[description]);
    cleaned.push_back(clean_text(raw.back()));
    raw_bytes += raw.back().size();
    cleaned_bytes += cleaned.back().size();
  }
  std::printf("bench tokenize: %s\n", tokenizer.describe().c_str());
  std::printf("bench tokenize: %s, %zu distinct rows repeated to %zu (%.2f MB raw, %.2f MB cleaned), vocab %d, "
              "max_length %d, 1 thread, best of %d\n",
              table.source.c_str(), table.rows.size(), rows, raw_bytes / 1e6, cleaned_bytes / 1e6,
              tokenizer.vocab_size(), max_length, repeats);

  Encoding enc;  // reused: the timed loops allocate nothing once warm
  const Result clean = best_of(repeats, [&] {
    Result r;
    for (const std::string& text : raw) r.clean_bytes += clean_text(text).size();
    return r;
  });
  BERTRAIN_CHECK(clean.clean_bytes == cleaned_bytes, "bench tokenize: clean_text is not deterministic");
  report("clean", clean, rows, raw_bytes);

  const Result tokenize = best_of(repeats, [&] {
    Result r;
    for (const std::string& text : cleaned) {
      tokenizer.encode(text, max_length, &enc);
      r.tokens += enc.ids.size();
      for (const int32_t id : enc.ids) r.id_sum += static_cast<uint64_t>(id);
    }
    return r;
  });
  report("tokenize", tokenize, rows, cleaned_bytes);

  const Result both = best_of(repeats, [&] {
    Result r;
    for (const std::string& text : raw) {
      tokenizer.encode(clean_text(text), max_length, &enc);
      r.tokens += enc.ids.size();
      for (const int32_t id : enc.ids) r.id_sum += static_cast<uint64_t>(id);
    }
    return r;
  });
  report("clean+tokenize", both, rows, raw_bytes);
  BERTRAIN_CHECK(both.tokens == tokenize.tokens && both.id_sum == tokenize.id_sum,
                 "bench tokenize: clean+tokenize and tokenize-only disagree (" << both.tokens << " vs "
                                                                               << tokenize.tokens << " tokens)");
  std::printf("tokens per pass: %llu, id sum: %llu\n", static_cast<unsigned long long>(tokenize.tokens),
              static_cast<unsigned long long>(tokenize.id_sum));
  return 0;
}

}  // namespace bertrain

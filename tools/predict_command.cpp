// `bertrain predict`: label probabilities for one text, or for every row of a dataset file, streamed: rows are
// read, tokenized and predicted one batch at a time and written as JSON Lines, so a file of any length needs
// the memory of one batch.
#include <chrono>
#include <cstring>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/count_text.h"
#include "core/error.h"
#include "core/files.h"
#include "engine/predictor.h"
#include "engine/stop_signals.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/data_flags.h"
#include "tools/model_source.h"
#include "tools/prediction_rule.h"

namespace bertrain {

namespace {

// Where JSON Lines go: a file replaced atomically at the end (nothing is left of it when predict fails), or
// stdout as they come.
class LineSink {
 public:
  explicit LineSink(const std::string& path) {
    if (!path.empty()) file_ = std::make_unique<AtomicFile>(path);
  }
  void write(const std::string& text) {
    if (file_) {
      file_->write(text.data(), text.size());
    } else {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);  // a batch's answers, now: what reads a pipe may wait for them before it writes more rows
    }
  }
  void commit() {
    if (file_) file_->commit();
    std::fflush(stdout);
  }

 private:
  std::unique_ptr<AtomicFile> file_;
};

// A signal (SIGTERM, SIGINT, SIGUSR1, SIGHUP) that stopped predict between two batches.
struct PredictionStopped {
  int signal;
};

// Predicts every row of `path` in batches of `batch_size` rows; returns the rows written. Throws PredictionStopped
// after the batch in which a stop signal came (StopSignals). From a pipe, a batch is cut short where the next row
// has not arrived yet: the rows that have are answered before predict waits (a program that writes a row and
// reads its answer would otherwise wait for a whole batch of its own rows).
long predict_file(Predictor& predictor, TextRowReader& reader, const DatasetOptions& options, int batch_size,
                  const PredictionRule& rule, LineSink& sink) {
  const int classes = predictor.labels().size();
  std::vector<Example> examples;
  std::vector<std::string> ids;
  std::string lines;
  TextRow row;
  long written = 0;
  bool more = true;
  while (more) {
    examples.clear();
    ids.clear();
    // A bad row is the input's fault (exit 2), wherever in the file it is.
    while (static_cast<int>(examples.size()) < batch_size && (examples.empty() || reader.ready()) &&
           (more = input_step([&] { return reader.next(&row); }))) {
      examples.push_back(std::move(row.example));
      ids.push_back(std::move(row.id));
      row = TextRow{};
    }
    if (examples.empty()) break;
    const std::vector<float> probs = predictor.predict_proba(examples);
    if (const long bad = first_non_finite_row(probs, classes); bad >= 0) {
      throw InputError(non_finite_scores(predictor.model_dir(), "the row with id " + ids[static_cast<std::size_t>(bad)]));
    }
    lines.clear();
    for (std::size_t i = 0; i < examples.size(); ++i) {
      nlohmann::ordered_json out{{"id", ids[i]}};
      out.update(rule.predict(probs.data() + i * classes, predictor.labels()));
      lines += out.dump() + "\n";
    }
    sink.write(lines);
    written += static_cast<long>(examples.size());
    if (StopSignals::received() != 0) throw PredictionStopped{StopSignals::received()};
  }
  std::fputs(reading_notes("predict", reader.skipped(), reader.skip_reasons(), reader.truncated(), options.max_length)
                 .c_str(),
             stderr);
  input_step([&] { reader.require_rows(); });  // as evaluate refuses it; --out is then not written
  return written;
}

}  // namespace

int run_predict(const std::vector<std::string>& args) {
  ArgParser p("predict",
              "Label probabilities of one text (--text, or Made-With-ML's --title and --description), printed as one\n"
              "JSON object on one line, or of every row of a CSV, TSV or JSON Lines file (--data), streamed in\n"
              "batches and written as JSON Lines ({\"id\", \"prediction\", \"probabilities\"} per row, in file order)\n"
              "to --out or stdout. Single-label models: softmax, the arg-max label; multi-label models: one sigmoid\n"
              "per label, every label at p >= --threshold. Text is read and cleaned as in training.");
  p.usage("bertrain predict (--model DIR | --run-id ID) (--text T | [--title T] [--description D] | --data FILE) "
          "[options]");
  add_model_source_flags(p, "with --run-id: the MLflow file store of that run",
                         "with --run-id: the MLflow experiment of that run (default: any; MLflow run ids are unique)");
  p.option("text", "", "one text").value_name("TEXT");
  p.option("title", "", "title of one project (Made-With-ML)").value_name("TEXT");
  p.option("description", "", "description of that project (alone: a project without a title)").value_name("TEXT");
  p.option("data", "", "dataset file: one prediction per row (- for standard input, with --format)").value_name("FILE");
  p.option("out", "", "with --data: write the JSON Lines to this file (replaced atomically when done)").value_name("FILE");
  p.option("threshold", "",
           "single-label models: predict --other-label when the top probability is below RATE (Made-With-ML's "
           "serving rule uses 0.9; default: none, always the top label); multi-label models: the probability a "
           "label needs (default 0.5)").value_name("RATE");
  p.option("other-label", "other",
           "single-label models with --threshold: the prediction below it (need not be one of the model's labels "
           "when given)").value_name("NAME");
  add_data_flags(p, false);
  p.option("id-column", "id", "with --data: the column whose value is each output's \"id\" (rows without one get "
                              "their row number, from 0)").value_name("NAME");
  add_inference_flags(p);
  p.flag("quiet", "no throughput line on stderr (notes and errors are still printed)");
  if (!p.parse(args)) return 0;
  // A project is --title and/or --description: a missing title is an empty one, as in serve's /predict/ body.
  const bool has_project = p.given("title") || p.given("description"), has_text = p.given("text"),
             has_data = p.given("data");
  if (has_project + has_text + has_data != 1) {
    throw UsageError("predict: give one of --text, --title / --description or --data");
  }
  // The text of one project as a dataset row's: the columns that are not empty, joined with one space.
  const std::string text = has_project ? join_text_columns({p.get("title"), p.get("description")})
                                     : has_text ? join_text_columns({p.get("text")}) : std::string();
  for (const char* flag : {"text", "title", "description"}) {
    if (p.given(flag)) require_utf8_text(p.get(flag), "predict", std::string("--") + flag);
  }
  if (has_project && text.empty()) throw UsageError("predict: --title and --description are both empty");
  if (has_text && text.empty()) throw UsageError("predict: --text is empty");
  if (has_data && p.get("data").empty()) throw UsageError("predict: --data is empty");
  p.refuse_empty("out", "give the file to write, or leave the flag out to write to stdout");
  for (const char* flag : {"out", "id-column"}) {
    if (!has_data && p.given(flag)) throw UsageError(std::string("predict: --") + flag + " goes with --data");
  }
  PredictionRule rule;
  if (!p.get("threshold").empty()) {
    rule.threshold = p.get_double("threshold");
    if (!(rule.threshold >= 0 && rule.threshold <= 1)) throw UsageError("predict: --threshold must be in [0, 1]");
  }
  const InferenceOptions inference = inference_options(p);
  if (!p.given("run-id") && (p.given("mlflow-dir") || p.given("experiment"))) {
    throw UsageError("predict: --mlflow-dir and --experiment say where --run-id's run is: give --run-id too");
  }

  // The model and the flags are the user's input: what fails here exits 2.
  const ModelSource source = model_source(p);
  const std::string data_path = has_data ? data_file(p, "predict") : std::string();
  if (p.given("out")) check_out_spares_inputs(p.get("out"), data_path, source);
  Predictor predictor = input_step([&] { return Predictor(source.path, inference); });
  const LabelSet& labels = predictor.labels();
  rule.multi_label = predictor.multi_label();
  rule.other = p.get("other-label");
  const DatasetOptions options = input_step([&] {
    rule.check_other_label(labels, p.given("other-label"));
    DatasetOptions o = predictor.dataset_options();
    apply_data_flags(p, &o);
    predictor.check_dataset_options(o);
    o.read_labels = false;
    return o;
  });
  if (const std::string note = unrecorded_cleaning_note(predictor.config(), predictor.model_dir(), options);
      !note.empty()) {
    std::fprintf(stderr, "predict: note: %s\n", note.c_str());
  }

  if (!has_data) {
    const std::vector<float> probs = predictor.predict_proba({encode_text(text, predictor.tokenizer(), options, nullptr)});
    if (first_non_finite_row(probs, predictor.labels().size()) >= 0) {
      throw InputError(non_finite_scores(predictor.model_dir(), "the text"));
    }
    // One JSON object on one line: the shape of a --data line, without the id.
    std::printf("%s\n", rule.predict(probs.data(), labels).dump().c_str());
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  long rows = 0;
  try {
    // A stop signal ends the stream after its batch; --out's temporary file goes with the sink, and the process
    // then ends by that signal, as it would have without the handler.
    // The file is opened before the handlers exist: a FIFO no writer opens blocks in open(), which SIGTERM must
    // still end (a handler would only set a flag).
    TextRowReader reader = input_step([&] { return TextRowReader(data_path, predictor.tokenizer(), options); });
    const StopSignals stop_signals;
    LineSink sink(p.get("out"));
    rows = predict_file(predictor, reader, options, predictor.batch_size(), rule, sink);
    sink.commit();
  } catch (const PredictionStopped& stopped) {
    std::fprintf(stderr, "bertrain: predict: stopped by %s%s\n", signal_name(stopped.signal).c_str(),
                 p.get("out").empty() ? "" : ("; " + p.get("out") + " not written").c_str());
    return end_by_signal(stopped.signal);
  }
  if (p.get_flag("quiet")) return 0;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "predict: %s in %.2f s (%.0f rows/s) on %s, batches of %d%s%s\n", count_of(rows, "row").c_str(),
               seconds, rows / seconds, predictor.engine_description().c_str(), predictor.batch_size(),
               p.get("out").empty() ? "" : "; written to ", p.get("out").c_str());
  return 0;
}

}  // namespace bertrain

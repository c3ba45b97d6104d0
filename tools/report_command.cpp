// `bertrain report RUN_DIR... [--out FILE]`: one self-contained HTML page (inline SVG, no scripts, nothing
// fetched) with a run's loss, learning-rate and throughput curves, its validation metrics per epoch when it recorded
// them, and its evaluation's per-class metrics and confusion matrix; several runs overlay their curves.
// `bertrain report STUDY_DIR`: the page of a `bertrain tune` study (tools/report/study_report.h) instead.
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "core/atomic_file.h"
#include "core/files.h"
#include "core/count_text.h"
#include "core/error.h"
#include "core/timestamp.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/report/run_report.h"
#include "tools/report/study_report.h"

namespace bertrain {

namespace {

// "'a/' is the run directory 'a' again" for each directory named twice, once what they name has been read (an
// unreadable one is then a single error line, with no note before it).
void note_repeats(const std::vector<std::pair<std::string, std::string>>& repeats, const char* what) {
  for (const auto& [again, first] : repeats) {
    std::fprintf(stderr, "report: '%s' is the %s '%s' again; reported once\n", again.c_str(), what, first.c_str());
  }
}

// The report's file is none of the files it reads in `dirs` (a run's or a study's record, which it would replace).
void check_out(const std::string& out, const std::string& what, const std::vector<std::string>& dirs) {
  std::vector<std::string> inputs;
  for (const std::string& dir : dirs) {
    // What report reads, and the run's or study's models and checkpoints, which an HTML page must not replace.
    for (const char* name : {"metrics.jsonl", "results.json", "evaluation.json", "study.json", "last", "best",
                             "checkpoints", "trials"}) {
      inputs.push_back(dir + "/" + name);
    }
  }
  check_writable_file(out, what, regular_files_in(inputs));
}

// The page of the tune study in `dir` and its lines on the terminal.
int report_study(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& repeats,
                 std::string out) {
  // An unreadable study.json is the input's fault (exit 2); a failed write is not.
  const report::StudyRecord study = input_step([&] { return report::load_study(dir); });
  note_repeats(repeats, "study directory");
  const std::string what = out.empty() ? "report" : "--out";
  if (out.empty()) out = dir + "/report.html";
  input_step([&] { check_out(out, what, {dir}); });
  write_file_atomically(out, report::render_study_report(study, iso_timestamp_now()));
  std::fputs(report::study_summary(study).c_str(), stdout);
  std::printf("report: study of %s -> %s\n", count_of(static_cast<long long>(study.trials.size()), "trial").c_str(),
              out.c_str());
  return 0;
}

}  // namespace

int run_report(const std::vector<std::string>& args) {
  ArgParser p("report",
              "Writes an HTML report of training runs: a summary table (and why a run stopped early); train and\n"
              "validation loss per epoch with the best epoch marked, the learning rate and samples/s (several runs\n"
              "overlaid, one colour each); validation accuracy and F1 (weighted, micro, macro) per epoch, charted and\n"
              "tabled, for runs that recorded them; and for each run with RUN_DIR/evaluation.json (bertrain evaluate\n"
              "--out) its overall metrics, per-class precision / recall / F1 bars and the confusion matrix as a heat\n"
              "map. One file, no scripts, no network: open it in any browser, attach it, archive it. Reads\n"
              "metrics.jsonl, so a running run can be reported.\n"
              "\n"
              "Given a bertrain tune study directory (one with study.json) instead, alone, writes the study's page: its\n"
              "trials best first by the study's metric (status, epochs, best metric, each searched parameter, time; the\n"
              "best trial highlighted, failed trials with their error), every trial's train and validation loss per epoch\n"
              "overlaid (a colour per trial), and for each searched parameter its value against the trials' best metric\n"
              "(a log axis for a parameter such as the learning rate that spans decades). A running study can be\n"
              "reported: trials that have recorded no epoch yet are listed, not charted.");
  p.positionals("RUN_DIR",
                "training run directories (bertrain train --out), one named twice reported once; or one tune study "
                "directory (bertrain tune --out, with study.json), on its own",
                1);
  p.option("out", "", "the HTML file to write (replaced atomically; default RUN_DIR/report.html for one run or a "
                      "study, report.html for several runs)").value_name("FILE");
  if (!p.parse(args)) return 0;
  p.refuse_empty("out", "give the HTML file to write, or leave the flag out for the default");
  // A directory named twice is one run: overlaid on itself it would only hide its own lines and count twice.
  std::vector<std::pair<std::string, std::string>> repeats;
  const std::vector<std::string> dirs = report::distinct_run_dirs(p.positional_values(), &repeats);
  std::vector<std::string> studies;
  for (const std::string& dir : dirs) {
    if (report::is_study_dir(dir)) studies.push_back(dir);
  }
  // A study's page has its own layout (a table of trials, parameter charts): overlaying a study's trials with other
  // runs would be neither page, so a study is reported on its own.
  if (studies.size() > 1) {
    throw UsageError("report: '" + studies[0] + "' and '" + studies[1] +
                     "' are both tune studies (they have study.json); report one study at a time");
  }
  if (!studies.empty() && dirs.size() > 1) {
    const std::string& other = dirs[0] == studies[0] ? dirs[1] : dirs[0];
    throw UsageError("report: '" + studies[0] + "' is a tune study (it has study.json) and is reported on its own, not "
                     "with '" + other + "'");
  }
  if (!studies.empty()) return report_study(studies[0], repeats, p.get("out"));
  std::vector<report::RunRecord> runs;
  // An unreadable run directory is the input's fault (exit 2); a failed write is not.
  for (const std::string& dir : dirs) runs.push_back(input_step([&] { return report::load_run(dir); }));
  note_repeats(repeats, "run directory");
  report::name_runs(&runs);
  std::string out = p.get("out");
  if (out.empty()) out = dirs.size() == 1 ? dirs[0] + "/report.html" : "report.html";
  input_step([&] { check_out(out, p.given("out") ? "--out" : "report", dirs); });
  write_file_atomically(out, report::render_report(runs, iso_timestamp_now()));
  for (const report::RunRecord& run : runs) std::fputs(report::run_summary(run).c_str(), stdout);
  std::printf("report: %s -> %s\n", count_of(static_cast<long long>(runs.size()), "run").c_str(), out.c_str());
  return 0;
}

}  // namespace bertrain

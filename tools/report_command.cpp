// `bertrain report RUN_DIR... [--out FILE]`: one self-contained HTML page (inline SVG, no scripts, nothing
// fetched) with a run's loss, learning-rate and throughput curves, its validation metrics per epoch when it recorded
// them, and its evaluation's per-class metrics and confusion matrix; several runs overlay their curves.
#include <cstdio>
#include <vector>

#include "core/atomic_file.h"
#include "core/count_text.h"
#include "core/error.h"
#include "core/timestamp.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/report/run_report.h"

namespace bertrain {

int run_report(const std::vector<std::string>& args) {
  ArgParser p("report",
              "Writes an HTML report of training runs: a summary table (and why a run stopped early); train and\n"
              "validation loss per epoch with the best epoch marked, the learning rate and samples/s (several runs\n"
              "overlaid, one colour each); validation accuracy and F1 (weighted, micro, macro) per epoch, charted and\n"
              "tabled, for runs that recorded them; and for each run with RUN_DIR/evaluation.json (bertrain evaluate\n"
              "--out) its overall metrics, per-class precision / recall / F1 bars and the confusion matrix as a heat\n"
              "map. One file, no scripts, no network: open it in any browser, attach it, archive it. Reads\n"
              "metrics.jsonl, so a running run can be reported.");
  p.positionals("RUN_DIR", "training run directories (bertrain train --out); one named twice is reported once", 1);
  p.option("out", "", "the HTML file to write (replaced atomically; default RUN_DIR/report.html for one run, "
                      "report.html for several)").value_name("FILE");
  if (!p.parse(args)) return 0;
  // A directory named twice is one run: overlaid on itself it would only hide its own lines and count twice.
  std::vector<std::pair<std::string, std::string>> repeats;
  const std::vector<std::string> dirs = report::distinct_run_dirs(p.positional_values(), &repeats);
  std::vector<report::RunRecord> runs;
  // An unreadable run directory is the input's fault (exit 2); a failed write is not.
  for (const std::string& dir : dirs) runs.push_back(input_step([&] { return report::load_run(dir); }));
  for (const auto& [again, first] : repeats) {
    std::fprintf(stderr, "report: '%s' is the run directory '%s' again; reported once\n", again.c_str(), first.c_str());
  }
  report::name_runs(&runs);
  std::string out = p.get("out");
  if (out.empty()) out = dirs.size() == 1 ? dirs[0] + "/report.html" : "report.html";
  write_file_atomically(out, report::render_report(runs, iso_timestamp_now()));
  for (const report::RunRecord& run : runs) std::fputs(report::run_summary(run).c_str(), stdout);
  std::printf("report: %s -> %s\n", count_of(static_cast<long long>(runs.size()), "run").c_str(), out.c_str());
  return 0;
}

}  // namespace bertrain

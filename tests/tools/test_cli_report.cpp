// bertrain report as a user runs it: the command line, its output and exit codes, and the page it writes,
// on a run the real train command made (tests/tools/cli_test.h). The page's charts and layout are
// test_report.cpp's.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/tools/cli_test.h"
#include "tests/xml_check.h"

namespace bertrain {
namespace {

using namespace cli_test;

// The runs table's body rows.
std::size_t run_rows(const testing::XmlElement& page) {
  return page.find_all("table").at(0)->find_all("tbody").at(0)->find_all("tr").size();
}

TEST_F(CliTest, ReportCountsARunDirectoryNamedTwiceOnce) {
  ASSERT_TRUE(succeeded(suite_train()));
  fs::copy(suite_run(), path("run"), fs::copy_options::recursive);
  fs::create_directory_symlink(path("run"), path("link"));
  // From inside the folder, as a person types it: the same run four ways.
  const RunResult r = ::bertrain::testing::run_process(
      {"/bin/sh", "-c", "cd '" + dir_.string() + "' && exec '" + binary() + "' report run run/ ./run link"});
  ASSERT_TRUE(succeeded(r));
  EXPECT_EQ(lines_of(r.out).back(), "report: 1 run -> run/report.html");
  EXPECT_EQ(r.out.rfind("run: finished 3 epochs", 0), 0u) << r.out;  // one summary: one run
  EXPECT_EQ(r.err,
            "report: 'run/' is the run directory 'run' again; reported once\n"
            "report: './run' is the run directory 'run' again; reported once\n"
            "report: 'link' is the run directory 'run' again; reported once\n");
  const testing::XmlElement page = testing::parse_xml(slurp(path("run/report.html")));
  EXPECT_EQ(run_rows(page), 1u);
  EXPECT_NE(page.find_all("title").at(0)->text.find("bertrain report: run"), std::string::npos);
  // One run's lines, named as one run's are (no run-name prefix, no path to tell two "run"s apart).
  std::size_t train_lines = 0;
  for (const testing::XmlElement* p : page.find_all("svg").at(0)->find_all("circle")) {
    const std::string* series = p->attribute("data-series");
    if (series != nullptr && *series == "train_loss" && *p->attribute("class") == "point") ++train_lines;
  }
  EXPECT_EQ(train_lines, 3u);  // the suite run's 3 epochs, once

  // Absolute paths, with --out: still one run, and two distinct runs stay two.
  ASSERT_TRUE(succeeded(run(train_args(path("run2")))));
  const RunResult two = run({"report", path("run"), path("run2"), path("run") + "/.", "--out", path("two.html")});
  ASSERT_TRUE(succeeded(two));
  EXPECT_EQ(lines_of(two.out).back(), "report: 2 runs -> " + path("two.html"));
  EXPECT_EQ(run_rows(testing::parse_xml(slurp(path("two.html")))), 2u);

  // A missing directory named twice is one error line, exit 2, with no note before it.
  expect_error(run({"report", path("gone"), path("gone") + "/"}), "gone' not found");
}

}  // namespace
}  // namespace bertrain

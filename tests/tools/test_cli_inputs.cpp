// What a new user hits with their own data and inputs (issue 25), end to end through the binary (harness:
// tests/tools/cli_test.h): flags given with empty values, text columns left empty, files that are not UTF-8
// text, a directory where a file belongs, hints that name only the running command's flags, and the label
// warnings of train.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/tools/cli_test.h"

namespace bertrain {
namespace {

using namespace cli_test;

// ---- flag values -----------------------------------------------------------------------------------------

// A flag given with an empty value is an error naming it, never its default in disguise (train used to read
// --text-columns "" as title,description and --label-column "" as tag).
TEST_F(CliTest, EmptyOrMalformedDataFlagsAreInputErrors) {
  const struct {
    std::vector<std::string> flags;
    const char* needle;
  } cases[] = {
      {{"--text-columns", ""}, "--text-columns names no column"},
      {{"--text-columns", " "}, "--text-columns names no column"},
      {{"--text-columns", ","}, "--text-columns ',' has an empty column name"},
      {{"--text-columns", "title,,description"}, "has an empty column name"},
      {{"--text-columns", "title,title"}, "names column 'title' twice"},
      {{"--label-column", ""}, "--label-column is empty"},
      {{"--multi-label", "--label-separator", ""}, "--label-separator is empty"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.needle);
    expect_error(run(train_args(path("run"), c.flags)), c.needle);
    expect_no_run(path("run"));
  }
  // evaluate and predict read an empty flag the same way (absent: as the model was trained).
  ASSERT_TRUE(succeeded(suite_train()));
  expect_error(run({"evaluate", "--model", suite_run(), "--data", data(), "--text-columns", ""}),
               "--text-columns names no column");
  expect_error(run({"predict", "--model", suite_run(), "--data", data(), "--label-column", ""}),
               "--label-column is empty");
  expect_error(run({"tokenize", "--vocab", path("model/vocab.txt"), "--data", data(), "--text-columns", ","}),
               "--text-columns ',' has an empty column name");
}

}  // namespace
}  // namespace bertrain

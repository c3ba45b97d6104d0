// Where tests find the real data they check against (Made-With-ML's CSVs, SciBERT's vocabulary): the folder
// the environment variable BERTRAIN_DATA_DIR names when the test runs (./bertrain.sh test sets it as `run`
// finds the data; README: Tests). A test that needs a file it does not find there skips, saying which.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace bertrain::testing {

struct DataFile {
  std::string path;          // $BERTRAIN_DATA_DIR/<relative>; empty when the variable is unset
  bool found = false;        // path names a file that exists
  std::string skip_message;  // when not found: for GTEST_SKIP(), naming BERTRAIN_DATA_DIR and the file
};

// `relative` (e.g. "madewithml/dataset.csv") in the folder $BERTRAIN_DATA_DIR names.
inline DataFile find_data_file(const std::string& relative) {
  DataFile f;
  const char* dir = std::getenv("BERTRAIN_DATA_DIR");
  if (dir == nullptr || *dir == '\0') {
    f.skip_message = "SKIPPED: needs $BERTRAIN_DATA_DIR/" + relative +
                     ", and BERTRAIN_DATA_DIR is not set (./bertrain.sh test sets it)";
    return f;
  }
  f.path = std::string(dir) + "/" + relative;
  f.found = std::filesystem::is_regular_file(f.path);
  if (!f.found) {
    f.skip_message = "SKIPPED: needs $BERTRAIN_DATA_DIR/" + relative + ", and " + f.path + " is not found";
  }
  return f;
}

}  // namespace bertrain::testing

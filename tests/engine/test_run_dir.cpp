// RUN_DIR's disk-use line (engine/run_dir.h): every file counted once however many hard links share it, as du
// counts, and the folders that share files named.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "engine/run_dir.h"
#include "tests/temp_dir.h"

namespace bertrain {
namespace {

namespace fs = std::filesystem;

void write_bytes(const std::string& path, std::size_t bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << std::string(bytes, 'x');
}

// Whether this filesystem makes hard links (the summary's sharing needs them).
bool can_link(const testing::TempDir& dir) {
  write_bytes(dir.path("probe/a"), 1);
  return ::link(dir.path("probe/a").c_str(), dir.path("probe/b").c_str()) == 0;
}

TEST(DiskUse, FoldersAndTheirSizes) {
  testing::TempDir dir("bertrain_disk_use");
  write_bytes(dir.path("run/last/model.safetensors"), 3'000'000);
  write_bytes(dir.path("run/last/config.json"), 100'000);
  write_bytes(dir.path("run/best/model.safetensors"), 2'000'000);
  write_bytes(dir.path("run/metrics.jsonl"), 50'000);
  EXPECT_EQ(disk_use_summary(dir.path("run")),
            "5.2 MB in " + dir.path("run") + " (last/ 3.1 MB, best/ 2.0 MB)");
}

TEST(DiskUse, HardLinkedFilesCountOnceAndTheirFoldersAreNamed) {
  testing::TempDir dir("bertrain_disk_use");
  if (!can_link(dir)) GTEST_SKIP() << "the temporary directory's filesystem makes no hard links";
  // A step checkpoint holding last/'s files (as write_checkpoint links them), and best/ sharing last/'s weights.
  write_bytes(dir.path("run/last/model.safetensors"), 3'000'000);
  write_bytes(dir.path("run/last/optimizer.safetensors"), 6'000'000);
  write_bytes(dir.path("run/checkpoints/step-1/model.safetensors"), 3'000'000);
  fs::create_directories(dir.path("run/checkpoints/step-2"));
  for (const char* name : {"model.safetensors", "optimizer.safetensors"}) {
    fs::create_hard_link(dir.path("run/last/") + name, dir.path("run/checkpoints/step-2/") + name);
  }
  fs::create_directories(dir.path("run/best"));
  fs::create_hard_link(dir.path("run/last/model.safetensors"), dir.path("run/best/model.safetensors"));
  write_bytes(dir.path("run/best/config.json"), 200'000);
  // 3 MB (step-1) + 9 MB (last/ = step-2) + 0.2 MB (best/'s own file): 12.2 MB, where a sum of the folders says 24.2.
  EXPECT_EQ(disk_use_summary(dir.path("run")),
            "12.2 MB in " + dir.path("run") +
                " (checkpoints/ 12.0 MB, last/ 9.0 MB, best/ 3.2 MB; last/ shares 9.0 MB with checkpoints/, best/ "
                "shares 3.0 MB with checkpoints/ and last/: hard links, counted once)");
  // A file linked twice inside one folder is one file too.
  fs::create_hard_link(dir.path("run/best/config.json"), dir.path("run/best/config-copy.json"));
  EXPECT_EQ(disk_use_summary(dir.path("run")).substr(0, 7), "12.2 MB");
}

TEST(DiskUse, AnEmptyOrMissingFolderIsNoBytes) {
  testing::TempDir dir("bertrain_disk_use");
  EXPECT_EQ(disk_use_summary(dir.path("missing")), "0.0 MB in " + dir.path("missing"));
  fs::create_directories(dir.path("run/last"));
  EXPECT_EQ(disk_use_summary(dir.path("run")), "0.0 MB in " + dir.path("run") + " (last/ 0.0 MB)");
}

}  // namespace
}  // namespace bertrain

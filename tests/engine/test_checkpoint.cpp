// Tests for engine/checkpoint: atomic directory replacement (create, replace, a failing writer leaves the
// previous directory and no temporary behind, recovery after a crash between the two fallback renames),
// and the optimizer state file (round trip, mismatches naming the file).
#include "engine/checkpoint.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "engine/error.h"
#include "tests/temp_dir.h"
#include "model/safetensors.h"

namespace bertrain {
namespace {

namespace fs = std::filesystem;

class CheckpointTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return (root_ / name).string(); }

  static void spit(const fs::path& p, const std::string& contents) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << contents;
  }
  static std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // name -> contents of the regular files directly in `dir`.
  static std::map<std::string, std::string> files_in(const fs::path& dir) {
    std::map<std::string, std::string> files;
    for (const auto& e : fs::directory_iterator(dir)) files[e.path().filename().string()] = slurp(e.path());
    return files;
  }
  std::vector<std::string> root_entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(root_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  // Fills a checkpoint directory with `files`.
  static std::function<void(const std::string&)> writer(std::map<std::string, std::string> files) {
    return [files](const std::string& dir) {
      for (const auto& [name, contents] : files) spit(fs::path(dir) / name, contents);
    };
  }

  testing::TempDir temp_{"bertrain_checkpoint"};
  const fs::path root_ = temp_.path();
};

using Files = std::map<std::string, std::string>;

TEST_F(CheckpointTest, ReplaceCreatesAMissingDirectory) {
  std::string written_into;
  replace_directory_atomically(path("ckpt"), [&](const std::string& dir) {
    written_into = dir;
    EXPECT_TRUE(directory_exists(dir));
    EXPECT_FALSE(directory_exists(path("ckpt"))) << "the target must not appear before the writer finished";
    spit(fs::path(dir) / "model.safetensors", "weights");
    spit(fs::path(dir) / "config.json", "{}");
  });
  // The writer got a sibling temporary directory, not the target itself.
  EXPECT_NE(written_into, path("ckpt"));
  EXPECT_EQ(written_into.rfind(path("ckpt") + ".tmp-", 0), 0u) << written_into;
  EXPECT_EQ(files_in(path("ckpt")), (Files{{"config.json", "{}"}, {"model.safetensors", "weights"}}));
  EXPECT_EQ(root_entries(), std::vector<std::string>{"ckpt"});
}

TEST_F(CheckpointTest, ReplaceSwapsInTheNewContentsCompletely) {
  replace_directory_atomically(path("ckpt"), writer({{"a.txt", "old a"}, {"b.txt", "old b"}}));
  replace_directory_atomically(path("ckpt"), writer({{"b.txt", "new b"}, {"c.txt", "new c"}}));
  // a.txt was only in the old directory: gone; nothing merged.
  EXPECT_EQ(files_in(path("ckpt")), (Files{{"b.txt", "new b"}, {"c.txt", "new c"}}));
  EXPECT_EQ(root_entries(), std::vector<std::string>{"ckpt"}) << "temporary or .old directory left behind";
  replace_directory_atomically(path("ckpt"), writer({{"d.txt", "third"}}));
  EXPECT_EQ(files_in(path("ckpt")), (Files{{"d.txt", "third"}}));
  EXPECT_EQ(root_entries(), std::vector<std::string>{"ckpt"});
}

TEST_F(CheckpointTest, AWriterThatThrowsLeavesThePreviousDirectory) {
  const Files previous{{"model.safetensors", "good weights"}, {"trainer_state.json", "{\"epochs_done\": 3}"}};
  replace_directory_atomically(path("ckpt"), writer(previous));
  EXPECT_THROW(replace_directory_atomically(path("ckpt"),
                                            [&](const std::string& dir) {
                                              spit(fs::path(dir) / "model.safetensors", "half");
                                              BERTRAIN_FAIL("disk full while writing " << dir);
                                            }),
               Error);
  EXPECT_EQ(files_in(path("ckpt")), previous);
  EXPECT_EQ(root_entries(), std::vector<std::string>{"ckpt"}) << "the temporary directory was not removed";

  // Any exception type, and a target that did not exist yet: nothing appears.
  EXPECT_THROW(replace_directory_atomically(path("fresh"),
                                            [](const std::string& dir) {
                                              spit(fs::path(dir) / "x", "partial");
                                              throw std::runtime_error("interrupted");
                                            }),
               std::runtime_error);
  EXPECT_FALSE(fs::exists(path("fresh")));
  EXPECT_EQ(root_entries(), std::vector<std::string>{"ckpt"});
}

TEST_F(CheckpointTest, AStaleTemporaryDirectoryIsReplaced) {
  // A crashed earlier writer with this pid left a temporary directory with junk in it.
  replace_directory_atomically(path("ckpt"), [&](const std::string& dir) {
    spit(fs::path(dir) / "new.txt", "new");
  });
  const std::string tmp = path("ckpt") + ".tmp-" + std::to_string(::getpid());
  fs::create_directories(tmp);
  spit(fs::path(tmp) / "junk.txt", "junk");
  replace_directory_atomically(path("ckpt"), writer({{"newer.txt", "newer"}}));
  EXPECT_EQ(files_in(path("ckpt")), (Files{{"newer.txt", "newer"}}));
  EXPECT_EQ(root_entries(), std::vector<std::string>{"ckpt"});
}

TEST_F(CheckpointTest, RecoverRestoresTheOldDirectoryAfterACrashBetweenRenames) {
  // The fallback swap renames dir -> dir.old, then tmp -> dir; a crash in between leaves only dir.old.
  const Files previous{{"model.safetensors", "epoch 3"}};
  replace_directory_atomically(path("ckpt"), writer(previous));
  fs::rename(path("ckpt"), path("ckpt.old"));
  recover_directory(path("ckpt"));
  EXPECT_EQ(files_in(path("ckpt")), previous);
  EXPECT_FALSE(fs::exists(path("ckpt.old")));

  // Nothing to do: neither exists, or dir exists (dir.old is then a leftover and dir wins).
  EXPECT_NO_THROW(recover_directory(path("absent")));
  EXPECT_FALSE(fs::exists(path("absent")));
  fs::create_directories(path("ckpt.old"));
  spit(path("ckpt.old") + "/model.safetensors", "epoch 2");
  recover_directory(path("ckpt"));
  EXPECT_EQ(files_in(path("ckpt")), previous);
}

TEST_F(CheckpointTest, ReplaceAfterACrashRecoversFirst) {
  replace_directory_atomically(path("ckpt"), writer({{"a", "old"}}));
  fs::rename(path("ckpt"), path("ckpt.old"));  // the crash
  replace_directory_atomically(path("ckpt"), writer({{"b", "new"}}));
  EXPECT_EQ(files_in(path("ckpt")), (Files{{"b", "new"}}));
  EXPECT_EQ(root_entries(), std::vector<std::string>{"ckpt"});
}

TEST_F(CheckpointTest, FileAndDirectoryPredicates) {
  spit(path("f"), "x");
  fs::create_directories(path("d/e"));
  EXPECT_TRUE(file_exists(path("f")));
  EXPECT_FALSE(file_exists(path("d")));
  EXPECT_TRUE(directory_exists(path("d")));
  EXPECT_FALSE(directory_exists(path("f")));
  EXPECT_FALSE(file_exists(path("missing")));
  remove_tree(path("d"));
  EXPECT_FALSE(fs::exists(path("d")));
  EXPECT_NO_THROW(remove_tree(path("missing")));
}

// ---- optimizer state ------------------------------------------------------------------------------------

AdamOptimizer<float> filled_optimizer(std::size_t n, long steps) {
  AdamOptimizer<float> opt(n, AdamHyper{});
  for (std::size_t i = 0; i < n; ++i) {
    opt.first_moment()[i] = 0.25f * static_cast<float>(i) - 1.0f / 3.0f;
    opt.second_moment()[i] = 1e-7f * static_cast<float>(i * i + 1);
  }
  opt.set_steps_taken(steps);
  return opt;
}

TEST_F(CheckpointTest, OptimizerStateRoundTrip) {
  const AdamOptimizer<float> saved = filled_optimizer(37, 123456789012L);
  save_optimizer_state(path("optimizer.safetensors"), saved);
  AdamOptimizer<float> loaded(37, AdamHyper{});
  load_optimizer_state(path("optimizer.safetensors"), &loaded);
  EXPECT_EQ(loaded.first_moment(), saved.first_moment());  // exact: F32 stored as F32
  EXPECT_EQ(loaded.second_moment(), saved.second_moment());
  EXPECT_EQ(loaded.steps_taken(), 123456789012L);
}

TEST_F(CheckpointTest, OptimizerStateSizeMismatchNamesTheFile) {
  save_optimizer_state(path("optimizer.safetensors"), filled_optimizer(37, 5));
  AdamOptimizer<float> bigger(38, AdamHyper{});
  try {
    load_optimizer_state(path("optimizer.safetensors"), &bigger);
    FAIL() << "a size mismatch was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path("optimizer.safetensors")), std::string::npos) << what;
    EXPECT_NE(what.find("37"), std::string::npos) << what;
    EXPECT_NE(what.find("38"), std::string::npos) << what;
  }
  EXPECT_EQ(bigger.steps_taken(), 0);
}

TEST_F(CheckpointTest, OptimizerStateMissingPiecesNameTheFile) {
  const std::vector<float> values(4, 1.0f);
  {
    SafetensorsWriter w;  // exp_avg_sq missing
    w.add_f32("exp_avg", {4}, values.data());
    w.set_metadata("step", "3");
    w.write(path("no_sq.safetensors"));
  }
  {
    SafetensorsWriter w;  // step missing
    w.add_f32("exp_avg", {4}, values.data());
    w.add_f32("exp_avg_sq", {4}, values.data());
    w.write(path("no_step.safetensors"));
  }
  {
    SafetensorsWriter w;  // step not an integer
    w.add_f32("exp_avg", {4}, values.data());
    w.add_f32("exp_avg_sq", {4}, values.data());
    w.set_metadata("step", "three");
    w.write(path("bad_step.safetensors"));
  }
  for (const char* name : {"no_sq.safetensors", "no_step.safetensors", "bad_step.safetensors", "absent.safetensors"}) {
    AdamOptimizer<float> opt(4, AdamHyper{});
    try {
      load_optimizer_state(path(name), &opt);
      ADD_FAILURE() << name << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path(name)), std::string::npos) << e.what();
    }
  }
}

TEST_F(CheckpointTest, JsonFilesNameThemselvesInErrors) {
  write_json_file(path("state.json"), nlohmann::json{{"epochs_done", 2}, {"lr", 1e-4}});
  EXPECT_EQ(read_json_file(path("state.json")), (nlohmann::json{{"epochs_done", 2}, {"lr", 1e-4}}));
  spit(path("broken.json"), "{\"epochs_done\": ");
  for (const char* name : {"broken.json", "absent.json"}) {
    try {
      read_json_file(path(name));
      ADD_FAILURE() << name << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path(name)), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace bertrain

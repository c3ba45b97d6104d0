// Tests for core/files: atomic directory replacement (create, replace, a failing writer leaves the previous
// directory and no temporary behind, recovery after a crash between the two fallback renames), the file and
// directory predicates, hard links with a copy across filesystems, and JSON files whose errors name them.
#include "core/files.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/temp_dir.h"

namespace bertrain {
namespace {

namespace fs = std::filesystem;

class FilesTest : public ::testing::Test {
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

  // Fills a directory with `files`.
  static std::function<void(const std::string&)> writer(std::map<std::string, std::string> files) {
    return [files](const std::string& dir) {
      for (const auto& [name, contents] : files) spit(fs::path(dir) / name, contents);
    };
  }

  testing::TempDir temp_{"bertrain_files"};
  const fs::path root_ = temp_.path();
};

using Files = std::map<std::string, std::string>;

TEST_F(FilesTest, ReplaceCreatesAMissingDirectory) {
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

TEST_F(FilesTest, ReplaceSwapsInTheNewContentsCompletely) {
  replace_directory_atomically(path("ckpt"), writer({{"a.txt", "old a"}, {"b.txt", "old b"}}));
  replace_directory_atomically(path("ckpt"), writer({{"b.txt", "new b"}, {"c.txt", "new c"}}));
  // a.txt was only in the old directory: gone; nothing merged.
  EXPECT_EQ(files_in(path("ckpt")), (Files{{"b.txt", "new b"}, {"c.txt", "new c"}}));
  EXPECT_EQ(root_entries(), std::vector<std::string>{"ckpt"}) << "temporary or .old directory left behind";
  replace_directory_atomically(path("ckpt"), writer({{"d.txt", "third"}}));
  EXPECT_EQ(files_in(path("ckpt")), (Files{{"d.txt", "third"}}));
  EXPECT_EQ(root_entries(), std::vector<std::string>{"ckpt"});
}

TEST_F(FilesTest, AWriterThatThrowsLeavesThePreviousDirectory) {
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

TEST_F(FilesTest, AStaleTemporaryDirectoryIsReplaced) {
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

TEST_F(FilesTest, RecoverRestoresTheOldDirectoryAfterACrashBetweenRenames) {
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

TEST_F(FilesTest, ReplaceAfterACrashRecoversFirst) {
  replace_directory_atomically(path("ckpt"), writer({{"a", "old"}}));
  fs::rename(path("ckpt"), path("ckpt.old"));  // the crash
  replace_directory_atomically(path("ckpt"), writer({{"b", "new"}}));
  EXPECT_EQ(files_in(path("ckpt")), (Files{{"b", "new"}}));
  EXPECT_EQ(root_entries(), std::vector<std::string>{"ckpt"});
}

TEST_F(FilesTest, FileAndDirectoryPredicates) {
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

ino_t inode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

// A hard link shares the file's inode, and the linked file keeps its bytes when the directory it came from is
// replaced (a rename does not touch the old inode); an existing target is an error, not a silent copy.
TEST_F(FilesTest, LinkSharesTheInodeAndOutlivesTheReplacedDirectory) {
  replace_directory_atomically(path("best"), [](const std::string& dir) { spit(dir + "/w", "epoch 1"); });
  EXPECT_EQ(link_or_copy_file(path("best/w"), path("w")), "");
  EXPECT_EQ(inode_of(path("w")), inode_of(path("best/w")));
  replace_directory_atomically(path("best"), [](const std::string& dir) { spit(dir + "/w", "epoch 2"); });
  EXPECT_EQ(slurp(path("w")), "epoch 1");
  EXPECT_NE(inode_of(path("w")), inode_of(path("best/w")));
  EXPECT_THROW(link_or_copy_file(path("best/w"), path("w")), Error);
  EXPECT_THROW(link_or_copy_file(path("missing"), path("w2")), Error);
}

// Across filesystems (here /dev/shm, a tmpfs, when it is one apart from the temporary directory's) the file is
// copied and the reason returned.
TEST_F(FilesTest, LinkAcrossFilesystemsCopiesAndSaysWhy) {
  struct stat here {}, shm {};
  if (::stat(root_.c_str(), &here) != 0 || ::stat("/dev/shm", &shm) != 0 || here.st_dev == shm.st_dev) {
    GTEST_SKIP() << "no /dev/shm on another filesystem than " << root_ << " to link across";
  }
  char pattern[] = "/dev/shm/bertrain_files_XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const std::string shm_dir = pattern;
  spit(shm_dir + "/w", "weights");
  const std::string why = link_or_copy_file(shm_dir + "/w", path("w"));
  EXPECT_NE(why, "");
  EXPECT_EQ(slurp(path("w")), "weights");
  EXPECT_NE(inode_of(path("w")), inode_of(shm_dir + "/w"));
  remove_tree(shm_dir);
}

// A lock's folder made by the lock goes with it when nothing was written there (a run that failed on its input);
// one that held something, or was there before, stays. A second lock on a held folder is refused, naming the pid.
TEST_F(FilesTest, ADirectoryLockRemovesOnlyTheEmptyFolderItMade) {
  {
    DirectoryLock lock(path("new"), "--out");
    EXPECT_TRUE(fs::exists(path("new/.bertrain-lock")));
    try {
      DirectoryLock second(path("new"), "--out");
      ADD_FAILURE() << "a held folder was locked twice";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("is in use by another bertrain process (pid " + std::to_string(::getpid())),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_FALSE(fs::exists(path("new")));
  {
    DirectoryLock lock(path("written"), "--out");
    spit(fs::path(path("written")) / "results.json", "{}");
  }
  EXPECT_EQ(files_in(path("written")), (Files{{"results.json", "{}"}}));
  fs::create_directories(path("there"));
  { DirectoryLock lock(path("there"), "--out"); }
  EXPECT_TRUE(fs::is_directory(path("there")));
  EXPECT_TRUE(fs::is_empty(path("there")));
}

// A locked folder moved away and made anew under its name is no longer the one locked: check_held says so (a
// second process could lock the new folder, and both would write it).
TEST_F(FilesTest, ADirectoryLockKnowsWhenItsFolderIsReplaced) {
  DirectoryLock lock(path("run"), "--out");
  lock.check_held();
  fs::rename(path("run"), path("gone"));
  fs::create_directories(path("run"));
  try {
    lock.check_held();
    ADD_FAILURE() << "a replaced folder passed for the locked one";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--out '" + path("run") + "' was removed or replaced while this process "
                                         "wrote it"),
              std::string::npos)
        << e.what();
  }
  DirectoryLock other(path("run"), "--out");  // the new folder is free: why the holder must check
}

// A lock file deleted from the locked folder (a clean-up of hidden files) is made and locked again, so a second
// process cannot take the folder; one that took it first stops the holder.
TEST_F(FilesTest, ADirectoryLockWhoseFileWasDeletedLocksAgain) {
  DirectoryLock lock(path("run"), "--out");
  fs::remove(path("run/.bertrain-lock"));
  lock.check_held();
  EXPECT_TRUE(fs::exists(path("run/.bertrain-lock")));
  try {
    DirectoryLock second(path("run"), "--out");
    ADD_FAILURE() << "a folder whose lock file was made again was locked twice";
  } catch (const DirectoryInUseError&) {
  }
  fs::remove(path("run/.bertrain-lock"));
  {
    DirectoryLock taken(path("run"), "--out");
    try {
      lock.check_held();
      ADD_FAILURE() << "the holder went on beside the process that locked the new file";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("is in use by another bertrain process"), std::string::npos) << e.what();
    }
  }
}

TEST_F(FilesTest, FolderNameIgnoresATrailingSlash) {
  EXPECT_EQ(folder_name("runs/a"), "a");
  EXPECT_EQ(folder_name("runs/a/"), "a");
  EXPECT_EQ(folder_name("runs/./a//"), "a");
  EXPECT_EQ(folder_name("a"), "a");
}

TEST_F(FilesTest, JsonFilesNameThemselvesInErrors) {
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

// An output file may be a new name, a regular file or a link (whose target's folder must be writable), never a
// FIFO or device, which writing a file in its place would remove; and never the command's own input, by any name.
TEST_F(FilesTest, OutputFilesAreRegularFilesAndNotTheInput) {
  spit(path("data.csv"), "a,b\n");
  check_writable_file(path("new.jsonl"), "--out");
  check_writable_file(path("data.csv"), "--out");
  fs::create_directories(root_ / "sub");
  fs::create_symlink("sub/target.jsonl", path("link.jsonl"));  // dangling: written through into sub/
  check_writable_file(path("link.jsonl"), "--out");
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  for (const std::string& special : {path("fifo"), std::string("/dev/null")}) {
    try {
      check_writable_file(special, "--out");
      ADD_FAILURE() << special << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
    }
  }
  check_writable_file(path("new.jsonl"), "--out", {path("data.csv")});  // a file that does not exist yet
  fs::create_hard_link(path("data.csv"), path("same.csv"));
  fs::create_symlink("data.csv", path("data_link.csv"));
  for (const std::string& same : {path("data.csv"), path("same.csv"), path("data_link.csv"), path("./data.csv")}) {
    try {
      check_writable_file(same, "--out", {path("data.csv")});
      ADD_FAILURE() << same << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("is the input"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace bertrain

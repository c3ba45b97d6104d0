// Tests for AtomicFile: a commit replaces the target, an abandoned write leaves the old file and no
// temporary file behind, and failures name the path.
#include "core/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/temp_dir.h"

namespace bertrain {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  static std::string slurp(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    return names;
  }

  testing::TempDir temp_{"bertrain_atomic"};
  const fs::path dir_ = temp_.path();
};

TEST_F(AtomicFileTest, CommitReplacesContents) {
  const std::string p = path("weights.bin");
  write_file_atomically(p, "old contents");
  ASSERT_EQ(slurp(p), "old contents");

  AtomicFile file(p);
  file.write("new", 3);
  file.write(" contents!", 10);
  file.commit();
  EXPECT_EQ(slurp(p), "new contents!");
  EXPECT_EQ(entries(), std::vector<std::string>{"weights.bin"});  // temporary file renamed away
}

TEST_F(AtomicFileTest, TargetKeepsOldContentsUntilCommit) {
  const std::string p = path("config.json");
  write_file_atomically(p, "{\"old\": 1}");
  AtomicFile file(p);
  file.write("{\"new\": 2}", 10);
  // The new bytes live in "<path>.tmp.<pid>" while the target still holds the old ones.
  const std::string tmp = p + ".tmp." + std::to_string(static_cast<long>(::getpid()));
  EXPECT_TRUE(fs::exists(tmp));
  EXPECT_EQ(slurp(p), "{\"old\": 1}");
  file.commit();
  EXPECT_EQ(slurp(p), "{\"new\": 2}");
  EXPECT_FALSE(fs::exists(tmp));
}

TEST_F(AtomicFileTest, UncommittedFileLeavesOldFileAndNoTemporary) {
  const std::string p = path("model.safetensors");
  write_file_atomically(p, "complete old file");
  {
    AtomicFile file(p);
    file.write("half-written new f", 18);
  }  // destroyed without commit, as when an exception unwinds a writer
  EXPECT_EQ(slurp(p), "complete old file");
  EXPECT_EQ(entries(), std::vector<std::string>{"model.safetensors"});
}

TEST_F(AtomicFileTest, UncommittedNewFileLeavesNothing) {
  { AtomicFile file(path("never.bin")); }
  EXPECT_TRUE(entries().empty());
}

TEST_F(AtomicFileTest, NonexistentDirectoryIsErrorNamingPath) {
  const std::string p = path("missing_dir/out.bin");
  try {
    AtomicFile file(p);
    FAIL() << "expected bertrain::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(p), std::string::npos) << msg;
    EXPECT_NE(msg.find("No such file or directory"), std::string::npos) << msg;
  }
  EXPECT_THROW(write_file_atomically(p, "x"), Error);
}

TEST_F(AtomicFileTest, WriteOrCommitAfterCommitIsError) {
  const std::string p = path("once.bin");
  AtomicFile file(p);
  file.write("a", 1);
  file.commit();
  try {
    file.write("b", 1);
    FAIL() << "expected bertrain::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
  EXPECT_THROW(file.commit(), Error);
  EXPECT_EQ(slurp(p), "a");
}

TEST_F(AtomicFileTest, LargeAndEmptyWritesRoundTrip) {
  std::string big(8u << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 131u) >> 3);
  write_file_atomically(path("big.bin"), big);
  EXPECT_EQ(slurp(path("big.bin")), big);

  write_file_atomically(path("empty.bin"), "");
  EXPECT_TRUE(fs::exists(path("empty.bin")));
  EXPECT_EQ(fs::file_size(path("empty.bin")), 0u);
}

// A symbolic link is written through (its target replaced, the link kept); a FIFO is refused, not replaced.
TEST_F(AtomicFileTest, LinksAreWrittenThroughAndFifosRefused) {
  write_file_atomically(path("target"), "old");
  fs::create_symlink("target", path("link"));
  write_file_atomically(path("link"), "new");
  EXPECT_TRUE(fs::is_symlink(path("link")));
  EXPECT_EQ(slurp(path("target")), "new");
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  EXPECT_THROW(write_file_atomically(path("fifo"), "x"), Error);
  EXPECT_TRUE(fs::is_fifo(path("fifo")));
}

// A writer killed before its rename leaves "<file>.tmp.<pid>" (MLflow then reads one in params/ or metrics/ as a
// parameter or metric of its own): the next commit of that file removes it, when no process <pid> lives.
TEST_F(AtomicFileTest, AKilledWritersTemporaryFileIsRemovedByTheNextCommit) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // a pid no process has now
  const std::string dead = std::to_string(child), alive = std::to_string(::getppid());
  const std::vector<std::string> leftovers = {"batch_size.tmp." + dead, "batch_size.tmp." + alive, "lr.tmp." + dead,
                                             "batch_size.tmp.x1", "batch_size.tmp." + dead + ".keep"};
  for (const std::string& name : leftovers) {
    write_file_atomically(path(name), "partial");
  }
  write_file_atomically(path("batch_size"), "32");
  const auto sorted = [](std::vector<std::string> names) {  // pids sort as text: "9" after "10"
    std::sort(names.begin(), names.end());
    return names;
  };
  EXPECT_EQ(sorted(entries()), sorted({"batch_size", "batch_size.tmp." + alive, "batch_size.tmp." + dead + ".keep",
                                       "batch_size.tmp.x1", "lr.tmp." + dead}));
  remove_abandoned_temporary_files(dir_.string());  // the whole folder's
  EXPECT_EQ(sorted(entries()), sorted({"batch_size", "batch_size.tmp." + alive, "batch_size.tmp." + dead + ".keep",
                                       "batch_size.tmp.x1"}));
  remove_abandoned_temporary_files(path("no-such-folder"));  // nothing to do, no error
}

// With a temporary folder, nothing but the committed file ever appears in the target's folder (a reader that lists
// it, as MLflow lists a run's params/, saw "seed.tmp.<pid>" as a param), and the temporary folder keeps nothing.
TEST_F(AtomicFileTest, ATemporaryFolderKeepsTheTargetsFolderClean) {
  fs::create_directories(dir_ / "params");
  AtomicFile file(path("params/seed"), dir_.string());
  file.write("42", 2);
  EXPECT_TRUE(fs::is_empty(dir_ / "params"));
  EXPECT_TRUE(fs::exists(path("seed.tmp." + std::to_string(::getpid()))));
  file.commit();
  EXPECT_EQ(slurp(path("params/seed")), "42");
  std::vector<std::string> names = entries();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, std::vector<std::string>{"params"});
  write_file_atomically(path("params/seed"), "7", dir_.string());
  EXPECT_EQ(slurp(path("params/seed")), "7");
  EXPECT_EQ(entries(), std::vector<std::string>{"params"});
  // A temporary folder on another filesystem than the target's (an MLflow artifact_uri elsewhere): the temporary
  // file goes beside the target, where the rename can move it (it failed with EXDEV).
  struct stat shm, here;
  if (::stat("/dev/shm", &shm) == 0 && ::stat(dir_.c_str(), &here) == 0 && shm.st_dev != here.st_dev) {
    const std::string elsewhere = "/dev/shm/bertrain_atomic_" + std::to_string(::getpid());
    write_file_atomically(elsewhere, "8", dir_.string());
    EXPECT_EQ(slurp(elsewhere), "8");
    fs::remove(elsewhere);
  } else {
    std::cout << "no /dev/shm on another filesystem here: the cross-filesystem case is not checked\n";
  }
}

TEST_F(AtomicFileTest, RelativePathInCurrentDirectory) {
  // A bare file name has "." as its folder; the directory fsync must handle that.
  const fs::path old_cwd = fs::current_path();
  fs::current_path(dir_);
  EXPECT_NO_THROW(write_file_atomically("relative.txt", "here"));
  fs::current_path(old_cwd);
  EXPECT_EQ(slurp(path("relative.txt")), "here");
}

}  // namespace
}  // namespace bertrain

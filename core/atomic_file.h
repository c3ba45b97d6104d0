// Crash-safe file replacement: write to "<path>.tmp.<pid>", fsync, rename over <path>, fsync the folder.
// A reader of <path> sees the old file or the complete new one, never a partial write. A writer killed before its
// rename leaves its temporary file; the next commit of the same path removes it. Where a reader lists the folder
// and takes every file in it as data (an MLflow run's params/, tags/, metrics/), the temporary file goes in another
// folder instead, as "<temporary_dir>/<name>.tmp.<pid>" (beside the target when that folder is on another
// filesystem, which the rename cannot cross).
#pragma once

#include <cstddef>
#include <string>

namespace bertrain {

class AtomicFile {
 public:
  // Opens the temporary file (in `temporary_dir` when given, else beside `path`); throws Error naming path.
  explicit AtomicFile(std::string path, const std::string& temporary_dir = "");
  ~AtomicFile();                          // removes the temporary file unless commit() succeeded
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, std::size_t size);  // throws Error naming the path on short writes
  void commit();                                   // fsync, close, rename, fsync the directory

 private:
  std::string path_;
  std::string tmp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

// The file an AtomicFile for `path` replaces: a symbolic link's target (the link stays), else `path`. Throws Error
// naming a link it cannot follow.
std::string atomic_file_target(const std::string& path);

// Removes the temporary files "<name>.tmp.<pid>" in `dir` whose writer is gone (no process <pid> on this machine):
// what a writer killed between creating and renaming its temporary file leaves. Of one `name` only, when given.
// Best effort: nothing it cannot remove is an error. AtomicFile::commit sweeps its own file's.
void remove_abandoned_temporary_files(const std::string& dir, const std::string& name = "");

// Writes `size` bytes of `data` to `fd`, again after a signal or a partial write; returns how many it wrote, fewer
// only on an error: *error is then its errno, or 0 when write() stopped making progress.
std::size_t write_all(int fd, const void* data, std::size_t size, int* error);

// Convenience: replaces `path` atomically with `contents` (the temporary file in `temporary_dir`, when given).
void write_file_atomically(const std::string& path, const std::string& contents, const std::string& temporary_dir = "");

}  // namespace bertrain

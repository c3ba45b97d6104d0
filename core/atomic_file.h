// Crash-safe file replacement: write to "<path>.tmp.<pid>", fsync, rename over <path>, fsync the folder.
// A reader of <path> sees the old file or the complete new one, never a partial write.
#pragma once

#include <cstddef>
#include <string>

namespace bertrain {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // opens the temporary file; throws Error naming path
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

// Convenience: replaces `path` atomically with `contents`.
void write_file_atomically(const std::string& path, const std::string& contents);

}  // namespace bertrain

// Files and directories as the training workflow needs them: existence checks, mkdir -p, rm -rf, crash-safe
// replacement of a whole directory (checkpoints), hard links, and JSON files read with errors that name them.
#pragma once

#include <sys/types.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"

namespace bertrain {

// Replaces directory `dir` with the one that `write` fills (called with a fresh temporary directory
// "<dir>.tmp-<pid>"). The swap is one renameat2(RENAME_EXCHANGE) where the filesystem supports it; elsewhere
// two renames, after which a crash in between leaves the previous directory at "<dir>.old", which
// recover_directory() restores. The temporary directory is removed if `write` throws.
void replace_directory_atomically(const std::string& dir, const std::function<void(const std::string&)>& write);

// Finishes an interrupted replace: when `dir` is missing and "<dir>.old" exists, renames it back.
void recover_directory(const std::string& dir);

// Throws Error "cannot open <what> '<path>': <why>" unless `path` can be opened as a file: why is "it is a
// directory, not a file", "'<dir>' is a file, not a directory" (a file where the path needs a directory), or
// the system's reason ("No such file or directory"). A directory opens as a stream on Linux and then reads as
// nothing, or throws "basic_filebuf::underflow error reading the file: Is a directory" from the first read.
void require_readable_file(const std::string& path, const std::string& what);

// The whole of file `path` (named `what` in errors, as require_readable_file's).
std::string read_file(const std::string& path, const std::string& what);

// Before any work: checks that an output can be written where the user asked, so that a bad --out fails at once
// instead of after the training or evaluation. Nothing is created (a file is made and removed at once to probe).
// check_writable_directory: `dir` is a directory, or mkdir -p can make it, in which files can be created.
// check_writable_file: `path` is not a directory, nor a device, FIFO or socket (which replacing would remove), nor
// any of the command's `inputs` (the same file by any name, a link included), and files can be created in its folder
// (a symbolic link's target's), which must exist (the commands write files atomically beside themselves and make no
// folders for them). Both throw Error "<what> '<path>': <why>", why being "'<p>' is a file, not a directory",
// "folder '<p>' does not exist", "cannot create files in '<p>': <the system's reason>" or, for an input, "'<path>' is
// the input '<input>'".
void check_writable_directory(const std::string& dir, const std::string& what);
// The regular files of `paths`, each a file or a folder listed whole: the inputs an output must not replace. What
// cannot be listed is left out (reading it fails later, by its own name).
std::vector<std::string> regular_files_in(const std::vector<std::string>& paths);
void check_writable_file(const std::string& path, const std::string& what, const std::vector<std::string>& inputs = {});

// Holds an exclusive lock on directory `dir` (created if missing) for as long as it lives, so that two processes
// never write one run directory at once: flock on "<dir>/.bertrain-lock", which the kernel releases when the
// process ends (kill -9 included). The file names the holder's pid and is removed when the lock is given back, and
// so is `dir` when this lock created it and nothing was written into it (a run that failed on its input).
// Throws DirectoryInUseError "<what> '<dir>' is in use by another bertrain process (pid N) ..." when another process
// holds it, Error for anything else.
class DirectoryLock {
 public:
  DirectoryLock(const std::string& dir, const std::string& what);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

  // Throws Error when `dir` is no longer the folder locked (removed, or moved away and made anew: a second process
  // could then lock the new one and both would write it); a lock file deleted from the folder is made and locked
  // again (Error when another process took it meanwhile).
  void check_held();

 private:
  void lock_file(int attempts);  // opens and locks path_ into fd_; Error or DirectoryInUseError
  std::string dir_, what_, path_;
  int fd_ = -1;
  bool created_dir_ = false;
  dev_t dir_device_ = 0;
  ino_t dir_inode_ = 0;
};

class DirectoryInUseError : public Error {
 public:
  using Error::Error;
};

bool directory_exists(const std::string& path);
bool file_exists(const std::string& path);
bool path_exists(const std::string& path);  // anything at all: file, directory, device...
void remove_tree(const std::string& path);  // rm -rf; missing paths are fine
void make_directories(const std::string& dir);  // mkdir -p; throws Error naming the path

// Makes the new file `to` a hard link to the file `from` (the same bytes on disk, stored once), or a copy of it
// where the system refuses the link: another filesystem (EXDEV), or one without hard links or with too many to
// the file (the copy fsynced). Returns "" when linked, else the system's reason for the refusal ("Invalid
// cross-device link"). Throws Error naming both paths when neither works (`to` existing is an error, not a reason
// to copy).
std::string link_or_copy_file(const std::string& from, const std::string& to);
// The last name of a directory path, with or without a trailing '/': "runs/a/" and "runs/./a" name "a".
std::string folder_name(const std::string& dir);

nlohmann::json read_json_file(const std::string& path);  // throws Error naming the file
void write_json_file(const std::string& path, const nlohmann::json& json);  // atomic

}  // namespace bertrain

#include "core/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_text.h"

namespace bertrain {

void require_readable_file(const std::string& path, const std::string& what) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    BERTRAIN_CHECK(!S_ISDIR(st.st_mode), "cannot open " << what << " '" << path << "': it is a directory, not a file");
    return;
  }
  const int error = errno;
  if (error == ENOTDIR) {
    // Some folder on the way is a file: name it (e.g. --model data.csv looks for data.csv/config.json).
    for (std::filesystem::path p = std::filesystem::path(path).parent_path(); !p.empty(); p = p.parent_path()) {
      if (::stat(p.c_str(), &st) == 0) {
        BERTRAIN_CHECK(S_ISDIR(st.st_mode), "cannot open " << what << " '" << path << "': '" << p.string()
                                                           << "' is a file, not a directory");
        break;
      }
      if (p == p.parent_path()) break;
    }
  }
  BERTRAIN_FAIL("cannot open " << what << " '" << path << "': " << std::strerror(error));
}

namespace {

// Creates and removes a file in directory `dir`: the one test that answers for permissions, read-only mounts and
// filesystems like /proc alike. Returns "" or the system's reason.
std::string probe_file_creation(const std::string& dir) {
  const std::string probe = dir + "/.bertrain-write-check-" + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
  return "";
}

// The nearest part of directory `dir` that exists must be a directory in which files can be created (mkdir -p
// makes the rest in it). Errors name `path`, the output asked for, and `what`, its flag.
void check_creatable_below(std::filesystem::path dir, const std::string& path, const std::string& what) {
  struct stat st;
  while (!dir.empty() && ::stat(dir.c_str(), &st) != 0 && dir != dir.parent_path()) {
    // Missing, or below a file (ENOTDIR: the loop reaches that file): look one folder up. Any other reason (no
    // permission to search a folder) is the answer.
    const int error = errno;
    BERTRAIN_CHECK(error == ENOENT || error == ENOTDIR, what << " '" << path << "': " << std::strerror(error));
    dir = dir.parent_path();
  }
  if (!dir.empty() && ::stat(dir.c_str(), &st) == 0) {
    BERTRAIN_CHECK(S_ISDIR(st.st_mode), what << " '" << path << "': '" << dir.string() << "' is a file, not a directory");
  }
  const std::string name = dir.empty() ? "." : dir.string();
  const std::string why = probe_file_creation(name);
  BERTRAIN_CHECK(why.empty(), what << " '" << path << "': cannot create files in '" << name << "': " << why);
}

}  // namespace

void check_writable_directory(const std::string& dir, const std::string& what) {
  check_creatable_below(std::filesystem::path(dir).lexically_normal(), dir, what);
}

std::vector<std::string> regular_files_in(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    std::error_code error;
    if (fs::is_regular_file(path, error)) files.push_back(path);
    if (!fs::is_directory(path, error)) continue;
    for (fs::recursive_directory_iterator it(path, error), end; !error && it != end; it.increment(error)) {
      if (it->is_regular_file(error)) files.push_back(it->path().string());
    }
  }
  return files;
}

void check_writable_file(const std::string& path, const std::string& what, const std::vector<std::string>& inputs) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    BERTRAIN_CHECK(!S_ISDIR(st.st_mode), what << " '" << path << "': it is a directory, not a file");
    BERTRAIN_CHECK(S_ISREG(st.st_mode), what << " '" << path << "': not a regular file (a device, FIFO or socket), "
                                             << "which writing a file in its place would remove: give a file's path");
  }
  // Unlike a directory, the file's folder is not made: it must exist (a file on the way is named below). A link
  // is written through (AtomicFile): its target's folder is the one written.
  const std::filesystem::path folder = std::filesystem::path(atomic_file_target(path)).parent_path();
  BERTRAIN_CHECK(folder.empty() || ::stat(folder.c_str(), &st) == 0 || errno != ENOENT,
                 what << " '" << path << "': folder '" << folder.string() << "' does not exist");
  check_creatable_below(folder, path, what);
  for (const std::string& input : inputs) {
    std::error_code ignored;
    BERTRAIN_CHECK(!std::filesystem::equivalent(path, input, ignored),
                   what << " '" << path << "' is the input '" << input << "', which writing it would replace: write "
                        << "to another file");
  }
}

namespace {

// Whether the open file `fd` is the file at `path` now (not unlinked, not replaced by another of that name).
bool is_file_at(int fd, const std::string& path) {
  struct stat open_file, at_path;
  return ::fstat(fd, &open_file) == 0 && ::stat(path.c_str(), &at_path) == 0 && open_file.st_dev == at_path.st_dev &&
         open_file.st_ino == at_path.st_ino;
}

}  // namespace

DirectoryLock::DirectoryLock(const std::string& dir, const std::string& what)
    : dir_(dir), what_(what), path_(dir + "/.bertrain-lock") {
  created_dir_ = !path_exists(dir);
  lock_file(100);
  struct stat st;
  BERTRAIN_CHECK(::stat(dir.c_str(), &st) == 0, dir << ": cannot look at the locked folder: " << std::strerror(errno));
  dir_device_ = st.st_dev;
  dir_inode_ = st.st_ino;
}

void DirectoryLock::lock_file(int attempts) {
  // A holder unlinks the file before it lets go, and a lock's own folder may go with it: a lock taken on a file no
  // longer at the path (opened before the unlink) is no lock, so it is taken again on the file there now.
  for (int attempt = 0;; ++attempt) {
    make_directories(dir_);
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0 && errno == ENOENT && attempt < attempts) continue;  // the folder went between the two calls
    BERTRAIN_CHECK(fd_ >= 0, path_ << ": cannot open the lock file: " << std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      char holder[32] = {0};
      const ssize_t n = ::pread(fd_, holder, sizeof(holder) - 1, 0);
      ::close(fd_);
      fd_ = -1;
      std::string pid(holder, n > 0 ? static_cast<std::size_t>(n) : 0);
      pid = pid.substr(0, pid.find_first_not_of("0123456789"));
      if (error == EWOULDBLOCK) {
        throw DirectoryInUseError(what_ + " '" + dir_ + "' is in use by another bertrain process (pid " +
                                  (pid.empty() ? "unknown" : pid) + "): wait for it to end, or choose another " + what_);
      }
      BERTRAIN_FAIL(path_ << ": cannot lock: " << std::strerror(error));
    }
    if (is_file_at(fd_, path_)) break;
    ::close(fd_);
    fd_ = -1;
    BERTRAIN_CHECK(attempt < attempts, path_ << ": cannot lock: the lock file keeps being replaced");
  }
  const std::string pid = std::to_string(::getpid());
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    // The pid only makes the message of a process that waits more helpful; the lock itself holds.
  }
}

DirectoryLock::~DirectoryLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while still held: a process that opened the old file finds it locked, or not there
  ::close(fd_);
  if (created_dir_) ::rmdir(dir_.c_str());  // only when empty: nothing was written into it
}

void DirectoryLock::check_held() {
  struct stat st;
  BERTRAIN_CHECK(::stat(dir_.c_str(), &st) == 0 && st.st_dev == dir_device_ && st.st_ino == dir_inode_,
                 what_ << " '" << dir_ << "' was removed or replaced while this process wrote it: stopped, so as not "
                       << "to write into a folder another process may own");
  if (is_file_at(fd_, path_)) return;
  // The folder is the one locked, but its lock file was deleted (a clean-up of hidden files): locked anew, unless
  // another process locked the new file first.
  ::close(fd_);
  fd_ = -1;
  try {
    lock_file(0);
  } catch (const DirectoryInUseError& e) {
    throw Error(std::string(e.what()) + " (it locked " + path_ + " after the lock file was deleted): stopped");
  }
}

std::string read_file(const std::string& path, const std::string& what) {
  require_readable_file(path, what);
  std::ifstream in(path, std::ios::binary);
  BERTRAIN_CHECK(in, "cannot open " << what << " '" << path << "': " << std::strerror(errno));
  std::ostringstream contents;
  contents << in.rdbuf();
  BERTRAIN_CHECK(!in.bad(), "cannot read " << what << " '" << path << "': " << std::strerror(errno));
  return contents.str();
}

bool directory_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool path_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string link_or_copy_file(const std::string& from, const std::string& to) {
  if (::link(from.c_str(), to.c_str()) == 0) return "";
  const int error = errno;
  // ENOSYS: FUSE filesystems without hard links (sshfs without its hardlink extension) say so that way.
  BERTRAIN_CHECK(error == EXDEV || error == EPERM || error == EMLINK || error == EOPNOTSUPP || error == ENOSYS,
                 "cannot link '" << to << "' to '" << from << "': " << std::strerror(error));
  std::error_code ec;
  std::filesystem::copy_file(from, to, ec);
  BERTRAIN_CHECK(!ec, "cannot copy '" << from << "' to '" << to << "' (a hard link was refused: "
                                      << std::strerror(error) << "): " << ec.message());
  // On disk before the folder holding it is renamed into place, as a file written through AtomicFile is.
  const int fd = ::open(to.c_str(), O_RDONLY | O_CLOEXEC);
  const bool synced = fd >= 0 && ::fsync(fd) == 0;
  const int sync_error = errno;
  if (fd >= 0) ::close(fd);
  BERTRAIN_CHECK(synced, "cannot fsync the copy '" << to << "' of '" << from << "': " << std::strerror(sync_error));
  return std::strerror(error);
}

void remove_tree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    if (DIR* d = ::opendir(path.c_str())) {
      while (const dirent* entry = ::readdir(d)) {
        const std::string name = entry->d_name;
        if (name != "." && name != "..") remove_tree(path + "/" + name);
      }
      ::closedir(d);
    }
    ::rmdir(path.c_str());
  } else {
    ::unlink(path.c_str());
  }
}

void make_directories(const std::string& dir) {
  for (std::size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      BERTRAIN_FAIL(prefix << ": cannot create directory: " << std::strerror(errno));
    }
  }
  BERTRAIN_CHECK(directory_exists(dir), dir << ": not a directory");
}

std::string folder_name(const std::string& dir) {
  std::filesystem::path p = std::filesystem::path(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // "runs/a/" keeps its '/' through lexically_normal
  return p.filename().string();
}

namespace {

void sync_parent(const std::string& path) {
  const auto slash = path.find_last_of('/');
  const std::string parent = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

void rename_or_throw(const std::string& from, const std::string& to) {
  BERTRAIN_CHECK(::rename(from.c_str(), to.c_str()) == 0,
                 "cannot rename " << from << " to " << to << ": " << std::strerror(errno));
}

}  // namespace

void recover_directory(const std::string& dir) {
  const std::string old = dir + ".old";
  if (!directory_exists(dir) && directory_exists(old)) rename_or_throw(old, dir);
  // "<dir>.tmp-<pid>" of a writer that died (kill -9, power loss) holds a partial or a replaced checkpoint,
  // never the current one: remove it, unless that process still runs.
  const std::filesystem::path path(dir);
  const std::string prefix = path.filename().string() + ".tmp-";
  const std::filesystem::path parent = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH) remove_tree(entry.path().string());
  }
}

void replace_directory_atomically(const std::string& dir, const std::function<void(const std::string&)>& write) {
  recover_directory(dir);
  const std::string tmp = dir + ".tmp-" + std::to_string(::getpid());
  remove_tree(tmp);
  BERTRAIN_CHECK(::mkdir(tmp.c_str(), 0755) == 0, tmp << ": cannot create directory: " << std::strerror(errno));
  try {
    write(tmp);
  } catch (...) {
    remove_tree(tmp);
    throw;
  }
  sync_parent(tmp + "/x");  // the new directory's entries
  if (!directory_exists(dir)) {
    rename_or_throw(tmp, dir);
  } else if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) == 0) {
    remove_tree(tmp);  // now holds the previous contents
  } else {
    // No atomic exchange on this filesystem: move the old one aside first (recover_directory undoes a crash here).
    const std::string old = dir + ".old";
    remove_tree(old);
    rename_or_throw(dir, old);
    rename_or_throw(tmp, dir);
    remove_tree(old);
  }
  sync_parent(dir);
}

nlohmann::json read_json_file(const std::string& path) {
  return parse_json(read_file(path, "JSON file"), path);
}

void write_json_file(const std::string& path, const nlohmann::json& json) {
  write_file_atomically(path, json.dump(2) + "\n");
}

}  // namespace bertrain

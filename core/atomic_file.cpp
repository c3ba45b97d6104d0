// Crash-safe file replacement (see atomic_file.h): temporary file, fsync, rename, fsync of the folder.
#include "core/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "core/error.h"

namespace bertrain {

namespace {

// The folder whose entry rename() changes; its fsync makes the rename itself durable.
std::string parent_directory(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// The pid of a temporary file's name, "<name>.tmp.<pid>" with `name` given or any; 0 when it is not one.
long temporary_file_pid(const std::string& file, const std::string& name) {
  const auto dot = file.rfind(".tmp.");
  if (dot == std::string::npos || dot == 0 || (!name.empty() && file.compare(0, dot, name) != 0) ||
      (!name.empty() && dot != name.size())) {
    return 0;
  }
  const std::string digits = file.substr(dot + 5);
  if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::stol(digits);
}

}  // namespace

void remove_abandoned_temporary_files(const std::string& dir, const std::string& name) {
  DIR* folder = ::opendir(dir.c_str());
  if (folder == nullptr) return;
  std::vector<std::string> abandoned;
  while (const dirent* entry = ::readdir(folder)) {
    const long pid = temporary_file_pid(entry->d_name, name);
    // kill(pid, 0) fails with ESRCH only when no such process exists: a live writer's file (or one of a process
    // this one may not signal, EPERM) is left alone.
    if (pid <= 0 || pid == static_cast<long>(::getpid())) continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) abandoned.push_back(dir + "/" + entry->d_name);
  }
  ::closedir(folder);
  for (const std::string& path : abandoned) {
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) ::unlink(path.c_str());
  }
}

std::string atomic_file_target(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return path;
  std::error_code error;
  const std::filesystem::path target = std::filesystem::weakly_canonical(path, error);
  BERTRAIN_CHECK(!error, "cannot follow the link '" << path << "': " << error.message());
  return target.string();
}

AtomicFile::AtomicFile(std::string path, const std::string& temporary_dir) : path_(std::move(path)) {
  BERTRAIN_CHECK(!path_.empty(), "AtomicFile: empty path");
  // A symbolic link is written through: its target is replaced and the link stays. Anything but a regular file
  // (a device, FIFO or socket) would be removed by the rename, not written.
  path_ = atomic_file_target(path_);
  struct stat st;
  BERTRAIN_CHECK(::stat(path_.c_str(), &st) != 0 || S_ISREG(st.st_mode),
                 "cannot write '" << path_ << "': not a regular file (a directory, device, FIFO or socket)");
  const std::size_t slash = path_.rfind('/');
  const std::string name = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  // The temporary folder only on the target's filesystem, where the rename can move the file (an MLflow run's
  // artifacts may live on another: its artifact_uri).
  struct stat folder, temporary;
  const bool same_filesystem = !temporary_dir.empty() && ::stat(parent_directory(path_).c_str(), &folder) == 0 &&
                               ::stat(temporary_dir.c_str(), &temporary) == 0 && folder.st_dev == temporary.st_dev;
  tmp_path_ = (same_filesystem ? temporary_dir + "/" + name : path_) + ".tmp." +
              std::to_string(static_cast<long>(::getpid()));
  // O_TRUNC rather than O_EXCL: a leftover temp file with our pid can only come from an earlier
  // crashed process that happened to have the same pid, and its contents are garbage either way.
  fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  BERTRAIN_CHECK(fd_ >= 0, "cannot create temporary file '" << tmp_path_ << "' to write '" << path_
                                                            << "': " << std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_path_.c_str());
}

void AtomicFile::write(const void* data, std::size_t size) {
  BERTRAIN_CHECK(!committed_ && fd_ >= 0,
                 "cannot write '" << path_ << "': file already committed or closed after a failed commit");
  BERTRAIN_CHECK(data != nullptr || size == 0, "cannot write '" << path_ << "': null data for " << size << " bytes");
  int error = 0;
  BERTRAIN_CHECK(write_all(fd_, data, size, &error) == size,
                 "cannot write '" << path_ << "' (temporary file '" << tmp_path_ << "'): "
                                  << (error != 0 ? std::strerror(error) : "no progress (short write)"));
}

std::size_t write_all(int fd, const void* data, std::size_t size, int* error) {
  *error = 0;
  const char* p = static_cast<const char*>(data);
  std::size_t written = 0;
  // write() may accept fewer bytes than asked (signals, large sizes): keep going until all are written.
  while (written < size) {
    const ssize_t n = ::write(fd, p + written, size - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = n < 0 ? errno : 0;
      break;
    }
    written += static_cast<std::size_t>(n);
  }
  return written;
}

void AtomicFile::commit() {
  BERTRAIN_CHECK(!committed_ && fd_ >= 0, "cannot commit '" << path_ << "': already committed or failed earlier");
  BERTRAIN_CHECK(::fsync(fd_) == 0, "cannot fsync '" << tmp_path_ << "' for '" << path_ << "': " << std::strerror(errno));
  const int fd = fd_;
  fd_ = -1;  // close() releases the descriptor even when it fails; never close it twice
  // close() can report deferred write errors (e.g. on network filesystems), so its result matters.
  BERTRAIN_CHECK(::close(fd) == 0, "cannot close '" << tmp_path_ << "' for '" << path_ << "': " << std::strerror(errno));
  BERTRAIN_CHECK(::rename(tmp_path_.c_str(), path_.c_str()) == 0,
                 "cannot rename '" << tmp_path_ << "' to '" << path_ << "': " << std::strerror(errno));
  committed_ = true;  // the temporary name no longer exists; the destructor must not unlink anything
  const auto slash = path_.rfind('/');
  remove_abandoned_temporary_files(parent_directory(tmp_path_),
                                   slash == std::string::npos ? path_ : path_.substr(slash + 1));

  const std::string dir = parent_directory(path_);
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  BERTRAIN_CHECK(dir_fd >= 0, "wrote '" << path_ << "' but cannot open its folder '" << dir
                                        << "' to fsync it: " << std::strerror(errno));
  const int rc = ::fsync(dir_fd);
  const int fsync_errno = errno;
  ::close(dir_fd);
  // Some filesystems cannot fsync a directory (EINVAL); the rename is then as durable as it gets.
  BERTRAIN_CHECK(rc == 0 || fsync_errno == EINVAL, "wrote '" << path_ << "' but cannot fsync its folder '" << dir
                                                             << "': " << std::strerror(fsync_errno));
}

void write_file_atomically(const std::string& path, const std::string& contents, const std::string& temporary_dir) {
  AtomicFile file(path, temporary_dir);
  file.write(contents.data(), contents.size());
  file.commit();
}

}  // namespace bertrain

#include "engine/checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "engine/atomic_file.h"
#include "engine/error.h"
#include "model/safetensors.h"

namespace bertrain {

bool directory_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
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

void save_optimizer_state(const std::string& path, const AdamOptimizer<float>& optimizer) {
  const auto n = static_cast<int64_t>(optimizer.first_moment().size());
  SafetensorsWriter writer;
  writer.add_f32("exp_avg", {n}, optimizer.first_moment().data());
  writer.add_f32("exp_avg_sq", {n}, optimizer.second_moment().data());
  writer.set_metadata("step", std::to_string(optimizer.steps_taken()));
  writer.write(path);
}

void load_optimizer_state(const std::string& path, AdamOptimizer<float>* optimizer) {
  const SafetensorsFile file(path);
  const std::size_t n = optimizer->first_moment().size();
  for (const char* name : {"exp_avg", "exp_avg_sq"}) {
    BERTRAIN_CHECK(file.contains(name), path << ": missing tensor '" << name << "'");
    BERTRAIN_CHECK(file.info(name).numel() == static_cast<int64_t>(n),
                   path << ": tensor '" << name << "' has " << file.info(name).numel()
                        << " elements, the model needs " << n);
  }
  file.read_float_into("exp_avg", optimizer->first_moment().data(), n);
  file.read_float_into("exp_avg_sq", optimizer->second_moment().data(), n);
  const auto it = file.metadata().find("step");
  BERTRAIN_CHECK(it != file.metadata().end(), path << ": metadata 'step' missing");
  try {
    optimizer->set_steps_taken(std::stol(it->second));
  } catch (const std::exception&) {
    BERTRAIN_FAIL(path << ": metadata 'step' is not an integer: '" << it->second << "'");
  }
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  BERTRAIN_CHECK(in, path << ": cannot open");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    BERTRAIN_FAIL(path << ": invalid JSON: " << e.what());
  }
}

void write_json_file(const std::string& path, const nlohmann::json& json) {
  write_file_atomically(path, json.dump(2) + "\n");
}

}  // namespace bertrain

// Limits this process's address space (RLIMIT_AS, as `ulimit -v` does) to what it maps now plus `room` bytes for one
// scope, and restores the limit it had: tests of what a command does when an allocation would not fit.
#pragma once

#include <sys/resource.h>

#include <cstddef>
#include <fstream>
#include <string>

namespace bertrain::testing {

class AddressSpaceRoom {
 public:
  explicit AddressSpaceRoom(std::size_t room) {
    if (getrlimit(RLIMIT_AS, &saved_) != 0) return;
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("VmSize:", 0) == 0) mapped_ = std::stoul(line.substr(7)) * 1024;
    }
    rlimit limited = saved_;
    limited.rlim_cur = mapped_ + room;
    if (mapped_ == 0 || (saved_.rlim_max != RLIM_INFINITY && limited.rlim_cur > saved_.rlim_max)) return;
    set_ = setrlimit(RLIMIT_AS, &limited) == 0;
    if (set_) limit_ = limited.rlim_cur;
  }
  ~AddressSpaceRoom() { restore(); }
  AddressSpaceRoom(const AddressSpaceRoom&) = delete;
  AddressSpaceRoom& operator=(const AddressSpaceRoom&) = delete;

  // What the process mapped when the scope began (VmSize; 0 if /proc/self/status did not say).
  std::size_t mapped() const { return mapped_; }
  // Whether the limit is in place (false: the hard limit is below it, or nothing was mapped to count from).
  bool set() const { return set_; }
  // The limit set, in bytes.
  std::size_t limit() const { return limit_; }
  // Puts the previous limit back before the scope ends.
  void restore() {
    if (set_) setrlimit(RLIMIT_AS, &saved_);
    set_ = false;
  }

 private:
  rlimit saved_{};
  std::size_t mapped_ = 0;
  bool set_ = false;
  std::size_t limit_ = 0;
};

}  // namespace bertrain::testing

#include "core/host_memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

namespace bertrain {

namespace {

std::optional<std::string> file_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The number after "`key` " (or "`key`:") on a line of its own, nullopt when there is no such line.
std::optional<std::size_t> field(const std::string& text, const std::string& key) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.compare(0, key.size(), key) != 0 || line.size() == key.size()) continue;
    std::size_t at = key.size();
    if (line[at] == ':') ++at;
    if (line[at] != ' ' && line[at] != '\t') continue;
    std::istringstream value(line.substr(at));
    unsigned long long n = 0;
    if (value >> n) return static_cast<std::size_t>(n);
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<std::size_t> number(const std::string& text) {
  std::istringstream in(text);
  unsigned long long n = 0;
  if (!(in >> n)) return std::nullopt;
  return static_cast<std::size_t>(n);
}

// The memory controller's mount and this process's cgroup path in it: v1's "N:...memory...:/path" line of
// /proc/self/cgroup (under /sys/fs/cgroup/memory), else v2's "0::/path" (under /sys/fs/cgroup, when it is the v2
// mount: it has cgroup.controllers). Empty mount when neither is found.
void find_memory_cgroup(std::string* mount, std::string* path, bool* v2) {
  mount->clear();
  const std::optional<std::string> self = file_text("/proc/self/cgroup");
  if (!self) return;
  std::istringstream lines(*self);
  std::string unified;
  bool has_unified = false;
  for (std::string line; std::getline(lines, line);) {
    const std::size_t colon = line.find(':'), second = line.find(':', colon + 1);
    if (colon == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = "," + line.substr(colon + 1, second - colon - 1) + ",";
    if (controllers.find(",memory,") != std::string::npos) {
      *mount = "/sys/fs/cgroup/memory";
      *path = line.substr(second + 1);
      *v2 = false;
      return;
    }
    if (line.rfind("0::", 0) == 0) {
      unified = line.substr(3);
      has_unified = true;
    }
  }
  if (has_unified && file_text("/sys/fs/cgroup/cgroup.controllers")) {
    *mount = "/sys/fs/cgroup";
    *path = unified;
    *v2 = true;
  }
}

}  // namespace

std::optional<HostMemory> parse_meminfo(const std::string& meminfo) {
  const std::optional<std::size_t> available = field(meminfo, "MemAvailable");
  if (!available) return std::nullopt;
  HostMemory memory;
  memory.available = *available * 1024;
  memory.swap_free = field(meminfo, "SwapFree").value_or(0) * 1024;
  return memory;
}

std::optional<std::size_t> cgroup_room(const std::string& limit, const std::string& usage, const std::string& stat) {
  const std::optional<std::size_t> max = number(limit), used = number(usage);
  // v1 says "no limit" with a page-rounded LONG_MAX; nothing real is within a factor of 2 of it.
  if (!max || !used || *max >= std::numeric_limits<std::size_t>::max() / 4) return std::nullopt;
  std::optional<std::size_t> inactive_file = field(stat, "total_inactive_file");
  if (!inactive_file) inactive_file = field(stat, "inactive_file");
  const std::size_t working_set = *used - std::min(*used, inactive_file.value_or(0));
  return *max > working_set ? *max - working_set : 0;
}

std::optional<std::size_t> cgroup_swap_room_v2(const std::string& swap_max, const std::string& swap_current) {
  const std::optional<std::size_t> max = number(swap_max), used = number(swap_current);
  if (!max || !used) return std::nullopt;  // "max": no limit
  return *max > *used ? *max - *used : 0;
}

std::optional<std::size_t> cgroup_swap_room_v1(const std::string& memsw_limit, const std::string& memsw_usage,
                                               std::size_t memory_room) {
  const std::optional<std::size_t> max = number(memsw_limit), used = number(memsw_usage);
  if (!max || !used || *max >= std::numeric_limits<std::size_t>::max() / 4) return std::nullopt;
  const std::size_t both = *max > *used ? *max - *used : 0;  // memory and swap together
  return both > memory_room ? both - memory_room : 0;
}

namespace {

// Sets `memory`'s room in the address space `ulimit -v` (RLIMIT_AS) leaves, each process's own: beyond it an
// allocation fails, swap or not.
void limit_to_address_space(HostMemory* memory) {
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  const std::optional<std::string> status = file_text("/proc/self/status");
  const std::optional<std::size_t> mapped = status ? field(*status, "VmSize") : std::nullopt;
  if (!mapped) return;
  const std::size_t used = *mapped * 1024, cap = static_cast<std::size_t>(limit.rlim_cur);
  memory->address_space = cap > used ? cap - used : 0;
  memory->address_space_limit = cap;
}

// Lowers `memory` to the room this process's memory cgroups leave.
void limit_by_cgroups(HostMemory* memory) {
  std::string mount, path;
  bool v2 = false;
  find_memory_cgroup(&mount, &path, &v2);
  if (mount.empty()) return;
  // The process's cgroup and every one above it (a Slurm job's limit sits on the job, not on its steps' cgroups).
  // Inside a container the path names the host's hierarchy while the mount shows only the container's: the parts
  // of the path that do not exist under the mount are skipped.
  while (true) {
    const std::string dir = path == "/" ? mount : mount + path;
    const std::optional<std::string> limit = file_text(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes"));
    const std::optional<std::string> usage = file_text(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes"));
    if (limit && usage) {
      const std::optional<std::size_t> room = cgroup_room(*limit, *usage, file_text(dir + "/memory.stat").value_or(""));
      // memory.max bounds the cgroup's RAM; beyond it the kernel swaps it (as far as its swap limit allows), then
      // kills.
      if (room && *room < memory->available) {
        memory->available = *room;
        memory->limited_by = "the cgroup limit in " + dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes");
      }
      const std::optional<std::size_t> swap =
          v2 ? cgroup_swap_room_v2(file_text(dir + "/memory.swap.max").value_or(""),
                                   file_text(dir + "/memory.swap.current").value_or(""))
             : cgroup_swap_room_v1(file_text(dir + "/memory.memsw.limit_in_bytes").value_or(""),
                                   file_text(dir + "/memory.memsw.usage_in_bytes").value_or(""),
                                   room.value_or(memory->available));
      if (swap) memory->swap_free = std::min(memory->swap_free, *swap);
    }
    if (path.empty() || path == "/") break;
    const std::size_t slash = path.find_last_of('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
}

}  // namespace

std::optional<HostMemory> host_memory() {
  const std::optional<std::string> meminfo = file_text("/proc/meminfo");
  if (!meminfo) return std::nullopt;
  std::optional<HostMemory> memory = parse_meminfo(*meminfo);
  if (!memory) return std::nullopt;
  limit_by_cgroups(&*memory);
  limit_to_address_space(&*memory);
  return memory;
}

std::string memory_text(std::size_t bytes) {
  char text[32];
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) {
    std::snprintf(text, sizeof(text), "%.1f GiB", b / (1024.0 * 1024 * 1024));
  } else if (b >= 1024.0 * 1024) {
    std::snprintf(text, sizeof(text), "%.0f MiB", b / (1024.0 * 1024));
  } else {
    std::snprintf(text, sizeof(text), "%.0f KiB", b / 1024.0);
  }
  return text;
}

}  // namespace bertrain

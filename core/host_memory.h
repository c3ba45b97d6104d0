// How much host memory this process can still allocate: what a command checks its allocations against before
// making them, so that a batch too large for the machine is one error line naming the flags, not std::bad_alloc
// or, worse, the kernel's OOM killer (SIGKILL, which `bertrain launch` would retry) once the pages are touched.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace bertrain {

// What the processes of a job on one host share (the machine's memory, their cgroup's), and what each has alone
// (its address space under ulimit -v, a per-process limit).
struct HostMemory {
  std::size_t available = 0;  // RAM to be had without swapping: MemAvailable, or what a cgroup leaves if less
  std::size_t swap_free = 0;  // SwapFree, or what a cgroup's swap limit leaves if less
  std::string limited_by;     // "" (the machine's memory), or "the cgroup limit in FILE" where that leaves less
  std::optional<std::size_t> address_space;  // this process's room under ulimit -v (RLIMIT_AS): its limit less
                                             // what it maps already; nullopt without a limit
  std::size_t address_space_limit = 0;       // that limit
};

// The memory /proc/meminfo, this process's cgroups (v2 memory.max and memory.swap.max, or v1 memory.limit_in_bytes
// and memory.memsw.limit_in_bytes, of its cgroup and those above it) and its address-space limit (ulimit -v) allow;
// nullopt where /proc/meminfo cannot be read (not Linux): the caller then checks nothing.
std::optional<HostMemory> host_memory();

// The parts of host_memory, over the files' text, for tests.
// MemAvailable and SwapFree of /proc/meminfo's text (kB lines); nullopt without MemAvailable.
std::optional<HostMemory> parse_meminfo(const std::string& meminfo);
// The room a cgroup leaves: limit − usage + its inactive file cache (page cache the kernel reclaims before it
// kills, as kubelet's working set counts it). `limit` is memory.max's text ("max": none) or v1's
// memory.limit_in_bytes (a huge number: none); `stat` is memory.stat (v1's total_inactive_file line, which counts
// the cgroups below as its usage does, else inactive_file). nullopt where there is no limit or a file does not parse.
std::optional<std::size_t> cgroup_room(const std::string& limit, const std::string& usage, const std::string& stat);
// The swap a cgroup leaves, nullopt where it sets no limit: v2, memory.swap.max's text less memory.swap.current's;
// v1, memory.memsw.limit_in_bytes less memory.memsw.usage_in_bytes (memory and swap together), less `memory_room`
// (what cgroup_room left of the memory alone).
std::optional<std::size_t> cgroup_swap_room_v2(const std::string& swap_max, const std::string& swap_current);
std::optional<std::size_t> cgroup_swap_room_v1(const std::string& memsw_limit, const std::string& memsw_usage,
                                               std::size_t memory_room);

// "1.5 GiB", "820 MiB", "12 KiB" (binary units, as `free -h`, nvidia-smi and the run header's device memory).
std::string memory_text(std::size_t bytes);

}  // namespace bertrain

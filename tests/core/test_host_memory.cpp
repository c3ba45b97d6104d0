#include "core/host_memory.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <fstream>
#include <sstream>

#include "tests/address_space_room.h"

namespace bertrain {
namespace {

constexpr std::size_t kGiB = std::size_t{1} << 30;

TEST(HostMemory, MeminfoGivesTheAvailableMemoryAndTheSwapInBytes) {
  const std::string meminfo =
      "MemTotal:       24576000 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\n"
      "SwapTotal:       2097148 kB\nSwapFree:        1048576 kB\n";
  const std::optional<HostMemory> m = parse_meminfo(meminfo);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->available, std::size_t{20000000} * 1024);
  EXPECT_EQ(m->swap_free, std::size_t{1048576} * 1024);
  EXPECT_EQ(m->limited_by, "");
  // A kernel before 3.14 has no MemAvailable: nothing is checked rather than a guess.
  EXPECT_FALSE(parse_meminfo("MemTotal: 1000 kB\nMemFree: 10 kB\n").has_value());
  // No swap line: no swap.
  EXPECT_EQ(parse_meminfo("MemAvailable: 4 kB\n")->swap_free, 0u);
}

// The room under a cgroup limit counts its inactive page cache as free (the kernel reclaims it before it kills);
// "max" (v2) and v1's page-rounded LONG_MAX mean no limit.
TEST(HostMemory, ACgroupsRoomIsItsLimitLessItsWorkingSet) {
  EXPECT_EQ(cgroup_room("8589934592\n", "4294967296\n", "anon 3221225472\ninactive_file 1073741824\n"),
            std::optional<std::size_t>(5 * kGiB));
  EXPECT_EQ(cgroup_room("8589934592\n", "4294967296\n", ""), std::optional<std::size_t>(4 * kGiB));
  // v1: total_inactive_file counts the cgroups below, as memory.usage_in_bytes does.
  EXPECT_EQ(cgroup_room("8589934592\n", "4294967296\n", "inactive_file 1\ntotal_inactive_file 2147483648\n"),
            std::optional<std::size_t>(6 * kGiB));
  EXPECT_EQ(cgroup_room("4294967296\n", "8589934592\n", ""), std::optional<std::size_t>(0));  // over its limit
  EXPECT_FALSE(cgroup_room("max\n", "4294967296\n", "").has_value());
  EXPECT_FALSE(cgroup_room("9223372036854771712\n", "4294967296\n", "").has_value());
  EXPECT_FALSE(cgroup_room("", "4294967296\n", "").has_value());
}

// A cgroup's swap limit bounds the swap it can use: v2 memory.swap.max ("max": none), v1 memory and swap together
// (memsw) less the memory room.
TEST(HostMemory, ACgroupsSwapLimitBoundsItsSwap) {
  EXPECT_EQ(cgroup_swap_room_v2("0\n", "0\n"), std::optional<std::size_t>(0));
  EXPECT_EQ(cgroup_swap_room_v2("2147483648\n", "1073741824\n"), std::optional<std::size_t>(kGiB));
  EXPECT_FALSE(cgroup_swap_room_v2("max\n", "0\n").has_value());
  EXPECT_FALSE(cgroup_swap_room_v2("", "").has_value());  // no swap controller
  // memsw 6 GiB of which 3 used, memory room 2 GiB: 1 GiB of swap.
  EXPECT_EQ(cgroup_swap_room_v1("6442450944\n", "3221225472\n", 2 * kGiB), std::optional<std::size_t>(kGiB));
  EXPECT_EQ(cgroup_swap_room_v1("4294967296\n", "3221225472\n", 2 * kGiB), std::optional<std::size_t>(0));
  EXPECT_FALSE(cgroup_swap_room_v1("9223372036854771712\n", "0\n", kGiB).has_value());
}

TEST(HostMemory, ThisMachinesMemoryIsRead) {
  const std::optional<HostMemory> m = host_memory();
  ASSERT_TRUE(m.has_value()) << "/proc/meminfo has MemAvailable on every Linux since 3.14";
  std::ifstream in("/proc/meminfo");
  std::ostringstream text;
  text << in.rdbuf();
  const std::optional<HostMemory> machine = parse_meminfo(text.str());
  ASSERT_TRUE(machine.has_value());
  EXPECT_GT(m->available, 0u);
  // A limit only lowers what the machine has (the two readings are moments apart: 1 GiB of slack).
  EXPECT_LE(m->available, machine->available + kGiB);
}

// ulimit -v bounds what can be allocated, swap or not: the room is the limit less what is mapped already.
TEST(HostMemory, AnAddressSpaceLimitLowersTheRoom) {
#ifdef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "AddressSanitizer's allocator does not work under an address-space limit this tight";
#endif
  rlimit before{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &before), 0);
  testing::AddressSpaceRoom room(kGiB);
  ASSERT_GT(room.mapped(), 0u);
  if (!room.set()) GTEST_SKIP() << "the hard limit is below this process's mapping plus 1 GiB";
  const std::optional<HostMemory> m = host_memory();
  room.restore();
  ASSERT_TRUE(m.has_value());
  ASSERT_TRUE(m->address_space.has_value());
  EXPECT_LE(*m->address_space, kGiB);
  EXPECT_GT(*m->address_space, kGiB / 2);  // host_memory maps little of its own
  EXPECT_EQ(m->address_space_limit, room.limit());
  // Each process's own limit: the machine's memory, which the job's processes share, is not lowered by it.
  EXPECT_FALSE(host_memory()->address_space.has_value() && before.rlim_cur == RLIM_INFINITY);
}

TEST(HostMemory, SizesAreWrittenInBinaryUnits) {
  EXPECT_EQ(memory_text(3 * kGiB / 2), "1.5 GiB");
  EXPECT_EQ(memory_text(std::size_t{820} << 20), "820 MiB");
  EXPECT_EQ(memory_text(12 * 1024), "12 KiB");
}

}  // namespace
}  // namespace bertrain

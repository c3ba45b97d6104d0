// configure_cpu_threads (core/cpu_threads.h): never more OpenMP threads than CPUs the process may run on. Each case
// runs in a forked child, whose affinity mask it narrows.
#include "core/cpu_threads.h"

#include <gtest/gtest.h>

#include <omp.h>
#include <sched.h>

#include "tests/run_process.h"

namespace bertrain {
namespace {

// One CPU, as mpirun binds each of two ranks to a core: two threads asked for, one in effect (two spun at every GEMM
// barrier on the one core, 55x slower).
TEST(CpuThreads, NoMoreThreadsThanTheCpusTheProcessMayRunOn) {
  EXPECT_EQ(testing::exit_code_in_child([] {
              cpu_set_t allowed;
              CPU_ZERO(&allowed);
              if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return 1;
              int first = 0;
              while (!CPU_ISSET(first, &allowed)) ++first;
              cpu_set_t one;
              CPU_ZERO(&one);
              CPU_SET(first, &one);
              if (sched_setaffinity(0, sizeof one, &one) != 0) return 2;
              if (configure_cpu_threads(2) != 1) return 3;
              return omp_get_max_threads() == 1 ? 0 : 4;
            }),
            0);
  EXPECT_EQ(testing::exit_code_in_child([] {
              cpu_set_t allowed;
              CPU_ZERO(&allowed);
              if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return 1;
              if (CPU_COUNT(&allowed) < 2) return 0;  // a one-CPU machine: nothing to tell apart
              return configure_cpu_threads(2) == 2 && omp_get_max_threads() == 2 ? 0 : 5;
            }),
            0);
}

}  // namespace
}  // namespace bertrain

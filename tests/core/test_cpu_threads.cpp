// configure_cpu_threads (core/cpu_threads.h): never more OpenMP threads than CPUs the process may run on. Each case
// runs in a forked child, whose affinity mask it narrows.
#include "core/cpu_threads.h"

#include <gtest/gtest.h>

#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

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

// The calling thread's CPUs (OpenMP's thread 0 is the one that calls configure_cpu_threads).
int own_cpu_count() {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  return pthread_getaffinity_np(pthread_self(), sizeof mine, &mine) == 0 ? CPU_COUNT(&mine) : -1;
}

// Threads that fill the process's CPUs are pinned, one CPU each; fewer stay free to run on any, so that two
// processes of --threads 1 do not both pin to the first CPU (measured: 3.07 s a step each, against 2.24 unpinned).
TEST(CpuThreads, PinnedOnlyWhereTheThreadsFillTheCpus) {
  EXPECT_EQ(testing::exit_code_in_child([] {
              for (const char* name : {"OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY"}) ::unsetenv(name);
              const int cpus = own_cpu_count();
              if (cpus < 2) return 0;  // a one-CPU machine: nothing to tell apart
              if (configure_cpu_threads(cpus - 1) != cpus - 1) return 1;
              if (own_cpu_count() != cpus) return 2;  // fewer threads than CPUs: not pinned
              if (configure_cpu_threads(1, 0, cpus) != 1) return 3;
              if (own_cpu_count() != 1) return 4;  // one thread each of `cpus` processes: pinned
              return 0;
            }),
            0);
  EXPECT_EQ(testing::exit_code_in_child([] {
              for (const char* name : {"OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY"}) ::unsetenv(name);
              const int cpus = own_cpu_count();
              if (cpus < 2) return 0;
              if (configure_cpu_threads(cpus) != cpus) return 5;
              return own_cpu_count() == 1 ? 0 : 6;  // as many threads as CPUs: pinned
            }),
            0);
}

}  // namespace
}  // namespace bertrain

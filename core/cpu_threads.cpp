#include "core/cpu_threads.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/build_config.h"

#if BERTRAIN_HAS_BLAS
#include "core/openblas.h"
#endif

namespace bertrain {

namespace {

// The CPUs this process may run on, as its launcher (mpirun, taskset, a cgroup) gave them: read at the first call,
// before this file pins any thread. A thread's own mask is no guide later: pinning the calling thread narrows it,
// and threads started after inherit that (serve's engine thread saw one CPU of two).
const std::vector<int>& process_cpus() {
  static const std::vector<int> cpus = [] {
    std::vector<int> found;
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return found;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &allowed)) found.push_back(cpu);
    }
    return found;
  }();
  return cpus;
}

}  // namespace

int configure_cpu_threads(int threads, int local_rank, int local_size) {
  if (threads > 0) omp_set_num_threads(threads);
  int count = omp_get_max_threads();
  const std::vector<int>& cpus = process_cpus();
  // More threads than CPUs this process may run on spin at every GEMM barrier in turn: mpirun binds each of up to two
  // ranks to one core, and 2 threads there made a training run 55x slower. As many threads as CPUs, and a line why.
  if (!cpus.empty() && static_cast<std::size_t>(count) > cpus.size()) {
    if (local_rank == 0) {
      std::fprintf(stderr,
                   "bertrain: %d CPU threads asked for (--threads or OMP_NUM_THREADS) but this process may run on %zu "
                   "CPU%s (its affinity; mpirun binds each rank to a core when there are at most two): using %zu "
                   "(give mpirun --bind-to none, or --map-by slot:PE=%d, for more)\n",
                   count, cpus.size(), cpus.size() == 1 ? "" : "s", cpus.size(), count);
    }
    count = static_cast<int>(cpus.size());
    omp_set_num_threads(count);
  }
#if BERTRAIN_HAS_BLAS
  // OpenBLAS's OpenMP build sets the calling thread's OpenMP count to its own before each product it threads, at most
  // the MAX_THREADS it was built with (Debian's: 64). Asked now, it cuts the count here, where the engine's loops,
  // their pinning and the engine's description still follow it, instead of at the first product.
  openblas_set_num_threads(count);
  if (omp_get_max_threads() < count) {
    if (local_rank == 0) {
      std::fprintf(stderr, "bertrain: %d CPU threads asked for but OpenBLAS runs at most %d: using %d\n", count,
                   omp_get_max_threads(), omp_get_max_threads());
    }
    count = omp_get_max_threads();
  }
#endif
  for (const char* name : {"OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY"}) {
    if (std::getenv(name) != nullptr) return count;
  }
  if (cpus.size() < 2 || static_cast<std::size_t>(count) * static_cast<std::size_t>(local_size) < cpus.size()) {
    return count;  // see cpu_threads.h: pinned only where the job's threads fill the CPUs
  }
  const std::size_t first = static_cast<std::size_t>(local_rank) * static_cast<std::size_t>(count);
  // OpenMP keeps its worker threads between parallel regions, so pinning them once here lasts.
#pragma omp parallel num_threads(count)
  {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[(first + static_cast<std::size_t>(omp_get_thread_num())) % cpus.size()], &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);  // best effort: placement is not correctness
  }
  return count;
}

}  // namespace bertrain

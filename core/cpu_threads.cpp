#include "core/cpu_threads.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <cstdlib>
#include <vector>

namespace bertrain {

int configure_cpu_threads(int threads, int local_rank) {
  if (threads > 0) omp_set_num_threads(threads);
  const int count = omp_get_max_threads();
  for (const char* name : {"OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY"}) {
    if (std::getenv(name) != nullptr) return count;
  }
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return count;
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  }
  if (cpus.size() < 2) return count;
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

// CPU thread setup for the Eigen/OpenMP engine.
#pragma once

#include <string>

#include "core/build_config.h"
#include "core/count_text.h"

namespace bertrain {

// The most CPU threads a command takes (--threads): far above any machine's cores, and far below the thousands at
// which libgomp fails to create or allocate its threads (a crash, not an error).
constexpr int kMaxCpuThreads = 1024;

// Sets the OpenMP thread count (0 keeps OpenMP's default), at most the number of CPUs this process may run on
// (its affinity mask; more is said on stderr and cut) and, with BERTRAIN_BLAS, at most the threads OpenBLAS runs
// (64 in Debian's build; said and cut too), and, when the job's threads fill those CPUs (threads · local_size at
// least as many), pins thread i to the i-th of them, unless the user chose a placement (OMP_PROC_BIND, OMP_PLACES or
// GOMP_CPU_AFFINITY set).
// Why: OpenMP threads spin at every barrier of Eigen's parallel GEMM; unpinned, the scheduler lets two of
// them share a core while another idles, and a training step measured 10x slower on a 2-core VM. Fewer threads than
// CPUs stay unpinned: other processes may run beside them (a second training, --threads 1 each), and pinning each
// process's thread i to CPU i piled them onto the same cores (two bench steps: 3.07 s a step pinned, 2.24 unpinned).
// `local_rank` of `local_size` processes on one host (data parallelism): process r starts at the
// (r · threads)-th allowed CPU, so that processes do not pile onto the same cores.
// Returns the thread count in effect.
// OpenBLAS's thread settings are the process's, not a thread's: its products are called from one thread at a time
// (the command's, or serve's one engine thread), never from two threads outside a parallel loop at once.
int configure_cpu_threads(int threads, int local_rank = 0, int local_size = 1);

// "cpu (2 threads, fp32)", or "cpu (2 threads, fp32, OpenBLAS)" when its matrix products are OpenBLAS's
// (BERTRAIN_BLAS): the CPU engine as logs, run files and serve's /v1/model name it, so that a run's speed can be
// told apart by build. The engines take `threads` when they are built, on the thread that runs them: OpenMP's count
// is per thread (serve's HTTP threads keep the default).
inline std::string cpu_engine_description(int threads) {
  return "cpu (" + count_of(threads, "thread") + ", fp32" + (BERTRAIN_HAS_BLAS ? ", OpenBLAS" : "") + ")";
}

}  // namespace bertrain

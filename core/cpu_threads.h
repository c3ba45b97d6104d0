// CPU thread setup for the Eigen/OpenMP engine.
#pragma once

namespace bertrain {

// Sets the OpenMP thread count (0 keeps OpenMP's default) and pins thread i to the i-th CPU this process
// may run on, unless the user chose a placement (OMP_PROC_BIND, OMP_PLACES or GOMP_CPU_AFFINITY set).
// Why: OpenMP threads spin at every barrier of Eigen's parallel GEMM; unpinned, the scheduler lets two of
// them share a core while another idles, and a training step measured 10x slower on a 2-core VM.
// `local_rank`: with several processes on one host (data parallelism), process r starts at the
// (r · threads)-th allowed CPU, so that processes do not pile onto the same cores.
// Returns the thread count in effect.
int configure_cpu_threads(int threads, int local_rank = 0);

}  // namespace bertrain

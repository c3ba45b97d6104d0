// Configure-time check (CMakeLists.txt, BERTRAIN_BLAS): exits 0 only when the library linked is OpenBLAS built for
// OpenMP, the one build whose threads are the engine's own OpenMP threads.
#include <cstdio>

extern "C" int openblas_get_parallel();  // 0: sequential, 1: pthreads, 2: OpenMP
extern "C" char* openblas_get_config();

int main() {
  const int parallel = openblas_get_parallel();
  if (parallel == 2) return 0;
  std::printf("its threading is %s, not OpenMP (%s)", parallel == 1 ? "pthreads" : "sequential", openblas_get_config());
  return 1;
}

// The part of OpenBLAS's C API bertrain calls (CMakeLists.txt: BERTRAIN_BLAS links its OpenMP build under Eigen's
// products). Declared here, not taken from <cblas.h>: the library is linked by its path, and its headers need not be
// the ones on the include path. Include only where BERTRAIN_HAS_BLAS.
#pragma once

extern "C" {
int openblas_get_parallel();             // 0: sequential, 1: pthreads, 2: OpenMP
char* openblas_get_config();             // "OpenBLAS 0.3.21 ... USE_OPENMP ..."
void openblas_set_num_threads(int);      // at most the MAX_THREADS it was built with
}

#include "core/build_info.h"

#include <omp.h>

#include <Eigen/Core>
#include <sstream>

#include "core/build_config.h"
#include "core/git_commit.h"

#if BERTRAIN_HAS_NCCL
#include <nccl.h>
#endif
#if BERTRAIN_HAS_MPI
#include <mpi.h>
#endif
#if BERTRAIN_HAS_BLAS
#include "core/openblas.h"
#endif

namespace bertrain {

#if BERTRAIN_HAS_CUDA
std::string cuda_runtime_version();  // core/cuda/device_info.cu
#else
int cuda_device_count(std::string* why) {
  if (why != nullptr) *why = "built without CUDA";
  return 0;
}
std::string cuda_device_summary() { return ""; }
double gpu_peak_tflops(int, bool) { return 0.0; }
#endif

std::string build_version() { return BERTRAIN_VERSION; }

std::string build_git_commit() { return BERTRAIN_GIT_COMMIT; }

bool build_git_dirty() { return BERTRAIN_GIT_DIRTY != 0; }

std::string build_info() {
  std::ostringstream os;
  os << "bertrain " << BERTRAIN_VERSION << "\n";
  if (!build_git_commit().empty()) {
    os << "  commit " << build_git_commit() << (build_git_dirty() ? ", with uncommitted changes" : "") << "\n";
  }
  os << "  Eigen " << EIGEN_WORLD_VERSION << "." << EIGEN_MAJOR_VERSION << "." << EIGEN_MINOR_VERSION
     << ", OpenMP threads " << omp_get_max_threads() << "\n";
#if BERTRAIN_HAS_BLAS
  os << "  BLAS: yes (" << openblas_get_config() << "; the CPU engine's matrix products)\n";
#else
  os << "  BLAS: no (Eigen's own matrix products)\n";
#endif
#if BERTRAIN_HAS_CUDA
  os << "  CUDA: yes (runtime " << cuda_runtime_version() << ", architectures " << BERTRAIN_CUDA_ARCHITECTURES << ")\n";
#else
  os << "  CUDA: no\n";
#endif
#if BERTRAIN_HAS_NCCL
  os << "  NCCL: yes (" << NCCL_MAJOR << "." << NCCL_MINOR << "." << NCCL_PATCH << ")\n";
#else
  os << "  NCCL: no\n";
#endif
#if BERTRAIN_HAS_MPI
  os << "  MPI: yes (MPI " << MPI_VERSION << "." << MPI_SUBVERSION << ")\n";
#else
  os << "  MPI: no\n";
#endif
  std::string why;
  const int devices = cuda_device_count(&why);
  os << "  CUDA devices: " << devices;
  if (devices == 0) os << " (" << why << ")";
  os << "\n" << cuda_device_summary();
  return os.str();
}

}  // namespace bertrain

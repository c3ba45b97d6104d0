#include "dist/launcher.h"

#include <unistd.h>

#include <cstdlib>

#include "core/error.h"

namespace bertrain {

namespace {

// An integer environment variable, or -1 when unset; throws when set but not a non-negative integer.
int env_int(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return -1;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  BERTRAIN_CHECK(*end == '\0' && parsed >= 0 && parsed < (1L << 30),
                 "environment variable " << name << "='" << value << "' is not a non-negative integer");
  return static_cast<int>(parsed);
}

// The leading integer of an environment variable (Slurm writes lists like "2(x3)"), or -1.
int env_leading_int(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return -1;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  return end != value && parsed >= 0 && parsed < (1L << 30) ? static_cast<int>(parsed) : -1;
}

struct Scheme {
  const char* launcher;
  const char *rank, *size, *local_rank, *local_size;
};

// Checked in this order: mpirun sets its own variables even inside a Slurm allocation.
constexpr Scheme kSchemes[] = {
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
};

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return name;
}

}  // namespace

LaunchInfo detect_launch() {
  LaunchInfo info;
  info.host = host_name();
  for (const Scheme& s : kSchemes) {
    const int rank = env_int(s.rank), size = env_int(s.size);
    if (rank < 0 || size < 0) continue;
    BERTRAIN_CHECK(size >= 1 && rank < size,
                   s.rank << "=" << rank << " and " << s.size << "=" << size << " do not describe a rank in a job");
    info.launcher = s.launcher;
    info.variables = std::string(s.rank) + "=" + std::to_string(rank) + ", " + s.size + "=" + std::to_string(size);
    info.rank = rank;
    info.world_size = size;
    const int local_rank = env_int(s.local_rank), local_size = env_leading_int(s.local_size);
    info.local_rank = local_rank >= 0 ? local_rank : 0;
    info.local_size = local_size > 0 ? local_size : 1;
    return info;
  }
  return info;
}

}  // namespace bertrain

// Where this process sits in a data-parallel job, read from the launcher's environment: Open MPI
// (mpirun), MPICH / Intel MPI (Hydra's PMI variables) or Slurm (srun). Without a launcher: rank 0 of 1.
#pragma once

#include <string>

namespace bertrain {

struct LaunchInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // rank among the processes on this host: the GPU index to use
  int local_size = 1;
  std::string launcher = "none";  // "openmpi", "pmi", "slurm" or "none"
  std::string variables;          // what rank and size were read from: "SLURM_PROCID=0, SLURM_NTASKS=4"; "" for none
  std::string host;               // this host's name, for messages
};

// Reads the environment. Throws Error when a launcher's variables are present but inconsistent
// (e.g. rank >= size), naming the variables.
LaunchInfo detect_launch();

}  // namespace bertrain

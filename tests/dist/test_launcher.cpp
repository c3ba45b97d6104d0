// Launcher discovery from the environment: Open MPI, MPICH / PMI and Slurm variables, and bad values.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "dist/communicator.h"
#include "dist/launcher.h"

namespace bertrain {
namespace {

// Sets variables for one test and removes every launcher variable before and after.
class LauncherEnv : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    for (const char* name : {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                             "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
                             "MPI_LOCALNRANKS", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                             "SLURM_NTASKS_PER_NODE"}) {
      ::unsetenv(name);
    }
  }
  static void set(const char* name, const char* value) { ::setenv(name, value, 1); }
};

TEST_F(LauncherEnv, NoLauncherIsOneProcess) {
  const LaunchInfo info = detect_launch();
  EXPECT_EQ(info.launcher, "none");
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.world_size, 1);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_FALSE(info.host.empty());
  EXPECT_EQ(make_communicator(info)->size(), 1);
}

TEST_F(LauncherEnv, OpenMpi) {
  set("OMPI_COMM_WORLD_RANK", "5");
  set("OMPI_COMM_WORLD_SIZE", "8");
  set("OMPI_COMM_WORLD_LOCAL_RANK", "1");
  set("OMPI_COMM_WORLD_LOCAL_SIZE", "4");
  const LaunchInfo info = detect_launch();
  EXPECT_EQ(info.launcher, "openmpi");
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_size, 4);
}

TEST_F(LauncherEnv, PmiAndSlurm) {
  set("PMI_RANK", "2");
  set("PMI_SIZE", "3");
  set("MPI_LOCALRANKID", "0");
  EXPECT_EQ(detect_launch().launcher, "pmi");
  EXPECT_EQ(detect_launch().rank, 2);
  clear();
  set("SLURM_PROCID", "3");
  set("SLURM_NTASKS", "4");
  set("SLURM_LOCALID", "1");
  set("SLURM_NTASKS_PER_NODE", "2(x2)");  // Slurm's list syntax
  const LaunchInfo info = detect_launch();
  EXPECT_EQ(info.launcher, "slurm");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_size, 2);
  EXPECT_EQ(info.variables, "SLURM_PROCID=3, SLURM_NTASKS=4");  // named when MPI disagrees
}

TEST_F(LauncherEnv, MpirunInsideSlurmMeansMpirun) {
  set("SLURM_PROCID", "0");
  set("SLURM_NTASKS", "1");
  set("OMPI_COMM_WORLD_RANK", "1");
  set("OMPI_COMM_WORLD_SIZE", "2");
  EXPECT_EQ(detect_launch().launcher, "openmpi");
  EXPECT_EQ(detect_launch().world_size, 2);
}

TEST_F(LauncherEnv, InconsistentValuesAreErrorsNamingTheVariables) {
  set("OMPI_COMM_WORLD_RANK", "2");
  set("OMPI_COMM_WORLD_SIZE", "2");
  try {
    detect_launch();
    FAIL() << "rank 2 of 2 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("OMPI_COMM_WORLD_RANK=2"), std::string::npos) << e.what();
  }
  set("OMPI_COMM_WORLD_RANK", "one");
  EXPECT_THROW(detect_launch(), Error);
}

}  // namespace
}  // namespace bertrain

// The choice of GPU collectives (--gpu-collectives: NCCL, or MPI through host memory) and the host half of the
// staged bf16 allreduce. CPU only: the staged allreduce itself runs in test_mpi's GPU tests.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/build_config.h"
#include "core/error.h"
#include "dist/bf16_staging.h"
#include "dist/communicator.h"
#include "dist/device_communicator.h"

namespace bertrain {
namespace {

// One process's communicator, with `local_size` ranks claimed on its host.
std::unique_ptr<Communicator> host_with(int local_size) {
  LaunchInfo info;
  info.local_size = local_size;
  info.host = "node1";
  return make_communicator(info);
}

TEST(GpuCollectives, NamesParseAndPrint) {
  for (const char* name : {"auto", "nccl", "mpi"}) EXPECT_EQ(gpu_collectives_name(parse_gpu_collectives(name)), std::string(name));
  try {
    parse_gpu_collectives("gloo");
    FAIL() << "gloo was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--gpu-collectives must be auto, nccl or mpi, got 'gloo'"), std::string::npos)
        << e.what();
  }
}

TEST(GpuCollectives, AutoTakesNcclOnlyWhenEveryRankHasAGpu) {
  const GpuCollectives nccl_if_built = BERTRAIN_HAS_NCCL ? GpuCollectives::kNccl : GpuCollectives::kMpi;
  EXPECT_EQ(agree_gpu_collectives(GpuCollectives::kAuto, *host_with(1), 1), nccl_if_built);
  EXPECT_EQ(agree_gpu_collectives(GpuCollectives::kAuto, *host_with(8), 8), nccl_if_built);
  // More ranks on the host than GPUs: some share one, which NCCL refuses.
  EXPECT_EQ(agree_gpu_collectives(GpuCollectives::kAuto, *host_with(2), 1), GpuCollectives::kMpi);
  EXPECT_EQ(agree_gpu_collectives(GpuCollectives::kAuto, *host_with(9), 8), GpuCollectives::kMpi);
}

TEST(GpuCollectives, MpiIsTakenAsAsked) {
  EXPECT_EQ(agree_gpu_collectives(GpuCollectives::kMpi, *host_with(1), 1), GpuCollectives::kMpi);
  EXPECT_EQ(agree_gpu_collectives(GpuCollectives::kMpi, *host_with(3), 1), GpuCollectives::kMpi);
}

TEST(GpuCollectives, NcclIsRefusedWhenRanksShareAGpuOrTheBuildHasNone) {
  try {
    agree_gpu_collectives(GpuCollectives::kNccl, *host_with(3), 1);
    FAIL() << "NCCL accepted for 3 ranks on 1 GPU";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("node1 rank 0"), std::string::npos) << what;
    EXPECT_NE(what.find("--gpu-collectives"), std::string::npos) << what;
    if (BERTRAIN_HAS_NCCL) {
      EXPECT_NE(what.find("3 rank(s), 1 GPU(s)"), std::string::npos) << what;
    }
  }
  if (BERTRAIN_HAS_NCCL) {
    EXPECT_EQ(agree_gpu_collectives(GpuCollectives::kNccl, *host_with(2), 2), GpuCollectives::kNccl);
  } else {
    EXPECT_THROW(agree_gpu_collectives(GpuCollectives::kNccl, *host_with(1), 1), Error);
  }
}

TEST(GpuCollectives, MakingOneNeedsADecision) {
  EXPECT_THROW(make_device_communicator(GpuCollectives::kAuto, *host_with(1), 0, 10.0, 16), Error);
}

// Random bf16 bit patterns (finite ones: the sums below must be comparable), of every length up to 67, widened
// in place from the upper half and narrowed back to the front, as the staged allreduce does around MPI's sum.
TEST(Bf16Staging, WidensFromTheUpperHalfAndNarrowsToTheFront) {
  std::mt19937 gen(5);
  for (std::size_t n = 0; n <= 67; ++n) {
    std::vector<bf16> values(n);
    for (bf16& v : values) {
      do {
        v.bits = static_cast<uint16_t>(gen());
      } while ((v.bits & 0x7f80u) == 0x7f80u);  // no infinities or NaNs
    }
    std::vector<unsigned char> staging(4 * n + 8, 0xab);  // 8 guard bytes that must stay untouched
    if (n > 0) std::memcpy(staging.data() + 2 * n, values.data(), 2 * n);
    const float* widened = widen_bf16_upper_half(staging.data(), n);
    ASSERT_EQ(static_cast<const void*>(widened), static_cast<const void*>(staging.data()));
    std::vector<float> sums(n);
    for (std::size_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, staging.data() + 4 * i, sizeof f);
      ASSERT_EQ(f, bf16_to_float(values[i])) << "n " << n << " element " << i;
      sums[i] = 3.0f * f + 0.001f;  // what MPI's sum might leave: no longer a bf16 value
      std::memcpy(staging.data() + 4 * i, &sums[i], sizeof f);
    }
    narrow_to_bf16_front(staging.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      bf16 h;
      std::memcpy(&h, staging.data() + 2 * i, sizeof h);
      ASSERT_EQ(h.bits, float_to_bf16(sums[i]).bits) << "n " << n << " element " << i;
    }
    for (std::size_t b = 4 * n; b < staging.size(); ++b) ASSERT_EQ(staging[b], 0xab) << "n " << n << " byte " << b;
  }
}

}  // namespace
}  // namespace bertrain

// GraphCache (engine/cuda/graph_cache.h): eager on a key's first run, captured on its second, replayed after;
// replays repeat the captured arguments over the buffers' current contents; the cap and "off" run eagerly; an
// exception during a capture leaves the stream usable.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "core/cuda/device_buffer.h"
#include "core/cuda/gpu_context.h"
#include "engine/cuda/graph_cache.h"
#include "kernels/tensor_ops.h"
#include "tests/cuda/gpu_test.h"

namespace bertrain {
namespace {

constexpr std::size_t kElements = 1000;

// y += x as the graphed work: after k runs y = k · x, however each run was executed.
struct Accumulate {
  GpuContext context{0, gpu_reduction_workspace_elements(16)};
  DeviceBuffer<float> x{std::vector<float>(kElements, 1.5f)};
  DeviceBuffer<float> y{std::vector<float>(kElements, 0.0f)};
  void operator()() { add_inplace_cuda(y.data(), static_cast<const float*>(x.data()), kElements, context.stream()); }
  float first_y() {
    context.synchronize();
    return y.download()[0];
  }
};

TEST(CudaGraphCache, EagerThenCapturedThenReplayed) {
  BERTRAIN_REQUIRE_GPU();
  Accumulate work;
  GraphCache cache(4);
  const GraphCache::Key key{1, 2, 3, 4};
  cache.run(key, work.context.stream(), [&] { work(); });
  EXPECT_EQ(cache.graphs(), 0u) << "the first run of a key is eager";
  cache.run(key, work.context.stream(), [&] { work(); });
  EXPECT_EQ(cache.graphs(), 1u) << "the second run captures";
  for (int i = 0; i < 3; ++i) cache.run(key, work.context.stream(), [] { FAIL() << "a replay must not enqueue"; });
  EXPECT_EQ(cache.replays(), 3u);
  EXPECT_FLOAT_EQ(work.first_y(), 5 * 1.5f);
  // New contents of the captured buffers are what a replay reads.
  work.x.upload(std::vector<float>(kElements, 2.0f).data(), kElements);
  cache.run(key, work.context.stream(), [] {});
  EXPECT_FLOAT_EQ(work.first_y(), 5 * 1.5f + 2.0f);
}

TEST(CudaGraphCache, OffAndFullRunEagerly) {
  BERTRAIN_REQUIRE_GPU();
  Accumulate work;
  GraphCache off(0), one(1);
  for (int i = 0; i < 3; ++i) off.run({7, 0, 0, 0}, work.context.stream(), [&] { work(); });
  EXPECT_EQ(off.graphs(), 0u);
  for (int i = 0; i < 2; ++i) one.run({1, 0, 0, 0}, work.context.stream(), [&] { work(); });
  for (int i = 0; i < 3; ++i) one.run({2, 0, 0, 0}, work.context.stream(), [&] { work(); });
  EXPECT_EQ(one.graphs(), 1u) << "the cap keeps the first captured key only";
  EXPECT_EQ(one.replays(), 0u);
  EXPECT_FLOAT_EQ(work.first_y(), 8 * 1.5f);
}

TEST(CudaGraphCache, AnExceptionDuringACaptureLeavesTheStreamUsable) {
  BERTRAIN_REQUIRE_GPU();
  Accumulate work;
  GraphCache cache(4);
  const GraphCache::Key key{5, 0, 0, 0};
  cache.run(key, work.context.stream(), [&] { work(); });
  EXPECT_THROW(cache.run(key, work.context.stream(), [&] {
    work();
    throw std::runtime_error("host-side failure mid-capture");
  }),
               std::runtime_error);
  EXPECT_EQ(cache.graphs(), 0u);
  work();  // the stream is out of capture mode: plain launches work again
  EXPECT_FLOAT_EQ(work.first_y(), 2 * 1.5f) << "the captured-then-dropped launch never ran";
}

}  // namespace
}  // namespace bertrain

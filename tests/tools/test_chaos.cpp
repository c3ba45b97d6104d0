// Chaos on the CPU engine (label slow): tests/tools/chaos_test.h, 20 interrupted runs.
#include "tests/tools/chaos_test.h"

namespace bertrain::chaos {
namespace {

INSTANTIATE_TEST_SUITE_P(Cpu, InterruptedRunTest, ::testing::Values(Engine{"cpu", "fp32", 20, true}), engine_name);

}  // namespace
}  // namespace bertrain::chaos

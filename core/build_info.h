// What this binary was compiled with (CUDA, NCCL, MPI, BLAS) and which devices it sees, for --version.
#pragma once

#include <string>

namespace bertrain {

// Multi-line human-readable report: version, commit, compiled-in backends with their versions, visible devices.
std::string build_info();

// bertrain's version (the CMake project version, "0.1.0").
std::string build_version();

// The git commit the build's sources were at (40 hex digits), refreshed at every build; "" when the build
// did not know it (sources outside a git checkout, or no git). Uncommitted changes: build_git_dirty().
std::string build_git_commit();

// Whether tracked files differed from build_git_commit() when the build was made (--version says so).
bool build_git_dirty();

// Number of CUDA devices visible to this process; 0 without CUDA support or without a device.
// `why` (optional) receives the reason when there are none.
int cuda_device_count(std::string* why = nullptr);

// One line per visible CUDA device: "<index>: <name>, <memory> GiB, compute capability X.Y".
std::string cuda_device_summary();

// Dense peak TFLOP/s of CUDA device `device` for bf16 tensor-core (bf16) or fp32 non-tensor (!bf16) math,
// from a table of datacenter GPUs by name (not queryable from the driver); 0 when unknown or without CUDA.
double gpu_peak_tflops(int device, bool bf16);

}  // namespace bertrain

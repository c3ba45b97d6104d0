#!/usr/bin/env bash
# Builds one of the emulated GPU test binaries (tools/cuda_emulation/README.md) and runs it; what follows the
# suite name goes to GoogleTest. A developer tool: never needed to build, run or test bertrain.
#
#   tools/cuda_emulation/run.sh [--build-dir DIR] [attention|elementwise] [gtest arguments...]
#
#   --build-dir DIR  where to configure and build (default: build-emu/ under the repository root, git-ignored)
#   attention        tests/cuda/test_cuda_gemm_attention.cpp on kernels/cuda/attention.cu (the default)
#   elementwise      tests/cuda/test_cuda_elementwise.cpp on activation, dropout, layernorm, tensor_ops, packed .cu
#
# Without a --gtest_filter of yours, a suite runs the tests the emulation can run (attention: not the cuBLAS
# linear ones). EMU_JOBS: parallel compile jobs (default: all cores). EMU_SEED: the scheduler's seed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build="$repo/build-emu"
if [[ ${1:-} == --build-dir ]]; then
  [[ $# -ge 2 ]] || { echo "run.sh: --build-dir needs a directory" >&2; exit 2; }
  build=$2
  shift 2
fi

suite=attention
case ${1:-} in
  attention | elementwise) suite=$1; shift ;;
esac

case $suite in
  # The file's CudaLinear tests and ColumnSumNeedsEnoughWorkspace call cuBLAS code (linear_stubs.cpp).
  attention) default_filter='CudaAttention*:CudaGemmAttentionChecks.AttentionRejectsOverlapAndBadArguments' ;;
  elementwise) default_filter='*' ;;
esac
filter=("--gtest_filter=$default_filter")
for arg in "$@"; do
  [[ $arg == --gtest_filter=* ]] && filter=()
done

log="$build/configure.log"
mkdir -p "$build"
if ! cmake -S "$here" -B "$build" >"$log" 2>&1; then
  cat "$log" >&2
  echo "run.sh: configuring the emulation in $build failed (log above)" >&2
  exit 1
fi
cmake --build "$build" --target "emu_$suite" -j "${EMU_JOBS:-$(nproc)}"
echo "run.sh: running $build/emu_$suite ${filter[*]} $*"
exec "$build/emu_$suite" "${filter[@]}" "$@"

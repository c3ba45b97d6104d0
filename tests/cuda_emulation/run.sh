#!/usr/bin/env bash
# Builds one of the emulated GPU test binaries (tests/cuda_emulation/README.md) and runs it; what follows the
# suite name goes to GoogleTest (to bertrain for `bertrain`). A developer tool: never needed to build, run or test
# bertrain.
#
#   tests/cuda_emulation/run.sh [--build-dir DIR] [attention|elementwise|embedding|model|mpi|gpu_runs] [gtest arguments...]
#   tests/cuda_emulation/run.sh [--build-dir DIR] bertrain [bertrain arguments...]
#
#   --build-dir DIR  where to configure and build (default: build-emu/ under the repository root, git-ignored)
#   attention        tests/cuda/test_cuda_gemm_attention.cpp on attention.cu, linear.cu (fake cuBLAS) (the default)
#   elementwise      tests/cuda/test_cuda_elementwise.cpp on activation, dropout, layernorm, tensor_ops, packed .cu
#   embedding        tests/cuda/test_cuda_embedding_loss_adam.cpp on embedding, loss, adam .cu (CUB sort: a stand-in)
#   model            tests/cuda/test_cuda_model.cpp, test_cuda_graph_cache.cpp: the whole model and engine, every .cu,
#                    on a FAKE cuBLAS(Lt) (emu_cublas.h; EMU_CUBLASLT=none takes linear.cu's fallbacks)
#   bertrain         the whole bertrain program with MPI on the emulated GPU (emu_bertrain): prints its path, then
#                    runs it with the arguments that follow, if any (e.g. `mpirun -np 2 <path> train --device cuda`)
#   mpi              tests/dist/test_mpi.cpp (emu_mpi) against emu_bertrain; needs MPI (libopenmpi-dev openmpi-bin)
#   gpu_runs         tests/tools/test_gpu_runs.cpp (emu_gpu_runs) against emu_bertrain: SIGTERM resume and chaos
#
# EMU_JOBS: parallel compile jobs (default: all cores). EMU_SEED: the scheduler's seed. EMU_MAX_SMEM, EMU_CUBLASLT:
# README.md.
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
  attention | elementwise | embedding | model | bertrain | mpi | gpu_runs) suite=$1; shift ;;
esac
targets=("emu_$suite")
if [[ $suite == mpi || $suite == gpu_runs ]]; then
  targets=(emu_bertrain "emu_$suite")  # they run emu_bertrain
fi

log="$build/configure.log"
mkdir -p "$build"
if ! cmake -S "$here" -B "$build" >"$log" 2>&1; then
  cat "$log" >&2
  echo "run.sh: configuring the emulation in $build failed (log above)" >&2
  exit 1
fi
if [[ $suite == bertrain || $suite == mpi || $suite == gpu_runs ]] && grep -q "no emu_bertrain" "$log"; then
  echo "run.sh: no MPI, nlohmann_json or utf8proc found, so no $suite suite (Debian: libopenmpi-dev openmpi-bin" \
       "nlohmann-json3-dev libutf8proc-dev)" >&2
  exit 1
fi
cmake --build "$build" --target "${targets[@]}" -j "${EMU_JOBS:-$(nproc)}"
if [[ $suite == bertrain ]]; then
  echo "run.sh: built $build/emu_bertrain"
  [[ $# -gt 0 ]] || exit 0
fi
echo "run.sh: running $build/emu_$suite $*"
exec "$build/emu_$suite" "$@"

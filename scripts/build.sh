#!/usr/bin/env bash
# Configures and builds tcv (Release) in build/. Uses nvcc from /usr/local/cuda
# when present, so the CUDA sources are always compiled where they can be.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
BUILD_DIR="${BUILD_DIR:-build}"
# ccache keys on paths relative to the checkout, so a fresh clone elsewhere (CI)
# reuses what an earlier build of the same sources compiled.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR=1
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$BUILD_DIR" -j"$(nproc)"

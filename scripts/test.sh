#!/usr/bin/env bash
# Everything from a fresh machine to a test report: dependencies, build, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
bash scripts/build.sh -DTCV_BUILD_TESTS=ON -DTCV_BUILD_BENCH=ON -DTCV_BUILD_APPS=ON
# Every package the build used must be one setup-deps.sh installs.
bash scripts/check-deps.sh "${BUILD_DIR:-build}"
bash scripts/check-layers.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j"$(nproc)" --timeout 600

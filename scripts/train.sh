#!/usr/bin/env bash
# Everything from a fresh machine to a trained model: dependencies, build, and
# tcv-train on the default config (Fashion-MNIST CNN). Extra arguments go to tcv-train.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
bash scripts/build.sh -DTCV_BUILD_APPS=ON
"${BUILD_DIR:-build}"/apps/tcv-train --config configs/cls/fmnist_cnn.toml "$@"

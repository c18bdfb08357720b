#!/usr/bin/env bash
# Prepares what scripts/gpu-check.sh needs on a lent GPU machine that has no
# Debian packages: a Hopper-only build of tcv (sm_90 machine code, no -march=native,
# so it runs on that machine's CPU), the shared libraries it links from Debian
# (oneDNN, OpenBLAS, Gloo, ...; not the CUDA ones, which come from that machine's
# Python environment), and Fashion-MNIST. Everything lands in .gpu/ (git-ignored):
#   .gpu/deps.tar.xz   Debian libraries + dataset (made once, reused)
#   .gpu/tcv.tar.xz    libtcv, the tools and the CUDA test binaries
# Then, on the device: bash scripts/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${GPU_BUILD_DIR:-build-gpu}
if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTCV_WITH_CUDA=ON -DTCV_NATIVE=OFF \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DTCV_BUILD_TESTS=ON -DTCV_BUILD_BENCH=ON -DTCV_BUILD_APPS=ON >/dev/null
cmake --build "$BUILD" -j"${JOBS:-$(nproc)}" ${GPU_TARGETS:+--target $GPU_TARGETS}

mkdir -p .gpu
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT

# --- tcv itself -------------------------------------------------------------------
mkdir -p "$STAGE/tcv/lib" "$STAGE/tcv/bin" "$STAGE/tcv/tests"
cp -P "$BUILD"/libtcv.so* "$STAGE/tcv/lib/"
for t in tcv-train tcv-bench tcv-run tcv-predict; do
  [ -x "$BUILD/apps/$t" ] && cp "$BUILD/apps/$t" "$STAGE/tcv/bin/"
done
for t in "$BUILD"/tests/test_cuda_* "$BUILD"/tests/test_ops_* "$BUILD"/tests/test_train_grad_scaler \
  "$BUILD"/tests/test_engine_autocast \
  "$BUILD"/tests/test_engine_cuda_libs; do
  [ -x "$t" ] && cp "$t" "$STAGE/tcv/tests/"
done
strip --strip-unneeded "$STAGE"/tcv/lib/libtcv.so.* "$STAGE"/tcv/bin/* "$STAGE"/tcv/tests/* 2>/dev/null || true
tar -C "$STAGE/tcv" -cf - . | xz -3 -T"${JOBS:-2}" > .gpu/tcv.tar.xz
echo "gpu-bundle: .gpu/tcv.tar.xz $(du -h .gpu/tcv.tar.xz | cut -f1)"

# --- Debian libraries and the dataset (once) -----------------------------------------
if [ ! -f .gpu/deps.tar.xz ]; then
  mkdir -p "$STAGE/deps/lib" "$STAGE/deps/data/fashion-mnist"
  # Everything libtcv and the tools link that is neither glibc/libstdc++ nor CUDA.
  ldd "$BUILD"/libtcv.so "$BUILD"/apps/tcv-train "$BUILD"/tests/test_cuda_runtime 2>/dev/null |
    awk '/=> \//{print $3}' | sort -u |
    grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux|libstdc\+\+|libgcc_s)\.so' |
    grep -vE 'libcu|libnccl|libnv|/usr/local/cuda|libtcv' |
    while read -r lib; do cp -L "$lib" "$STAGE/deps/lib/"; done
  cp /usr/share/datasets/fashion-mnist/*.gz "$STAGE/deps/data/fashion-mnist/"
  tar -C "$STAGE/deps" -cf - . | xz -3 -T"${JOBS:-2}" > .gpu/deps.tar.xz
fi
echo "gpu-bundle: .gpu/deps.tar.xz $(du -h .gpu/deps.tar.xz | cut -f1)"
# The library list only when this run made deps.tar.xz.
if [ -d "$STAGE/deps/lib" ]; then ls "$STAGE/deps/lib" | tr '\n' ' '; echo; fi

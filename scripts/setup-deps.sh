#!/usr/bin/env bash
# Installs everything tcv's build, tests and default training run need, from
# Debian's packages only. Idempotent: installs only what is missing. Run as root.
# scripts/check-deps.sh (run by scripts/test.sh) fails when the build uses a
# package this list neither names nor gets as a dependency.
#
# The CUDA toolkit (with cuDNN, cuBLAS, NCCL) is expected at /usr/local/cuda
# where the GPU backend is wanted; without it tcv builds CPU-only.
set -euo pipefail

packages=(
  build-essential cmake ccache pkg-config git
  libdnnl-dev          # oneDNN: convolution, pooling, batch norm on the CPU
  # Debian's oneDNN is built with its OpenCL GPU runtime: dnnl-config.cmake
  # runs find_package(OpenCL REQUIRED) and the dnnl target links OpenCL::OpenCL.
  # libdnnl-dev only Recommends the headers and the linkable libOpenCL.so, and
  # Recommends are not installed here, so name them (tcv never calls OpenCL).
  ocl-icd-opencl-dev
  libopenblas-dev      # GEMM
  libtomlplusplus-dev  # TOML configs
  # JSON: safetensors headers, trainer state, metrics lines, COCO instances_*.json
  nlohmann-json3-dev
  libpugixml-dev       # XML: Pascal VOC annotations read and written by data/det
  libstb-dev           # image decode/encode
  # Label maps are PNGs whose pixels are class indices (palette or grayscale);
  # stb_image expands palette PNGs to colours, libspng gives the indices.
  libspng-dev
  libgloo-dev          # CPU collectives
  zlib1g-dev           # gzip IDX files
  libgtest-dev libgmock-dev
  libbenchmark-dev
  dataset-fashion-mnist  # real data for the default model and the tests
  # `ip netns`: the multi-machine tests (tests/dist/test_multinode.cpp) make
  # machines from network namespaces joined by veth pairs and a bridge.
  iproute2
)

# Only for scripts/fuzz.sh (installed with --fuzz): libFuzzer comes with clang,
# its runtime and the sanitizers' with libclang-rt, and the library's OpenMP
# under clang is LLVM's libomp. scripts/sanitize.sh builds with gcc and needs
# nothing more.
fuzz_packages=(clang libclang-rt-14-dev libomp-14-dev)

# --fuzz: also the fuzzing packages. --list: print the package names instead of
# installing (scripts/check-deps.sh compares the build with them).
list=0
for arg in "$@"; do
  case "$arg" in
    --fuzz) packages+=("${fuzz_packages[@]}") ;;
    --list) list=1 ;;
    *) echo "usage: setup-deps.sh [--fuzz] [--list]" >&2; exit 2 ;;
  esac
done
if [ $list -eq 1 ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

#!/usr/bin/env bash
# One call on a GPU machine: the CUDA tests (and the memory checker where it
# works), one epoch of the Fashion-MNIST default on the GPU, tcv-bench train
# in f32 and bf16 against PyTorch eager on the same model and batch, per-kernel
# profiles of both for the bf16 runs, and a table at the end.
#
# cuDNN, cuBLAS and NCCL come from the machine's Python environment (its
# `nvidia` packages). tcv comes from .gpu/ (scripts/gpu-bundle.sh, built where
# Debian's oneDNN/OpenBLAS/Gloo are) or, where those libraries are installed,
# from a build here with 16 jobs (GPU_CHECK_BUILD=1).
#
#   bash scripts/gpu-check.sh            # full check
#   GPU_CHECK_QUICK=1 bash scripts/gpu-check.sh   # tests only
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUTDIR=${GPU_CHECK_OUT:-${OUT:-/tmp/tcv-gpu-check}}
mkdir -p "$OUTDIR"
T0=$(date +%s)
log() { echo "[gpu-check $(($(date +%s) - T0))s] $*"; }

# --- libraries from the Python environment ----------------------------------------
NVROOTS=$(python3 -c 'import nvidia, os; print(" ".join(nvidia.__path__))' 2>/dev/null)
NVLIBS=""
for so in 'libcudnn.so.9' 'libcublas.so.1*' 'libcublasLt.so.1*' 'libnccl.so.2' 'libcudart.so.1*' 'libnvrtc.so*' 'libnvJitLink.so*'; do
  for d in $(find $NVROOTS -name "$so" -printf '%h\n' 2>/dev/null | sort -u); do
    case ":$NVLIBS:" in *":$d:"*) ;; *) NVLIBS="$NVLIBS:$d" ;; esac
  done
done
NVLIBS=${NVLIBS#:}
log "CUDA libraries from: $NVLIBS"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

# --- tcv -------------------------------------------------------------------------
G=/tmp/tcv-gpu
rm -rf "$G"
mkdir -p "$G"
if [ "${GPU_CHECK_BUILD:-0}" = 1 ] || [ ! -f .gpu/tcv.tar.xz ]; then
  log "building with 16 jobs"
  CUDNN_INC=$(find $NVROOTS -name cudnn.h -printf '%h\n' | head -1)
  cmake -S . -B "$G/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTCV_NATIVE=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCUDNN_INCLUDE_DIR="$CUDNN_INC" \
    -DCUDNN_LIBRARY="$(find $NVROOTS -name 'libcudnn.so.9' | head -1)" \
    -DNCCL_LIBRARY="$(find $NVROOTS -name 'libnccl.so.2' | head -1)" >"$OUTDIR/configure.log" 2>&1 &&
    cmake --build "$G/build" -j16 >"$OUTDIR/build.log" 2>&1 || {
    log "build failed (see build.log)"
    tail -30 "$OUTDIR/build.log"
    exit 1
  }
  mkdir -p "$G/lib" "$G/bin" "$G/tests"
  cp -P "$G"/build/libtcv.so* "$G/lib/"
  cp "$G"/build/apps/tcv-* "$G/bin/"
  cp "$G"/build/tests/test_cuda_* "$G"/build/tests/test_ops_* "$G/build/tests/test_train_grad_scaler" \
    "$G/build/tests/test_engine_autocast" "$G/build/tests/test_engine_cuda_libs" "$G/tests/"
  DATA=/usr/share/datasets/fashion-mnist
else
  tar -C "$G" -xJf .gpu/tcv.tar.xz
  tar -C "$G" -xJf .gpu/deps.tar.xz
  DATA=$G/data/fashion-mnist
fi
export LD_LIBRARY_PATH="$G/lib:$NVLIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMP_NUM_THREADS=8
export TCV_SOURCE_DIR="$ROOT"
log "tcv ready"

# --- CUDA tests --------------------------------------------------------------------
TESTS_PASSED=0
TESTS_FAILED=0
TESTS_SKIPPED=0
FAILED_LIST=""
# run_test BINARY LABEL [ENV=VALUE...]: one test binary, its counts added to the totals.
run_test() {
  local t=$1 name=$2
  shift 2
  env "$@" timeout ${GPU_CHECK_TEST_TIMEOUT:-90} "$t" --gtest_brief=1 >"$OUTDIR/$name.log" 2>&1
  local rc=$?
  local p f s
  p=$(grep -oP '\[  PASSED  \] \K[0-9]+' "$OUTDIR/$name.log" | tail -1)
  f=$(grep -cE '^\[  FAILED  \] .*\([0-9]+ ms\)$' "$OUTDIR/$name.log")
  s=$(grep -oP '\[  SKIPPED \] \K[0-9]+' "$OUTDIR/$name.log" | tail -1)
  TESTS_PASSED=$((TESTS_PASSED + ${p:-0}))
  TESTS_FAILED=$((TESTS_FAILED + ${f:-0}))
  TESTS_SKIPPED=$((TESTS_SKIPPED + ${s:-0}))
  if [ $rc -ne 0 ]; then
    FAILED_LIST="$FAILED_LIST $name(rc=$rc)"
    echo "---- $name failed (rc $rc):"
    grep -E '^\[  FAILED|Failure|error|Error|Expected|Which is|actual|Value of' "$OUTDIR/$name.log" | head -40
  fi
}
for t in "$G"/tests/test_*; do
  run_test "$t" "$(basename "$t")"
done
# Again with 64-bit indices everywhere (WideDivmod paths that need 2^31 elements otherwise).
for name in test_cuda_elementwise test_cuda_batch_norm test_ops_op_table; do
  [ -x "$G/tests/$name" ] && run_test "$G/tests/$name" "$name.wide" TCV_CUDA_WIDE_INDICES=1
done
log "tests: $TESTS_PASSED passed, $TESTS_FAILED failed, $TESTS_SKIPPED skipped;$FAILED_LIST"
SAN="not run"
if [ "${GPU_CHECK_QUICK:-0}" != 1 ] && command -v compute-sanitizer >/dev/null; then
  timeout 60 compute-sanitizer --tool memcheck --print-limit 20 "$G/tests/test_cuda_runtime" \
    --gtest_brief=1 --gtest_filter=-*OutOfMemory* >"$OUTDIR/sanitizer.log" 2>&1
  SAN=$(grep -E 'ERROR SUMMARY' "$OUTDIR/sanitizer.log" | tail -1)
  timeout 60 compute-sanitizer --tool memcheck --print-limit 20 "$G/tests/test_cuda_elementwise" \
    --gtest_brief=1 --gtest_filter=-*Large*:*GridStride* >>"$OUTDIR/sanitizer.log" 2>&1
  timeout 60 compute-sanitizer --tool memcheck --print-limit 20 "$G/tests/test_cuda_batch_norm" \
    --gtest_brief=1 --gtest_filter=-*ManyBlocks* >>"$OUTDIR/sanitizer.log" 2>&1
  SAN="runtime: ${SAN:-no summary}; elementwise: $(grep -E 'ERROR SUMMARY' "$OUTDIR/sanitizer.log" | sed -n 2p)"
  SAN="$SAN; batch_norm: $(grep -E 'ERROR SUMMARY' "$OUTDIR/sanitizer.log" | sed -n 3p)"
  log "compute-sanitizer memcheck: $SAN"
fi
[ "${GPU_CHECK_QUICK:-0}" = 1 ] && exit 0

# --- one epoch of the default config on the GPU ----------------------------------------
RUN=/tmp/tcv-gpu-run
rm -rf "$RUN"
t_train=$(date +%s)
timeout 180 "$G/bin/tcv-train" --config configs/cls/fmnist_cnn.toml --out "$RUN" --device cuda \
  --set solver.max_epoch=1 --set "data.data_dir=\"$DATA\"" >"$OUTDIR/train.log" 2>&1
TRAIN_RC=$?
TRAIN_S=$(($(date +%s) - t_train))
TRAIN_TOP1=$(grep '"split":"val"' "$RUN/metrics.jsonl" 2>/dev/null | tail -1 | grep -oP '"top1":\K[0-9.]+')
TRAIN_IPS=$(grep '"split":"train"' "$RUN/metrics.jsonl" 2>/dev/null | tail -1 | grep -oP '"images_per_sec":\K[0-9.]+')
log "fmnist_cnn 1 epoch on cuda: rc $TRAIN_RC, top1 ${TRAIN_TOP1:-?}, ${TRAIN_IPS:-?} img/s, ${TRAIN_S}s"
[ $TRAIN_RC -ne 0 ] && tail -20 "$OUTDIR/train.log"

# --- tcv-bench train vs PyTorch -----------------------------------------------------------
ROWS=""
bench_pair() {  # model batch size steps dtype
  local model=$1 batch=$2 size=$3 steps=$4 dtype=$5
  if [ $(($(date +%s) - T0)) -gt "${GPU_CHECK_BUDGET_S:-330}" ]; then
    log "skipping $model $dtype: over the time budget"
    return
  fi
  local a b
  a=$(timeout 120 "$G/bin/tcv-bench" train --model "$model" --batch "$batch" --image-size "$size" \
    --steps "$steps" --warmup 5 --device cuda --dtype "$dtype" --json 2>>"$OUTDIR/bench.err" | tail -1)
  b=$(timeout 120 python3 bench/compare/train_torch_gpu.py --model "$model" --batch "$batch" \
    --image-size "$size" --steps "$steps" --warmup 5 --dtype "$dtype" 2>>"$OUTDIR/bench.err" | tail -1)
  echo "$a" >>"$OUTDIR/bench.jsonl"
  echo "$b" >>"$OUTDIR/bench.jsonl"
  ROWS="$ROWS$(python3 - "$a" "$b" <<'PY'
import json, sys
def load(s):
    try: return json.loads(s)
    except Exception: return {}
a, b = load(sys.argv[1]), load(sys.argv[2])
ai, bi = a.get("images_per_sec", 0), b.get("images_per_sec", 0)
am, bm = a.get("allocator_peak_bytes", 0) / 2**20, b.get("peak_bytes", 0) / 2**20
print(f"{a.get('model', b.get('model','?')):<16} {a.get('batch','?'):>5} {a.get('image_size','?'):>4} "
      f"{a.get('dtype', b.get('dtype','?')):<5} {ai:>10.1f} {bi:>10.1f} {ai/bi if bi else 0:>6.2f}x "
      f"{am:>9.0f} {bm:>9.0f}")
PY
)
"
}
bench_pair resnet50 64 224 20 f32
bench_pair resnet50 64 224 20 bf16
bench_pair resnet18_cifar 128 32 30 f32
bench_pair resnet18_cifar 128 32 30 bf16

# --- where the time goes: per-kernel profiles of both, for the bf16 rows ----------------
# tcv: calls and device ms per step per kernel entry point (CUDA events);
# torch: torch.profiler's CUDA kernel table. Full tables in $OUTDIR/profile_*.txt.
profile_pair() {  # model batch size dtype
  local model=$1 batch=$2 size=$3 dtype=$4 tag="$1_$4"
  if [ $(($(date +%s) - T0)) -gt "${GPU_CHECK_BUDGET_S:-330}" ]; then
    log "skipping the $tag profiles: over the time budget"
    return
  fi
  timeout 120 "$G/bin/tcv-bench" train --model "$model" --batch "$batch" --image-size "$size" \
    --steps 5 --warmup 3 --device cuda --dtype "$dtype" --profile \
    >"$OUTDIR/profile_tcv_$tag.txt" 2>&1
  timeout 120 python3 bench/compare/train_torch_gpu.py --model "$model" --batch "$batch" \
    --image-size "$size" --steps 5 --warmup 3 --dtype "$dtype" --profile 3 \
    >/dev/null 2>"$OUTDIR/profile_torch_$tag.txt"
}
profile_pair resnet50 64 224 bf16
profile_pair resnet18_cifar 128 32 bf16

# --- all-reduce on NCCL, world size 1 ---------------------------------------------------
NCCL_TABLE="not run"
if [ -x "$G/bin/tcv-bench" ] && [ $(($(date +%s) - T0)) -lt "${GPU_CHECK_BUDGET_S:-330}" ]; then
  timeout 60 "$G/bin/tcv-bench" allreduce --backend nccl -b 1M -e 256M -f 4 -n 20 -w 5 -c 1 \
    >"$OUTDIR/allreduce_nccl.txt" 2>&1 && NCCL_TABLE=$(cat "$OUTDIR/allreduce_nccl.txt") ||
    NCCL_TABLE="failed: $(tail -3 "$OUTDIR/allreduce_nccl.txt")"
fi

echo
echo "================ tcv gpu-check ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)) ================"
echo "CUDA tests          : $TESTS_PASSED passed, $TESTS_FAILED failed, $TESTS_SKIPPED skipped${FAILED_LIST:+ (failed:$FAILED_LIST)}"
echo "compute-sanitizer   : $SAN"
echo "fmnist_cnn 1 epoch  : rc $TRAIN_RC, val top-1 ${TRAIN_TOP1:-?}, ${TRAIN_IPS:-?} img/s (last window), ${TRAIN_S}s wall"
echo
echo "model            batch size dtype  tcv img/s torch img/s  ratio  tcv MiB torch MiB"
printf "%s" "$ROWS"
echo "(MiB: peak device memory held by tensors: tcv's caching allocator, torch.cuda.max_memory_allocated)"
echo
for f in "$OUTDIR"/profile_tcv_*.txt; do
  [ -f "$f" ] || continue
  echo "$(basename "$f" .txt) (top 16 kernels):"
  sed -n '4,22p' "$f"
  t="$OUTDIR/profile_torch_${f##*/profile_tcv_}"
  [ -f "$t" ] && { echo "$(basename "$t" .txt) (top 12 rows):"; sed -n '1,16p' "$t"; }
  echo
done
echo "tcv-bench allreduce --backend nccl (world size 1):"
echo "$NCCL_TABLE"
echo "total ${SECONDS}s"

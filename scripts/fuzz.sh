#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz (clang, with AddressSanitizer and
# UndefinedBehaviorSanitizer, CPU only) in build-fuzz/ and runs each for a fixed
# time, then prints a table: harness, executions, corpus size, crashes.
#
#   bash scripts/fuzz.sh [SECONDS_PER_HARNESS] [HARNESS...]     (default 60 s, all)
#   bash scripts/fuzz.sh 600 safetensors image                   (two of them, 10 min each)
#   bash scripts/fuzz.sh --smoke [SECONDS_PER_HARNESS] [HARNESS...]   (default 5 s)
#
# Each harness starts from its seed corpus (written by tcv-fuzz-seeds from real
# files, plus the inputs checked in under tests/fuzz/corpus/<harness>/) and
# keeps what it finds in build-fuzz/corpus/<harness>/, so later runs go on from
# there. A crash, hang (-timeout, 10 s), leak, out-of-memory (-rss_limit_mb,
# 2 GiB) or sanitizer report stops that harness and leaves its input in
# build-fuzz/artifacts/<harness>/; reproduce with
#   build-fuzz/tests/fuzz/fuzz_<harness> build-fuzz/artifacts/<harness>/crash-...
# The script exits 1 when any harness found something.
#
# --smoke replays, for each harness, every input it has: the seeds, the inputs
# checked in under tests/fuzz/corpus/<harness>/ (each one broke a parser once),
# what earlier runs kept in build-fuzz/corpus/<harness>/ and the crashes left
# in build-fuzz/artifacts/<harness>/, then fuzzes on for the rest of a few
# seconds. It writes nothing into those directories (new inputs go to a
# temporary one), and exits 1 when any input breaks a harness. It needs the
# same clang build, so it is not part of scripts/test.sh (CI).
set -euo pipefail
cd "$(dirname "$0")/.."
smoke=0
if [ "${1:-}" = --smoke ]; then
  smoke=1
  shift
fi
default_secs=60
[ $smoke -eq 1 ] && default_secs=5
secs="$default_secs"
if [[ "${1:-}" =~ ^[0-9]+$ ]]; then
  secs="$1"
  shift
fi
if ! [[ "$secs" =~ ^[0-9]+$ ]] || [ "$secs" -lt 1 ]; then
  echo "usage: fuzz.sh [--smoke] [SECONDS_PER_HARNESS] [HARNESS...]" >&2
  exit 2
fi
t_start=$(date +%s)

bash scripts/setup-deps.sh --fuzz
BUILD_DIR="${BUILD_DIR:-build-fuzz}"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR=1
# -O1 -g with assertions on: what libFuzzer's documentation recommends.
CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DTCV_FUZZ=ON -DTCV_WITH_CUDA=OFF \
  -DTCV_BUILD_TESTS=OFF -DTCV_BUILD_BENCH=OFF -DTCV_BUILD_APPS=OFF >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"

bin="$BUILD_DIR/tests/fuzz"
if [ $# -gt 0 ]; then
  harnesses=("$@")
else
  mapfile -t harnesses < <(find tests/fuzz -maxdepth 1 -name 'fuzz_*.cpp' -printf '%f\n' |
                             sed -e 's/^fuzz_//' -e 's/\.cpp$//' | sort)
fi
for h in "${harnesses[@]}"; do
  if [ ! -x "$bin/fuzz_$h" ]; then
    echo "fuzz.sh: no harness '$h' (tests/fuzz/fuzz_$h.cpp)" >&2
    exit 2
  fi
done

seeds="$BUILD_DIR/seeds"
rm -rf "$seeds"
"$bin/tcv-fuzz-seeds" "$seeds" "$PWD"
# The sanitizers' options; libFuzzer reports leaks itself (-detect_leaks).
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export OMP_NUM_THREADS=1

results=()
found=0
t_fuzz=$(date +%s)
for h in "${harnesses[@]}"; do
  corpus="$BUILD_DIR/corpus/$h"
  artifacts="$BUILD_DIR/artifacts/$h"
  log="$BUILD_DIR/logs/$h.log"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  if [ $smoke -eq 1 ]; then
    # New inputs go to a scratch directory (libFuzzer writes to the first one);
    # the saved crashes are replayed with the rest, and new ones land in smoke/.
    log="$BUILD_DIR/logs/smoke-$h.log"
    scratch=$(mktemp -d)
    dirs=("$scratch" "$corpus" "$artifacts")
    artifacts="$BUILD_DIR/artifacts/smoke/$h"
    mkdir -p "$artifacts"
  else
    dirs=("$corpus")
  fi
  dirs+=("$seeds/$h")
  if [ -d "tests/fuzz/corpus/$h" ]; then dirs+=("tests/fuzz/corpus/$h"); fi
  dict=()
  if [ -f "tests/fuzz/$h.dict" ]; then dict=(-dict="tests/fuzz/$h.dict"); fi
  before=$(find "$artifacts" -type f | wc -l)
  echo "fuzz.sh: $h for ${secs} s (log: $log)"
  rc=0
  "$bin/fuzz_$h" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "${dict[@]}" "${dirs[@]}" \
    >"$log" 2>&1 || rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 ||
          true)
  if [ $smoke -eq 1 ]; then
    # The inputs replayed: every file of the directories read.
    size=$(find "${dirs[@]:1}" -type f | wc -l)
    rm -rf "$scratch"
  else
    size=$(find "$corpus" -type f | wc -l)
  fi
  new=$(( $(find "$artifacts" -type f | wc -l) - before ))
  if [ "$rc" -ne 0 ] && [ "$new" -eq 0 ]; then new=1; fi  # died without leaving an input
  if [ "$new" -gt 0 ]; then
    found=1
    grep -m1 -E 'ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer)|runtime error|accepted input breaks|deadly signal|uncaught' \
      "$log" | sed "s|^|fuzz.sh: $h: |" || true
  fi
  results+=("$(printf '%-16s %14s %12s %8s' "$h" "${execs:-?}" "$size" "$new")")
done
t_end=$(date +%s)

printf '\n%-16s %14s %12s %8s\n' harness executions \
  "$([ $smoke -eq 1 ] && echo replayed || echo corpus)" crashes
printf '%s\n' "${results[@]}"
echo "fuzz.sh: build and seeds $((t_fuzz - t_start)) s, harnesses $((t_end - t_fuzz)) s"
if [ $found -ne 0 ]; then
  echo "fuzz.sh: inputs that broke a harness are in $BUILD_DIR/artifacts/" >&2
  exit 1
fi

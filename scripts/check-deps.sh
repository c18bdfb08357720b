#!/usr/bin/env bash
# Guard: every file from the system that the build in BUILD_DIR used must come
# from a Debian package that scripts/setup-deps.sh installs, either by name or
# as a Depends/Pre-Depends of what it names (Recommends are not installed), or
# from a package every Debian 12 system has (Essential, or Priority required).
#
# "Used" means: the headers the compiler read (its .d dependency files), the
# libraries on every link line and those the built binaries load (ldd), the CMake
# package files find_package() read (including the packages those files look
# for themselves, such as oneDNN's OpenCL), the tools the build ran, and the
# data the tests and the default config read. Files under /usr/local (the CUDA
# toolkit) are outside Debian and outside this check.
#
# Usage: bash scripts/check-deps.sh [BUILD_DIR]   (exit 1 and a list on failure)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-${BUILD_DIR:-build}}"
CACHE="$BUILD_DIR/CMakeCache.txt"
if [ ! -f "$CACHE" ]; then
  echo "check-deps: $CACHE not found; configure and build first (scripts/build.sh)" >&2
  exit 2
fi

# ---- the packages setup-deps.sh installs, and everything they depend on -------
mapfile -t named < <(bash scripts/setup-deps.sh --list)
declare -A allowed=()
while read -r p; do
  allowed[$p]=1
done < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
           --no-breaks --no-replaces --no-enhances "${named[@]}" 2>/dev/null |
         grep -v '^ ' | sed -e 's/[<>]//g' -e 's/:.*$//')
for p in "${named[@]}"; do allowed[$p]=1; done
while read -r p essential priority; do
  if [ "$essential" = yes ] || [ "$priority" = required ]; then allowed[$p]=1; fi
done < <(dpkg-query -W -f='${Package} ${Essential} ${Priority}\n' 2>/dev/null | sed 's/:[a-z0-9]* / /')

# ---- the files the build used --------------------------------------------------
used=$(mktemp)
trap 'rm -f "$used"' EXIT
{
  # Headers: the compilers' dependency files (gcc and nvcc both write them).
  find "$BUILD_DIR" -name '*.d' -path '*CMakeFiles*' -print0 |
    xargs -0 -r cat | tr ' \\' '\n\n' | grep -E '^/usr/' | grep -v -E '^/usr/local/'
  # Libraries on the link lines.
  find "$BUILD_DIR" -name link.txt -print0 | xargs -0 -r cat | tr ' ' '\n' |
    grep -E '^/usr/.*\.(so|a)(\.[0-9.]+)?$' | grep -v -E '^/usr/local/'
  # Libraries the built programs load.
  find "$BUILD_DIR" -type f \( -name '*.so*' -o -perm -u+x \) -not -path '*CMakeFiles*' |
    while read -r bin; do
      if [ "$(head -c 4 "$bin" 2>/dev/null)" = $'\x7fELF' ]; then ldd "$bin" 2>/dev/null; fi
    done |
    awk '$3 ~ /^\/(usr|lib)/ {print $3}' | grep -v -E '^/usr/local/'
  # Files CMake found (find_library, find_path's headers, find_program) and the
  # package configuration files it read, with what they pulled in.
  grep -E '^[A-Za-z0-9_]+:(FILEPATH|PATH)=/usr/' "$CACHE" | sed 's/^[^=]*=//' |
    grep -v -E '^/usr/local/' | while read -r f; do
      if [ -f "$f" ]; then
        echo "$f"
      elif [ -d "$f" ]; then
        find "$f" -maxdepth 1 -type f \( -name '*onfig.cmake' -o -name '*-config*.cmake' \
          -o -name 'Find*.cmake' -o -name '*Targets*.cmake' -o -name '*targets*.cmake' \)
      fi
    done
  # The tools the build ran.
  for tool in cmake ctest; do command -v "$tool"; done
  # Data the tests and the default training run read.
  ls /usr/share/datasets/fashion-mnist/*.gz 2>/dev/null
} | sort -u > "$used"

# ---- resolve each file to its package (one dpkg query for all) -------------------
declare -A owner=()
mapfile -t files < <(while read -r f; do
  [ -e "$f" ] || continue
  echo "$f"
  realpath "$f"
done < "$used" | sort -u)
while IFS= read -r line; do
  case "$line" in diversion*) continue ;; esac
  owner[${line#*: }]=${line%%: *}
done < <(dpkg -S "${files[@]}" 2>/dev/null)

missing=0
declare -A seen_pkg=()
while read -r f; do
  [ -e "$f" ] || continue
  real=$(realpath "$f")
  case "$real" in /usr/local/*) continue ;; esac
  pkg=${owner[$f]:-${owner[$real]:-}}
  if [ -z "$pkg" ]; then
    echo "check-deps: $f belongs to no Debian package (installed by hand?)"
    missing=1
    continue
  fi
  # A file shared by several packages ("a, b") is fine if any of them is allowed.
  ok=0
  IFS=', ' read -r -a owners <<< "$pkg"
  for o in "${owners[@]}"; do
    o=${o%%:*}
    if [ -n "$o" ] && [ -n "${allowed[$o]:-}" ]; then ok=1; fi
  done
  if [ $ok -eq 0 ]; then
    o=${owners[0]%%:*}
    if [ -z "${seen_pkg[$o]:-}" ]; then
      echo "check-deps: the build uses $f from package '$o'," \
        "which scripts/setup-deps.sh neither installs nor gets as a dependency"
      seen_pkg[$o]=1
    fi
    missing=1
  fi
done < "$used"

n=$(wc -l < "$used")
if [ $missing -ne 0 ]; then
  echo "check-deps: FAILED: add the packages above to scripts/setup-deps.sh" >&2
  exit 1
fi
echo "check-deps: ok: $n files the build used all come from the ${#named[@]} packages" \
  "scripts/setup-deps.sh installs, their dependencies, or Debian's required packages"

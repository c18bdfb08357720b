#!/usr/bin/env bash
# The installed-header check (check_installed_headers.cmake) must fail on what
# it guards against: a kernels/ header, a third-party include, an include of a
# header the package does not ship. Builds a small fake prefix with each and
# expects the check to name the file and the include; a good prefix passes.
#   tests/package/check_refuses.sh WORK
set -euo pipefail
work="$(mkdir -p "$1" && cd "$1" && pwd)"
check="$(cd "$(dirname "$0")" && pwd)/check_installed_headers.cmake"
root="$work/prefix/include/tcv"
rm -rf "$work/prefix"
mkdir -p "$root/engine" "$root/core"
printf '#pragma once\n#include <cstdint>\n' > "$root/core/dtype.h"
printf '#pragma once\n#include "tcv/core/dtype.h"\n#include <vector>\n' > "$root/engine/tensor.h"
printf '#pragma once\n#include "engine/tensor.h"\n' > "$root/tcv.h"
cmake -DPREFIX="$work/prefix" -P "$check" > "$work/good.log" 2>&1 ||
  { echo "a good prefix failed:"; cat "$work/good.log"; exit 1; }
grep -q 'installed headers: 3' "$work/good.log" || { cat "$work/good.log"; exit 1; }

expect_refused() {  # header-path text... : writes the header, expects the check to name it
  local rel=$1 want=$2
  mkdir -p "$(dirname "$root/$rel")"
  printf '%s\n' "$3" > "$root/$rel"
  if cmake -DPREFIX="$work/prefix" -P "$check" > "$work/bad.log" 2>&1; then
    echo "the check passed with $rel holding: $3"; exit 1
  fi
  grep -qF "$want" "$work/bad.log" || { echo "expected '$want' in:"; cat "$work/bad.log"; exit 1; }
  rm -f "$root/$rel"
}
expect_refused kernels/base.h "kernels/base.h: a kernels/ header" '#pragma once'
expect_refused engine/json.h "engine/json.h: includes <nlohmann/json.hpp>, not a standard header" \
  '#include <nlohmann/json.hpp>'
expect_refused engine/conv.h "engine/conv.h: includes <dnnl.hpp>" '#include <dnnl.hpp>'
expect_refused engine/ops.h "engine/ops.h: includes \"kernels/cpu/conv.h\", which is not installed" \
  '#include "kernels/cpu/conv.h"'
echo ok

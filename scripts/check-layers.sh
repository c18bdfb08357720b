#!/usr/bin/env bash
# Guard: includes point down the layers, never up.
#
#   tcv/core <- kernels <- engine <- layers <- models <- train <- apps, include/tcv, examples
#              engine <- data   (beside layers)
#              engine, layers <- dist   (beside layers)
#
# A folder may include itself and the folders below it in that order, with two
# narrowings: only engine/ includes kernels/ (everything above reaches the
# kernels through the engine's ops and re-exports, so device dispatch stays in
# one place), and data/ and dist/ sit beside layers/: data/ includes engine/
# only, dist/ engine/ and layers/, and neither layers/ nor models/ include them.
# The front-door headers (include/tcv/, included as <tcv/...>) and examples/
# stand at the top, with apps/. The vocabulary of include/tcv/core/ (element
# types, the error type, settings and hyper-parameters the kernels read) sits
# below everything: every folder may include it, and it includes nothing of
# the project. tests/ and bench/ may include anything.
#
# Reads every #include "<top>/..." (or <top/...>) in the source files git
# tracks (and untracked ones it does not ignore) under those folders. Prints
# each offending file:line with the include and the rule, and exits 1.
#
# Usage: bash scripts/check-layers.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# What each folder may include, and the line that explains it.
declare -A allowed=(
  [kernels]="kernels"
  [engine]="engine kernels"
  [layers]="layers engine"
  [data]="data engine"
  [dist]="dist layers engine"
  [models]="models layers engine"
  [train]="train models layers data dist engine"
  [apps]="apps train models layers data dist engine"
  [include]="include train models layers data dist engine"
  [examples]="examples include train models layers data dist engine"
)
tops="kernels engine layers data dist models train apps include examples"
order="tcv/core <- kernels <- engine <- layers <- models <- train <- apps, include/tcv, examples; data/ (engine) and dist/ (engine, layers) beside layers"

bad=0
checked=0
while IFS= read -r -d '' file; do
  top=${file%%/*}
  checked=$((checked + 1))
  # file:line:text of each include of a project folder.
  while IFS=: read -r line text; do
    target=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^">]+)[">].*/\1/' <<< "$text")
    dest=${target%%/*}
    case "$target" in tcv/core/*) continue ;; esac  # the vocabulary: below everything
    if [[ "$file" == include/tcv/core/* ]]; then
      echo "check-layers: $file:$line: includes \"$target\": include/tcv/core/ may include only itself"
      bad=1
      continue
    fi
    [ "$dest" = tcv ] && dest=include  # <tcv/...> is include/tcv/...
    case " $tops " in *" $dest "*) ;; *) continue ;; esac
    case " ${allowed[$top]} " in *" $dest "*) continue ;; esac
    echo "check-layers: $file:$line: includes \"$target\": $top/ may include only" \
      "$(sed -E 's/([a-z]+)/\1\//g; s/ /, /g' <<< "${allowed[$top]}")"
    bad=1
  done < <(grep -n -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"][a-z]+/' "$file" || true)
done < <(git ls-files -z --cached --others --exclude-standard -- $tops |
           grep -z -E '\.(h|hpp|cpp|cc|cu|cuh|inc)$')

if [ $bad -ne 0 ]; then
  echo "check-layers: FAILED: includes must point down the layers ($order);" \
    "move the code to the layer that owns it, or reach it through the engine" >&2
  exit 1
fi
echo "check-layers: ok: $checked files include only down the layers ($order)"

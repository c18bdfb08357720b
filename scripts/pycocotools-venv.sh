#!/usr/bin/env bash
# Makes (once) a virtual environment on Debian's /usr/bin/python3 with pycocotools
# from PyPI, for the scripts that compare tcv's COCO mAP with it
# (scripts/make_golden_det_map.py, bench/compare/det_map.py). pycocotools is never
# a dependency of tcv's build or tests. Prints the environment's python.
#
#   PY=$(bash scripts/pycocotools-venv.sh)   # venv in $TCV_PYCOCOTOOLS_VENV or ~/.cache/tcv/pycocotools
set -euo pipefail
VENV="${TCV_PYCOCOTOOLS_VENV:-$HOME/.cache/tcv/pycocotools}"
if ! "$VENV/bin/python" -c "import pycocotools.cocoeval" 2>/dev/null; then
  /usr/bin/python3 -m venv --system-site-packages "$VENV" >&2
  "$VENV/bin/pip" install -q pycocotools >&2
fi
echo "$VENV/bin/python"

#!/usr/bin/env bash
# Create .venv (Python >= 3.10) and install tfm into it, editable, with the extras named by the
# first argument: dev (the default: what the tests need), or run (tfm and its serve extra, for
# scripts/run.sh: `tfm serve` works after it).
# torch is pinned to 2.13.0 only when absent: unpinned, pip would fetch a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=${1:-dev}
PYTHON=${PYTHON:-python3}
"$PYTHON" - <<'PY' || { echo "tfm needs Python >= 3.10 (found $("$PYTHON" --version 2>&1))" >&2; exit 2; }
import sys
sys.exit(0 if sys.version_info >= (3, 10) else 1)
PY
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -c "import torch" 2>/dev/null || .venv/bin/python -m pip install -q "torch==2.13.0"
case "$EXTRAS" in run) TARGET=".[serve]" ;; *) TARGET=".[$EXTRAS]" ;; esac
.venv/bin/python -m pip install -q -e "$TARGET"

#!/usr/bin/env bash
# Create .venv (Python >= 3.10) and install tfm into it, editable, with the test extras.
# torch is pinned to 2.13.0 only when absent: unpinned, pip would fetch a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
"$PYTHON" - <<'PY' || { echo "tfm needs Python >= 3.10 (found $("$PYTHON" --version 2>&1))" >&2; exit 2; }
import sys
sys.exit(0 if sys.version_info >= (3, 10) else 1)
PY
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -c "import torch" 2>/dev/null || .venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[dev]"
# mimalloc (the alloc extra) keeps training and serving memory flat and trains faster; it comes
# from PyPI, so offline (no index holding it) tfm runs on the C library's malloc instead.
.venv/bin/python -m pip install -q --retries 0 --timeout 15 -e ".[alloc]" 2>/dev/null \
  || echo "setup: mimalloc (pip extra 'alloc') not installed: no package index holding it; tfm uses glibc's malloc (README, Memory)" >&2

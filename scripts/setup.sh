#!/usr/bin/env bash
# Create .venv (Python >= 3.10) and install tfm into it, editable, with the extras named by the
# first argument: dev (the default: what the tests need), or run (tfm and its serve extra, for
# scripts/run.sh: `tfm serve` works after it).
# torch is pinned to 2.13.0 only when absent: unpinned, pip would fetch a multi-GB CUDA build.
# The installer is uv where it can be had (scripts/installer.sh), else pip; TFM_INSTALLER=pip
# asks for pip from the start.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=${1:-dev}
PYTHON=${PYTHON:-python3}
"$PYTHON" - <<'PY' || { echo "tfm needs Python >= 3.10 (found $("$PYTHON" --version 2>&1))" >&2; exit 2; }
import sys
sys.exit(0 if sys.version_info >= (3, 10) else 1)
PY
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
case "$EXTRAS" in run) TARGET=".[serve]" ;; *) TARGET=".[$EXTRAS]" ;; esac
TORCH=()
.venv/bin/python -c "import torch" 2>/dev/null || TORCH=("torch==2.13.0")

# shellcheck source=scripts/installer.sh
. scripts/installer.sh

with_pip() {
  .venv/bin/python -m pip install -q --upgrade pip
  [ ${#TORCH[@]} -eq 0 ] || .venv/bin/python -m pip install -q "${TORCH[@]}"
  .venv/bin/python -m pip install -q -e "$TARGET"
}

with_uv "${TORCH[@]}" -e "$TARGET" || {
  [ "${TFM_INSTALLER:-uv}" = pip ] || echo "setup: uv could not install tfm here; installing with pip" >&2
  with_pip
}

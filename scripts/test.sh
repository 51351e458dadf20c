#!/usr/bin/env bash
# Set up (scripts/setup.sh with the test extras, and a browser for the page's test where one
# can be had), run ruff (lint, and the formatter's check over the whole tree) and mypy (the
# package strict, as pyproject.toml says; tests, benchmarks and scripts with its defaults),
# then the test suite. Extra arguments go to pytest (e.g. -m "not slow" for the fast tier).
# Real-data tests run when TFM_DATA_SOURCE names a Multi30k folder (CI sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
bash scripts/browser.sh || true
.venv/bin/ruff check --quiet transformer_cli tests benchmarks scripts
.venv/bin/ruff format --check --quiet
.venv/bin/mypy
.venv/bin/mypy tests benchmarks scripts
exec .venv/bin/python -m pytest -q --durations=15 "$@"

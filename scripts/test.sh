#!/usr/bin/env bash
# Set up (scripts/setup.sh with the test extras, and a browser for the page's test where one
# can be had), run ruff (lint, and the formatter's check over the whole tree) and mypy (the
# package strict, as pyproject.toml says; tests, benchmarks and scripts with its defaults),
# then the test suite in two phases: the tests that may run beside others, two at a time
# (pytest-xdist, a file to a worker), then the timed ones alone (tests/conftest.py's
# SERIAL_MODULES). Extra arguments go to both (e.g. -m "not slow" for the fast tier). The exit
# code is the first failing phase's; nothing collected in both phases is pytest's 5.
# Real-data tests run when TFM_DATA_SOURCE names a Multi30k folder (CI sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
bash scripts/browser.sh || true
.venv/bin/ruff check --quiet transformer_cli tests benchmarks scripts
.venv/bin/ruff format --check --quiet
.venv/bin/mypy
.venv/bin/mypy tests benchmarks scripts
phase() { .venv/bin/python -m pytest -q --durations=10 --phase "$@"; }
status=0
phase parallel -n 2 --dist loadfile "$@" || status=$?
serial=0
phase serial "$@" || serial=$?
# 5 (nothing collected) in one phase is no failure when the other ran tests
if [ "$status" -eq 5 ]; then status=$serial; elif [ "$status" -eq 0 ] && [ "$serial" -ne 5 ]; then status=$serial; fi
exit "$status"

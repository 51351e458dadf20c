#!/usr/bin/env bash
# Set up (scripts/setup.sh: tfm, what running needs and the serve extra), then preprocess
# Multi30k and train the recommended model (`.venv/bin/tfm serve -c base.yaml` serves it).
# Offline? Point at a local copy: TFM_DATA_SOURCE=/path/to/multi30k ./scripts/run.sh
# Any arguments replace the default `--config base.yaml`, e.g. ./scripts/run.sh -c seed.yaml
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh run
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--config base.yaml)
.venv/bin/tfm preprocess "${args[@]}"
exec .venv/bin/tfm train "${args[@]}"

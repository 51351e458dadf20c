#!/usr/bin/env bash
# Set up (scripts/setup.sh), then preprocess Multi30k and train the recommended model.
# Offline? Point at a local copy: TFM_DATA_SOURCE=/path/to/multi30k ./scripts/run.sh
# Any arguments replace the default `--config base.yaml`, e.g. ./scripts/run.sh -c seed.yaml
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# tcmalloc, where installed (Debian: libtcmalloc-minimal4), keeps bf16 training's memory flat
# (1.3 GB instead of 2.7 GB and growing after 200 steps) and trains ~14% faster here
# (benchmarks/train_memory.py, docs/results.md).
for lib in /usr/lib/*-linux-gnu/libtcmalloc_minimal.so.4; do
  [ -e "$lib" ] && export LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}"
done
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--config base.yaml)
.venv/bin/tfm preprocess "${args[@]}"
exec .venv/bin/tfm train "${args[@]}"

#!/usr/bin/env bash
# The GPU measurements of docs/results.md, step by step, each step's output in OUT/:
#
#     benchmarks/gpu.sh OUT STEP...
#
#   tests       the GPU tests (pytest -m gpu), then all the others          tests-gpu.log, tests-all.log
#   throughput  seed.yaml and base.yaml: fp32/bf16, with and without torch.compile, and base.yaml
#               at 4x its token budget (tokens/s, MFU, peak GPU memory)    throughput-*.json
#   large       the paper's base shape (transformer-base.yaml) on 1M joined pairs: preprocessing,
#               start, steady tokens/s and MFU at 8k, 25k and 50k tokens    large-*.json
#   train       full base.yaml and seed.yaml runs (wall time, curves) and test2016 BLEU, greedy
#               and beam 5                                                 train-*.log, bleu-*.json
#   decode      greedy and beam 5 over test2016 at batch 1 and 128          decode.json
#   serve       tfm serve at 1, 16 and 64 clients, and a hot reload         serve.json
#   export      CTranslate2 float32, float16 and int8_float16 on the GPU    export.json
#
# `train` must have run before decode, serve and export (they use its base.yaml model). Needs
# tfm installed with its serve and ctranslate2 extras (offline: scripts/wheelhouse.py) and
# Multi30k at $TFM_DATA_SOURCE. DEVICE=cpu QUICK=1 checks the plumbing on a machine without a
# GPU in a few minutes (tiny step counts; its figures mean nothing).
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,20p "$0" >&2; exit 2; }
cd "$(dirname "$0")/.."
OUT=$(mkdir -p "$1" && cd "$1" && pwd); shift
DEVICE=${DEVICE:-cuda}
PY=${PYTHON:-python3}
TFM=("$PY" -m transformer_cli)
WORK=${WORK:-/tmp/tfm-gpu}
mkdir -p "$WORK"
if [ "${QUICK:-0}" = 1 ]; then
  STEPS=(--steps 3 --warmup 1); COMPILE=(false); EPOCHS=(--set train.epochs=1)
  LARGE=(30000 8000); LARGE_SETS=(--set=train.batch_tokens=2000); LARGE_TOKENS=(1000 3000)
  SENTENCES=(--sentences 64); CLIENTS=1,4
else
  STEPS=(--steps 50 --warmup 10); COMPILE=(false true); EPOCHS=()
  LARGE=(1000000 32000); LARGE_SETS=(); LARGE_TOKENS=(8000 50000)  # and the config's 25k
  SENTENCES=(--sentences 1000); CLIENTS=1,16,64
fi
SETS=("train.device=$DEVICE" "train.out_dir=$WORK/runs" "data.dir=$WORK/data")
RUN=("${SETS[@]/#/--set=}")  # as options: --set=train.device=cuda ...
PRECISION=$([ "$DEVICE" = cuda ] && echo auto || echo fp32)  # decoding: the device's half on a GPU
BASE_MODEL="$WORK/runs/gpu-base/best.pt"

step_tests() {
  "$PY" -m pytest -m gpu -q -p no:cacheprovider 2>&1 | tee "$OUT/tests-gpu.log"
  "$PY" -m pytest -m "not gpu" -q -p no:cacheprovider 2>&1 | tee "$OUT/tests-all.log"
}

step_throughput() {
  for cfg in seed base; do
    "${TFM[@]}" preprocess -c "$cfg.yaml" "${RUN[@]}" -q
    "$PY" benchmarks/train_throughput.py --config "$cfg.yaml" "${STEPS[@]}" \
      --precision fp32 bf16 --compile "${COMPILE[@]}" "${RUN[@]}" > "$OUT/throughput-$cfg.json"
  done
  "$PY" benchmarks/train_throughput.py --config base.yaml "${STEPS[@]}" --precision bf16 \
    --set=train.batch_tokens=8192 "${RUN[@]}" > "$OUT/throughput-base-8k.json"
}

step_large() {  # preprocessing and start measured once, at the config's own 25k tokens a step
  local pairs=${LARGE[0]} vocab=${LARGE[1]}
  "$PY" benchmarks/scale.py --pairs "$pairs" --vocab "$vocab" --extends transformer-base.yaml \
    --work "$WORK/scale" "${STEPS[@]}" --set="train.device=$DEVICE" "${LARGE_SETS[@]}" \
    > "$OUT/large-default.json"
  local config="$WORK/scale/scale${pairs}v${vocab}-transformer-base.yaml"
  for tokens in "${LARGE_TOKENS[@]}"; do
    "$PY" benchmarks/train_throughput.py --config "$config" "${STEPS[@]}" --precision auto \
      --set="train.batch_tokens=$tokens" --set="train.device=$DEVICE" > "$OUT/large-$tokens.json"
  done
}

step_train() {
  local timed=()  # wall time and peak RSS where GNU time is installed; the log's lines always
  [ -x /usr/bin/time ] && timed=(/usr/bin/time -v)
  for cfg in base seed; do
    local started=$SECONDS
    "${timed[@]}" "${TFM[@]}" train -c "$cfg.yaml" --set "name=gpu-$cfg" "${RUN[@]}" "${EPOCHS[@]}" \
      > "$OUT/train-$cfg.log" 2>&1
    echo "wall seconds: $((SECONDS - started))" >> "$OUT/train-$cfg.log"
    cp "$WORK/runs/gpu-$cfg/metrics.jsonl" "$OUT/metrics-$cfg.jsonl"
    for beam in 1 5; do
      "${TFM[@]}" evaluate -c "$cfg.yaml" --set "name=gpu-$cfg" "${RUN[@]}" --split test \
        --beam-size "$beam" --device "$DEVICE" --json > "$OUT/bleu-$cfg-beam$beam.json"
    done
  done
}

step_decode() {
  "$PY" benchmarks/decode_speed.py --config base.yaml --checkpoint "$BASE_MODEL" --device "$DEVICE" \
    --precision "$PRECISION" --batch-size 1 128 > "$OUT/decode.json"
}

step_serve() {
  "$PY" benchmarks/serve_load.py -c base.yaml "${RUN[@]}" --checkpoint "$BASE_MODEL" \
    --device "$DEVICE" --precision "$PRECISION" "${SENTENCES[@]}" --clients "$CLIENTS" \
    > "$OUT/serve.json"
}

step_export() {
  local quantizations=(none float16 int8_float16)
  [ "$DEVICE" = cuda ] || quantizations=(none int8)
  "$PY" benchmarks/export_speed.py --model "base=$BASE_MODEL" --device "$DEVICE" \
    --quantization "${quantizations[@]}" > "$OUT/export.json"
}

for step in "$@"; do
  declare -F "step_$step" > /dev/null || { echo "gpu.sh: unknown step $step" >&2; exit 2; }
  echo "== $step ($(date -u +%H:%M:%S))" >&2
  started=$SECONDS
  "step_$step"
  echo "== $step done in $((SECONDS - started)) s" >&2
done

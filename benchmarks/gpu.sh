#!/usr/bin/env bash
# The GPU measurements of docs/results.md, step by step, each step's output in OUT/:
#
#     benchmarks/gpu.sh OUT STEP...
#
#   probe       the machine: GPU, driver, torch, whether CTranslate2 finds CUDA  probe.txt
#   tests       the GPU tests (pytest -m gpu), then all the others          tests-gpu.log, tests-all.log
#   sdpa        base.yaml's training steps under each choice of attention kernels (tfm's: all but
#               cuDNN's; torch's: all four; math only), with the ops taking most host time  sdpa.json
#   throughput  seed.yaml and base.yaml: fp32/bf16, with and without torch.compile, and base.yaml
#               at 4x its token budget (tokens/s, MFU, peak GPU memory)    throughput-*.json
#   large       the paper's base shape (transformer-base.yaml) on 1M joined pairs: preprocessing,
#               start, steady tokens/s and MFU at 8k, 25k and 50k tokens    large-*.json
#   compile     the same shape at its own 25k tokens a step under torch.compile (after large)
#                                                                          large-compiled.json
#   train       full base.yaml and seed.yaml runs (wall time, curves) and test2016 BLEU, greedy
#               and beam 5                                                 train-*.log, bleu-*.json
#   decode      greedy and beam 5 over test2016 at batch 1 and 128          decode.json
#   serve       tfm serve at 1, 16 and 64 clients, and a hot reload         serve.json
#   export      CTranslate2 float32, float16 and int8_float16 on the GPU    export.json
#
# `train` must have run before decode, serve and export (they use its base.yaml model). Needs
# tfm installed with its serve and ctranslate2 extras (offline: scripts/wheelhouse.py) and
# Multi30k at $TFM_DATA_SOURCE. DEVICE=cpu QUICK=1 checks the plumbing on a machine without a
# GPU in a few minutes (tiny step counts; its figures mean nothing). LEASE=1 sizes the steps for a
# lease of ~15 minutes of GPU time: the GPU tests only, base.yaml only (seed.yaml needs spaCy),
# the paper's shape on 100k joined pairs at its 25k-token batches with and without
# torch.compile, decoding and serving on the first 300 / 500 test sentences. BUDGET_S=N runs the
# steps in order within N seconds in all: each one is stopped at what is left (its partial output
# stays in OUT), and none starts with under 30 s left; CAP_<STEP>=N (e.g. CAP_TRAIN=240) gives one
# step at most N of them. For one lease, short steps first:
#
#     LEASE=1 BUDGET_S=540 CAP_TRAIN=240 benchmarks/gpu.sh OUT probe tests sdpa large throughput train decode serve export
#
# (decode, serve and export use train's best.pt, as far as it got; without one they are skipped.)
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,20p "$0" >&2; exit 2; }
cd "$(dirname "$0")/.."
OUT=$(mkdir -p "$1" && cd "$1" && pwd); shift
DEVICE=${DEVICE:-cuda}
PY=${PYTHON:-python3}
TFM=("$PY" -m transformer_cli)
WORK=${WORK:-/tmp/tfm-gpu}
mkdir -p "$WORK"
DECODED=()  # the profiles below may set it
if [ "${QUICK:-0}" = 1 ]; then
  STEPS=(--steps 3 --warmup 1); COMPILE=(false); EPOCHS=(--set train.epochs=1)
  LARGE=(30000 8000); LARGE_SETS=(--set=train.batch_tokens=2000); LARGE_TOKENS=(1000 3000)
  SENTENCES=(--sentences 64); CLIENTS=1,4
elif [ "${LEASE:-0}" = 1 ]; then
  STEPS=(--steps 40 --warmup 10); COMPILE=(false); EPOCHS=()
  LARGE=(100000 32000); LARGE_SETS=(); LARGE_TOKENS=()
  SENTENCES=(--sentences 500); CLIENTS=1,16,64; DECODED=(--sentences 300 --naive-sentences 50)
else
  STEPS=(--steps 50 --warmup 10); COMPILE=(false true); EPOCHS=()
  LARGE=(1000000 32000); LARGE_SETS=(); LARGE_TOKENS=(8000 50000)  # and the config's 25k
  SENTENCES=(--sentences 1000); CLIENTS=1,16,64
fi
CONFIGS=(seed base); [ "${LEASE:-0}" = 1 ] && CONFIGS=(base)
SETS=("train.device=$DEVICE" "train.out_dir=$WORK/runs" "data.dir=$WORK/data")
RUN=("${SETS[@]/#/--set=}")  # as options: --set=train.device=cuda ...
PRECISION=$([ "$DEVICE" = cuda ] && echo auto || echo fp32)  # decoding: the device's half on a GPU
BASE_MODEL="$WORK/runs/gpu-base/best.pt"
LARGE_CONFIG="$WORK/scale/scale${LARGE[0]}v${LARGE[1]}-transformer-base.yaml"  # written by step large

step_probe() {
  { nvidia-smi || true
    "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available() and torch.cuda.get_device_name())'
    "$PY" -c 'import ctranslate2 as c; print("ctranslate2", c.__version__, "cuda devices", c.get_cuda_device_count(), "compute types", sorted(c.get_supported_compute_types("cuda")))' 2>&1 || true
    ldconfig -p | grep -E "libcublas|libcudnn" || echo "no libcublas/libcudnn in ldconfig's cache"
    lscpu | grep -E "Model name|^CPU\(s\)"
  } > "$OUT/probe.txt" 2>&1
  cat "$OUT/probe.txt"
}

step_tests() {
  if [ "${LEASE:-0}" = 1 ]; then  # the rest runs in CI, on CPUs
    "$PY" -m pytest tests/gpu -m gpu -q -p no:cacheprovider 2>&1 | tee "$OUT/tests-gpu.log"
    return
  fi
  "$PY" -m pytest -m gpu -q -p no:cacheprovider 2>&1 | tee "$OUT/tests-gpu.log"
  "$PY" -m pytest -m "not gpu" -q -p no:cacheprovider 2>&1 | tee "$OUT/tests-all.log"
}

step_sdpa() {  # the H200's base.yaml epochs ran 0.2-0.5 s a step, faster as shapes recurred (results.md)
  "${TFM[@]}" preprocess -c base.yaml "${RUN[@]}" -q
  "$PY" benchmarks/train_throughput.py --config base.yaml "${STEPS[@]}" --precision auto --profile \
    --sdpa default cudnn,flash,efficient,math math "${RUN[@]}" > "$OUT/sdpa.json"
}

step_throughput() {
  for cfg in "${CONFIGS[@]}"; do
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
  for tokens in "${LARGE_TOKENS[@]}"; do
    "$PY" benchmarks/train_throughput.py --config "$LARGE_CONFIG" "${STEPS[@]}" --precision auto \
      --set="train.batch_tokens=$tokens" --set="train.device=$DEVICE" > "$OUT/large-$tokens.json"
  done
}

step_compile() {
  "$PY" benchmarks/train_throughput.py --config "$LARGE_CONFIG" "${STEPS[@]}" --precision auto \
    --compile true --set="train.device=$DEVICE" "${LARGE_SETS[@]}" > "$OUT/large-compiled.json"
}

step_train() {
  local timed=()  # wall time and peak RSS where GNU time is installed; the log's lines always
  [ -x /usr/bin/time ] && timed=(/usr/bin/time -v)
  for cfg in "${CONFIGS[@]}"; do
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

have_model() {
  [ -f "$BASE_MODEL" ] || { echo "no $BASE_MODEL (step train first): skipped" >&2; return 1; }
}

step_decode() {
  have_model || return 0
  "$PY" benchmarks/decode_speed.py --config base.yaml "${RUN[@]}" --checkpoint "$BASE_MODEL" --device "$DEVICE" \
    --precision "$PRECISION" --batch-size 1 128 "${DECODED[@]}" > "$OUT/decode.json"
}

step_serve() {
  have_model || return 0
  "$PY" benchmarks/serve_load.py -c base.yaml "${RUN[@]}" --checkpoint "$BASE_MODEL" \
    --device "$DEVICE" --precision "$PRECISION" "${SENTENCES[@]}" --clients "$CLIENTS" \
    > "$OUT/serve.json"
}

step_export() {
  have_model || return 0
  local quantizations=(none float16 int8_float16)
  [ "$DEVICE" = cuda ] || quantizations=(none int8)
  "$PY" benchmarks/export_speed.py --model "base=$BASE_MODEL" --device "$DEVICE" \
    --quantization "${quantizations[@]}" > "$OUT/export.json"
}

for step in "$@"; do
  declare -F "step_$step" > /dev/null || { echo "gpu.sh: unknown step $step" >&2; exit 2; }
done
for step in "$@"; do
  if [ -n "${GPU_SH_STEP:-}" ]; then "step_$step"; continue; fi  # a child of the budget's loop
  echo "== $step ($(date -u +%H:%M:%S))" >&2
  started=$SECONDS
  if [ -z "${BUDGET_S:-}" ]; then
    "step_$step"
  else  # each step in a child of its own, stopped at what is left of the budget; the next goes on
    left=$((BUDGET_S - SECONDS))
    cap_name="CAP_${step^^}"
    [ -n "${!cap_name:-}" ] && [ "${!cap_name}" -lt "$left" ] && left=${!cap_name}
    if [ "$left" -lt 30 ]; then echo "== $step skipped: ${left} s of the budget left" >&2; continue; fi
    GPU_SH_STEP=1 timeout "$left" bash "$0" "$OUT" "$step" || echo "== $step failed (exit $?)" >&2
  fi
  echo "== $step done in $((SECONDS - started)) s" >&2
done

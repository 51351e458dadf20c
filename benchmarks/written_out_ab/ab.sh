#!/usr/bin/env bash
# Issue 67's A/B (docs/results.md, "The written-out mixture against the one pipeline"), made for
# one lease of a GPU: the teacher (base.yaml) and the reverse model side by side, bt.yaml's
# synthetic text, then four trainings at once: bt.yaml's parts pipeline (ab-one.yaml) and its mix
# written out as one plain-text corpus (ab-out.yaml, writtenout.py), seeds 1234 and 2 each, the
# same steps; each scored on val, greedy and beam 5. Laid out as it ran: this folder's files in
# a folder that also holds src/ (`git archive <commit> | tar x -C src`: the code under test, so
# that nothing edited meanwhile travels) and data/multi30k, data/multi30k-task2 (copies):
#
#     PHASE: all (default), chain (up to the prepared folders), train (chain first if absent)
#     DEADLINE_S=N   seconds from the start by which it is done: the steps follow (RATE steps/s)
#     QUICK=1 DEV=cpu PY=.venv/bin/python bash ab.sh    # a smoke test of the plumbing on a CPU
set -u
cd "$(dirname "$0")/src"  # a copy of the commit under test (git archive HEAD)
OUT=${OUT:-/tmp/ab-out}; L=${L:-/tmp/ab-logs}; mkdir -p "$OUT" "$L"
export PYTHONPATH=$PWD:$(dirname "$PWD") PYTHONUNBUFFERED=1 TFM_DATA_SOURCE=$(dirname "$PWD")/data/multi30k
PY=${PY:-python3}; TFM=("$PY" -m transformer_cli)
DEV=${DEV:-cuda}; DEADLINE_S=${DEADLINE_S:-560}; RATE=${RATE:-20}  # 4 runs at once: ~20 steps/s (H200)
log() { echo "$(date -u +%T) t=$SECONDS $*" | tee -a "$L/times.txt"; tar czf "$OUT/ab.tgz" -C "$L" . 2>/dev/null; }
Q=(); SQ=(); [ "${QUICK:-0}" = 1 ] && { Q=(--set train.max_steps=4 --set data.limit_train=2000); SQ=(--set synthetic.back_translation.max_lines=300 --set synthetic.forward_translation.max_lines=300); }
D=(--set "train.device=$DEV")
PHASE=${1:-all}  # chain: up to the prepared folders; train: the four trainings and scores (chain first if absent)
log "start $PHASE"; { nvidia-smi -L; "$PY" -c 'import torch, transformer_cli;print(torch.__version__, torch.cuda.is_available(), transformer_cli.__file__)'; lscpu | grep "Model name"; } >> "$L/times.txt" 2>&1
chain() {
[ "$DEV" = cuda ] && ( "$PY" -m pytest tests/gpu -m gpu -q -p no:cacheprovider > "$L/tests-gpu.log" 2>&1; log "gpu tests exit $?" ) &
"${TFM[@]}" train -c base.yaml "${D[@]}" "${Q[@]}" > "$L/teacher.log" 2>&1 & a=$!
"${TFM[@]}" train -c ../ab-one.yaml --reverse "${D[@]}" "${Q[@]}" > "$L/reverse.log" 2>&1 & b=$!
wait $a; log "teacher exit $?"; wait $b; log "reverse exit $?"
"${TFM[@]}" synthesize -c ../ab-one.yaml --nproc-per-node 6 "${D[@]}" "${SQ[@]}" > "$L/synth.log" 2>&1; log "synth exit $?"
"$PY" ../writtenout.py data ab-one ../data/multi30k out-corpus > "$L/writtenout.log" 2>&1; log "written out exit $?"
for v in one out; do "${TFM[@]}" preprocess -c ../ab-$v.yaml "${D[@]}" "${SQ[@]}" > "$L/pre-$v.log" 2>&1 & done; wait; log preprocessed
}
[ "$PHASE" = train ] && [ -f data/ab-out/manifest.json ] && [ -f data/ab-one/manifest.json ] || chain
[ "$PHASE" = chain ] && exit 0
left=$((DEADLINE_S - SECONDS - 70)); steps=$((left * RATE)); [ $steps -gt 7860 ] && steps=7860
[ "${QUICK:-0}" = 1 ] && steps=30
log "training $steps steps (left $left s)"
pids=()
for v in one out; do for s in 1234 2; do
  "${TFM[@]}" train -c ../ab-$v.yaml "${D[@]}" "${SQ[@]}" --set train.seed=$s --set train.out_dir=checkpoints/s$s --set train.max_steps=$steps \
    --set train.snapshot_every_steps=$((steps * 520 / 7860 > 1 ? steps * 520 / 7860 : 1)) > "$L/train-$v-s$s.log" 2>&1 & pids+=($!)
done; done
( sleep $((DEADLINE_S - SECONDS - 45)); kill -TERM "${pids[@]}" 2>/dev/null && log "trainings stopped at the deadline" ) & guard=$!
for p in "${pids[@]}"; do wait $p; log "train $p exit $?"; done; kill $guard 2>/dev/null
for v in one out; do for s in 1234 2; do for beam in 1 5; do
  "${TFM[@]}" evaluate -c ../ab-$v.yaml "${SQ[@]}" --set train.out_dir=checkpoints/s$s --split val --beam-size $beam --device "$DEV" --json > "$L/val-$v-s$s-b$beam.json" 2>>"$L/eval.log" &
done; done; done; wait
for f in checkpoints/s*/ab-*/metrics.jsonl; do cp "$f" "$L/metrics-$(echo "$f" | tr / _)"; done
log evaluated
for f in "$L"/val-*.json; do echo "$f $(head -c 300 "$f")"; done

#!/usr/bin/env bash
# Replay nights on Multi30k (issue 65; docs/results.md, "Replay nights: a first pilot"):
#
#     benchmarks/replay_nights.sh WORK [NIGHTS] [--set KEY=VALUE ...]
#
# base.yaml from scratch on the first 70% of the training pairs (data.limit_train=20300), then
# NIGHTS nights (30) each adding the next 290 pairs (1%) with `--init-from published` and
# train.retrain.night=replay, every later --set given to each night too (e.g. the recipe:
# --set train.retrain.replay_epochs=2). Each night's /usr/bin/time -v output in WORK/nightNN.log,
# the published model's greedy validation BLEU in WORK/valNN.json; after the last night, val and
# test2016 at beam 5 in WORK/final-{val,test}.json. Needs TFM_DATA_SOURCE (Multi30k). Re-running
# goes on at the first night without its WORK/valNN.json (a night cut short resumes; one done is
# skipped: run again, it would train the moved-on published model on that night's smaller data).
set -euo pipefail
[ $# -ge 1 ] || { sed -n 2,13p "$0" >&2; exit 2; }
WORK=$(mkdir -p "$1" && cd "$1" && pwd); shift
NIGHTS=${1:-30}; [ $# -ge 1 ] && shift
cd "$(dirname "$0")/.."
TFM=${TFM:-.venv/bin/tfm}
RUN=(-c base.yaml --set name=r70 --set "train.out_dir=$WORK/checkpoints" --set "data.dir=$WORK/data"
  --set train.threads=2 --set train.retrain.night=replay --set train.retrain.max_continued_runs=null
  --set train.retrain.max_growth=null --set train.continued.schedule_options.warmup_steps=20 "$@")
for i in $(seq 0 "$NIGHTS"); do
  n=$((20300 + 290 * i)); tag=$(printf %02d "$i")
  [ -s "$WORK/val$tag.json" ] && continue  # a night done (its evaluation written): the published model has moved on
  /usr/bin/time -v "$TFM" train "${RUN[@]}" --set "data.limit_train=$n" --init-from published --quiet > "$WORK/night$tag.log" 2>&1
  "$TFM" evaluate "${RUN[@]}" --set "data.limit_train=$n" --split val --beam-size 1 --json > "$WORK/val$tag.json"
done
for split in val test; do
  "$TFM" evaluate "${RUN[@]}" --set "data.limit_train=$((20300 + 290 * NIGHTS))" --split "$split" --beam-size 5 --json > "$WORK/final-$split.json"
done

#!/usr/bin/env bash
# After `benches/gpu/run.sh e2e` on a GPU machine (the demo volume and its 15 hard links in
# ~/.cache/damacy/demo): the 16-array sharded zstd (Z) and uncompressed (R) sets at 128^3 float32
# over a grid of workers (= lanes) and device budgets, to choose the default budget from data:
# one JSON line per bench appended to $OUT/explore.jsonl, GB/s and stage times printed.
#   OUT=/tmp/out [EXPLORE_WORKERS="2 4"] [EXPLORE_MIB="1024 2048 4096 8192"] [EXPLORE_SETS="Z R"] \
#     bash benches/gpu/explore_lanes.sh
# Each bench is capped at 40 s; the default grid is 16 benches (~4 minutes at most).
set -u
OUT="${OUT:-/tmp}"
B="${DAMACY_BIN:-/tmp/damacy-gpu-bin/damacy}"; S=$HOME/.cache/damacy/demo/full/demo.zarr
R="$S/raw"; Z="$S/sharded_zstd"; for i in $(seq 1 15); do R="$R $S/raw_$i"; Z="$Z $S/zstd_$i"; done
F="--crop 128,128,128 --batch 128 --dtype float32 --batches 10 --warmup 2 --executor gpu"
for set in ${EXPLORE_SETS:-Z R}; do
  for w in ${EXPLORE_WORKERS:-2 4}; do
    for mib in ${EXPLORE_MIB:-1024 2048 4096 8192}; do
      extra="--workers $w --lanes $w --device-buffer-mib $mib --host-buffer-mib $((w * 512))"
      eval "arrs=\$$set"; echo "== $set $extra"
      # shellcheck disable=SC2086
      timeout 40 "$B" bench --json $arrs $F $extra | tee -a "$OUT/explore.jsonl" \
        | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["pipeline"]["gb_per_s"], j["stages_s"])'
    done
  done
done

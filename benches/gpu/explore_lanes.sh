#!/usr/bin/env bash
# After `benches/gpu/run.sh e2e` on a GPU machine (the demo volume and its 15 hard links in
# ~/.cache/damacy/demo): the 16-array uncompressed (R) and sharded zstd (Z) sets at 128^3 float32
# with more lanes and larger device/pinned budgets than the defaults, one JSON line per bench
# appended to $OUT/explore.jsonl, GB/s and stage times printed.
#   OUT=/tmp/out bash benches/gpu/explore_lanes.sh
set -u
OUT="${OUT:-/tmp}"
B=/tmp/damacy-gpu-bin/damacy; S=$HOME/.cache/damacy/demo/full/demo.zarr
R="$S/raw"; Z="$S/sharded_zstd"; for i in $(seq 1 15); do R="$R $S/raw_$i"; Z="$Z $S/zstd_$i"; done
F="--crop 128,128,128 --batch 128 --dtype float32 --batches 10 --warmup 2 --executor gpu"
for set in R Z; do for extra in "--workers 4 --lanes 4 --device-buffer-mib 8192 --host-buffer-mib 2048" "--workers 8 --lanes 8 --device-buffer-mib 16384 --host-buffer-mib 4096"; do
  eval "arrs=\$$set"; echo "== $set $extra"; timeout 40 $B bench --json $arrs $F $extra | tee -a $OUT/explore.jsonl | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["pipeline"]["gb_per_s"], j["stages_s"])'; done; done

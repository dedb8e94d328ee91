#!/usr/bin/env bash
# The CPU route before and after a change, in one run: `damacy bench --executor cpu
# --compare-engine` (the Pipeline and read_batch alone) built at each revision and run in
# alternating rounds on the same crops (random unaligned 64^3 crops, batches of 32, 2 threads,
# 2 workers: make bench's pipeline rows), medians per revision and their ratios printed as a
# markdown table.
#
#   bash benches/pipeline/before_after.sh REV_BEFORE [REV_AFTER=HEAD] [ROUNDS=5] [DATA_DIR]
#
# Each revision is built in a detached worktree under $DAMACY_AB_DIR (default
# /tmp/damacy-before-after) with a target folder of its own; the arrays are those of
# benches/read/make_data.py (written if missing).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
before="${1:?usage: before_after.sh REV_BEFORE [REV_AFTER] [ROUNDS] [DATA_DIR]}"
after="${2:-HEAD}"
rounds="${3:-5}"
data="${4:-/tmp/damacy-bench-data}"
work="${DAMACY_AB_DIR:-/tmp/damacy-before-after}"
mkdir -p "$work"
if [ ! -f "$data/MANIFEST.json" ]; then
  "$root/.venv/bin/python" "$root/benches/read/make_data.py" "$data"
fi

build() {  # rev -> path of its damacy binary
  local rev sha tree
  rev=$1
  sha=$(git -C "$root" rev-parse --short "$rev")
  tree="$work/$sha"
  if [ ! -d "$tree" ]; then
    git -C "$root" worktree add -q --detach "$tree" "$sha"
  fi
  [ -e "$tree/.nvrtc" ] || ln -s "$root/.nvrtc" "$tree/.nvrtc" 2>/dev/null || true
  (cd "$tree" && CARGO_TARGET_DIR="$tree/target" cargo build --release -q -p damacy-cli >&2)
  echo "$tree/target/release/damacy"
}

bin_before=$(build "$before")
bin_after=$(build "$after")
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
for r in $(seq 1 "$rounds"); do
  for side in before after; do
    bin=$bin_before
    [ "$side" = after ] && bin=$bin_after
    for array in sharded_zstd blosc_lz4; do
      echo "== round $r, $side, $array" >&2
      "$bin" bench "$data#$array" --executor cpu --threads 2 --workers 2 --crop 64,64,64 --batch 32 \
        --batches 20 --warmup 2 --rounds 1 --compare-engine --json \
        | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sys.argv[1], sys.argv[2], d["pipeline"]["crops_per_s"], d["engine"]["crops_per_s"])' \
          "$side" "$array" >>"$out"
    done
  done
done
python3 - "$out" "$before" "$after" "$rounds" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
before, after, rounds = sys.argv[2], sys.argv[3], sys.argv[4]
print(f"CPU route, {before} (before) vs {after} (after): median of {rounds} alternating rounds, crops/s")
print()
print("| array | what | before | after | after ÷ before | rounds before | rounds after |")
print("|---|---|---:|---:|---:|---|---|")
for array in ("sharded_zstd", "blosc_lz4"):
    for k, what in ((2, "Pipeline"), (3, "read_batch alone")):
        b = [float(r[k]) for r in rows if r[0] == "before" and r[1] == array]
        a = [float(r[k]) for r in rows if r[0] == "after" and r[1] == array]
        mb, ma = statistics.median(b), statistics.median(a)
        print(f"| {array} | {what} | {mb:.1f} | {ma:.1f} | {ma / mb:.3f} | {[round(x) for x in b]} | {[round(x) for x in a]} |")
PY

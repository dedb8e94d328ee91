#!/usr/bin/env bash
# The Pipeline against the read engine alone on the same crops, in one run (issue 10): does the
# Pipeline (feeder, workers, slot pool, ordering) cost throughput? Random unaligned 64^3 crops in
# batches of 32 from a damacy-sampler plan, 2 reader threads, the CPU executor, on the arrays of
# benches/read/make_data.py (written if missing). Rounds alternate engine and pipeline, so a
# load that comes and goes hits both alike; medians and their ratio go to
# benches/results/pipeline.md.
#
#   bash benches/pipeline/run.sh [DATA_DIR] [ROUNDS] [BATCHES]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
data="${1:-/tmp/damacy-bench-data}"
rounds="${2:-5}"
batches="${3:-20}"
target="${CARGO_TARGET_DIR:-$root/target}"
if [ ! -f "$data/MANIFEST.json" ]; then
  "$root/.venv/bin/python" benches/read/make_data.py "$data"
fi
cargo build --release -q -p damacy-cli --features emulate
out="$root/benches/results/pipeline.md"
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
for array in sharded_zstd blosc_lz4; do
  echo "== $array" >&2
  "$target/release/damacy" bench "$data#$array" --executor cpu --threads 2 --workers 2 \
    --crop 64,64,64 --batch 32 --batches "$batches" --warmup 2 --rounds "$rounds" --compare-engine --json >>"$tmp"
done
python3 - "$tmp" "$out" "$load_before" "$rounds" "$batches" "$data" <<'PY'
import json, subprocess, sys, datetime, os
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
out, load_before, rounds, batches, data = sys.argv[2:7]
def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
    except Exception:
        return "unknown"
commit = sh("git rev-parse --short HEAD") + ("" if sh("git status --porcelain --untracked-files=no") == "" else " (with uncommitted changes)")
cpu = sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip()
lines = [
    "# Pipeline vs the read engine alone",
    "",
    f"- date: {datetime.date.today().isoformat()}",
    f"- commit: {commit}",
    f"- machine: {os.cpu_count()} cores, {cpu}; load average before: {load_before}, after: {open('/proc/loadavg').read().split()[:3]}",
    f"- command: `bash benches/pipeline/run.sh {data} {rounds} {batches}`",
    f"- what: random unaligned 64³ crops (a damacy-sampler plan, seed 0) in batches of 32 of the 512³ uint16 arrays of `benches/read/make_data.py`; CPU executor, 2 I/O + 2 decode threads for both; the Pipeline with 2 workers (`damacy bench --compare-engine`); 2 warm-up batches, then {batches} timed batches per round, {rounds} rounds alternating engine and pipeline; medians.",
    "- engine alone: `Reader::read_batch` in a loop, one batch at a time, on the same crops; pipeline: push the warm-up samples and pop their batches, then start the clock, push the timed samples and pop their batches (so the read-ahead cannot do timed work during the warm-up).",
    "- note: on a machine shared with other jobs (see the load averages) absolute crops/s vary from round to round; the ratio of the alternating rounds is the measure.",
    "",
    "| array | engine alone, crops/s | Pipeline, crops/s | Pipeline / engine | rounds (engine) | rounds (pipeline) |",
    "|---|---:|---:|---:|---|---|",
]
for r in rows:
    name = r["uri"].split("#")[-1]
    lines.append(f"| {name} | {r['engine']['crops_per_s']:.1f} | {r['pipeline']['crops_per_s']:.1f} | {r['ratio']:.3f} | {[round(x) for x in r['engine']['rounds']]} | {[round(x) for x in r['pipeline']['rounds']]} |")
lines += ["", "Pipeline stage times of the last round (seconds, summed over threads for io/decode/assemble):", "", "| array | plan | read | io | decode | assemble | pop wait |", "|---|---:|---:|---:|---:|---:|---:|"]
for r in rows:
    s = r["stages_s"]
    lines.append(f"| {r['uri'].split('#')[-1]} | {s['plan']:.2f} | {s['read']:.2f} | {s['io']:.2f} | {s['decode']:.2f} | {s['assemble']:.2f} | {s['pop_wait']:.2f} |")
open(out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY

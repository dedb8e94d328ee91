#!/usr/bin/env bash
# `make bench`: run every benchmark and write benches/results/<name>.md, each with the date,
# commit, machine and the command that produced it. Comparison scripts write their own tables.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
results="$root/benches/results"
mkdir -p "$results"

header() {  # name command
  cat <<HDR
# $1

- date: $(date -u +%Y-%m-%d)
- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo " (with uncommitted changes)")
- machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(free -g | awk '/Mem:/ {print $2}') GiB; load average before: $(cut -d' ' -f1-3 /proc/loadavg)
- command: \`$2\`

\`\`\`
HDR
}

run() {  # name command...
  local name=$1; shift
  local out="$results/$name.md"
  echo "== $name: $*" >&2
  # Build lines, cargo's lock waits and criterion's progress lines are noise in a results file.
  { header "$name" "$*"; "$@" 2>&1 | grep -vE '^ *(Compiling|Benchmarking|Finished|Running|Blocking) ' || true; echo '```'; } >"$out.tmp"
  mv "$out.tmp" "$out"
  echo "   -> $out" >&2
}

run sampler-plan cargo bench -p damacy-sampler --bench plan
run sampler-locality cargo run --release -q -p damacy-sampler --example locality
# Kernel throughput needs a GPU; without one it says so and times the emulator (labelled).
run kernels cargo bench -p damacy-kernels --features emulate --bench kernels
# The emulator's memory-access cost model: sectors, bank conflicts, warp-requests per byte and a
# modelled H100 time per kernel (writes kernel_cost.md; model, not GPU time).
bash crates/damacy-kernels/scripts/cost.sh --report >/dev/null
# zstd on the kernel emulator and libzstd (what zarrs' zstd codec calls) on the same frames;
# emulator time is not GPU time.
run zstd cargo bench -p damacy-kernels --features emulate --bench zstd
# CPU read path against zarrs, tensorstore and zarr-python + zarrs-python (writes cpu_read.md).
"$root/.venv/bin/python" benches/read/compare.py
# The Pipeline against the read engine alone on the same crops (writes pipeline.md).
bash benches/pipeline/run.sh
# The zarrs extension against zarrs' own reads, 512³ (the explained table is zarrs_ext.md).
run zarrs_ext_latest cargo bench -p damacy --bench zarrs_ext -- --size 512 --reps 9

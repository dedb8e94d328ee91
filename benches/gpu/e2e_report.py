"""The e2e step's report: reads the `damacy bench --json` objects that benches/gpu/run.sh wrote
into one folder and writes a markdown table (crops/s, GB/s, GPU ÷ CPU, worker scaling, the
engine alone ÷ the Pipeline, cold start) with the date, build and device.

    python3 benches/gpu/e2e_report.py DIR OUT.md     # the report
    python3 benches/gpu/e2e_report.py --line FILE    # one bench's summary line
"""

import json
import os
import subprocess
import sys
from datetime import datetime, timezone

# name → what the row is (in this order).
ROWS = [
    ("cold-gpu", "cold start: 1 array, 64³ u16, batch 8, empty kernel cache"),
    ("zstd16-f32-gpu-w1", "16 arrays sharded zstd, 128³ → f32, batch 128, GPU, 1 worker"),
    ("zstd16-f32-gpu-w2", "same, GPU, 2 workers"),
    ("zstd16-f32-gpu-w4", "same, GPU, 4 workers"),
    ("zstd16-f32-cpu", "same, CPU route"),
    ("raw16-f32-gpu-w4", "16 arrays uncompressed (bytes only), 128³ → f32, GPU, 4 workers"),
    ("raw16-f32-cpu", "same, CPU route"),
    ("lz416-f32-gpu-w4", "16 arrays blosc-lz4, 128³ → f32, GPU, 4 workers"),
    ("lz416-f32-cpu", "same, CPU route"),
    ("zstd16-64-u16-gpu-w4", "16 arrays sharded zstd, 64³ u16, batch 32, GPU, 4 workers"),
    ("zstd16-64-u16-cpu", "same, CPU route"),
    ("zstd1-f32-gpu-engine", "1 array sharded zstd, 128³ → f32, GPU, Pipeline vs read_batch"),
    ("lz41-f32-gpu-engine", "1 array blosc-lz4, 128³ → f32, GPU, Pipeline vs read_batch"),
]


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def line(j, name):
    p = j["pipeline"]
    s = f"  {name}: {p['crops_per_s']:.1f} crops/s, {p['gb_per_s']:.2f} GB/s"
    if j.get("engine"):
        s += f", engine alone {j['engine']['crops_per_s']:.1f} crops/s (pipeline ÷ engine {j.get('ratio') or 0:.2f})"
    if j.get("cold_start"):
        c = j["cold_start"]
        s += f", first batch {c['first_batch_s']:.2f} s after process start (kernels: {c['kernels']})"
    return s


def ratio(a, b):
    return f"{a / b:.2f}×" if a and b else "–"


def report(folder, out):
    runs = {name: load(os.path.join(folder, name + ".json")) for name, _ in ROWS}
    info = load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", os.environ.get("DAMACY_GPU_BUNDLE", ".gpu-bundle"), "BUILD_INFO.json")) or {}
    device = next((j["executor"] for j in runs.values() if j and "CUDA" in j.get("executor", "")), "no GPU run")
    try:
        cpus = os.cpu_count()
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        smi = ""
    gbs = {k: (j["pipeline"]["gb_per_s"] if j else None) for k, j in runs.items()}
    cps = {k: (j["pipeline"]["crops_per_s"] if j else None) for k, j in runs.items()}
    lines = [
        f"# damacy end to end on a GPU — {datetime.now(timezone.utc).date()}",
        "",
        f"Build {info.get('commit', '?')}{' (dirty)' if info.get('dirty') else ''} ({info.get('rustc', '?')}), "
        f"{device}; {smi or 'nvidia-smi unavailable'}; {cpus} CPUs. `benches/gpu/run.sh e2e`: the demo's full dataset "
        "(512³ uint16; sharded zstd, inner chunks 32×64×64 in 256×256×512 shards; blosc-lz4 64³ chunks; "
        "an uncompressed copy written by zarr-python), 16 arrays = one array and 15 hard links, page cache warm, "
        "`damacy bench` with its default threads (one per CPU), 10 timed batches after 2 warm-up (64³: 20).",
        "",
        "| run | crops/s | GB/s | note |",
        "|---|---:|---:|---|",
    ]
    for name, what in ROWS:
        j = runs[name]
        if not j:
            err = os.path.join(folder, name + ".err")
            why = open(err).read().strip().splitlines()[-1:] if os.path.exists(err) else ["not run"]
            lines.append(f"| {what} | – | – | failed or not run: {' '.join(why)[:160]} |")
            continue
        p = j["pipeline"]
        note = []
        if j.get("engine"):
            e = j["engine"]
            # `ratio` in the JSON is pipeline ÷ engine; the goal reads engine ÷ pipeline (≥ 0.9).
            note.append(f"read_batch alone {e['crops_per_s']:.1f} crops/s = "
                        f"{e['crops_per_s'] / p['crops_per_s']:.2f}× the Pipeline")
            st = e.get("stages_s")
            if st and e.get("seconds"):
                # Where read_batch's time went (summed over threads and lanes, last round).
                down = e.get("bytes_downloaded") or 0
                gbps = f", {down / 1e9 / st['download']:.1f} GB/s" if st.get("download") else ""
                note.append(f"read_batch's {e['seconds']:.2f} s: io {st['io']:.2f} s, parse {st['parse']:.2f} s, "
                            f"decode {st['decode']:.2f} s, device-to-host {st['download']:.2f} s ({down / 1e9:.2f} GB{gbps})")
        if j.get("cold_start"):
            c = j["cold_start"]
            note.append(f"first batch {c['first_batch_s']:.2f} s after process start, kernels: {c['kernels']}")
        lines.append(f"| {what} | {p['crops_per_s']:.1f} | {p['gb_per_s']:.2f} | {'; '.join(note)} |")
    lines += [
        "",
        "| ratio | value | goal |",
        "|---|---:|---:|",
        f"| 16-array zstd f32: GPU (best of workers) ÷ CPU | {ratio(max([v for k, v in gbs.items() if k.startswith('zstd16-f32-gpu') and v] or [0]), gbs['zstd16-f32-cpu'])} | ≥ 2× and ≥ 9.5 GB/s |",
        f"| 16-array uncompressed f32: GPU GB/s | {gbs['raw16-f32-gpu-w4'] or 0:.2f} | ≥ 30 GB/s |",
        f"| workers 2 ÷ 1 (16-array zstd, GPU) | {ratio(cps['zstd16-f32-gpu-w2'], cps['zstd16-f32-gpu-w1'])} | ≥ 1.6× |",
        f"| workers 4 ÷ 1 (16-array zstd, GPU) | {ratio(cps['zstd16-f32-gpu-w4'], cps['zstd16-f32-gpu-w1'])} | |",
        f"| 16-array blosc-lz4 f32: GPU ÷ CPU | {ratio(gbs['lz416-f32-gpu-w4'], gbs['lz416-f32-cpu'])} | |",
        f"| 16-array zstd 64³ u16: GPU ÷ CPU | {ratio(gbs['zstd16-64-u16-gpu-w4'], gbs['zstd16-64-u16-cpu'])} | |",
        "",
    ]
    with open(out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


def main():
    if sys.argv[1] == "--line":
        j = load(sys.argv[2])
        if j:
            print(line(j, os.path.basename(sys.argv[2]).removesuffix(".json")))
        return 0
    report(sys.argv[1], sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())

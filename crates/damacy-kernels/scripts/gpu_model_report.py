#!/usr/bin/env python3
"""The GPU performance model's calibration report (issue 30): benches/results/gpu-model.md.

Joins a GPU run's kernel_bench JSON (measured) with the model's kernel_bench JSON (the same
cases run by the emulator with --model h200), row by row on the case name, and the Nsight
Compute durations of that GPU run with the model's predictions at ncu's locked clock.

usage: gpu_model_report.py --measured kernel_bench.json --model model.json [--ncu-kernels F]
                           [--ncu-zstd F] [--out benches/results/gpu-model.md] [--commit SHA]
"""
from __future__ import annotations

import argparse
import datetime
import json
import re
import sys

DECODE = {"lz4", "zstd", "deflate"}
MEMORY = {"copy", "unshuffle", "bitunshuffle", "assemble", "assemble-cast"}


def ncu_durations(path: str) -> list[tuple[str, str, float]]:
    """(kernel, grid x block, duration µs) of every profiled launch, in order."""
    out, cur = [], None
    for line in open(path, errors="replace"):
        m = re.match(r"\s+(dmc_\w+) (\([^)]*\)x\([^)]*\))", line)
        if m:
            cur = (m.group(1), m.group(2))
            continue
        m = re.match(r"\s+Duration\s+(us|ms|ns)\s+([\d.,]+)", line)
        if m and cur:
            v = float(m.group(2).replace(",", ""))
            v *= {"us": 1.0, "ms": 1e3, "ns": 1e-3}[m.group(1)]
            out.append((cur[0], cur[1], v))
            cur = None
    return out


def fmt(x: float | None, d: int = 1) -> str:
    return "–" if x is None else f"{x:.{d}f}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--measured", required=True)
    ap.add_argument("--model", required=True, action="append", help="the model's kernel_bench JSON (repeatable)")
    ap.add_argument("--ncu-kernels")
    ap.add_argument("--ncu-zstd")
    ap.add_argument("--out", default="benches/results/gpu-model.md")
    ap.add_argument("--commit", default="?")
    ap.add_argument("--model-mib", default="?")
    ap.add_argument("--command", default="bash crates/damacy-kernels/scripts/gpu_model.sh --report")
    a = ap.parse_args()
    meas = json.load(open(a.measured))
    models = [json.load(open(m)) for m in a.model]
    model = models[0]
    pred = {r["name"]: r for m in models for r in m["rows"] if "predicted_kernel_s" in r}
    rows = []
    for r in meas["rows"]:
        kind = r.get("kind", "")
        if kind not in DECODE and kind not in MEMORY:
            continue
        p = pred.get(r["name"])
        m_us = r.get("kernel_s", 0) * 1e6
        p_us = p["predicted_kernel_s"] * 1e6 if p else None
        rows.append((r, p, m_us, p_us))
    lines = []
    w = lines.append
    w("# GPU performance model — predicted vs measured kernel times (issue 30)")
    w("")
    w(f"- date: {datetime.date.today().isoformat()}")
    w(f"- commit: {a.commit}")
    w(f"- measured: `{a.measured}` ({meas.get('device', '?')}, batch {meas.get('batch_bytes', 0) >> 20} MiB per case, "
      f"median of {meas.get('reps', '?')} runs, `WaveStats::kernel_time`)")
    w(f"- predicted: `kernel_bench --device emulated --model h200` on the same cases (same generators, seeds, "
      f"batch and chunk sizes), each case's verification run recorded; `--model-mib {a.model_mib}`: every k-th "
      f"chunk (crop) run, each recorded launch standing for k (column `sample`)")
    w(f"- command: `{a.command}`")
    w("")
    w("Ratio = predicted / measured; within ±30 % means 0.70 ≤ ratio ≤ 1.30. Decode rows are one `dmc_*_decode` "
      "launch; copy rows one `dmc_memcpy`; unshuffle rows the copy plus `dmc_unshuffle` (the wave's two launches); "
      "assemble rows one `dmc_assemble`.")
    w("")
    w("| case | kind | chunks | sample | measured µs | predicted µs | ratio | ±30 % | bound (model) | longest warp µs | occupancy | waves |")
    w("|---|---|---:|---:|---:|---:|---:|:---:|---|---:|---|---:|")
    worst = None
    outside = []
    for r, p, m_us, p_us in rows:
        ratio = p_us / m_us if p_us and m_us else None
        ok = ratio is not None and 0.7 <= ratio <= 1.3
        if ratio is not None:
            err = max(ratio, 1 / ratio)
            if worst is None or err > worst[0]:
                worst = (err, r["name"], ratio)
            if not ok:
                outside.append((r["name"], ratio))
        launches = p["model"] if p else []
        main = max(launches, key=lambda l: l["total_us"]) if launches else {}
        smp = p.get("model_sample", {}) if p else {}
        smp = f"1/{smp['every']}" if smp else "–"
        w(f"| {r['name']} | {r.get('kind')} | {r.get('n_chunks', r.get('n_source_chunks', ''))} | {smp} | {fmt(m_us)} | {fmt(p_us)} | "
          f"{fmt(ratio, 2)} | {'yes' if ok else '**no**' if ratio is not None else '–'} | "
          f"{'; '.join(l['kernel'].removeprefix('dmc_') + ' ' + l['bound'] for l in launches) or '–'} | "
          f"{fmt(main.get('longest_warp_us'))} | "
          f"{(str(main.get('blocks_per_sm')) + ' blocks/SM (' + str(main.get('occupancy_limiter')) + ')') if main else '–'} | "
          f"{fmt(main.get('waves'), 2) if main else '–'} |")
    w("")
    if worst:
        w(f"**Worst row: {worst[1]}**, predicted/measured = {worst[2]:.2f}.")
    w("")
    if outside:
        w(f"Rows outside ±30 % ({len(outside)} of {sum(1 for x in rows if x[3] is not None)}): "
          + ", ".join(f"{n} ({q:.2f})" for n, q in outside) + ".")
    else:
        w("Every row is within ±30 %.")
    missing = [r["name"] for r, p, _, _ in rows if p is None]
    if missing:
        w("")
        w("No prediction (case not in the model run): " + ", ".join(missing) + ".")
    # ncu
    ncu = []
    if a.ncu_kernels:
        ncu += ncu_durations(a.ncu_kernels)
    if a.ncu_zstd:
        ncu += ncu_durations(a.ncu_zstd)
    if ncu:
        w("")
        w("## Nsight Compute durations (SM clock locked at 1.50 GHz)")
        w("")
        w("ncu ran `kernel_bench --batch-mib 32 --sizes 64K --reps 1 --warmup 0`; each case's kernels were "
          "profiled for the verification run and the timed run (both listed). The prediction is the same case's "
          "at ncu's 1.50 GHz clock (`predicted_ncu_s`).")
        w("")
        w("| kernel | launch | ncu µs | case | predicted µs at 1.5 GHz | ratio |")
        w("|---|---|---:|---|---:|---:|")
        # the cases in the order ncu's kernel_bench ran them
        order = {
            "dmc_lz4_decode": ["lz4-u16-labels-64KiB"] * 2 + ["lz4-u16-smooth-64KiB"] * 2 + ["lz4-u16-noisy-64KiB"] * 2,
            "dmc_zstd_decode": ["zstd-l3-u16-labels-64KiB"] * 2,
        }
        seen: dict[str, int] = {}
        for k, launch, d in ncu:
            name = None
            if k == "dmc_assemble":
                # 64 KiB crops: (1,2048) u16 (verify, timed), (1,2048) 1-element jobs, (4,2048) f32 cast
                if launch.startswith("(4,"):
                    name = "assemble-cast-64KiB"
                elif d > 20:
                    name = "assemble-64KiB"
            else:
                i = seen.get(k, 0)
                seen[k] = i + 1
                names = order.get(k, [])
                name = names[i] if i < len(names) else None
            p = pred.get(name) if name else None
            pn = p.get("predicted_ncu_s") if p else None
            pn_us = pn * 1e6 if pn else None
            ratio = pn_us / d if pn_us else None
            w(f"| {k} | {launch} | {d:.1f} | {name or '(1-element jobs: not a case)'} | {fmt(pn_us)} | {fmt(ratio, 2)} |")
    # what limits each kernel
    per_kernel: dict[str, list] = {}
    for r, p, m_us, p_us in rows:
        for l in (p["model"] if p else []):
            per_kernel.setdefault(l["kernel"], []).append((r["name"], l, m_us))
    if per_kernel:
        w("")
        w("## What limits each kernel (the model's terms, per row)")
        w("")
        w("Per launch: the share of the predicted time in the latency part (the last SM's end: blocks of "
          "their longest warp's serial path, list-scheduled by occupancy), the memory part (the launch's bytes "
          "at the copy bandwidth) and the launch cost; the longest warp over the mean warp's instructions "
          "(imbalance: the tail a batch waits for); resident warps per SM the occupancy allows and how many "
          "warps the launch has per SM (parallelism); waves.")
        w("")
        w("| kernel | case | predicted µs | latency | memory | launch | longest ÷ mean warp | warps/SM allowed | warps/SM launched | waves | bound |")
        w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for k, items in sorted(per_kernel.items()):
            for name, l, _ in items:
                t = l["total_us"] or 1.0
                imb = l["max_warp_insts"] / l["mean_warp_insts"] if l["mean_warp_insts"] else 0.0
                w(f"| {k} | {name} | {t:.1f} | {100 * l['latency_us'] / t:.0f} % | {100 * l['memory_us'] / t:.0f} % | "
                  f"{100 * l['launch_us'] / t:.0f} % | {imb:.2f} | {l['warps_per_sm']} ({l['occupancy_limiter']}) | "
                  f"{l['warps'] / 132:.1f} | {l['waves']:.2f} | {l['bound']} |")
    consts = model.get("model_constants")
    if consts:
        w("")
        w("## The model's constants and their sources")
        w("")
        w(consts.rstrip())
    open(a.out, "w").write("\n".join(lines) + "\n")
    print(f"wrote {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

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


SIZE = {"KiB": 1 << 10, "MiB": 1 << 20}


def log_rows(path: str) -> dict[str, float]:
    """case -> measured kernel µs, from a GPU run's kernel_bench text output (its "Decode cases"
    and "Assemble" tables; runs whose kernel_bench.json did not come back). Decode rows: the
    chunks × chunk bytes decoded at the kernel GB/s; assemble rows: the copy-equivalent bytes
    ((read + written) / 2, the crops' u16 reads and their out MiB) at the `equiv kernel` GB/s."""
    out, part = {}, None
    for line in open(path, errors="replace"):
        if line.startswith("Decode cases"):
            part = "decode"
            continue
        if line.startswith("Assemble ("):
            part = "assemble"
            continue
        f = line.split()
        if part == "decode" and len(f) >= 5 and f[3] == "ok":
            m = re.search(r"-(\d+)(KiB|MiB)$", f[0])
            if m:
                decoded = int(f[1]) * int(m.group(1)) * SIZE[m.group(2)]
                out[f[0]] = decoded / (float(f[4]) * 1e9) * 1e6
        elif part == "assemble" and len(f) == 9 and f[2] == "ok":
            out_b = float(f[4]) * (1 << 20)
            wide = 2 if "cast" in f[0] else 1  # float32 out: twice the u16 bytes read
            equiv = (out_b / wide + out_b) / 2
            out[f[0]] = equiv / (float(f[8]) * 1e9) * 1e6
        elif part and not line.strip():
            part = None if part == "assemble" else part
    return out


def fmt(x: float | None, d: int = 1) -> str:
    return "–" if x is None else f"{x:.{d}f}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--measured", required=True)
    ap.add_argument("--model", required=True, action="append", help="the model's kernel_bench JSON (repeatable)")
    ap.add_argument("--measured-label", default="first run")
    ap.add_argument("--measured-log", help="a later GPU run's kernel_bench output (text), whose rows win")
    ap.add_argument("--measured-log-label", default="later run")
    ap.add_argument("--nvcomp", help="the run's nvcomp_decode.json: a predicted damacy ÷ nvCOMP table")
    ap.add_argument("--ncu-kernels")
    ap.add_argument("--ncu-changed", default="", type=lambda v: set(filter(None, v.split(","))),
                    help="kernels whose source changed since the profiled build (no ratio)")
    ap.add_argument("--ncu-zstd")
    ap.add_argument("--out", default="benches/results/gpu-model.md")
    ap.add_argument("--commit", default="?")
    ap.add_argument("--model-mib", default="?")
    ap.add_argument("--command", default="bash crates/damacy-kernels/scripts/gpu_model.sh --report")
    ap.add_argument("--kernels-changed", default="",
                    help="kernel sources that differ from the measured run's build (comma separated; "
                         "'unknown' when that build is not in this clone): the report says its ratios compare two builds")
    a = ap.parse_args()
    meas = json.load(open(a.measured))
    models = [json.load(open(m)) for m in a.model]
    model = models[0]
    pred = {r["name"]: r for m in models for r in m["rows"] if "predicted_kernel_s" in r}
    # A later run's rows (its kernel sources are the modelled build's) replace the JSON's.
    later = log_rows(a.measured_log) if a.measured_log else {}
    rows = []
    seen = set()
    for r in meas["rows"]:
        kind = r.get("kind", "")
        if kind not in DECODE and kind not in MEMORY:
            continue
        seen.add(r["name"])
        run = a.measured_label
        m_us = r.get("kernel_s", 0) * 1e6
        if r["name"] in later:
            run, m_us = a.measured_log_label, later[r["name"]]
        p = pred.get(r["name"])
        p_us = p["predicted_kernel_s"] * 1e6 if p else None
        rows.append((dict(r, run=run), p, m_us, p_us))
    for name, m_us in later.items():
        if name in seen:
            continue
        kind = name.split("-")[0]
        r = {"name": name, "kind": kind, "run": a.measured_log_label}
        p = pred.get(name)
        if p:
            r["kind"] = p.get("kind", kind)
            r["n_chunks"] = p.get("n_chunks", p.get("n_crops", ""))
        p_us = p["predicted_kernel_s"] * 1e6 if p else None
        rows.append((r, p, m_us, p_us))
    lines = []
    w = lines.append
    w("# GPU performance model — predicted vs measured kernel times (issue 30)")
    w("")
    w(f"- date: {datetime.date.today().isoformat()}")
    w(f"- commit: {a.commit}")
    w(f"- measured: `{a.measured}` ({meas.get('device', '?')}, batch {meas.get('batch_bytes', 0) >> 20} MiB per case, "
      f"median of {meas.get('reps', '?')} runs, `WaveStats::kernel_time`): column run = {a.measured_label}")
    if a.measured_log:
        w(f"- measured, later: `{a.measured_log}` (kernel_bench's text tables, same cases, GB/s to 2 decimals): "
          f"column run = {a.measured_log_label}; its rows replace the first run's (their kernel sources are the "
          f"modelled build's)")
    w(f"- predicted: `kernel_bench --device emulated --model h200` on the same cases (same generators, seeds, "
      f"batch and chunk sizes), each case's verification run recorded; `--model-mib {a.model_mib}`: every k-th "
      f"chunk (crop) run, the stride placed on the chunk with the most encoded bytes, each recorded launch "
      f"standing for k (column `sample`; 1/1: unsampled, as the label image's rows are)")
    w(f"- command: `{a.command}`")
    if a.kernels_changed:
        what = ("the measured run's build is not in this clone, so whether its kernels are these is unknown"
                if a.kernels_changed == "unknown" else
                f"`{'`, `'.join(a.kernels_changed.split(','))}` changed since {a.measured_label}")
        head = "may not be" if a.kernels_changed == "unknown" else "are not"
        w(f"- **the modelled kernels {head} the measured ones**: {what}. Each ratio below may then compare this "
          f"build's predicted time with another build's measured time, which calibrates nothing; to calibrate, run this "
          f"script in a worktree with the measured build's kernels (or after a GPU run of this build)")
    w("")
    w("Ratio = predicted / measured; within ±30 % means 0.70 ≤ ratio ≤ 1.30. Decode rows are one `dmc_*_decode` "
      "launch; copy rows one `dmc_memcpy`; unshuffle rows the copy plus `dmc_unshuffle` (the wave's two launches); "
      "assemble rows one `dmc_assemble`.")
    w("")
    w("| case | kind | chunks | sample | run | measured µs | predicted µs | ratio | ±30 % | bound (model) | longest warp µs | occupancy | waves |")
    w("|---|---|---:|---:|---|---:|---:|---:|:---:|---|---:|---|---:|")
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
        w(f"| {r['name']} | {r.get('kind')} | {r.get('n_chunks', r.get('n_source_chunks', ''))} | {smp} | {r.get('run', '')} | {fmt(m_us)} | {fmt(p_us)} | "
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
            if k in a.ncu_changed:
                w(f"| {k} | {launch} | {d:.1f} | {name or '(1-element jobs: not a case)'} | – | "
                  f"– (the kernel's source changed since the profiled build) |")
                continue
            p = pred.get(name) if name else None
            pn = p.get("predicted_ncu_s") if p else None
            pn_us = pn * 1e6 if pn else None
            ratio = pn_us / d if pn_us else None
            w(f"| {k} | {launch} | {d:.1f} | {name or '(1-element jobs: not a case)'} | {fmt(pn_us)} | {fmt(ratio, 2)} |")
    # against nvCOMP (issue 31's yardstick): the model's decode rate over nvCOMP's measured one
    if a.nvcomp:
        best = {}
        for e in json.load(open(a.nvcomp)).get("entries", []):
            rates = [v["gbps"] for api in ("c_api", "py_api") for v in (e.get(api) or {}).values()
                     if isinstance(v, dict) and v.get("verified") and v.get("gbps")]
            if rates:
                best[e["name"]] = max(rates)
        table = [(r, p, m_us, p_us) for r, p, m_us, p_us in rows
                 if r.get("kind") in DECODE and p_us and r["name"] in best]
        if table:
            w("")
            w("## Predicted damacy ÷ nvCOMP (decode rows)")
            w("")
            w(f"nvCOMP: the fastest verified variant of `{a.nvcomp}` (same streams, measured on the H200); "
              "damacy: the model's kernel time of the same batch (predicted) and the run's (measured).")
            w("")
            w("| case | codec | dataset | chunk | predicted damacy GB/s | nvCOMP GB/s | predicted damacy ÷ nvCOMP | measured damacy ÷ nvCOMP |")
            w("|---|---|---|---|---:|---:|---:|---:|")
            for r, p, m_us, p_us in table:
                size = r["name"].rsplit("-", 1)[-1]
                dataset = p.get("dataset", "")
                gb = p.get("decoded_bytes", 32 << 20) / 1e9
                pred_gbps, meas_gbps, nv = gb / (p_us * 1e-6), gb / (m_us * 1e-6), best[r["name"]]
                w(f"| {r['name']} | {r.get('kind')} | {dataset} | {size} | {pred_gbps:.2f} | {nv:.2f} | "
                  f"{pred_gbps / nv:.2f} | {meas_gbps / nv:.2f} |")
    # what limits each kernel
    per_kernel: dict[str, list] = {}
    for r, p, m_us, p_us in rows:
        for l in (p["model"] if p else []):
            per_kernel.setdefault(l["kernel"], []).append((r["name"], l, m_us))
    if per_kernel:
        w("")
        w("## What limits each kernel (the model's terms, per row)")
        w("")
        w("Per launch: each part over the predicted time — the latency part (the last SM's end: blocks of "
          "their longest warp's serial path, list-scheduled by occupancy), the memory part (the launch's bytes "
          "at the copy bandwidth; the two overlap, the launch lasts the longer) and the launch cost; the longest warp over the mean warp's instructions "
          "(imbalance: the tail a batch waits for); resident warps per SM the occupancy allows and how many "
          "warps the launch has per SM (parallelism); waves; the achieved occupancy (active warps per SM over "
          "the launch, a fraction of its 64 slots, as Nsight Compute reports it).")
        w("")
        w("| kernel | case | predicted µs | latency | memory | launch | longest ÷ mean warp | warps/SM allowed | warps/SM launched | waves | achieved occupancy | bound |")
        w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for k, items in sorted(per_kernel.items()):
            for name, l, _ in items:
                t = l["total_us"] or 1.0
                imb = l["max_warp_insts"] / l["mean_warp_insts"] if l["mean_warp_insts"] else 0.0
                w(f"| {k} | {name} | {t:.1f} | {100 * l['latency_us'] / t:.0f} % | {100 * l['memory_us'] / t:.0f} % | "
                  f"{100 * l['launch_us'] / t:.0f} % | {imb:.2f} | {l['warps_per_sm']} ({l['occupancy_limiter']}) | "
                  f"{l['warps'] / 132:.1f} | {l['waves']:.2f} | {100 * l.get('achieved_occupancy', 0.0):.1f} % | {l['bound']} |")
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

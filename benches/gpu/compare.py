#!/usr/bin/env python3
"""GPU kernel report, side by side in one run: damacy's kernels vs nvCOMP's batched LZ4, Zstd
and Deflate on the same streams, and the memory-bound kernels vs the device's own copy
bandwidth.

    python3 benches/gpu/compare.py [--device cuda|emulated] [--bin PATH] [--out DIR] [--small]

1. runs ``kernel_bench`` (``crates/damacy-kernels/examples/kernel_bench.rs``; from ``--bin``,
   else ``.gpu-bundle/bin``, else built with cargo), which verifies and times every case and
   dumps the raw streams of its LZ4, zstd and deflate batches;
2. runs ``nvcomp_decode.py`` on that dump (nvCOMP C and Python APIs, same streams) and for the
   device-to-device copy bandwidth of the same byte counts;
3. prints the ratio tables and writes ``gpu-kernels-<date>.md`` (date, commit, device, command
   lines, both tables, the raw kernel_bench table) plus both JSON files into ``--out``, else
   ``$OUT``, else ``benches/results/``. Emulator runs are labelled as such, named
   ``emulator-kernels-<date>.md``, and default to a scratch folder, never benches/results/.

Goals: damacy ÷ nvCOMP ≥ 1 per chunk size for LZ4 (issue 5), zstd (issue 13) and deflate
(issue 15); copy, unshuffle, bitunshuffle and assemble ≥ 70 % of the device-to-device copy
bandwidth.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BUNDLE = ROOT / ".gpu-bundle"
EXIT_NO_DEVICE = 3
NVCOMP_GOAL = 1.0  # damacy ÷ nvCOMP, every codec
# kernel_bench's decode kinds compared with nvCOMP, and nvCOMP's name for each.
CODECS = {"lz4": "LZ4", "zstd": "Zstd", "deflate": "Deflate"}
COPY_GOAL = 0.70


def sh(cmd: list[str]) -> str:
    return " ".join(shlex.quote(c) for c in cmd)


def build_info() -> dict[str, Any]:
    p = BUNDLE / "BUILD_INFO.json"
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return {}


def git_commit() -> str:
    try:
        c = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=ROOT).returncode != 0
        return c.stdout.strip() + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        info = build_info()
        if info.get("commit"):
            return f"{info['commit']}{' (with uncommitted changes)' if info.get('dirty') else ''} (from .gpu-bundle/BUILD_INFO.json)"
        return "unknown"


def nvidia_smi() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    try:
        r = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None


def find_bin(args: argparse.Namespace) -> tuple[str, list[str]]:
    """The kernel_bench executable, and the build command if this script built it."""
    if args.bin:
        return args.bin, []
    bundled = BUNDLE / "bin" / "kernel_bench"
    if args.device == "cuda" and bundled.exists():
        return str(bundled), []
    if not shutil.which("cargo"):
        sys.exit("compare.py: no --bin, no .gpu-bundle/bin/kernel_bench and no cargo to build it")
    cmd = ["cargo", "build", "--release", "-p", "damacy-kernels", "--example", "kernel_bench"]
    if args.device == "emulated":
        cmd += ["--features", "emulate"]
    print(f"$ {sh(cmd)}", flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return str(target / "release" / "examples" / "kernel_bench"), cmd


def tee(cmd: list[str], timeout: float) -> tuple[int, str]:
    """Runs cmd, echoing its output, and returns (exit code, output)."""
    print(f"$ {sh(cmd)}", flush=True)
    lines: list[str] = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT) as p:
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        try:
            assert p.stdout is not None
            for line in p.stdout:
                sys.stdout.write(line)
                sys.stdout.flush()
                lines.append(line)
            rc = p.wait()
        finally:
            timed_out = not timer.is_alive()
            timer.cancel()
    if timed_out:
        lines.append(f"\n(killed after {timeout:.0f} s)\n")
        print(lines[-1], flush=True)
        rc = 124
    return rc, "".join(lines)


def fnum(v: Any, digits: int = 1) -> str:
    if not isinstance(v, (int, float)):
        return "–"
    return f"{v:.{digits}f}" if abs(v) >= 1 or v == 0 else f"{v:.2g}"


def pct(v: Any) -> str:
    return f"{100 * v:.0f} %" if isinstance(v, (int, float)) else "–"


def human(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n >> 10} KiB"


def best_nvcomp(entry: dict[str, Any]) -> tuple[float | None, str]:
    """The fastest verified nvCOMP variant of one batch: (GB/s, which)."""
    best: tuple[float | None, str] = (None, "–")
    for api in ("c_api", "py_api"):
        for label, r in (entry.get(api) or {}).items():
            g = r.get("gbps") if r.get("verified") else None
            if isinstance(g, (int, float)) and (best[0] is None or g > best[0]):
                best = (g, f"{'C' if api == 'c_api' else 'Python'} {label}")
    return best


def copy_for(copies: list[dict[str, Any]], nbytes: int) -> float | None:
    """Copy GB/s measured for the closest byte count."""
    ok = [c for c in copies if isinstance(c.get("gbps"), (int, float))]
    if not ok:
        return None
    return min(ok, key=lambda c: abs(c["bytes"] - nbytes))["gbps"]


def codec_table(rows: list[dict[str, Any]], nv: dict[str, Any]) -> tuple[list[str], list[str]]:
    """damacy ÷ nvCOMP per codec, dataset and chunk size: the table and the goals missed."""
    entries = {e["name"]: e for e in nv.get("entries", [])}
    out = [
        "| codec | dataset | level | chunk | chunks | ratio | damacy kernel GB/s | damacy wall GB/s | nvCOMP GB/s (best variant) | damacy ÷ nvCOMP | goal ≥ 1 |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|:-:|",
    ]
    misses = []
    for r in (r for r in rows if r["kind"] in CODECS):
        codec = CODECS[r["kind"]]
        e = entries.get(r["name"], {})
        nvg, which = best_nvcomp(e)
        k = r.get("kernel_gbps")
        ratio = k / nvg if isinstance(k, (int, float)) and nvg else None
        goal = "–" if ratio is None else ("yes" if ratio >= NVCOMP_GOAL else "**no**")
        if ratio is not None and ratio < NVCOMP_GOAL:
            misses.append(f"{codec} {r['dataset']} level {r.get('level', '?')} {human(r['chunk_bytes'])}: {ratio:.2f}× nvCOMP")
        note = "" if r.get("verified") else " (FAILED verification)"
        if not r.get("comparable", True):
            note += " (not one stream per chunk: not compared)"
        out.append(
            f"| {codec} | {r['dataset']}{note} | {r.get('level', '–')} | {human(r['chunk_bytes'])} | {r['n_chunks']} | {fnum(r.get('ratio'), 2)} | "
            f"{fnum(k)} | {fnum(r.get('wall_gbps'), 2)} | {fnum(nvg)} ({which}) | {fnum(ratio, 2)} | {goal} |"
        )
    return out, misses


def nvcomp_detail(nv: dict[str, Any]) -> list[str]:
    out = ["| batch | " + " | ".join(["C default", "C cuda", "Python concurrency", "Python latency"]) + " |", "|---|---:|---:|---:|---:|"]
    for e in nv.get("entries", []):
        cells = []
        for api, label in (("c_api", "default"), ("c_api", "cuda"), ("py_api", "concurrency"), ("py_api", "latency")):
            r = (e.get(api) or {}).get(label)
            if r is None:
                cells.append("–")
            elif "error" in r:
                cells.append("error: " + str(r["error"])[:50].replace("|", "/"))
            else:
                cells.append(fnum(r.get("gbps")))
        out.append(f"| {e['name']} | " + " | ".join(cells) + " |")
    return out


def memory_table(rows: list[dict[str, Any]], nv: dict[str, Any]) -> tuple[list[str], list[str]]:
    copies = nv.get("copy", [])
    out = [
        "| kernel | typesize / dtype | chunk | what is timed | GB/s | copy GB/s | % of copy | goal ≥ 70 % |",
        "|---|---|---|---|---:|---:|---:|:-:|",
    ]
    misses = []

    def add(name: str, ts: str, chunk: int, what: str, g: Any, nbytes: int) -> None:
        c = copy_for(copies, nbytes)
        frac = g / c if isinstance(g, (int, float)) and c else None
        goal = "–" if frac is None else ("yes" if frac >= COPY_GOAL else "**no**")
        if frac is not None and frac < COPY_GOAL:
            misses.append(f"{name} {ts} {human(chunk)}: {100 * frac:.0f} % of copy")
        out.append(f"| {name} | {ts} | {human(chunk)} | {what} | {fnum(g)} | {fnum(c)} | {pct(frac)} | {goal} |")

    order = {"copy": 0, "unshuffle": 1, "bitunshuffle": 2, "assemble": 3, "assemble-cast": 4}
    mem_rows = sorted(
        (r for r in rows if r["kind"] in order),
        key=lambda r: (order[r["kind"]], r.get("typesize", 0), r["chunk_bytes"]),
    )
    for r in mem_rows:
        kind = r["kind"]
        if not r.get("verified"):
            out.append(f"| {kind} | {r.get('typesize', '')} | {human(r['chunk_bytes'])} | FAILED verification | – | – | – | – |")
            continue
        if kind == "copy":
            add("copy (raw streams)", f"ts{r['typesize']}", r["chunk_bytes"], "memcpy kernel (kernel_time)", r.get("kernel_gbps"), r["decoded_bytes"])
        elif kind in ("unshuffle", "bitunshuffle"):
            add(kind, f"ts{r['typesize']}", r["chunk_bytes"], "wave − copy baseline (kernel_time)", r.get("unshuffle_only_gbps"), r["decoded_bytes"])
        elif kind.startswith("assemble"):
            dt = f"{r['src_dtype']}→{r['dst_dtype']}"
            crop = f"{r['crop_shape'][0]}×{r['crop_shape'][1]} crops"
            add(kind, dt, r["chunk_bytes"], f"{crop}, wall of Assembler::run", r.get("copy_equiv_gbps_wall"), r["copy_equiv_bytes"] if "copy_equiv_bytes" in r else r["out_bytes"])
            add(kind, dt, r["chunk_bytes"], f"{crop}, wall − 1-element jobs (est.)", r.get("copy_equiv_gbps_net"), r["copy_equiv_bytes"] if "copy_equiv_bytes" in r else r["out_bytes"])
            add(kind, dt, r["chunk_bytes"], f"{crop}, kernels (timing events)", r.get("copy_equiv_gbps_kernel"), r["copy_equiv_bytes"] if "copy_equiv_bytes" in r else r["out_bytes"])
    return out, misses


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["cuda", "emulated"], default="cuda")
    ap.add_argument("--bin", help="kernel_bench executable (default: .gpu-bundle/bin/kernel_bench, else cargo build)")
    ap.add_argument("--out", help="output folder (default: $OUT, else benches/results/; emulator: a scratch folder)")
    ap.add_argument("--small", action="store_true", help="kernel_bench --small (the emulator always uses it)")
    ap.add_argument("--reps", type=int, help="timed runs per case (default: kernel_bench's, 15 on a GPU)")
    ap.add_argument("--warmup", type=int, help="untimed runs per case first")
    ap.add_argument("--bench-args", default="", help="extra kernel_bench arguments, one string")
    ap.add_argument("--timeout", type=float, default=250, help="seconds for kernel_bench")
    ap.add_argument("--nvcomp-timeout", type=float, default=150, help="seconds for nvcomp_decode.py")
    args = ap.parse_args()

    emulated = args.device == "emulated"
    small = args.small or emulated
    if args.out:
        out_dir = Path(args.out)
    elif os.environ.get("OUT"):
        out_dir = Path(os.environ["OUT"])
    elif emulated:
        out_dir = Path(tempfile.mkdtemp(prefix="damacy-emulator-kernels-"))
    else:
        out_dir = ROOT / "benches" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    exe, build_cmd = find_bin(args)
    dump = Path(tempfile.mkdtemp(prefix="damacy-streams-dump-"))
    kb_json = out_dir / "kernel_bench.json"
    nv_json = out_dir / "nvcomp_decode.json"
    try:
        kb_cmd = [exe, "--device", args.device, "--dump", str(dump), "--json", str(kb_json)]
        kb_cmd += ["--small"] if small else []
        kb_cmd += ["--reps", str(args.reps)] if args.reps else []
        kb_cmd += ["--warmup", str(args.warmup)] if args.warmup is not None else []
        kb_cmd += shlex.split(args.bench_args)
        rc, kb_out = tee(kb_cmd, args.timeout)
        if rc == EXIT_NO_DEVICE:
            print(f"compare.py: kernel_bench found no usable {args.device} device; nothing measured")
            return 1
        if not kb_json.exists():
            print(f"compare.py: kernel_bench exited {rc} without writing {kb_json}")
            return 1
        kb = json.loads(kb_json.read_text())
        nv_cmd = [sys.executable, str(HERE / "nvcomp_decode.py"), "--index", str(dump / "index.json"), "--json", str(nv_json)]
        nv_cmd += ["--reps", str(kb["reps"]), "--warmup", str(kb["warmup"])]
        sizes = sorted({int(r["decoded_bytes"]) for r in kb["rows"] if "decoded_bytes" in r} | {int(r["copy_equiv_bytes"]) for r in kb["rows"] if "copy_equiv_bytes" in r})
        if sizes:
            nv_cmd += ["--copy-bytes", *map(str, sizes)]
        nv_rc, nv_out = tee(nv_cmd, args.nvcomp_timeout)
        try:
            nv = json.loads(nv_json.read_text())
        except (OSError, ValueError):
            nv = {"skipped": f"nvcomp_decode.py exited {nv_rc} without a JSON report"}
    finally:
        shutil.rmtree(dump, ignore_errors=True)

    label = kb.get("label", "?")
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    smi = nvidia_smi()
    device = smi or nv.get("device") or kb.get("device", "unknown")
    codecs, codec_miss = codec_table(kb["rows"], nv)
    mem, mem_miss = memory_table(kb["rows"], nv)
    copies = nv.get("copy", [])
    lines = [
        f"# {'GPU' if label == 'gpu' else 'EMULATOR (not GPU numbers)'} kernels: damacy vs nvCOMP (LZ4, Zstd, Deflate), memory-bound kernels vs copy bandwidth",
        "",
        f"- date: {date} (UTC)",
        f"- commit: {git_commit()}",
        f"- device: {device}" + (f" (kernel_bench: {kb.get('device')})" if smi else ""),
        f"- label: **{label}**" + ("" if label == "gpu" else " — the host emulator; these numbers say nothing about GPU speed"),
        *([] if kb.get("complete") else [f"- **INCOMPLETE**: kernel_bench was cut short (exit {rc}); only the cases it finished are here"]),
        f"- nvCOMP: {nv.get('nvcomp_version') or '–'}; cupy {nv.get('cupy') or '–'}" + (f"; SKIPPED: {nv['skipped']}" if nv.get("skipped") else ""),
        f"- batches: {human(kb['batch_bytes'])} decoded per case; {kb['warmup']} warm-up + {kb['reps']} timed runs, medians; GB/s = 10⁹ bytes/s",
        f"- command: `python3 benches/gpu/compare.py {sh(sys.argv[1:])}`",
        *([f"- built with: `{sh(build_cmd)}`"] if build_cmd else []),
        f"- kernel_bench: `{sh(kb_cmd)}` (exit {rc})",
        f"- nvCOMP: `{sh(nv_cmd)}` (exit {nv_rc})",
        "",
        "## Decoders: damacy ÷ nvCOMP's batched LZ4, Zstd and Deflate, same streams",
        "",
        "LZ4: one raw LZ4 block stream per chunk (c-blosc, cname lz4, clevel 5, typesize 1, no shuffle,",
        "blocksize = chunk, splitting off) over each chunk's byte planes (the layout blosc's shuffle",
        "gives LZ4). zstd: one frame per chunk (the `zstd` crate, level 3, content size, no checksum).",
        "deflate: one zlib stream per chunk (flate2, level 6); damacy decodes the zlib stream, nvCOMP its",
        "raw deflate body (the same bits without the 2-byte header and the Adler-32 trailer). zstd and",
        "deflate chunks are unshuffled, as zarr's `bytes` + `zstd`/`gzip` chains store them. damacy kernel",
        "GB/s: `WaveStats::kernel_time` of one `decode_wave`; wall: the whole call (host parse, staging,",
        "host-to-device copy, launches, status read-back). nvCOMP: CUDA events around",
        "`nvcompBatchedLZ4DecompressAsync` (C API, LZ4 only, backends DEFAULT and CUDA) or `Codec.decode`",
        "(Python API, RAW bitstream, policies CONCURRENCY and LATENCY); the ratio uses the fastest",
        "verified variant. Goal: ≥ 1. demo-sharded-zstd and demo-blosc-lz4 (kernel_bench `--dataset`): the",
        "demo volume's real chunks as stored (`damacy demo --full`: the sharded array's inner zstd frames;",
        "the blosc-lz4 array's frames, which damacy decodes whole — LZ4 and unshuffle kernels — while",
        "nvCOMP decodes their raw LZ4 streams, several per chunk; streams blosc stored raw are not in",
        "nvCOMP's batch).",
        "",
        *codecs,
        "",
        "nvCOMP per variant (GB/s):",
        "",
        *nvcomp_detail(nv),
        "",
        "## Memory-bound kernels ÷ device-to-device copy",
        "",
        "Copy: `cudaMemcpyAsync` device to device of the same byte count (bytes copied per second: a",
        "copy of N bytes reads N and writes N). copy (raw streams): damacy's memcpy kernel on blosc",
        "frames of random bytes (lz4, clevel 5, every split stored raw). unshuffle / bitunshuffle: the same",
        "frames with byte / bit shuffle, whose wave is copy + unshuffle; the unshuffle kernel's time is",
        "estimated as the wave's kernel time minus the copy baseline's. assemble: random crops of a",
        "quarter of a chunk (half of each side) into a batch, counted as (bytes read + bytes written) / 2",
        "so a plain copy of N bytes counts N; `Assembler::run` has no device timer, so its wall time",
        "(job-table upload, launch, status read-back) is shown, and that minus the wall time of as",
        "many 1-element jobs as an estimate of the kernel alone. Goal: ≥ 70 %.",
        "",
        "copy bandwidth: " + ("; ".join(f"{human(c['bytes'])}: {fnum(c.get('gbps'))} GB/s" for c in copies) or "not measured"),
        "",
        *mem,
        "",
        "## Goals missed",
        "",
        *([f"- {m}" for m in codec_miss + mem_miss] or ["- none" if label == "gpu" and not nv.get("skipped") else "- not judged (no GPU numbers)"]),
        "",
        "## kernel_bench output",
        "",
        "```",
        kb_out.rstrip(),
        "```",
        "",
        "## nvcomp_decode.py output",
        "",
        "```",
        nv_out.rstrip(),
        "```",
        "",
    ]
    name = f"{'gpu' if label == 'gpu' else 'emulator'}-kernels-{date}.md"
    report = out_dir / name
    report.write_text("\n".join(lines))
    print("\n".join(["", *codecs, "", *mem, ""]))
    print(f"wrote {report}")
    failed = rc != 0 or nv_rc != 0 or bool(kb.get("failures")) or (label == "gpu" and "skipped" in nv)
    if label == "gpu" and "skipped" in nv:
        print(f"compare.py: nvCOMP and copy bandwidth were not measured: {nv['skipped']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

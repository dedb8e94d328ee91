#!/usr/bin/env python3
"""CPU read benchmark, side by side: damacy vs zarrs vs tensorstore vs zarr-python + zarrs-python.

    .venv/bin/python benches/read/compare.py [--data /tmp/damacy-bench-data] [--batches 30]

Random unaligned 64^3 crops (batches of 32, one fixed seeded list shared by every reader) of
the two arrays that ``make_data.py`` writes (a sharded zstd array and an unsharded blosc-lz4
one), on the local filesystem, every reader limited to the same number of threads (2):

* damacy ``Reader::read_batch`` and zarrs ``retrieve_array_subset`` (Rust: the ``read``
  bench of damacy-codec, which this script runs with ``cargo bench``);
* tensorstore (``zarr3`` driver, no cache pool, all 32 reads of a batch issued in one
  ``ts.Batch`` and then awaited; ``data_copy_concurrency`` and ``file_io_concurrency`` = 2);
* zarr-python with zarrs-python's codec pipeline (``threading.max_workers`` = 2), the crops
  of a batch issued together with ``asyncio.gather`` (and, as a second row, one after another).

Every reader reads one warm-up batch first; the table shows medians over the timed batches.
The page cache is warmed (every file read once) before anything is timed, so this measures
decode and assembly, not the disk. Bytes and requests per batch come from each reader's own
counters where it has them (damacy stats, zarrs' PerformanceMetricsStorageAdapter,
tensorstore's kvstore metrics) and, for every reader, from the kernel's per-process read
counters (``/proc/self/io`` rchar/syscr). The table goes to stdout and to
``benches/results/cpu_read.md`` with date, commit, machine, load and the command.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import make_data  # noqa: E402

ARRAYS = ("sharded_zstd", "blosc_lz4")
CROP = (64, 64, 64)


# ---------------------------------------------------------------- measurement helpers


def proc_io() -> tuple[int, int]:
    """(rchar, syscr) of this process: bytes and calls of read/pread, page-cache hits included."""
    try:
        fields = dict(line.split(":") for line in Path("/proc/self/io").read_text().splitlines())
        return int(fields["rchar"]), int(fields["syscr"])
    except (OSError, KeyError, ValueError):
        return 0, 0


def _probe() -> tuple[int, int]:
    a = proc_io()
    b = proc_io()
    return b[0] - a[0], b[1] - a[1]


PROBE = _probe()


def cpu_busy_s() -> float:
    """Seconds of CPU time the whole machine spent busy (all cores), from /proc/stat."""
    parts = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    vals = [int(v) for v in parts]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    return (sum(vals[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class LoadWindow:
    """CPU used by other processes (cores, averaged) while a phase runs."""

    def __enter__(self) -> "LoadWindow":
        self.t0, self.busy0, self.own0 = time.perf_counter(), cpu_busy_s(), own_cpu_s()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self.t0
        others = (cpu_busy_s() - self.busy0) - (own_cpu_s() - self.own0)
        self.wall = wall
        self.other_cores = max(others, 0.0) / wall if wall > 0 else 0.0


def wait_quiet(max_wait_s: float, threshold_cores: float = 0.2, sample_s: float = 3.0) -> float:
    """Wait (at most ``max_wait_s``) until other processes use under ``threshold_cores`` for a
    ``sample_s`` sample. Returns the last sample's busy cores."""
    deadline = time.monotonic() + max_wait_s
    while True:
        b0, o0 = cpu_busy_s(), own_cpu_s()
        time.sleep(sample_s)
        busy = max((cpu_busy_s() - b0) - (own_cpu_s() - o0), 0.0) / sample_s
        if busy < threshold_cores or time.monotonic() >= deadline:
            return busy
        print(f"compare: machine busy ({busy:.2f} cores used by others); waiting", file=sys.stderr)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarize(reader: str, array: str, costs: list[dict], batch_size: int, **extra: object) -> dict:
    rates = [batch_size / c["seconds"] for c in costs]
    out = {
        "kind": "result",
        "array": array,
        "reader": reader,
        "batch_size": batch_size,
        "timed_batches": len(costs),
        "crops_per_s": median(rates),
        "crops_per_s_min": min(rates),
        "crops_per_s_max": max(rates),
        "batch_ms": median([c["seconds"] * 1e3 for c in costs]),
        "os_read_bytes_per_batch": median([c["rchar"] for c in costs]),
        "os_read_calls_per_batch": median([c["syscr"] for c in costs]),
        "cores_used": sum(c["cpu"] for c in costs) / sum(c["seconds"] for c in costs),
    }
    for key in ("storage_requests", "bytes_read"):
        if all(key in c for c in costs):
            out[f"{key}_per_batch"] = median([c[key] for c in costs])
    out.update(extra)
    print(
        f"{array:>14} {reader:<22} {out['crops_per_s']:8.1f} crops/s  {out['batch_ms']:7.1f} ms/batch",
        file=sys.stderr,
    )
    return out


QUIET_CORES = 0.25


def combine(rounds: list[list[dict]]) -> list[dict]:
    """One row per (array, reader): the median over rounds of each round's median, using only
    the rounds in which other processes used under QUIET_CORES while that reader ran (all
    rounds when none was quiet; the row's load then says so)."""
    out = []
    for row in rounds[0]:
        same = [r for rnd in rounds for r in rnd if (r["array"], r["reader"]) == (row["array"], row["reader"])]
        used = [r for r in same if r.get("other_cores", 0.0) < QUIET_CORES] or same
        merged = dict(row)
        for key, value in row.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and key not in ("threads", "batch_size"):
                merged[key] = median([r[key] for r in used if key in r])
        merged["crops_per_s_rounds"] = [
            (round(r["crops_per_s"], 1), r.get("other_cores", 0.0) >= QUIET_CORES) for r in same
        ]
        merged["rounds_used"] = len(used)
        merged["crops_per_s_min"] = min(r["crops_per_s_min"] for r in used)
        merged["crops_per_s_max"] = max(r["crops_per_s_max"] for r in used)
        merged["other_cores"] = max(r.get("other_cores", 0.0) for r in used)
        merged["index_fetches_total"] = max((r.get("index_fetches_total", 0) for r in used), default=0)
        out.append(merged)
    return out


def timed_batches(read_batch, batches: list[list[list[int]]], warmup: int, counters=None) -> tuple[list[dict], str]:
    """Run the warm-up batches, then time each later batch. Returns the costs and the SHA-256
    of the first timed batch's crops (C order, concatenated), to check readers agree."""
    for b in batches[:warmup]:
        read_batch(b)
    costs, digest = [], ""
    for i, b in enumerate(batches[warmup:]):
        c0 = counters() if counters else None
        io0 = proc_io()
        cpu0 = os.times()
        t = time.perf_counter()
        out = read_batch(b)
        seconds = time.perf_counter() - t
        cpu1 = os.times()
        io1 = proc_io()
        cost = {"seconds": seconds, "rchar": io1[0] - io0[0] - PROBE[0], "syscr": io1[1] - io0[1] - PROBE[1],
                "cpu": (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)}
        if counters:
            c1 = counters()
            cost.update({k: c1[k] - c0[k] for k in c0})
        costs.append(cost)
        if i == 0:
            h = hashlib.sha256()
            for a in out:
                h.update(np.ascontiguousarray(a, dtype="<u2").tobytes())
            digest = h.hexdigest()
    return costs, digest


def selections(batch: list[list[int]]) -> list[tuple[slice, ...]]:
    return [tuple(slice(o, o + n) for o, n in zip(origin, CROP)) for origin in batch]


# ---------------------------------------------------------------- readers


def run_tensorstore(data: Path, crops: dict, threads: int) -> list[dict]:
    import tensorstore as ts

    results = []
    for name in crops["arrays"]:
        ctx = ts.Context({"data_copy_concurrency": {"limit": threads}, "file_io_concurrency": {"limit": threads}})
        arr = ts.open(
            {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(data / name)}}, context=ctx, read=True
        ).result()

        def read_batch(batch: list[list[int]]) -> list[np.ndarray]:
            with ts.Batch() as b:
                futures = [arr[sel].read(batch=b) for sel in selections(batch)]
            return [f.result() for f in futures]

        def counters() -> dict:
            got = {"storage_requests": 0, "bytes_read": 0}
            for m in ts.experimental_collect_matching_metrics("/tensorstore/kvstore/file/"):
                if m["name"] == "/tensorstore/kvstore/file/read":
                    got["storage_requests"] = sum(v.get("value", 0) for v in m["values"])
                elif m["name"] == "/tensorstore/kvstore/file/bytes_read":
                    got["bytes_read"] = sum(v.get("value", 0) for v in m["values"])
            return got

        with LoadWindow() as w:
            costs, digest = timed_batches(read_batch, crops["batches"], crops["warmup_batches"], counters)
        results.append(
            summarize("tensorstore", name, costs, crops["batch_size"], first_batch_sha256=digest,
                      other_cores=w.other_cores)
        )
    return results


def run_zarr_python(data: Path, crops: dict, threads: int) -> list[dict]:
    import zarr
    from zarr.core.sync import sync

    results = []
    with zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline", "threading.max_workers": threads,
                          "codec_pipeline.strict": True}):
        for name in crops["arrays"]:
            arr = zarr.open_array(str(data / name), mode="r")
            pipeline = type(arr._async_array.codec_pipeline).__module__
            if not pipeline.startswith("zarrs"):
                raise SystemExit(f"zarr-python did not pick zarrs-python's pipeline for {name}: {pipeline}")

            async def gather(batch: list[list[int]]) -> list[np.ndarray]:
                return await asyncio.gather(*(arr._async_array.getitem(sel) for sel in selections(batch)))

            def read_gather(batch: list[list[int]]) -> list[np.ndarray]:
                return sync(gather(batch))

            def read_sequential(batch: list[list[int]]) -> list[np.ndarray]:
                return [arr[sel] for sel in selections(batch)]

            for label, fn in (("zarr-python+zarrs", read_gather), ("zarr-python+zarrs (seq)", read_sequential)):
                with LoadWindow() as w:
                    costs, digest = timed_batches(fn, crops["batches"], crops["warmup_batches"])
                results.append(
                    summarize(label, name, costs, crops["batch_size"], first_batch_sha256=digest,
                              other_cores=w.other_cores)
                )
    return results


RUST_CMD = ["cargo", "bench", "-p", "damacy-codec", "--bench", "read"]


def build_rust(env: dict) -> str:
    """Build the Rust bench once (not timed) and return its executable, so every round runs the
    same binary even if someone edits the sources meanwhile."""
    proc = subprocess.run([*RUST_CMD, "--no-run", "--message-format=json-render-diagnostics"], cwd=ROOT, env=env,
                          check=True, stdout=subprocess.PIPE, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            msg = json.loads(line)
            if msg.get("reason") == "compiler-artifact" and msg.get("target", {}).get("name") == "read" \
                    and msg.get("executable"):
                return msg["executable"]
    raise SystemExit("cargo did not report the read bench's executable")


def run_rust(exe: str, data: Path, crops_path: Path, threads: int, env: dict, arrays: list[str] = (),
             stderr=None) -> list[dict]:
    """The Rust bench's JSON records; ``arrays`` picks arrays by name (all when empty); ``stderr``: where the
    bench's stderr goes (inherited when ``None``)."""
    env = {**env, "DAMACY_BENCH_DATA": str(data), "DAMACY_BENCH_CROPS": str(crops_path),
           "DAMACY_BENCH_THREADS": str(threads)}
    with LoadWindow() as w:
        proc = subprocess.run([exe, "--bench", *arrays], cwd=ROOT / "crates" / "damacy-codec", env=env, check=True,
                              stdout=subprocess.PIPE, stderr=stderr, text=True)
    lines = []
    for line in proc.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            rec = json.loads(line)
            rec.setdefault("other_cores", w.other_cores)
            lines.append(rec)
    return lines


# ---------------------------------------------------------------- crops, machine, table


def make_crops(shape: list[int], n_batches: int, warmup: int, batch_size: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    hi = np.array(shape) - np.array(CROP) + 1
    origins = rng.integers(0, hi, size=(warmup + n_batches, batch_size, 3))
    return {
        "seed": seed,
        "crop": list(CROP),
        "batch_size": batch_size,
        "warmup_batches": warmup,
        "arrays": list(ARRAYS),
        "shape": list(shape),
        "batches": origins.tolist(),
    }


def warm_page_cache(data: Path) -> tuple[int, float]:
    t = time.perf_counter()
    total = sum(make_data.warm_page_cache(data / name) for name in ARRAYS)
    return total, time.perf_counter() - t


def machine() -> dict:
    model = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem_kb = next(int(l.split()[1]) for l in Path("/proc/meminfo").read_text().splitlines() if l.startswith("MemTotal"))
    return {"nproc": os.cpu_count(), "cpu": model, "mem_gib": round(mem_kb / 2**20, 1), "kernel": platform.release()}


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _proc_ticks() -> dict[int, tuple[str, int]]:
    """CPU ticks (user + system) of every process now, by pid."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            raw = (d / "stat").read_text()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1 : raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2 :].split()
        out[int(d.name)] = (comm, int(fields[11]) + int(fields[12]))
    return out


class OtherProcesses:
    """Samples /proc every 2 s in a thread: which other processes used CPU while we measured."""

    def __init__(self) -> None:
        import threading

        self.used: dict[str, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _mine() -> set[int]:
        """This process and its descendants."""
        parent = {}
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
        mine = {os.getpid()}
        grew = True
        while grew:
            new = {pid for pid, pp in parent.items() if pp in mine} - mine
            mine |= new
            grew = bool(new)
        return mine

    def _run(self) -> None:
        hz = os.sysconf("SC_CLK_TCK")
        last = _proc_ticks()
        while not self.stop.wait(2.0):
            now = _proc_ticks()
            mine = self._mine()
            for pid, (comm, ticks) in now.items():
                if pid in mine:
                    continue
                delta = ticks - last.get(pid, (comm, 0))[1] if pid in last else ticks
                if delta > 0 and comm != "compare.py":
                    self.used[comm] = self.used.get(comm, 0.0) + delta / hz
            last = now

    def __enter__(self) -> "OtherProcesses":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def top(self, n: int = 6) -> list[str]:
        return [f"{c} {s:.1f} s" for c, s in sorted(self.used.items(), key=lambda kv: -kv[1])[:n] if s >= 0.5]


def git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def mib(b: float | None) -> str:
    return "—" if b is None or b != b else f"{b / 2**20:.2f}"


def table(results: list[dict], distinct: dict[str, dict], probe: dict[str, dict]) -> str:
    lines = []
    for name in ARRAYS:
        rows = [r for r in results if r["array"] == name and r.get("kind") == "result"]
        if not rows:
            continue
        d = distinct.get(name, {})
        ours = next((r for r in rows if r["reader"] == "damacy"), None)
        lines.append(f"### {name}")
        lines.append("")
        if d:
            lines.append(
                f"Per batch of {rows[0]['batch_size']} crops: {d['chunk_touches_per_batch']:.0f} chunk touches, "
                f"{d['distinct_chunks_per_batch']:.0f} distinct {'inner ' if d['sharded'] else ''}chunks of "
                f"{'×'.join(map(str, d['decode_shape']))}, **{mib(d['distinct_chunk_bytes_per_batch'])} MiB "
                f"distinct chunk bytes** (encoded), {mib(d['crop_bytes_per_batch'])} MiB of crops out"
                + (f"; {d['distinct_shards_per_batch']:.0f} shards touched, "
                   f"{d['shard_index_bytes_per_batch'] / 1024:.1f} KiB of their indexes" if d["sharded"] else "")
                + "."
            )
            lines.append("")
        lines.append("| reader | crops/s (median) | round medians | batch min–max | damacy ÷ reader | requests/batch (÷ damacy) | MiB read/batch "
                     "| read ÷ distinct | OS read MiB/batch | OS read calls/batch | cores used | other load (cores) |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            ratio = ours["crops_per_s"] / r["crops_per_s"] if ours else float("nan")
            req = r.get("storage_requests_per_batch")
            br = r.get("bytes_read_per_batch")
            over = br / d["distinct_chunk_bytes_per_batch"] if (br is not None and d) else None
            ours_req = ours.get("storage_requests_per_batch") if ours else None
            if req is not None and ours_req and r is not ours:
                req_cell = f"{req:.0f} ({req / ours_req:.2f}×)"
            else:
                req_cell = "—" if req is None else f"{req:.0f}"
            lines.append(
                f"| {r['reader']} | {r['crops_per_s']:.1f} "
                f"| {' / '.join(f'{x:.0f}' + ('*' if loaded else '') for x, loaded in r.get('crops_per_s_rounds', []))} "
                f"| {r['crops_per_s_min']:.0f}–{r['crops_per_s_max']:.0f} "
                f"| {ratio:.2f}× | {req_cell} | {mib(br)} "
                f"| {'—' if over is None else f'{over:.3f}'} | {mib(r.get('os_read_bytes_per_batch'))} "
                f"| {r.get('os_read_calls_per_batch', float('nan')):.0f} | {r.get('cores_used', float('nan')):.2f} "
                f"| {r.get('other_cores', float('nan')):.2f} |"
            )
        if ours:
            lines.append("")
            lines.append(
                f"damacy: shard indexes fetched {ours.get('index_fetches_total', 0)} times per round (a fresh Reader, warm-up included), "
                f"{ours.get('index_fetches_timed', 0):.0f} in timed batches; "
                f"{ours.get('units_decoded_per_batch', float('nan')):.0f} units decoded/batch; bytes read ÷ distinct "
                f"chunk bytes: median {ours.get('bytes_read_over_distinct_median', float('nan')):.3f}, "
                f"max {ours.get('bytes_read_over_distinct_max', float('nan')):.3f}. Stage times (median "
                f"ms/batch, summed over the threads that ran them; reads and decodes overlap on local "
                f"stores): io {ours.get('io_ms', float('nan')):.1f}, decode {ours.get('decode_ms', float('nan')):.1f},"
                f" assemble {ours.get('assemble_ms', float('nan')):.1f} of {ours['batch_ms']:.1f} total."
                f" Heap allocations per batch (a counting allocator; the output buffer is the bench's, reused):"
                f" {ours.get('read_allocs_per_batch', float('nan')):.0f} in the read"
                f" ({ours.get('read_alloc_bytes_per_batch', float('nan')):.0f} bytes),"
                f" {ours.get('plan_allocs_per_batch', float('nan')):.0f} in the plan."
            )
        if name in probe:
            pr = probe[name]
            lines.append("")
            lines.append(
                f"Decode probe (the {pr['chunks']:.0f} distinct chunks of one batch, the array's zarrs codec chain, "
                f"{rows[0].get('threads', 2)} threads): {pr['decode_keep_mb_per_s']:.0f} MB/s decoded when every "
                f"output is kept until all are done (as `read_batch` does), {pr['decode_drop_each_mb_per_s']:.0f} MB/s "
                f"when each is dropped at once (as a fused decode-and-scatter would) — "
                f"{pr['decode_drop_each_mb_per_s'] / pr['decode_keep_mb_per_s']:.2f}×."
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=make_data.DEFAULT_DIR, help="scratch data folder (not the repo)")
    p.add_argument("--shape", nargs=3, type=int, default=list(make_data.DEFAULT_SHAPE), metavar=("Z", "Y", "X"))
    p.add_argument("--batches", type=int, default=30, help="timed batches per reader and array")
    p.add_argument("--warmup", type=int, default=1, help="warm-up batches per reader and array")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1122)
    p.add_argument("--out", type=Path, default=ROOT / "benches" / "results" / "cpu_read.md")
    p.add_argument("--no-write", action="store_true", help="print the table only")
    p.add_argument("--rounds", type=int, default=3,
                   help="repeat every reader this many times; the table shows the median of the round medians")
    p.add_argument("--wait-quiet", type=float, default=0.0, metavar="S",
                   help="wait up to S seconds for other processes to go quiet before measuring")
    args = p.parse_args(argv)

    started = time.perf_counter()
    manifest = make_data.make(args.data, tuple(args.shape))
    crops = make_crops(list(args.shape), args.batches, args.warmup, args.batch_size, args.seed)
    crops_path = args.data / "crops.json"
    crops_path.write_text(json.dumps(crops) + "\n")
    cached, cache_s = warm_page_cache(args.data)
    print(f"compare: page cache warmed ({cached / 2**20:.0f} MiB in {cache_s:.1f} s)", file=sys.stderr)

    env = dict(os.environ)
    # Build first (not timed), then wait for a quiet machine if asked.
    # What the measured binary was built from, beyond the commit.
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "crates/damacy-codec",
                             "Cargo.toml", "Cargo.lock"], cwd=ROOT, capture_output=True, text=True).stdout
    dirty = ", ".join(f"`{line[3:]}`" for line in status.splitlines() if line.strip())
    exe = build_rust(env)
    rust_cmd = " ".join(RUST_CMD)
    if args.wait_quiet > 0:
        busy = wait_quiet(args.wait_quiet)
        print(f"compare: starting with {busy:.2f} cores busy elsewhere", file=sys.stderr)
    load_before = loadavg()
    rounds: list[list[dict]] = []
    probes: dict[int, dict[str, dict]] = {}
    with OtherProcesses() as others:
        for i in range(args.rounds):
            print(f"compare: round {i + 1} of {args.rounds}", file=sys.stderr)
            rust = run_rust(exe, args.data, crops_path, args.threads, env)
            got = [r for r in rust if r.get("kind") == "result"]
            distinct = {r["array"]: r for r in rust if r.get("kind") == "distinct"}
            probes.setdefault(i, {}).update({r["array"]: r for r in rust if r.get("kind") == "probe"})
            got += run_tensorstore(args.data, crops, args.threads)
            got += run_zarr_python(args.data, crops, args.threads)
            rounds.append(got)
    load_after = loadavg()
    results = combine(rounds)
    total_s = time.perf_counter() - started

    digests = {}
    for r in results:
        if r.get("first_batch_sha256"):
            digests.setdefault(r["array"], set()).add(r["first_batch_sha256"])
    agree = all(len(v) == 1 for v in digests.values())

    max_other = max((r.get("other_cores", 0.0) for r in results), default=0.0)
    under_load = max_other >= QUIET_CORES
    loaded_rounds = sum(loaded for r in results for _, loaded in r.get("crops_per_s_rounds", []))
    mach = machine()
    cmd = " ".join(shlex.quote(a) for a in [".venv/bin/python", "benches/read/compare.py", *(argv or sys.argv[1:])])
    target = env.get("CARGO_TARGET_DIR")
    if target:
        cmd = f"CARGO_TARGET_DIR={shlex.quote(target)} {cmd}"
    probe = {
        name: {
            key: median([p[name][key] for p in probes.values() if name in p])
            for key in ("decode_keep_mb_per_s", "decode_drop_each_mb_per_s", "chunks")
        }
        for name in ARRAYS
        if any(name in p for p in probes.values())
    }
    body = table(results, distinct, probe)
    header = [
        "# CPU read: damacy vs zarrs vs tensorstore vs zarr-python + zarrs-python",
        "",
        f"- Date: {datetime.now(timezone.utc).date().isoformat()}; commit `{git('rev-parse', '--short', 'HEAD')}`"
        + (f"; uncommitted changes to the measured code when the bench was built: {dirty}" if dirty else
           "; the measured code (damacy-codec, Cargo.toml, Cargo.lock) had no uncommitted changes"),
        f"- Machine: {mach['nproc']} CPUs ({mach['cpu']}), {mach['mem_gib']} GiB, Linux {mach['kernel']}, no GPU",
        f"- Command: `{cmd}` ({total_s:.0f} s in all); the Rust half alone: "
        f"`DAMACY_BENCH_DATA={args.data} {rust_cmd}`",
        f"- Data: {manifest['shape']} uint16 written by zarr-python {manifest.get('zarr')} (`benches/read/make_data.py`): "
        "`sharded_zstd` = shards 256×256×512, inner chunks 32×64×64, zstd level 0; `blosc_lz4` = chunks 64³, "
        "blosc lz4 clevel 5 byte-shuffle. Local filesystem, page cache warm.",
        f"- Crops: {args.batch_size} per batch, 64³ at random unaligned origins (seed {args.seed}), "
        f"{args.warmup} warm-up + {args.batches} timed batches per reader and array, the same crops for every reader; "
        f"{args.rounds} rounds of all readers in turn; crops/s = median over (quiet) rounds of each round's median over batches. Threads: {args.threads} for every reader.",
        f"- Load: loadavg {load_before} before, {load_after} after. "
        + (f"{loaded_rounds} reader-rounds ran while other processes used ≥ {QUIET_CORES} cores (marked * under "
           "*round medians*) and are left out of the medians where a quiet round of the same reader exists. "
           if loaded_rounds else "")
        + f"CPU used by other processes while a reader ran, in the rounds used: up to {max_other:.2f} cores"
        + (" — **measured under load: other processes competed for the 2 cores; treat the numbers as noisy**"
           if under_load else " (quiet machine)")
        + (f". Other processes' CPU time during the measurement: {', '.join(others.top())}" if others.top() else "")
        + ".",
        f"- Output check: the first timed batch's SHA-256 {'matches across all readers' if agree else 'DIFFERS between readers: ' + str(digests)}"
        " (damacy was also checked byte for byte against zarrs inside the Rust bench).",
        "",
        "Readers: **damacy** = `Reader::plan` + `Reader::read_batch_into` per batch into one reused output buffer (2 I/O + 2 compute threads); **zarrs** = "
        "`retrieve_array_subset_opt` per crop in turn, rayon pool of 2, `concurrent_target(2)`; **zarrs-par** = the "
        "same call for the 32 crops in parallel on the pool, `concurrent_target(1)`; **tensorstore** = zarr3 driver, "
        "32 reads in one `ts.Batch`, data_copy/file_io concurrency 2, no cache pool; **zarr-python+zarrs** = zarr "
        "3.1 with `zarrs.ZarrsCodecPipeline`, `threading.max_workers=2`, the 32 `getitem`s gathered on zarr's event "
        "loop ((seq) = one `arr[crop]` after another).",
        "",
        "Columns: *requests/batch* and *MiB read/batch* from each reader's own counters (damacy stats; zarrs "
        "PerformanceMetricsStorageAdapter, which counts each byte range as a request; tensorstore "
        "`/tensorstore/kvstore/file/{read,bytes_read}`; none for zarrs-python). *OS read* = the process's "
        "`/proc/self/io` rchar/syscr delta over the batch (every pread, page-cache hits included) — the same "
        "yardstick for all readers. *cores used* = the reader's process CPU time ÷ wall time over its timed batches (of 2). *other load* = CPU time other processes used while that reader ran ÷ wall time "
        "(/proc/stat minus this process tree; the Rust readers share one window). *read ÷ distinct* = bytes read ÷ the encoded bytes of the distinct chunks the "
        "batch touches (sharded: lengths from the shard indexes via zarrs `subchunk_byte_range`; unsharded: chunk "
        "object sizes).",
        "",
    ]
    text = "\n".join(header) + "\n" + body + "\n"
    print(text)
    if not args.no_write:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        # Raw numbers go beside the data (scratch), not into the repository.
        (args.data / "results.json").write_text(
            json.dumps({"results": results, "rounds": rounds, "probe": probe, "distinct": distinct, "machine": mach, "load_before": load_before,
                        "load_after": load_after}, indent=1) + "\n"
        )
        print(f"compare: wrote {args.out}", file=sys.stderr)
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())

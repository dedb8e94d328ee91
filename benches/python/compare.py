#!/usr/bin/env python3
"""zarr-python reading random regions through three codec pipelines, same run, side by side:
damacy.GpuCodecPipeline, zarr-python's default BatchedCodecPipeline and zarrs-python's
ZarrsCodecPipeline.

    .venv/bin/pip install -r benches/requirements.txt        # zarrs (zarrs-python)
    .venv/bin/python benches/python/compare.py [--data /tmp/damacy-bench-data] [--rounds 3]

The arrays are the CPU read benchmark's (``benches/read/make_data.py``: 512³ uint16, a sharded
zstd array with 32×64×64 inner chunks and a blosc-lz4 array with 64³ chunks), read on the
local filesystem with random unaligned 64³ crops (one seeded list shared by every pipeline),
``arr[crop]`` one after another, every pipeline limited to 2 threads (damacy's
``codec_pipeline.n_compute_threads``, zarr's ``threading.max_workers``). Pipelines take turns
batch by batch within each round so machine load hits them alike; the first batch of each is a
warm-up; the page cache is warmed first. Reported: median crops/s over the timed batches and
the ratios of damacy's to the others'. Every pipeline's first batch is checked equal to
damacy's. Writes ``benches/results/python.md`` with date, commit and machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "benches" / "read"))
import make_data  # noqa: E402

ARRAYS = ("sharded_zstd", "blosc_lz4")
CROP = (64, 64, 64)
PIPELINES = {
    "damacy": {"codec_pipeline.path": "damacy.GpuCodecPipeline", "codec_pipeline.n_compute_threads": 2,
               "codec_pipeline.n_io_threads": 2, "codec_pipeline.strict": True},
    "zarr-python default": {"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline",
                            "threading.max_workers": 2},
    "zarrs-python": {"codec_pipeline.path": "zarrs.ZarrsCodecPipeline", "threading.max_workers": 2,
                     "codec_pipeline.strict": True},
}


def crops(shape: tuple[int, ...], n: int, seed: int) -> list[tuple[slice, ...]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        start = [int(rng.integers(0, s - c + 1)) for s, c in zip(shape, CROP)]
        out.append(tuple(slice(a, a + c) for a, c in zip(start, CROP)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path("/tmp/damacy-bench-data"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batches", type=int, default=6, help="timed batches per round and pipeline")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    import zarr

    import damacy

    try:
        import zarrs  # noqa: F401
    except ImportError:
        raise SystemExit("zarrs-python is missing: pip install -r benches/requirements.txt") from None
    make_data.make(args.data, (512, 512, 512))
    table = []
    for name in ARRAYS:
        path = args.data / name
        make_data.warm_page_cache(path)
        shape = zarr.open_array(str(path), mode="r").shape
        n = args.batch_size * (1 + args.batches * args.rounds)
        sels = crops(shape, n, seed=7)
        batches = [sels[i : i + args.batch_size] for i in range(0, n, args.batch_size)]
        arrays = {}
        for label, cfg in PIPELINES.items():
            with zarr.config.set(cfg):
                arrays[label] = zarr.open_array(str(path), mode="r")
                assert type(arrays[label]._async_array.codec_pipeline).__name__ in (
                    "GpuCodecPipeline", "BatchedCodecPipeline", "ZarrsCodecPipeline")
        times: dict[str, list[float]] = {label: [] for label in PIPELINES}
        reference = None
        for b, batch in enumerate(batches):
            for label, cfg in PIPELINES.items():
                with zarr.config.set(cfg), warnings.catch_warnings():
                    warnings.simplefilter("error", damacy.FallbackWarning)
                    t0 = time.perf_counter()
                    got = [arrays[label][s] for s in batch]
                    dt = time.perf_counter() - t0
                if b == 0:
                    if reference is None:
                        reference = got
                    elif not all(np.array_equal(x, y) for x, y in zip(got, reference)):
                        raise SystemExit(f"{label} read different values than damacy on {name}")
                    continue
                times[label].append(dt)
        row = {"array": name}
        for label, ts in times.items():
            row[label] = args.batch_size / statistics.median(ts)
        table.append(row)
        print(name, {k: round(v, 1) if isinstance(v, float) else v for k, v in row.items()}, flush=True)

    labels = list(PIPELINES)
    lines = [
        "| crops/s (median) | " + " | ".join(labels) + " | damacy ÷ default | damacy ÷ zarrs-python |",
        "|---|" + "---:|" * (len(labels) + 2),
    ]
    for r in table:
        lines.append(
            f"| {r['array']} | " + " | ".join(f"{r[lab]:.0f}" for lab in labels)
            + f" | {r['damacy'] / r['zarr-python default']:.2f}× | {r['damacy'] / r['zarrs-python']:.2f}× |"
        )
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    import zarr as z

    import damacy as d

    versions = f"zarr {z.__version__}, zarrs-python {__import__('zarrs').__version__}, damacy {d.__version__}"
    header = [
        "# zarr-python codec pipelines: damacy vs default vs zarrs-python",
        "",
        f"- date: {datetime.now(timezone.utc):%Y-%m-%d}",
        f"- commit: {commit}",
        f"- machine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}; load average before: "
        + " ".join(f"{x:.2f}" for x in os.getloadavg()),
        f"- versions: {versions}, Python {platform.python_version()}",
        f"- command: `{' '.join(sys.argv)}`",
        f"- method: random unaligned 64³ crops of 512³ uint16 arrays, `arr[crop]` one after another, "
        f"{args.rounds} rounds × {args.batches} batches of {args.batch_size} per pipeline (interleaved), "
        "2 threads each, page cache warm; medians.",
        "",
    ]
    text = "\n".join(header + lines) + "\n"
    print(text)
    if not args.no_write:
        (ROOT / "benches" / "results" / "python.md").write_text(text)


if __name__ == "__main__":
    main()

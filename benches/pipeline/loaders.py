#!/usr/bin/env python3
"""The Pipeline against what users write today, same crops, same run, side by side:

* ``damacy.Pipeline`` (the Python package): push every sample, pop batches, take each with
  ``numpy.from_dlpack`` (zero-copy);
* a thread-pool loop over tensorstore: per batch, the crops read through a
  ``ThreadPoolExecutor`` (2 threads) from one tensorstore handle (``zarr3`` driver, no cache
  pool, ``data_copy_concurrency`` and ``file_io_concurrency`` = 2), stacked into one array;
* a thread-pool loop over zarr-python with zarrs-python's codec pipeline (``threading.max_workers``
  = 2, ``codec_pipeline.strict``), the same pool and stack.

    .venv/bin/python benches/pipeline/loaders.py [--data /tmp/damacy-bench-data] [--rounds 5]

The arrays are the CPU read benchmark's (``benches/read/make_data.py``: 512³ uint16, sharded
zstd with 32×64×64 inner chunks, blosc-lz4 with 64³ chunks), read from the local filesystem
with the page cache warmed first. Crops: random unaligned 64³, batches of 32, one seeded list
for every loader. Every loader is held to 2 threads of work (damacy: 2 I/O + 2 compute
threads and 2 workers, the Pipeline's own structure; the loops: a 2-thread pool). Loaders
take turns round by round (each round: every loader reads one warm-up batch, then the same
``--batches`` batches, timed from the Pipeline's push, or the loop's first read, to the last
batch in hand) so machine load hits them alike; reported are medians over rounds of crops/s and
the ratios of the Pipeline's to each loop's. The warm-up batches of all loaders
are checked equal. Writes ``benches/results/loaders.md`` with date, commit and machine.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "benches" / "read"))
import make_data  # noqa: E402

ARRAYS = ("sharded_zstd", "blosc_lz4")
CROP = (64, 64, 64)
THREADS = 2


def crops(shape: tuple[int, ...], n: int, seed: int) -> list[tuple[int, ...]]:
    rng = np.random.default_rng(seed)
    return [tuple(int(rng.integers(0, s - c + 1)) for s, c in zip(shape, CROP)) for _ in range(n)]


def slices(start: tuple[int, ...]) -> tuple[slice, ...]:
    return tuple(slice(a, a + c) for a, c in zip(start, CROP))


class DamacyLoader:
    """The Pipeline: one per round, every batch of the round pushed at once."""

    label = "damacy.Pipeline"

    def __init__(self, path: Path, batch_size: int) -> None:
        import damacy

        self.damacy = damacy
        self.uri = str(path)
        self.cfg = damacy.Config(batch_size=batch_size, sample_shape=CROP, executor="cpu", n_io_threads=THREADS,
                                 n_compute_threads=THREADS, n_workers=2)

    def run(self, batches: list[list[tuple[int, ...]]]) -> tuple[float, np.ndarray]:
        def samples(bs: list[list[tuple[int, ...]]]) -> list:
            return [self.damacy.Sample(self.uri, self.damacy.Region(start, CROP)) for batch in bs for start in batch]

        with self.damacy.Pipeline(self.cfg) as p:
            # the warm-up batch (start-up, the array's metadata) is popped before the clock starts,
            # so nothing is decoded ahead of it; then from the push to the last pop
            p.push(samples(batches[:1]))
            with p.pop() as batch:
                first = np.from_dlpack(batch).copy()
            t0 = time.perf_counter()
            p.push(samples(batches[1:]))
            for _ in batches[1:]:
                with p.pop() as batch:
                    np.from_dlpack(batch)
            return time.perf_counter() - t0, first


class LoopLoader:
    """A 2-thread pool reading one batch's crops, then ``np.stack``."""

    def __init__(self, label: str, read) -> None:
        self.label = label
        self.read = read
        self.pool = concurrent.futures.ThreadPoolExecutor(THREADS)

    def run(self, batches: list[list[tuple[int, ...]]]) -> tuple[float, np.ndarray]:
        first = np.stack(list(self.pool.map(self.read, batches[0])))
        t0 = time.perf_counter()
        for batch in batches[1:]:
            np.stack(list(self.pool.map(self.read, batch)))
        return time.perf_counter() - t0, first


def tensorstore_loader(path: Path) -> LoopLoader:
    import tensorstore as ts

    ctx = ts.Context({"data_copy_concurrency": {"limit": THREADS}, "file_io_concurrency": {"limit": THREADS}})
    arr = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}, read=True,
                  context=ctx).result()
    return LoopLoader("tensorstore loop", lambda start: arr[slices(start)].read().result())


def zarrs_loader(path: Path) -> LoopLoader:
    import zarr

    with zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline", "threading.max_workers": THREADS,
                          "codec_pipeline.strict": True}):
        arr = zarr.open_array(str(path), mode="r")
    name = type(arr._async_array.codec_pipeline).__module__
    if not name.startswith("zarrs"):
        raise SystemExit(f"zarr-python did not pick zarrs-python's pipeline: {name}")
    return LoopLoader("zarr-python+zarrs loop", lambda start: arr[slices(start)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path("/tmp/damacy-bench-data"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batches", type=int, default=8, help="timed batches per round and loader")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    try:
        import tensorstore  # noqa: F401
        import zarrs  # noqa: F401
    except ImportError as e:
        raise SystemExit(f"{e.name} is missing: pip install -r benches/requirements.txt") from None
    import damacy
    import zarr

    make_data.make(args.data, (512, 512, 512))
    load_before = os.getloadavg()
    table = []
    for name in ARRAYS:
        path = args.data / name
        make_data.warm_page_cache(path)
        shape = zarr.open_array(str(path), mode="r").shape
        loaders = [DamacyLoader(path, args.batch_size), tensorstore_loader(path), zarrs_loader(path)]
        rates: dict[str, list[float]] = {ld.label: [] for ld in loaders}
        per_round = args.batch_size * (1 + args.batches)
        for r in range(args.rounds):
            starts = crops(shape, per_round, seed=1000 * r + 7)
            batches = [starts[i : i + args.batch_size] for i in range(0, per_round, args.batch_size)]
            reference = None
            for ld in loaders:
                seconds, first = ld.run(batches)
                if reference is None:
                    reference = first
                elif not np.array_equal(first, reference):
                    raise SystemExit(f"{ld.label} read different values than {loaders[0].label} on {name}")
                rates[ld.label].append(args.batch_size * args.batches / seconds)
        row = {"array": name, **{k: statistics.median(v) for k, v in rates.items()}, "rounds": rates}
        table.append(row)
        print(name, {k: round(v, 1) for k, v in row.items() if isinstance(v, float)}, flush=True)

    labels = ["damacy.Pipeline", "tensorstore loop", "zarr-python+zarrs loop"]
    lines = [
        "| array | " + " | ".join(f"{lab}, crops/s" for lab in labels)
        + " | Pipeline ÷ tensorstore | Pipeline ÷ zarr-python+zarrs |",
        "|---|" + "---:|" * (len(labels) + 2),
    ]
    for r in table:
        lines.append(
            f"| {r['array']} | " + " | ".join(f"{r[lab]:.0f}" for lab in labels)
            + f" | {r[labels[0]] / r[labels[1]]:.2f}× | {r[labels[0]] / r[labels[2]]:.2f}× |"
        )
    rounds = ["", "Crops/s per round:", ""]
    for r in table:
        for lab in labels:
            rounds.append(f"- {r['array']}, {lab}: {[round(v) for v in r['rounds'][lab]]}")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    from importlib.metadata import version

    header = [
        "# The Pipeline vs thread-pool loops over tensorstore and zarr-python + zarrs-python",
        "",
        f"- date: {datetime.now(timezone.utc):%Y-%m-%d}",
        f"- commit: {commit}",
        f"- machine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}, Python "
        f"{platform.python_version()}; load average before {tuple(round(x, 2) for x in load_before)}, "
        f"after {tuple(round(x, 2) for x in os.getloadavg())}",
        f"- versions: damacy {damacy.__version__}, zarr {zarr.__version__}, zarrs-python {version('zarrs')}, "
        f"tensorstore {version('tensorstore')}",
        f"- command: `.venv/bin/python benches/pipeline/loaders.py --rounds {args.rounds} --batches "
        f"{args.batches} --batch-size {args.batch_size}` (`make bench-python` builds the release wheel)",
        f"- what: random unaligned 64³ crops of the 512³ uint16 arrays, batches of {args.batch_size}, "
        f"{THREADS} threads of work for every loader; medians over rounds (each round: one warm-up "
        f"batch, then {args.batches} batches timed from the push or first read to the last batch in "
        f"hand, loaders in turn).",
        "",
    ]
    text = "\n".join(header + lines + rounds) + "\n"
    print(text)
    if not args.no_write:
        (ROOT / "benches" / "results" / "loaders.md").write_text(text)


if __name__ == "__main__":
    main()

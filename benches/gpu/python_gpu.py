"""The Python package's GPU paths, on a GPU machine (step `python` of benches/gpu/run.sh).

Checks: tests/python/test_gpu.py under pytest (damacy.Pipeline batches on the device taken by
torch.from_dlpack and cupy.from_dlpack; every fixture read under zarr.config.enable_gpu() into
CuPy arrays through damacy.GpuCodecPipeline, strict; each against zarr-python's CPU reads).
Timing (medians of --reps runs, the same crops on both sides in one run):
  random crops of a sharded zstd uint16 array under enable_gpu(): damacy.GpuCodecPipeline vs
  zarr-python's BatchedCodecPipeline, and damacy.Pipeline batches of the same crops.

  python3 benches/gpu/python_gpu.py --out DIR     # writes DIR/python-gpu-<date>.md

Needs damacy (a wheel built with the cuda feature), zarr, pytest, cupy and torch; exits 1 if a
check fails, skips or cannot run.
"""

from __future__ import annotations

import argparse
import datetime
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
DAMACY = {"codec_pipeline.path": "damacy.GpuCodecPipeline", "codec_pipeline.executor": "gpu"}
DEFAULT = {"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}


def crops(shape: tuple[int, ...], extent: int, n: int, seed: int) -> list[tuple[list[int], list[int]]]:
    rng = np.random.default_rng(seed)
    size = [min(extent, s) for s in shape]
    return [([int(rng.integers(0, s - e + 1)) for s, e in zip(shape, size)], size) for _ in range(n)]


def checks(lines: list[str]) -> None:
    """tests/python/test_gpu.py under pytest; every test must run (a skip fails the step)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "tests/python/test_gpu.py"]
    print("$ " + " ".join(cmd[2:]), flush=True)
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=150)
    print(run.stdout[-6000:] + run.stderr[-2000:], flush=True)
    summary = next((ln for ln in reversed(run.stdout.splitlines()) if " in " in ln and ("passed" in ln or "failed" in ln or "skipped" in ln)), "no summary")
    lines.append(f"- `pytest tests/python/test_gpu.py`: {summary.strip('= ')}")
    if run.returncode != 0 or "skipped" in summary:
        raise AssertionError(f"test_gpu.py: {summary}")


def timing(reps: int, lines: list[str]) -> None:
    import cupy
    import zarr

    import damacy

    with tempfile.TemporaryDirectory() as tmp:
        path = str(pathlib.Path(tmp) / "field.zarr")
        n = 256
        z, y, x = np.meshgrid(*(np.linspace(0, 6, n, dtype=np.float32),) * 3, indexing="ij")
        data = (30000 + 20000 * np.sin(z) * np.cos(y + x)).astype(np.uint16)
        with zarr.config.set(DEFAULT):
            a = zarr.create_array(store=path, shape=data.shape, dtype=data.dtype, chunks=(32, 64, 64),
                                  shards=(128, 128, 128), compressors=zarr.codecs.ZstdCodec(level=3))
            a[...] = data
        plan = crops(data.shape, 64, 32, seed=11)
        sels = [tuple(slice(s, s + e) for s, e in zip(st, sz)) for st, sz in plan]
        want = np.stack([data[s] for s in sels])

        # zarr's warning when a buffer handed to it cannot be wrapped without a copy, per side.
        slow_copies: dict[str, int] = {}

        def zarr_side(config: dict) -> float:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                with zarr.config.set(config), zarr.config.enable_gpu():
                    arr = zarr.open_array(path, mode="r")
                    cupy.cuda.Device().synchronize()
                    t0 = time.perf_counter()
                    out = [arr[s] for s in sels]
                    cupy.cuda.Device().synchronize()
                    dt = time.perf_counter() - t0
            name = config["codec_pipeline.path"]
            slow_copies[name] = slow_copies.get(name, 0) + sum("__cuda_array_interface__" in str(w.message) for w in caught)
            np.testing.assert_array_equal(cupy.asnumpy(cupy.stack(out)), want)
            return dt

        def pipeline_side() -> float:
            cfg = damacy.Config(batch_size=len(plan), executor="gpu", device=0)
            with damacy.Pipeline(cfg) as p:
                t0 = time.perf_counter()
                p.push([damacy.Sample(path, damacy.Region(s, e)) for s, e in plan])
                with p.pop(timeout=300) as batch:
                    got = cupy.from_dlpack(batch)
                    cupy.cuda.Device().synchronize()
                    dt = time.perf_counter() - t0
                    np.testing.assert_array_equal(cupy.asnumpy(got), want)
            return dt

        sides = {
            "zarr-python BatchedCodecPipeline (enable_gpu)": lambda: zarr_side(DEFAULT),
            "damacy.GpuCodecPipeline (enable_gpu)": lambda: zarr_side(DAMACY),
            "damacy.Pipeline (one batch, DLPack to CuPy)": pipeline_side,
        }
        for name, side in list(sides.items()):  # warm-up: kernels compiled, files cached
            try:
                side()
            except Exception as e:  # noqa: BLE001 — a side that cannot read is reported, not timed
                lines.append(f"- {name}: cannot read under enable_gpu(): {type(e).__name__}: {e}")
                del sides[name]
        if "damacy.GpuCodecPipeline (enable_gpu)" not in sides:
            raise AssertionError("damacy.GpuCodecPipeline could not read the timing array")
        times = {name: [] for name in sides}
        for _ in range(reps):
            for name, side in sides.items():
                times[name].append(side())
        ref = times.get("zarr-python BatchedCodecPipeline (enable_gpu)")
        base = statistics.median(ref) if ref else float("nan")
        lines.append("")
        lines.append(f"Random crops: {len(plan)} crops of 64³ of a 256³ uint16 array (zstd level 3, chunks "
                     f"32×64×64 in 128³ shards, local files, page cache warm), median of {reps} runs:")
        lines.append("")
        lines.append("| reader | median s | crops/s | vs zarr-python |")
        lines.append("|---|---:|---:|---:|")
        for name, ts in times.items():
            med = statistics.median(ts)
            lines.append(f"| {name} | {med:.4f} | {len(plan) / med:.1f} | {base / med:.2f}× |")
        lines.append("")
        for name, n in slow_copies.items():
            lines.append(f"- zarr's \"falling back to slow copy\" warnings under `{name}`: {n}")
        if slow_copies.get(DAMACY["codec_pipeline.path"]):
            raise AssertionError("zarr copied damacy's device buffers (no __cuda_array_interface__)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "benches" / "results")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    warnings.simplefilter("default")
    import damacy

    lines = [f"# Python GPU paths — {datetime.date.today().isoformat()}", ""]
    lines.append(f"damacy {getattr(damacy, '__version__', '?')}, Python {sys.version.split()[0]}")
    try:
        import cupy
        import torch
        import zarr

        lines.append(f"zarr {zarr.__version__}, cupy {cupy.__version__}, torch {torch.__version__}, "
                     f"device {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    except Exception as e:  # noqa: BLE001
        lines.append(f"cannot run: {type(e).__name__}: {e}")
        print("\n".join(lines))
        return 1
    lines += ["", "## Checks", ""]
    failed = []
    steps = [("checks", lambda: checks(lines)), ("timing", lambda: timing(args.reps, lines))]
    for name, step in steps:
        t0 = time.perf_counter()
        try:
            step()
            print(f"=== {name}: ok ({time.perf_counter() - t0:.1f} s)", flush=True)
        except Exception as e:  # noqa: BLE001
            failed.append(name)
            lines.append(f"- {name} FAILED: {type(e).__name__}: {e}")
            traceback.print_exc()
            print(f"=== {name}: FAILED", flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"python-gpu-{datetime.date.today().isoformat()}.md").write_text(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

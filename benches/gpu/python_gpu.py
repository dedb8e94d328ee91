"""The Python package's GPU paths, on a GPU machine (step `python` of benches/gpu/run.sh).

Checks, each against zarr-python's own CPU read of the same elements:
  pipeline-torch  damacy.Pipeline batches on the device (executor "gpu"), taken by
                  torch.from_dlpack: CUDA tensors, zero-copy, equal values
  pipeline-cupy   the same batches taken by cupy.from_dlpack
  zarr-gpu        damacy.GpuCodecPipeline under zarr.config.enable_gpu(), strict: every fixture,
                  whole and one random strided selection, read into CuPy arrays by damacy
                  (zarr_stats()["device_reads"] counts them)
Timing (medians of --reps runs, the same crops on both sides in one run):
  random crops of a sharded zstd uint16 array under enable_gpu(): damacy.GpuCodecPipeline vs
  zarr-python's BatchedCodecPipeline, and damacy.Pipeline batches of the same crops.

  python3 benches/gpu/python_gpu.py --out DIR     # writes DIR/python-gpu-<date>.md

Needs damacy (a wheel built with the cuda feature), zarr, cupy and torch; exits 1 if a check
fails or cannot run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import statistics
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


def manifest() -> list[dict]:
    return json.loads((FIXTURES / "manifest.json").read_text())["arrays"]


def random_selection(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple:
    sel = []
    for n in shape:
        kind = int(rng.integers(0, 5))
        if kind == 0 and n > 0:
            sel.append(int(rng.integers(0, n)))
        else:
            a, b = sorted(int(x) for x in rng.integers(0, n + 1, size=2))
            b = max(b, min(n, a + 1))
            sel.append(slice(a, b, int(rng.integers(1, 4)) if kind == 1 else 1))
    return tuple(sel)


def crops(shape: tuple[int, ...], extent: int, n: int, seed: int) -> list[tuple[list[int], list[int]]]:
    rng = np.random.default_rng(seed)
    size = [min(extent, s) for s in shape]
    return [([int(rng.integers(0, s - e + 1)) for s, e in zip(shape, size)], size) for _ in range(n)]


def cpu_read(path: str, start: list[int], size: list[int]) -> np.ndarray:
    import zarr

    with zarr.config.set(DEFAULT):
        return zarr.open_array(path, mode="r")[tuple(slice(s, s + e) for s, e in zip(start, size))]


def check_pipeline(consumer: str, arrays: list[str], lines: list[str]) -> None:
    import damacy

    if consumer == "torch":
        import torch

        take, to_host = torch.from_dlpack, lambda t: (t.is_cuda, t.cpu().numpy())
    else:
        import cupy

        take, to_host = cupy.from_dlpack, lambda a: (isinstance(a, cupy.ndarray), cupy.asnumpy(a))
    cfg = damacy.Config(batch_size=4, executor="gpu", device=0)
    for path in arrays:
        import zarr

        shape = zarr.open_array(path, mode="r").shape
        plan = crops(shape, 8, 4, seed=len(path))
        with damacy.Pipeline(cfg) as p:
            p.push([damacy.Sample(path, (s, e)) for s, e in plan])
            with p.pop(timeout=120) as batch:
                x = take(batch)
                on_device, host = to_host(x)
                want = np.stack([cpu_read(path, s, e) for s, e in plan])
                if not on_device:
                    raise AssertionError(f"{path}: {consumer}.from_dlpack gave a host array")
                np.testing.assert_array_equal(host, want, err_msg=path)
        lines.append(f"- {consumer}.from_dlpack, {pathlib.Path(path).relative_to(FIXTURES)}: "
                     f"4 crops of {plan[0][1]} equal zarr-python's CPU reads")


def check_zarr_gpu(lines: list[str]) -> None:
    import cupy
    import zarr

    import damacy

    rng = np.random.default_rng(3)
    damacy.GpuCodecPipeline.reset_stats()
    read, skipped, failed = 0, [], []
    for entry in manifest():
        path = str(FIXTURES / entry["path"])
        with zarr.config.set(DEFAULT):
            a = zarr.open_array(path, mode="r")
            if a.ndim == 0 or a.dtype.byteorder == ">" or a.dtype.kind not in "biuf":
                skipped.append(f"{entry['path']} ({a.dtype}, {a.ndim}-d: not a CuPy read damacy takes)")
                continue
            sels = [(slice(None),) * a.ndim, random_selection(rng, a.shape)]
            refs = [np.asarray(a[s]) for s in sels]
        for sel, ref in zip(sels, refs):
            try:
                with zarr.config.set({**DAMACY, "codec_pipeline.strict": True}), zarr.config.enable_gpu():
                    got = zarr.open_array(path, mode="r")[sel]
                if not isinstance(got, cupy.ndarray) and np.ndim(ref) > 0:
                    raise AssertionError(f"got a {type(got).__name__}, not a CuPy array")
                np.testing.assert_array_equal(cupy.asnumpy(got) if isinstance(got, cupy.ndarray) else got, ref)
                read += 1
            except Exception as e:  # noqa: BLE001 — every failure is reported
                failed.append(f"{entry['path']} {sel}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    stats = damacy.GpuCodecPipeline.stats()
    lines.append(f"- enable_gpu() + damacy.GpuCodecPipeline (strict): {read} reads equal zarr-python's CPU "
                 f"reads; zarr_stats: device_reads {stats['device_reads']}, reads {stats['reads']}, "
                 f"fallback_reads {stats['fallback_reads']}; {len(skipped)} fixtures not tried")
    for f in failed:
        lines.append(f"  - FAILED {f}")
    if failed:
        raise AssertionError(f"{len(failed)} zarr enable_gpu reads failed")


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

        def zarr_side(config: dict) -> float:
            with zarr.config.set(config), zarr.config.enable_gpu():
                arr = zarr.open_array(path, mode="r")
                cupy.cuda.Device().synchronize()
                t0 = time.perf_counter()
                out = [arr[s] for s in sels]
                cupy.cuda.Device().synchronize()
                dt = time.perf_counter() - t0
            np.testing.assert_array_equal(cupy.asnumpy(cupy.stack(out)), want)
            return dt

        def pipeline_side() -> float:
            cfg = damacy.Config(batch_size=len(plan), executor="gpu", device=0)
            with damacy.Pipeline(cfg) as p:
                t0 = time.perf_counter()
                p.push([damacy.Sample(path, (s, e)) for s, e in plan])
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
    arrays = [str(FIXTURES / p) for p in ("v3/sharded_zstd_index_end", "v3/blosc_lz4_byte_ts2_large",
                                          "v3/blosc_zstd_byte_ts4_large", "v2/zlib_C")]
    failed = []
    steps = [("pipeline-torch", lambda: check_pipeline("torch", arrays, lines)),
             ("pipeline-cupy", lambda: check_pipeline("cupy", arrays, lines)),
             ("zarr-gpu", lambda: check_zarr_gpu(lines)),
             ("timing", lambda: timing(args.reps, lines))]
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

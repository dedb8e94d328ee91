#!/usr/bin/env python3
"""zarr-python reading through damacy: the same selections with damacy.GpuCodecPipeline and
with zarr-python's default pipeline, compared, timed, and the route each read took.

    python examples/zarr_gpu.py [--host] [ARRAY ...]   # default: a few arrays of fixtures/

Two routes, picked by what the machine has:

- GPU route, when CuPy is installed, sees a CUDA device, and damacy's ``gpu`` executor can
  bind it: under ``zarr.config.enable_gpu()`` zarr's outputs are CuPy arrays, and damacy
  decodes straight into them on the device (fetched bytes go up, decoding and assembly run
  there, ordered on CuPy's current stream; ``damacy.zarr_stats()["device_reads"]`` counts these
  reads). The reference is zarr-python's default pipeline reading into host memory.
- Host route otherwise (or with ``--host``): both pipelines fill numpy arrays, damacy with its
  default ``auto`` executor (the CPU here unless a CUDA context is current or
  ``codec_pipeline.device`` is set on a GPU machine).

A fallback to zarr-python's pipeline is an error here (``damacy.FallbackWarning`` raised), so
a read that did not go through damacy cannot pass unnoticed.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import zarr

import damacy

ROOT = Path(__file__).resolve().parents[1] / "fixtures"
ARRAYS = ("v3/sharded_zstd_index_end", "v3/blosc_lz4_byte_ts2_large", "v2/zstd_F")
DEFAULT = {"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}


def gpu_route() -> tuple[Any, int] | str:
    """``(cupy, device)`` when the GPU route can run here, else why not."""
    try:
        import cupy  # type: ignore[import-not-found]
    except ImportError:
        return "CuPy is not installed"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "CuPy sees no CUDA device"
        device = int(cupy.cuda.Device().id)
        cupy.cuda.Device(device).use()  # makes the device's context current, as any CuPy work does
    except cupy.cuda.runtime.CUDARuntimeError as e:
        return f"CuPy has no CUDA device: {e}"
    try:
        reader = damacy.Reader(executor="gpu", device=device)
    except damacy.Error as e:
        return f"damacy cannot bind CUDA device {device}: {e}"
    if reader.device is None or reader.device[0] != "cuda":
        return f"damacy decodes {reader.executor_note}"
    return cupy, device


def selections(shape: tuple[int, ...], n: int, rng: np.random.Generator) -> list[tuple[slice, ...]]:
    out = []
    for _ in range(n):
        sel = []
        for size in shape:
            a = int(rng.integers(0, max(1, size - 1)))
            sel.append(slice(a, int(rng.integers(a + 1, size + 1)), int(rng.integers(1, 3))))
        out.append(tuple(sel))
    return out


def read(path: str, config: dict[str, Any], sels: list[tuple[slice, ...]], cupy: Any = None) -> tuple[list[Any], float]:
    """The selections read under ``config`` (into CuPy arrays under ``enable_gpu()`` when
    ``cupy`` is given, the time including the device work), and the seconds taken."""
    with zarr.config.set(config):
        gpu = zarr.config.enable_gpu() if cupy is not None else zarr.config.set({})
        with gpu:
            array = zarr.open_array(path, mode="r")
            t0 = time.perf_counter()
            out = [array[s] for s in sels]
            if cupy is not None:
                cupy.cuda.get_current_stream().synchronize()
    return out, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("arrays", nargs="*", help="zarr arrays (default: a few of fixtures/)")
    parser.add_argument("--host", action="store_true", help="read into numpy arrays even on a GPU machine")
    args = parser.parse_args()
    paths = args.arrays or [str(ROOT / p) for p in ARRAYS]

    route = "CuPy outputs were not asked for (--host)" if args.host else gpu_route()
    ours = {"codec_pipeline.path": "damacy.GpuCodecPipeline"}
    if isinstance(route, tuple):
        cupy, device = route
        ours.update({"codec_pipeline.executor": "gpu", "codec_pipeline.device": device})
        print(f"GPU route: zarr.config.enable_gpu(), CuPy outputs on CUDA device {device}")
    else:
        cupy = None
        print(f"host route: numpy outputs ({route})")

    rng = np.random.default_rng(0)
    for path in paths:
        with zarr.config.set(DEFAULT):
            shape = zarr.open_array(path, mode="r").shape
        sels = selections(shape, 20, rng)
        damacy.GpuCodecPipeline.reset_stats()
        with warnings.catch_warnings():
            warnings.simplefilter("error", damacy.FallbackWarning)  # show any fallback loudly
            got, t_ours = read(path, ours, sels, cupy)
        if cupy is not None:
            assert all(isinstance(g, cupy.ndarray) for g in got), [type(g) for g in got]
            got = [cupy.asnumpy(g) for g in got]
        want, t_theirs = read(path, DEFAULT, sels)
        assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True)), path
        stats = damacy.zarr_stats()
        where = f"{stats['device_reads']} of them on the device" if cupy is not None else "into numpy"
        print(
            f"{Path(path).name:32} 20 selections equal; damacy {t_ours * 1e3:7.1f} ms, "
            f"zarr-python (host) {t_theirs * 1e3:7.1f} ms; {stats['reads']} reads / {stats['chunks']} chunks "
            f"through damacy ({where}), {stats['fallback_reads']} fallbacks"
        )


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""zarr-python reading through damacy: the same selections with damacy.GpuCodecPipeline and
with zarr-python's default pipeline, compared, timed, and the route each read took.

    python examples/zarr_gpu.py [ARRAY ...]     # default: a few arrays of fixtures/

With a GPU and ``zarr.config.enable_gpu()``, zarr hands the pipeline CuPy outputs; damacy does
not decode into them yet and falls back to zarr-python for those reads (counted under
``output`` in ``damacy.zarr_stats()``), so this example reads into host numpy arrays.
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np
import zarr

import damacy

ROOT = Path(__file__).resolve().parents[1] / "fixtures"
DEFAULT = "zarr.core.codec_pipeline.BatchedCodecPipeline"


def read_all(path: str, pipeline: str, selections: list[tuple]) -> tuple[list[np.ndarray], float]:
    with zarr.config.set({"codec_pipeline.path": pipeline}):
        array = zarr.open_array(path, mode="r")
        t0 = time.perf_counter()
        out = [array[s] for s in selections]
        return out, time.perf_counter() - t0


def main(paths: list[str]) -> None:
    rng = np.random.default_rng(0)
    for path in paths:
        shape = zarr.open_array(path, mode="r").shape
        selections = []
        for _ in range(20):
            sel = []
            for n in shape:
                a = int(rng.integers(0, max(1, n - 1)))
                sel.append(slice(a, int(rng.integers(a + 1, n + 1)), int(rng.integers(1, 3))))
            selections.append(tuple(sel))
        damacy.GpuCodecPipeline.reset_stats()
        with warnings.catch_warnings():
            warnings.simplefilter("error", damacy.FallbackWarning)  # show any fallback loudly
            ours, t_ours = read_all(path, "damacy.GpuCodecPipeline", selections)
        theirs, t_theirs = read_all(path, DEFAULT, selections)
        assert all(np.array_equal(a, b) for a, b in zip(ours, theirs, strict=True))
        stats = damacy.zarr_stats()
        print(
            f"{Path(path).name:32} 20 selections equal; damacy {t_ours * 1e3:7.1f} ms, "
            f"zarr-python {t_theirs * 1e3:7.1f} ms; {stats['reads']} reads / {stats['chunks']} chunks "
            f"through damacy, {stats['fallback_reads']} fallbacks"
        )


if __name__ == "__main__":
    main(sys.argv[1:] or [str(ROOT / p) for p in ("v3/sharded_zstd_index_end", "v3/blosc_lz4_byte_ts2_large", "v2/zstd_F")])

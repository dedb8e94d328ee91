#!/usr/bin/env python3
"""Write the two arrays of the CPU read benchmark with zarr-python (the reference writer).

    python benches/read/make_data.py [DATA_DIR] [--shape Z Y X]

DATA_DIR defaults to /tmp/damacy-bench-data (a scratch folder, never the repository). It gets

* ``sharded_zstd``: uint16, sharded, shards 256x256x512, inner chunks 32x64x64, each inner
  chunk ``bytes`` + ``zstd(level=0, checksum=False)`` (zarr-python's default compressor);
* ``blosc_lz4``: uint16, unsharded 64x64x64 chunks, ``blosc(cname=lz4, clevel=5, shuffle)``;

both holding the same synthetic volume: a noisy dark background (100 +- 3 counts) with smooth
bright structures (a thresholded sum of sines), which compresses about 2.2x with zstd and 1.9x
with blosc-lz4, roughly like real microscopy data. A finished run leaves ``MANIFEST.json``
with the parameters; a later run with the same parameters leaves the data alone.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import zarr
from zarr.codecs import BloscCodec, BloscShuffle, ZstdCodec

DEFAULT_DIR = Path("/tmp/damacy-bench-data")
DEFAULT_SHAPE = (512, 512, 512)
SHARD = (256, 256, 512)
INNER = (32, 64, 64)
BLOSC_CHUNK = (64, 64, 64)
SEED = 20261122
# Bump when the volume or the codecs change, so old data is rewritten.
DATA_VERSION = 1


def volume(origin: tuple[int, int, int], shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """The synthetic volume on the box ``origin + shape`` (deterministic given the rng state)."""
    z = np.arange(origin[0], origin[0] + shape[0], dtype=np.float32)[:, None, None]
    y = np.arange(origin[1], origin[1] + shape[1], dtype=np.float32)[None, :, None]
    x = np.arange(origin[2], origin[2] + shape[2], dtype=np.float32)[None, None, :]
    s = (np.sin(z / 13.0 + 0.3) + np.sin(y / 17.0) * np.cos(x / 11.0) + np.sin((x + y - z) / 23.0)) / 3.0
    f = 100.0 + 2000.0 * np.maximum(s - 0.4, 0.0)
    f = f + rng.normal(0.0, 3.0, size=shape).astype(np.float32)
    return np.clip(f, 0, 65535).astype(np.uint16)


def manifest_for(shape: tuple[int, ...]) -> dict:
    return {
        "version": DATA_VERSION,
        "seed": SEED,
        "shape": list(shape),
        "arrays": {
            "sharded_zstd": {"shards": list(SHARD), "inner_chunks": list(INNER), "codec": "zstd(level=0)"},
            "blosc_lz4": {"chunks": list(BLOSC_CHUNK), "codec": "blosc(lz4, clevel=5, shuffle)"},
        },
        "zarr": zarr.__version__,
    }


def make(data_dir: Path, shape: tuple[int, ...]) -> dict:
    """Write the arrays unless a matching manifest says they are there. Returns the manifest."""
    manifest = manifest_for(shape)
    mpath = data_dir / "MANIFEST.json"
    if mpath.exists():
        try:
            old = json.loads(mpath.read_text())
        except json.JSONDecodeError:
            old = None
        if old is not None and {k: v for k, v in old.items() if k != "write_s"} == manifest:
            print(f"make_data: {data_dir} already holds the arrays (shape {shape}); not rewriting")
            return old
    if any(s % c for s, c in zip(shape, SHARD)):
        raise SystemExit(f"shape {shape} must be a multiple of the shard shape {SHARD}")
    data_dir.mkdir(parents=True, exist_ok=True)
    mpath.unlink(missing_ok=True)
    for name in ("sharded_zstd", "blosc_lz4"):
        shutil.rmtree(data_dir / name, ignore_errors=True)
    started = time.perf_counter()
    sharded = zarr.create_array(
        store=str(data_dir / "sharded_zstd"),
        shape=shape,
        dtype="uint16",
        chunks=INNER,
        shards=SHARD,
        compressors=ZstdCodec(level=0, checksum=False),
        fill_value=0,
        zarr_format=3,
    )
    blosc = zarr.create_array(
        store=str(data_dir / "blosc_lz4"),
        shape=shape,
        dtype="uint16",
        chunks=BLOSC_CHUNK,
        compressors=BloscCodec(cname="lz4", clevel=5, shuffle=BloscShuffle.shuffle, typesize=2),
        fill_value=0,
        zarr_format=3,
    )
    rng = np.random.default_rng(SEED)
    # One shard-sized block at a time: whole shards are written once (no read-modify-write),
    # and the block is a whole number of blosc chunks too.
    for z0 in range(0, shape[0], SHARD[0]):
        for y0 in range(0, shape[1], SHARD[1]):
            for x0 in range(0, shape[2], SHARD[2]):
                block = volume((z0, y0, x0), SHARD, rng)
                sel = tuple(slice(o, o + n) for o, n in zip((z0, y0, x0), SHARD))
                sharded[sel] = block
                blosc[sel] = block
    manifest["write_s"] = round(time.perf_counter() - started, 1)
    mpath.write_text(json.dumps(manifest, indent=2) + "\n")
    for name in ("sharded_zstd", "blosc_lz4"):
        stored = sum(p.stat().st_size for p in (data_dir / name).rglob("*") if p.is_file())
        raw = int(np.prod(shape)) * 2
        print(f"make_data: {name}: {stored / 2**20:.1f} MiB stored, ratio {raw / stored:.2f}")
    print(f"make_data: wrote {data_dir} (shape {shape}) in {manifest['write_s']} s")
    return manifest


def warm_page_cache(path: Path) -> int:
    """Reads every file under ``path`` once, so timed reads come from the page cache; the bytes."""
    total = 0
    for p in sorted(path.rglob("*")):
        if p.is_file():
            with open(p, "rb") as f:
                while chunk := f.read(1 << 22):
                    total += len(chunk)
    return total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data_dir", nargs="?", type=Path, default=DEFAULT_DIR)
    p.add_argument("--shape", nargs=3, type=int, default=list(DEFAULT_SHAPE), metavar=("Z", "Y", "X"))
    args = p.parse_args(argv)
    make(args.data_dir, tuple(args.shape))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The e2e step's uncompressed copy: the demo's sharded zstd array rewritten by zarr-python with
the same chunk and shard geometry and no compressor (`bytes` only), plus 15 hard-linked copies
(raw_1 … raw_15), so the GPU route can be timed with no kernel decoding anything.

    python3 benches/gpu/raw_copy.py STORE   # STORE = the demo's demo.zarr folder
"""

import os
import subprocess
import sys

import zarr
from zarr.storage import LocalStore


def main() -> int:
    root = sys.argv[1]
    store = LocalStore(root)
    src = zarr.open_array(store=store, path="sharded_zstd", mode="r")
    if not os.path.exists(os.path.join(root, "raw", "zarr.json")):
        dst = zarr.create_array(
            store=store,
            name="raw",
            shape=src.shape,
            dtype=src.dtype,
            chunks=src.chunks,
            shards=src.shards,
            compressors=None,
            fill_value=0,
            overwrite=True,
        )
        # One shard-row at a time keeps memory at a few hundred MiB.
        step = src.shards[0]
        for z in range(0, src.shape[0], step):
            dst[z : z + step] = src[z : z + step]
    for i in range(1, 16):
        link = os.path.join(root, f"raw_{i}")
        if not os.path.exists(link):
            subprocess.run(["cp", "-al", os.path.join(root, "raw"), link], check=True)
    print(f"uncompressed copy: {root}/raw (+15 links), shape {src.shape}, chunks {src.chunks}, shards {src.shards}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

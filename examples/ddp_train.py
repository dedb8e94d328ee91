#!/usr/bin/env python3
"""Data-parallel training fed by damacy: each rank streams its own random crops of a zarr array
(``damacy.samplers.DistributedSampler``) through a ``damacy.Pipeline`` into torch, zero-copy.

    torchrun --nproc-per-node 2 examples/ddp_train.py [--data DATA.zarr/ARRAY] [--steps 50]
    python examples/ddp_train.py                 # one process on the CPU, no torch.distributed
    python examples/ddp_train.py --no-torch      # the data path only (numpy), without torch

Without ``--data`` every rank writes the same small seeded array (zstd, sharded) to a temporary
folder. Under torchrun (``WORLD_SIZE`` set) the ranks join a process group (NCCL on GPUs, gloo
otherwise) and wrap the model in ``DistributedDataParallel``; each rank binds the GPU of its
``LOCAL_RANK`` (``torch.cuda.set_device`` and ``Config.device``), and the sampler gives each rank
disjoint crops, a new order every epoch.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import zarr

import damacy
from damacy.samplers import DistributedSampler, crop_space

CROP = (16, 32, 32)


def synthetic(folder: Path) -> str:
    """A (64, 128, 128) uint16 array, sharded, zstd: the same on every rank (seeded)."""
    path = folder / "synthetic.zarr"
    rng = np.random.default_rng(1234)
    a = zarr.create_array(store=str(path), shape=(64, 128, 128), dtype="uint16", chunks=(16, 32, 32),
                          shards=(32, 64, 64), compressors=zarr.codecs.ZstdCodec(level=3), overwrite=True)
    a[...] = rng.integers(0, 4096, size=a.shape, dtype=np.uint16)
    return str(path)


def import_torch() -> Any:
    try:
        import torch
    except ImportError:
        sys.exit(
            "this example trains with PyTorch, which is not installed: `pip install torch` "
            "(or run it with --no-torch to stream the batches through numpy only)"
        )
    return torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="a zarr array (path or URL); default: a synthetic one")
    ap.add_argument("--steps", type=int, default=20, help="steps per epoch on each rank")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=4, help="per rank")
    ap.add_argument("--no-torch", action="store_true", help="stream batches into numpy, no model")
    args = ap.parse_args()

    rank, world, local_rank = damacy.samplers.rank_info("env")
    torch = None if args.no_torch else import_torch()
    distributed = torch is not None and "WORLD_SIZE" in os.environ
    use_cuda = torch is not None and torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(local_rank or 0)
    if distributed:
        torch.distributed.init_process_group("nccl" if use_cuda else "gloo")

    tmp = tempfile.TemporaryDirectory(prefix=f"damacy-ddp-{rank}-")
    data = args.data or synthetic(Path(tmp.name))
    array = zarr.open_array(data, mode="r")
    # Random crops: steps × batch × world per epoch, dealt disjointly to the ranks.
    space = crop_space([array], CROP, count=args.steps * args.batch_size * world)
    sampler = DistributedSampler(space, batch_size=args.batch_size, seed=1234, dist_info="env")
    config = damacy.Config(
        batch_size=args.batch_size,
        sample_shape=CROP,
        dtype="float32",
        n_io_threads=4,
        # Without torch's CUDA the batches go to numpy or a CPU model: host batches, even on a
        # GPU machine (where "auto" would bind a GPU and want a device or a current context).
        executor="auto" if use_cuda else "cpu",
        device=(local_rank or 0) if use_cuda else None,
    )
    if rank == 0:
        print(f"world {world}, {sampler.n_batches} batches per rank per epoch\n{config.describe()}")

    model = opt = None
    if torch is not None:
        device = torch.device("cuda", local_rank or 0) if use_cuda else torch.device("cpu")
        model = torch.nn.Sequential(
            torch.nn.Conv3d(1, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool3d(1),
            torch.nn.Flatten(), torch.nn.Linear(8, 1),
        ).to(device)
        if distributed:
            model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if use_cuda else None)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    started = time.perf_counter()
    with damacy.Pipeline(config) as pipeline:
        if rank == 0:
            print(f"executor: {pipeline.executor}")
        for epoch in range(args.epochs):
            sampler.set_epoch(epoch)
            pipeline.push(sampler.samples([data]))
            for step, batch in enumerate(pipeline.batches(sampler.n_batches)):
                if torch is None:
                    loss = float(np.from_dlpack(batch).mean())           # zero-copy view
                else:
                    x = torch.from_dlpack(batch).unsqueeze(1) / 4096.0   # (B, 1, D, H, W), stream-fenced
                    target = x.mean(dim=(1, 2, 3, 4)).unsqueeze(1)
                    out = model(x)
                    loss_t = torch.nn.functional.mse_loss(out, target)
                    opt.zero_grad()
                    loss_t.backward()
                    opt.step()
                    loss = float(loss_t)
                if rank == 0 and step % 10 == 0:
                    print(f"epoch {epoch} step {step} loss {loss:.5f}")
        if rank == 0:
            print(pipeline.stats())
    if rank == 0:
        print(f"done in {time.perf_counter() - started:.1f} s")
    if distributed:
        torch.distributed.destroy_process_group()
    tmp.cleanup()


if __name__ == "__main__":
    main()

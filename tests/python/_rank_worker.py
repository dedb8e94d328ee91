"""One rank of test_pipeline.test_two_ranks_cover_the_dataset_exactly_once, launched like
torchrun (RANK, WORLD_SIZE, LOCAL_RANK in the environment): its sampler's crops of the array
through a Pipeline; writes what it read to a JSON file."""

import json
import os
import sys

import numpy as np
import zarr

import damacy
from damacy.samplers import DistributedSampler, crop_space


def main() -> None:
    path, out = sys.argv[1], sys.argv[2]
    array = zarr.open_array(path, mode="r")
    sampler = DistributedSampler(crop_space([array], (8, 8, 10)), batch_size=3, shuffle=True, seed=11)
    config = damacy.Config(batch_size=3, executor="cpu", n_io_threads=1, n_compute_threads=1, n_workers=1,
                           device=int(os.environ["LOCAL_RANK"]))
    crops, total = [], 0
    with damacy.Pipeline(config) as p:
        p.push(sampler.samples([path]))
        for batch in p.batches():
            total += int(np.from_dlpack(batch).astype(np.int64).sum())
            crops.extend([list(s.start), list(s.shape)] for s in batch.samples)
    starts = [",".join(map(str, c[0])) for c in crops]
    with open(out, "w") as f:
        json.dump({"rank": sampler.rank, "crops": crops, "starts": starts, "total": total}, f)


if __name__ == "__main__":
    main()

"""Per-rank sample plans for distributed training (the ``damacy-sampler`` crate).

A plan maps ``(space, seed, epoch, rank, world)`` to this rank's ordered samples for one
epoch: disjoint from every other rank's, equal in length (``equal_length="pad"`` or
``"drop"``), deterministic, resumable, computed lazily in O(1) memory.

>>> from damacy.samplers import DistributedSampler, IndexSpace
>>> space = IndexSpace([1000], chunk_size=100)
>>> s = DistributedSampler(space, batch_size=10, seed=1, rank=0, world_size=2)
>>> len(s), s.n_batches
(500, 50)
>>> ids = list(s)            # this rank's sample ids for epoch 0
>>> s.set_epoch(1)           # a new order for the next epoch

``DistributedSampler`` works as a ``torch.utils.data.Sampler`` (pass it as ``sampler=`` to a
``DataLoader``; ``batch_sampler()`` gives one for ``batch_sampler=``) without importing torch
unless ``dist_info="torch"`` asks for it. :meth:`DistributedSampler.samples` yields
:class:`damacy.Sample` regions for damacy's Pipeline.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from damacy import _damacy
from damacy._sample import Region, Sample

CropSpace = _damacy.CropSpace
IndexSpace = _damacy.IndexSpace
Plan = _damacy.Plan

__all__ = ["CropSpace", "DistributedSampler", "IndexSpace", "Plan", "crop_space", "rank_info"]

_CHUNK = 4096


def rank_info(dist_info: str | Callable[[], Sequence[int]] = "env") -> tuple[int, int, int | None]:
    """``(rank, world_size, local_rank)`` from the source ``dist_info`` names.

    - ``"env"``: torchrun's ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` (a single process when
      neither of the first two is set; a bad value is a ``damacy.InvalidArgument`` naming it).
    - ``"torch"``: ``torch.distributed`` when it is initialised, else the environment.
    - ``"jax"``: ``jax.process_index()`` / ``jax.process_count()`` once ``jax.distributed`` is
      initialised; before that (``jax.distributed.is_initialized()``, where JAX has it) the
      environment, without touching JAX's backends (which would make a later
      ``jax.distributed.initialize()`` fail).
    - a callable returning ``(rank, world)`` or ``(rank, world, local_rank)``.
    """
    if callable(dist_info):
        got = tuple(dist_info())
        if len(got) not in (2, 3) or not all(isinstance(v, int) for v in got[:2]):
            raise _damacy.InvalidArgument(
                f"dist_info callable returned {got!r}; return (rank, world) or (rank, world, local_rank)"
            )
        rank, world = got[0], got[1]
        local = got[2] if len(got) == 3 else None
    elif dist_info == "env":
        return _damacy.rank_from_env()
    elif dist_info == "torch":
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return _damacy.rank_from_env()
        rank, world = dist.get_rank(), dist.get_world_size()
        local_env = os.environ.get("LOCAL_RANK")
        local = int(local_env) if local_env and local_env.strip().isdigit() else None
    elif dist_info == "jax":
        import jax

        is_initialized = getattr(getattr(jax, "distributed", None), "is_initialized", None)
        if callable(is_initialized) and not is_initialized():
            return _damacy.rank_from_env()
        rank, world, local = jax.process_index(), jax.process_count(), None
    else:
        raise _damacy.InvalidArgument(f"dist_info={dist_info!r}: use 'env', 'torch', 'jax' or a callable")
    if world < 1 or not 0 <= rank < world:
        raise _damacy.InvalidArgument(f"rank {rank} is out of range for world size {world}")
    return rank, world, local


def crop_space(
    arrays: Sequence[Any],
    crop_shape: Sequence[int],
    *,
    count: int | None = None,
    stride: Sequence[int] | None = None,
    placement: str = "anywhere",
) -> CropSpace:
    """A :class:`CropSpace` over zarr arrays (anything with ``shape``, ``chunks``, optional
    ``shards`` and ``dtype``) or ``(shape, chunk_shape[, shard_shape[, element_size]])``
    tuples. ``count`` draws that many random crops per epoch; without it the crops tile a
    grid with ``stride`` (default: the crop shape). ``placement`` is ``"anywhere"``,
    ``"chunk"`` (crops inside one chunk) or ``"shard"``."""
    geometries = []
    for a in arrays:
        if isinstance(a, tuple):
            shape, chunks, *rest = a
            shards = rest[0] if rest else None
            size = rest[1] if len(rest) > 1 else 1
        else:
            shape, chunks = a.shape, a.chunks
            shards = getattr(a, "shards", None)
            size = getattr(getattr(a, "dtype", None), "itemsize", 1)
        geometries.append(
            (list(shape), list(chunks), list(shards) if shards is not None else None, int(size))
        )
    return CropSpace(
        geometries,
        list(crop_shape),
        count=count,
        stride=list(stride) if stride is not None else None,
        placement=placement,
    )


def _shuffle_name(shuffle: bool | str) -> str:
    if shuffle is True:
        return "full"
    if shuffle is False:
        return "none"
    return str(shuffle)


class DistributedSampler:
    """This rank's samples of a space, one epoch at a time; usable as a torch ``Sampler``.

    Parameters (keyword-only after ``space``):

    - ``batch_size``: samples per batch on each rank (plans deal whole global batches).
    - ``shuffle``: ``True``/``"full"`` (a keyed permutation), ``False``/``"none"``, or
      ``"two_level"`` (chunk order shuffled, samples within ``window`` chunks).
    - ``seed``: the run's seed, the same on every rank.
    - ``mode``: ``"strided"`` (``all[rank::world]``, elastic) or ``"contiguous"``.
    - ``granularity``: ``"sample"`` or ``"chunk"`` (whole chunks, or shards with
      ``group_level="shard"``, per rank).
    - ``equal_length``: ``"pad"`` (repeats, see :meth:`entries`), ``"drop"`` or ``"uneven"``.
    - ``dist_info``: where rank and world come from (see :func:`rank_info`), or give
      ``rank`` and ``world_size``.
    """

    def __init__(
        self,
        space: IndexSpace | CropSpace,
        *,
        batch_size: int = 1,
        shuffle: bool | str = True,
        seed: int = 0,
        mode: str = "strided",
        granularity: str = "sample",
        group_level: str = "chunk",
        window: int = 1,
        equal_length: str = "pad",
        dist_info: str | Callable[[], Sequence[int]] = "env",
        rank: int | None = None,
        world_size: int | None = None,
    ) -> None:
        if (rank is None) != (world_size is None):
            raise _damacy.InvalidArgument("give both rank and world_size, or neither (then dist_info decides)")
        if rank is None:
            rank, world_size, self.local_rank = rank_info(dist_info)
        else:
            self.local_rank = None
        self.space = space
        self.rank = int(rank)
        self.world_size = int(world_size)  # type: ignore[arg-type]
        self.seed = int(seed)
        self.epoch = 0
        self._options = dict(
            batch_size=int(batch_size),
            mode=mode,
            granularity=granularity,
            group_level=group_level,
            shuffle=_shuffle_name(shuffle),
            window=int(window),
            equal_length=equal_length,
        )
        self._resume: tuple[int, int, int, int] | None = None
        self._consumed = 0
        self._plan = self._build()  # validates every option now

    def _build(self) -> Plan:
        return Plan(
            self.space,
            rank=self.rank,
            world=self.world_size,
            seed=self.seed,
            epoch=self.epoch,
            resume=self._resume,
            **self._options,
        )

    @property
    def plan(self) -> Plan:
        """The plan of the current epoch (from the resume state, if one was loaded)."""
        return self._plan

    @property
    def batch_size(self) -> int:
        return self._options["batch_size"]

    @property
    def n_batches(self) -> int:
        """Batches this rank yields this epoch (equal on every rank under pad and drop)."""
        return self._plan.n_batches

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch the next iteration covers (a new order, never ``seed + epoch``)."""
        self.epoch = int(epoch)
        self._resume = None
        self._consumed = 0
        self._plan = self._build()

    def __len__(self) -> int:
        return len(self._plan)

    def entries(self) -> Iterator[tuple[int, bool]]:
        """``(sample id, padded)`` in order; ``padded`` marks repeats added by ``"pad"``."""
        plan, pos, end = self._plan, 0, len(self._plan)
        self._consumed = 0
        while pos < end:
            ids, padded = plan.entries(pos, _CHUNK)
            if not ids:
                break
            for entry in zip(ids, padded, strict=True):
                self._consumed += 1
                yield entry
            pos += len(ids)

    def __iter__(self) -> Iterator[int]:
        for sample_id, _ in self.entries():
            yield sample_id

    def batches(self) -> Iterator[list[int]]:
        """This rank's batches of sample ids."""
        batch: list[int] = []
        for sample_id, _ in self.entries():
            batch.append(sample_id)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch:
            yield batch

    def batch_sampler(self) -> _BatchSampler:
        """An iterable of batches with ``__len__``: a torch ``batch_sampler``."""
        return _BatchSampler(self)

    def worker_batches(self, worker: int, workers: int, split: str = "interleaved") -> Iterator[list[int]]:
        """Data-loader worker ``worker`` of ``workers``: disjoint whole batches of this rank."""
        plan = self._plan
        for b in plan.worker_batches(worker, workers, split):
            lo, hi = plan.batch_bounds(b)
            ids, _ = plan.entries(lo, hi - lo)
            yield ids

    def resolve(self, sample_id: int) -> tuple[Any, ...]:
        """``(array, row)`` for an index space, ``(array, start, shape)`` for a crop space."""
        return self._plan.resolve(sample_id)

    def samples(
        self,
        uris: Sequence[str | Sequence[str]],
        *,
        row_shape: Sequence[int] | None = None,
        worker: tuple[int, int] | None = None,
    ) -> Iterator[Sample]:
        """This rank's samples as :class:`damacy.Sample` (what ``Pipeline.push`` takes).

        ``uris[a]`` names array ``a`` of the space (a tuple of URIs names several arrays read at
        the same region: ``Config.arrays_per_sample`` tensors per batch). For an index space, a row of an array
        whose rows have shape ``row_shape`` is the region ``[row, 0…]`` of shape
        ``[1, row_shape…]``. ``worker=(w, n)`` yields worker ``w``'s batches only; inside a
        torch ``DataLoader`` worker (torch already imported) that is found by itself.
        """
        if worker is None and "torch" in sys.modules:
            info = sys.modules["torch"].utils.data.get_worker_info()
            if info is not None:
                worker = (info.id, info.num_workers)
        ids: Iterator[int]
        if worker is None:
            ids = iter(self)
        else:
            ids = (i for batch in self.worker_batches(*worker) for i in batch)
        is_index = isinstance(self.space, IndexSpace)
        tail = tuple(row_shape) if row_shape is not None else ()
        if is_index and row_shape is None:
            raise _damacy.InvalidArgument("an index space needs row_shape: the shape of one row of the arrays")
        for sample_id in ids:
            if is_index:
                array, row = self._plan.resolve(sample_id)
                yield Sample(uris[array], Region((row,) + (0,) * len(tail), (1,) + tail))
            else:
                array, start, shape = self._plan.resolve(sample_id)
                yield Sample(uris[array], Region(start, shape))

    def state_dict(self) -> dict[str, int]:
        """Where this rank is: resume with :meth:`load_state_dict` (the same on every rank;
        elastic plans resume on another world size with the same global batch)."""
        batches_done = self._consumed // self.batch_size
        epoch, cursor, world, batch = self._plan.checkpoint(batches_done)
        return {"epoch": epoch, "cursor": cursor, "world_size": world, "batch_size": batch, "seed": self.seed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue from a :meth:`state_dict`: the next iteration yields the rest of its epoch."""
        if int(state.get("seed", self.seed)) != self.seed:
            raise _damacy.InvalidArgument(
                f"state was saved with seed {state['seed']}, this sampler has seed {self.seed}"
            )
        self.epoch = int(state["epoch"])
        self._resume = (self.epoch, int(state["cursor"]), int(state["world_size"]), int(state["batch_size"]))
        self._consumed = 0
        self._plan = self._build()

    def __repr__(self) -> str:
        o = self._options
        return (
            f"DistributedSampler(rank={self.rank}, world_size={self.world_size}, epoch={self.epoch}, "
            f"len={len(self)}, batch_size={o['batch_size']}, shuffle={o['shuffle']!r}, mode={o['mode']!r}, "
            f"granularity={o['granularity']!r}, equal_length={o['equal_length']!r})"
        )


class _BatchSampler:
    def __init__(self, sampler: DistributedSampler) -> None:
        self.sampler = sampler

    def __iter__(self) -> Iterator[list[int]]:
        return self.sampler.batches()

    def __len__(self) -> int:
        return self.sampler.n_batches

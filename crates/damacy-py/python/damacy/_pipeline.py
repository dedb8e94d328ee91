"""``damacy.Pipeline``: push samples, pop batches (one pipeline per rank)."""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any

from damacy import _damacy
from damacy._config import Config
from damacy._sample import Sample
from damacy._warnings import DamacyWarning

Batch = _damacy.Batch
BatchInfo = _damacy.BatchInfo
PipelineStats = _damacy.PipelineStats
StageStats = _damacy.StageStats


def _local_rank_warning(config: Config, given: list[str]) -> str | None:
    """``LOCAL_RANK`` against ``Config.device`` (the extension warns about the device it bound
    on a GPU; this covers the configured ordinal on any machine)."""
    local = os.environ.get("LOCAL_RANK")
    if local is None or config.device in (None, "cpu") or any("LOCAL_RANK" in m for m in given):
        return None
    if not local.strip().isdigit():
        return f"LOCAL_RANK={local!r} is not a device ordinal; Config.device is {config.device}"
    if int(local) != config.device:
        return (
            f"LOCAL_RANK={int(local)} but Config.device={config.device}: set Config(device=int(os.environ['LOCAL_RANK'])) "
            "(or call torch.cuda.set_device(LOCAL_RANK) and leave device=None) so each rank uses its own GPU"
        )
    return None


class Pipeline:
    """Streams batches of zarr regions: :meth:`push` an iterable of :class:`damacy.Sample`
    (pulled lazily on a thread of the pipeline, so an endless generator is fine and memory
    stays flat), :meth:`pop` batches in push order.

    >>> cfg = damacy.Config(batch_size=8, dtype="bf16", device=local_rank)   # doctest: +SKIP
    >>> with damacy.Pipeline(cfg) as p:                                      # doctest: +SKIP
    ...     p.push(samples)                    # any iterable of damacy.Sample, even infinite
    ...     for step in range(n_steps):
    ...         with p.pop() as batch:
    ...             x = torch.from_dlpack(batch)     # zero-copy, stream-fenced

    ``Pipeline(config)`` or ``Pipeline(batch_size=8, …)`` (the knobs of :class:`damacy.Config`;
    with a config too, they replace its fields). Setup warnings (``LOCAL_RANK`` naming another
    device than ``Config.device``) are raised as :class:`damacy.DamacyWarning`, a
    ``UserWarning``. The GIL is released while the pipeline waits, reads and decodes.
    """

    def __init__(self, config: Config | None = None, /, **knobs: Any) -> None:
        if config is None:
            config = Config(**knobs)
        elif not isinstance(config, Config):
            raise TypeError(f"Pipeline() takes a damacy.Config, not {type(config).__name__}")
        elif knobs:
            config = dataclasses.replace(config, **knobs)
        self._config = config
        self._p = _damacy._Pipeline(config._args())
        given = list(self._p.warnings())
        extra = _local_rank_warning(config, given)
        for message in given + ([extra] if extra else []):
            warnings.warn(message, DamacyWarning, stacklevel=2)

    @property
    def config(self) -> Config:
        """The configuration the pipeline runs with."""
        return self._config

    @property
    def executor(self) -> str:
        """Which executor decodes, and why (``device kernels on …`` or ``cpu (reason)``)."""
        return self._p.executor

    def describe(self) -> str:
        """The configuration's sizes plus what the pipeline decided (executor, batch layout)."""
        return self._p.describe()

    def push(self, samples: Iterable[Sample]) -> None:
        """Queue an iterable of :class:`damacy.Sample` (a list, a generator, an endless
        iterator). It is pulled lazily, at most ``Config.sizes.lookahead`` samples ahead of the
        reads. Pushes are read one after another; each ends with its own (possibly short) last
        batch. An exception raised by the iterable, or an item that is not a ``Sample``, ends
        that push and is raised by the next :meth:`pop` (samples pulled before it still come,
        in later pops). ``damacy.Closed`` after :meth:`close`.
        """
        if isinstance(samples, (str, bytes, Sample, Mapping)) or not isinstance(samples, Iterable):
            raise TypeError(
                f"push() takes an iterable of damacy.Sample, not {type(samples).__name__}; "
                "wrap a single sample in a list: push([sample])"
            )
        self._p.push(samples)

    def pop(self, timeout: float | None = None) -> Batch:
        """The next batch, in push order. Waits (without the GIL) up to ``timeout`` seconds
        (default ``Config.pop_timeout``); Ctrl-C interrupts the wait with ``KeyboardInterrupt``.

        Raises ``damacy.Timeout`` (the message says what starves: nothing pushed, the
        iterable, I/O or decode), ``damacy.PoolStarved`` when you hold ``Config.depth``
        batches, ``damacy.Exhausted`` when every pushed sample was popped, ``damacy.Closed``
        after :meth:`close`, and a sample's error (``damacy.NotFound``,
        ``damacy.InvalidArgument``, ``damacy.DecodeError``, …, naming the sample) for a batch
        that could not be read under ``on_error="raise"``; later pops go on.
        """
        return self._p.pop(timeout)

    @property
    def pending(self) -> int:
        """Batches still to come: formed and not popped, plus one while a push may yield more.
        ``0`` means every pushed sample was popped."""
        return self._p.pending

    def batches(self, n: int | None = None, *, timeout: float | None = None) -> Iterator[Batch]:
        """Iterate over the next ``n`` batches (all that were pushed when ``n`` is ``None``;
        ends early when the pushes run out). Each batch is released when the next one is
        asked for, or when the iteration ends; tensors made from it with ``from_dlpack``
        stay valid (the memory returns to the pipeline when they are freed).

        >>> for batch in p.batches(100):          # doctest: +SKIP
        ...     train_step(torch.from_dlpack(batch))
        """
        if n is not None and n < 0:
            raise _damacy.InvalidArgument(f"batches(n={n}): n must be >= 0 or None")
        held: Batch | None = None
        done = 0
        try:
            while n is None or done < n:
                if held is not None:
                    held.release()
                    held = None
                try:
                    held = self.pop(timeout)
                except _damacy.Exhausted:
                    return
                done += 1
                yield held
        finally:
            if held is not None:
                held.release()

    def stats(self) -> PipelineStats:
        """Per-stage metrics since construction or :meth:`stats_reset`;
        ``print(p.stats())`` shows them as a table."""
        return self._p.stats()

    def stats_reset(self) -> None:
        """Start the counters of :meth:`stats` afresh."""
        self._p.stats_reset()

    def close(self) -> None:
        """Stop pulling the pushed iterables, free queued batches and join the threads.
        Batches (and tensors) you hold stay valid. Idempotent; the context manager calls it."""
        self._p.close()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        c = self._config
        return (
            f"damacy.Pipeline(batch_size={c.batch_size}, executor={self.executor!r}, pending={self.pending})"
        )

"""``damacy.Config``: every knob of a :class:`damacy.Pipeline`, validated once."""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from damacy import _damacy

_DEFAULTS = _damacy._config_defaults()
_STORE_KEYS = ("endpoint", "region", "access_key_id", "secret_access_key", "anonymous", "retries")


def _bytes(n: int | None) -> str:
    if n is None:
        return "None"
    v, unit = float(n), 0
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    while v >= 1024 and unit + 1 < len(units):
        v, unit = v / 1024, unit + 1
    return f"{n}" if unit == 0 else f"{n} ({v:.1f} {units[unit]})"


@dataclass(frozen=True)
class Sizes:
    """The sizes a :class:`Config` implies (``Config.sizes``), derived once at construction.

    - ``lookahead``: samples pulled from the pushed iterable ahead of the reads.
    - ``slots``: batch buffers in the pool, ``depth + n_workers``.
    - ``batch_bytes``: bytes of one batch buffer (all its tensors), when ``sample_shape`` and
      ``dtype`` fix it (else ``None``: the first sample fixes it).
    - ``pool_bytes``: bytes of all batch buffers (``slots × batch_bytes``), when known.
    - ``shard_index_cache_bytes``: the shard-index cache given to the reader (never below
      ``shard_index_floor``, what the batches being read need).
    - ``metadata_cache_entries``: arrays whose metadata stays open.
    """

    lookahead: int
    slots: int
    batch_bytes: int | None
    pool_bytes: int | None
    shard_index_cache_bytes: int
    shard_index_floor: int
    metadata_cache_entries: int


def _int(name: str, value: Any, minimum: int = 0) -> int:
    if isinstance(value, bool):
        raise TypeError(f"Config.{name} is a bool; give an integer")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"Config.{name} is {value!r}, not an integer") from None
    if v < minimum:
        raise _damacy.InvalidArgument(f"Config.{name} is {v}: use at least {minimum}")
    return v


_DEVICE_FORMS = "give a CUDA ordinal (LOCAL_RANK), 'cuda:N', 'cuda', a torch.device, 'cpu' or None"


def _device(value: Any) -> int | str | None:
    """``Config.device`` as torch users name devices, normalised to an ordinal, ``None`` (the
    current context) or ``"cpu"``."""
    if value is None:
        return None
    if not isinstance(value, (str, int)) and hasattr(value, "type") and hasattr(value, "index"):
        # a torch.device (not imported here): its type and index
        kind, index = value.type, value.index
        if kind == "cpu":
            return "cpu"
        if kind != "cuda":
            raise _damacy.InvalidArgument(f"Config.device is {value!r}, a {kind} device; {_DEVICE_FORMS}")
        return None if index is None else _int("device", index)
    if isinstance(value, str):
        name = value.strip().lower()
        if name == "cpu":
            return "cpu"
        if name == "cuda":
            return None
        kind, sep, index = name.partition(":")
        if kind == "cuda" and sep and index.isdigit():
            return int(index)
        raise _damacy.InvalidArgument(f"Config.device is {value!r}; {_DEVICE_FORMS}")
    if isinstance(value, bool):
        raise TypeError(f"Config.device is a bool; {_DEVICE_FORMS}")
    try:
        operator.index(value)
    except TypeError:
        raise TypeError(f"Config.device is {value!r}; {_DEVICE_FORMS}") from None
    return _int("device", value)


@dataclass(frozen=True, kw_only=True, repr=False)
class Config:
    """The configuration of a :class:`damacy.Pipeline`: frozen, keyword-only, validated at
    construction (an invalid value raises ``damacy.InvalidArgument`` naming the knob and what
    to use). Derive variants with ``dataclasses.replace(cfg, batch_size=16)`` (or
    ``copy.replace`` on Python 3.13+). ``repr`` shows every size derived from the knobs
    (:attr:`sizes`); :meth:`describe` explains them line by line.

    >>> import damacy
    >>> cfg = damacy.Config(batch_size=8, sample_shape=(64, 64), dtype="bf16", executor="cpu")
    >>> cfg.sizes.batch_bytes                      # 8 × 64 × 64 × 2 bytes
    65536
    >>> import dataclasses
    >>> dataclasses.replace(cfg, batch_size=16).sizes.batch_bytes
    131072

    Knobs (defaults in brackets):

    batch_size
        Samples per batch (required).
    sample_shape [None]
        The shape of every sample's region. With it (and ``dtype``) the batch buffers are
        allocated at construction; without it the first sample fixes the shape, and a sample
        of another shape later is an error naming both.
    arrays_per_sample [1]
        How many arrays each sample names (``Sample((image_uri, labels_uri), region)``): the
        batches hold one tensor per array (``batch.tensors``). A sample naming another number
        is an error naming both.
    dtype [None]
        Element type of the batches: ``None`` keeps each array's own type; a name casts
        (``"bf16"``/``"bfloat16"``, ``"float16"``, ``"float32"``, ``"uint8"``, …, or a numpy
        dtype). Floating-point types take every source type, rounded to nearest even as
        ``numpy.astype`` and ``torch.Tensor.to(torch.bfloat16)`` do (``uint16`` to ``bf16``
        included). An integer type that cannot hold the arrays' range is refused when an array
        is opened (the pop of its batch raises ``damacy.InvalidArgument``) unless
        ``allow_lossy_cast``.
    allow_lossy_cast [False]
        Allow casts to integer types that cannot hold the source's values (``uint16`` to
        ``int16`` wraps, ``float32`` to ``uint8`` truncates and saturates, as ``numpy.astype``).
    executor ["auto"]
        Who decodes: ``"auto"`` (the GPU when the machine has one, else the CPU, with the
        reason in ``Pipeline.executor``), ``"cpu"``, ``"gpu"`` (no usable GPU is
        ``damacy.DeviceError``) or ``"emulated"`` (the kernel emulator, when the wheel was built
        with it). Device executors give device batches (kDLCUDA).
    device [None]
        Where the batches go, as torch names devices: a CUDA ordinal (``LOCAL_RANK``, e.g.
        ``device=local_rank``), ``"cuda:N"`` (the same as ``N``), a ``torch.device``,
        ``"cuda"`` or ``None`` (the context current on the calling thread:
        ``torch.cuda.set_device``), or ``"cpu"`` (host batches: the ``"auto"`` executor decodes
        on the CPU; ``executor="gpu"`` with it is ``damacy.InvalidArgument``). Normalised at
        construction to an ordinal, ``None`` or ``"cpu"``. On a GPU machine, under ``"auto"``
        as under ``"gpu"``: a context of another device current, or no ``device`` and no
        current context, is ``damacy.InvalidArgument``. A ``LOCAL_RANK`` that disagrees warns.
    host_buffer_bytes [256 MiB]
        Pinned host memory of the device executor's upload staging.
    device_buffer_bytes [1 GiB]
        Device memory of the device executor's decode waves (the batch buffers come on top).
    max_gpu_memory_bytes [None]
        A cap on all device memory the pipeline holds (decode memory plus batch buffers).
    n_io_threads [8]
        Threads fetching shard indexes.
    n_compute_threads [CPUs]
        Threads decoding and assembling.
    reads_in_flight [64]
        Chunk reads a remote store keeps in flight per batch.
    n_workers [2]
        Batches read at the same time; while one decodes, the next is read.
    lanes [None]
        Device lanes: batches the device executor decodes side by side, each with its own
        streams, pinned staging and device scratch (an equal share of the two buffer budgets).
        A batch also takes the lanes free when it starts and is split over them. ``None``: one
        per worker.
    lookahead [None]
        Samples pulled from the pushed iterable ahead of the reads; ``None``:
        ``(n_workers + 1) × batch_size``. The iterable is never pulled further ahead, so an
        endless generator keeps memory flat.
    depth [2]
        Batches you may hold at once (popped, not released). Popping more raises
        ``damacy.PoolStarved``.
    validate_checksums [True]
        Verify crc32c and zstd content checksums.
    out_of_bounds ["error"]
        A region reaching outside its array: ``"error"``, or ``"fill"`` with the fill value.
    on_error ["raise"]
        A sample that cannot be read: ``"raise"`` (the pop of its batch raises, naming the
        sample; later pops go on) or ``"skip"`` (left out, counted in ``stats().skipped``).
    drop_last [False]
        Drop the short last batch of each push.
    pop_timeout [60.0]
        Seconds ``pop()`` waits by default before ``damacy.Timeout`` says what starves.
    shard_index_cache_bytes [None]
        Bytes of decoded shard indexes cached; ``None``: 256 MiB, never below the floor the
        batches being read need.
    store_options [None]
        Remote stores: a mapping with ``endpoint``, ``region``, ``access_key_id``,
        ``secret_access_key``, ``anonymous``, ``retries`` (as ``damacy.Store.open``).
    """

    batch_size: int
    sample_shape: tuple[int, ...] | None = None
    arrays_per_sample: int = 1
    dtype: str | None = None
    allow_lossy_cast: bool = bool(_DEFAULTS["allow_lossy_cast"])
    executor: str = "auto"
    device: int | str | None = None
    host_buffer_bytes: int = int(_DEFAULTS["host_buffer_bytes"])
    device_buffer_bytes: int = int(_DEFAULTS["device_buffer_bytes"])
    max_gpu_memory_bytes: int | None = None
    n_io_threads: int = int(_DEFAULTS["n_io_threads"])
    n_compute_threads: int = int(_DEFAULTS["n_compute_threads"])
    reads_in_flight: int = int(_DEFAULTS["reads_in_flight"])
    n_workers: int = int(_DEFAULTS["n_workers"])
    lanes: int | None = None
    lookahead: int | None = None
    depth: int = int(_DEFAULTS["depth"])
    validate_checksums: bool = bool(_DEFAULTS["validate_checksums"])
    out_of_bounds: str = "error"
    on_error: str = "raise"
    drop_last: bool = bool(_DEFAULTS["drop_last"])
    pop_timeout: float = float(_DEFAULTS["pop_timeout"])
    shard_index_cache_bytes: int | None = None
    store_options: Mapping[str, Any] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        put("batch_size", _int("batch_size", self.batch_size))
        put("arrays_per_sample", _int("arrays_per_sample", self.arrays_per_sample, minimum=1))
        for name in ("host_buffer_bytes", "device_buffer_bytes", "n_io_threads", "n_compute_threads",
                     "reads_in_flight", "n_workers", "depth"):
            put(name, _int(name, getattr(self, name)))
        put("device", _device(self.device))
        for name in ("max_gpu_memory_bytes", "lanes", "lookahead", "shard_index_cache_bytes"):
            if getattr(self, name) is not None:
                put(name, _int(name, getattr(self, name)))
        if self.sample_shape is not None:
            if isinstance(self.sample_shape, (str, bytes)) or not isinstance(self.sample_shape, Sequence):
                raise TypeError(f"Config.sample_shape is {self.sample_shape!r}; give a tuple of extents, e.g. (64, 64)")
            put("sample_shape", tuple(_int(f"sample_shape[{i}]", v) for i, v in enumerate(self.sample_shape)))
        if self.dtype is not None and not isinstance(self.dtype, str):
            try:
                import numpy

                put("dtype", numpy.dtype(self.dtype).name)
            except (ImportError, TypeError):
                raise TypeError(f"Config.dtype is {self.dtype!r}; give a name such as 'bf16' or 'float32'") from None
        for name in ("allow_lossy_cast", "validate_checksums", "drop_last"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"Config.{name} is {getattr(self, name)!r}; give True or False")
        for name in ("executor", "out_of_bounds", "on_error"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"Config.{name} is {getattr(self, name)!r}; give a string")
        if self.device == "cpu" and self.executor == "gpu":
            raise _damacy.InvalidArgument(
                "Config.device='cpu' asks for host batches but executor='gpu' decodes into device memory: "
                "use executor='auto' or 'cpu', or a CUDA device (device=local_rank)"
            )
        try:
            put("pop_timeout", float(self.pop_timeout))
        except (TypeError, ValueError):
            raise TypeError(f"Config.pop_timeout is {self.pop_timeout!r}; give seconds as a number") from None
        if self.store_options is not None:
            if not isinstance(self.store_options, Mapping):
                raise TypeError(f"Config.store_options is {self.store_options!r}; give a mapping of {_STORE_KEYS}")
            unknown = sorted(set(self.store_options) - set(_STORE_KEYS))
            if unknown:
                raise _damacy.InvalidArgument(f"Config.store_options has unknown keys {unknown}; use {list(_STORE_KEYS)}")
            put("store_options", dict(self.store_options))
        put("_sizes", Sizes(**_damacy._config_sizes(self._args())))

    def _args(self) -> dict[str, Any]:
        """The fields as the extension reads them."""
        args = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if self.device == "cpu":
            # Host batches: the CPU executor under "auto" (the emulator's batches are host
            # memory too); no CUDA device is bound.
            args["device"] = None
            if self.executor == "auto":
                args["executor"] = "cpu"
        if self.sample_shape is not None:
            args["sample_shape"] = list(self.sample_shape)
        so = self.store_options
        args["store_options"] = (
            None
            if so is None
            else (so.get("endpoint"), so.get("region"), so.get("access_key_id"), so.get("secret_access_key"),
                  bool(so.get("anonymous", False)), so.get("retries"))
        )
        return args

    @property
    def sizes(self) -> Sizes:
        """The sizes derived from the knobs (:class:`Sizes`)."""
        return self._sizes  # type: ignore[attr-defined,no-any-return]

    def describe(self) -> str:
        """Every derived size, one line each, with what it comes from."""
        return _damacy._config_describe(self._args())

    def __replace__(self, **changes: Any) -> Config:
        """``copy.replace(cfg, **changes)``: a validated copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:
        parts = []
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "store_options" and v is not None:
                v = {k: ("***" if k == "secret_access_key" and x is not None else x) for k, x in v.items()}
            parts.append(f"{f.name}={v!r}")
        s = self.sizes
        derived = (
            f"lookahead={s.lookahead} samples, slots={s.slots}, batch_bytes={_bytes(s.batch_bytes)}, "
            f"pool_bytes={_bytes(s.pool_bytes)}, shard_index_cache_bytes={_bytes(s.shard_index_cache_bytes)}, "
            f"shard_index_floor={_bytes(s.shard_index_floor)}, metadata_cache_entries={s.metadata_cache_entries}"
        )
        return f"damacy.Config({', '.join(parts)}) [derived: {derived}]"

"""``damacy.GpuCodecPipeline``: a zarr-python codec pipeline whose reads go through damacy.

Select it with ``zarr.config.set({"codec_pipeline.path": "damacy.GpuCodecPipeline"})`` (it is
registered through the ``zarr.codec_pipeline`` entry point). Reads of arrays in a store damacy
can open (zarr's ``LocalStore``; ``FsspecStore`` over http(s), s3 and local files;
``ObjectStore`` over local files, http and s3) with slice selections go through damacy's
planner, shard-index cache, coalesced I/O and decoders, straight into zarr's output array —
a numpy array, or under ``zarr.config.enable_gpu()`` a CuPy array, which a GPU reader writes on
the device (ordered on CuPy's current stream). An output of another dtype (zarr's ``out=``)
is written as that dtype when it is a floating-point one (every source dtype, rounded to nearest
even, as numpy's assignment rounds) or an integer one holding the array's range.
damacy hands zarr no buffers of its own: it writes into zarr's output through the output's
own memory (``__cuda_array_interface__`` for device arrays).
Anything else falls back to zarr-python's ``BatchedCodecPipeline`` with a
:class:`damacy.FallbackWarning` (or raises :class:`damacy.Unsupported` under
``codec_pipeline.strict``); writes, and the ``decode``/``encode`` calls the sharding codec makes
for inner chunks and indexes, are delegated to it.

Configuration keys (``zarr.config.set({...})``), read when a pipeline reads:

==================================  =======  ==================================================
key                                 default  meaning
==================================  =======  ==================================================
``codec_pipeline.strict``           False    raise ``damacy.Unsupported`` instead of falling back
``codec_pipeline.validate_checksums`` True   verify crc32c codecs and zstd checksums
``codec_pipeline.executor``         "auto"   ``auto``, ``cpu``, ``gpu`` or ``emulated``
``codec_pipeline.device``           None     CUDA device ordinal (``LOCAL_RANK``); with none,
                                             ``auto`` uses the device of the CUDA context
                                             current at the first read, else the CPU
``codec_pipeline.n_io_threads``     None     threads fetching shard indexes (engine default 8)
``codec_pipeline.n_compute_threads`` None    decode threads (engine default: the CPU count)
``codec_pipeline.shard_index_cache_bytes`` None  bytes of decoded shard indexes kept (256 MiB)
==================================  =======  ==================================================

Counters of what went where: :func:`stats` / :func:`reset_stats` (also
``GpuCodecPipeline.stats()``).
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import zarr
from zarr.abc.codec import CodecPipeline
from zarr.core.array_spec import ArrayConfig, ArraySpec
from zarr.core.buffer import cpu as _cpu_buffer
from zarr.core.buffer import default_buffer_prototype
from zarr.core.codec_pipeline import BatchedCodecPipeline
from zarr.core.metadata import ArrayV2Metadata, ArrayV3Metadata

from damacy import _damacy
from damacy._warnings import FallbackWarning

__all__ = ["GpuCodecPipeline", "reset_stats", "stats"]

_ZARR_VERSION = tuple(int(p) for p in zarr.__version__.split(".")[:2] if p.isdigit())

_NATIVE = "<" if sys.byteorder == "little" else ">"
# numpy dtype names damacy's engine writes (bfloat16 has no numpy dtype).
_DTYPES = {
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64",
}  # fmt: skip

# ---------------------------------------------------------------------------------------------
# Counters


class _Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.reads = 0
        self.device_reads = 0
        self.chunks = 0
        self.fallback_reads = 0
        self.fallbacks: Counter[str] = Counter()
        self.delegated_reads = 0
        self.writes = 0

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "reads": self.reads,
                "device_reads": self.device_reads,
                "chunks": self.chunks,
                "fallback_reads": self.fallback_reads,
                "fallbacks": dict(self.fallbacks),
                "delegated_reads": self.delegated_reads,
                "writes": self.writes,
            }


_STATS = _Stats()


def stats() -> dict[str, Any]:
    """Counters since the last :func:`reset_stats`.

    ``reads``/``chunks``: reads (and their chunks) damacy decoded; ``device_reads``: those of
    them written straight into an output in device memory (``zarr.config.enable_gpu()``);
    ``fallback_reads``: reads
    handed to zarr's ``BatchedCodecPipeline``, with ``fallbacks`` counting them by reason
    category (``store``, ``selection``, ``dtype``, ``array``, ``output``, ``chunk_key``,
    ``missing_chunks``); ``delegated_reads``: reads of pipelines built by ``from_codecs`` (the
    sharding codec's inner chunks), always zarr's; ``writes``: writes (always zarr's).
    """
    return _STATS.snapshot()


def reset_stats() -> None:
    """Zero the counters of :func:`stats`."""
    with _STATS.lock:
        _STATS.reset()


# ---------------------------------------------------------------------------------------------
# Engine objects, shared by every pipeline of the process


def _cfg(key: str, default: Any = None) -> Any:
    return zarr.config.get(f"codec_pipeline.{key}", default)


_LOCK = threading.Lock()
_READERS: dict[tuple[Any, ...], _damacy.Reader] = {}
_STORES: dict[tuple[Any, ...], _damacy.Store] = {}
_ARRAYS: dict[tuple[Any, ...], Any] = {}
_MAX_ARRAYS = 1024
# Bumped in a forked child: the engine's thread pools do not survive fork, so the child builds
# its own readers, stores and array handles (pipelines see the bump and reopen).
_GENERATION = 0


# What a forked child inherited from its parent (readers, stores, array handles, pipelines'
# views): kept referenced and never dropped in the child, since dropping them would join
# threads and free device state that only the parent has.
_INHERITED: list[Any] = []


def _after_fork_in_child() -> None:
    global _LOCK, _GENERATION
    _LOCK = threading.Lock()
    _INHERITED.append((dict(_READERS), dict(_STORES), dict(_ARRAYS)))
    _READERS.clear()
    _STORES.clear()
    _ARRAYS.clear()
    _GENERATION += 1
    _STATS.lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _reader() -> _damacy.Reader:
    key = (
        _cfg("executor", "auto"),
        _cfg("device"),
        _cfg("n_io_threads"),
        _cfg("n_compute_threads"),
        _cfg("shard_index_cache_bytes"),
    )
    with _LOCK:
        reader = _READERS.get(key)
        if reader is None:
            executor, device, n_io, n_compute, index_bytes = key
            knobs = {"device": device, "n_io_threads": n_io, "n_compute_threads": n_compute,
                     "shard_index_cache_bytes": index_bytes}  # fmt: skip
            try:
                reader = _damacy.Reader(executor=executor, **knobs)
            except _damacy.InvalidArgument as e:
                # "auto" binds a GPU as damacy.Config does: with no codec_pipeline.device and
                # no CUDA context current (no CuPy or torch work yet on this thread) that is
                # an error there; zarr users configure no device, so their reads decode on the
                # CPU instead (a CuPy output later makes a context current).
                if executor != "auto" or device is not None or isinstance(e, _damacy.Unsupported):
                    raise
                reader = _damacy.Reader(executor="cpu", **knobs)
            _READERS[key] = reader
        return reader


@dataclass(frozen=True)
class _StoreTarget:
    """How damacy opens a zarr store: a URL and its options."""

    url: str
    options: tuple[tuple[str, Any], ...] = ()

    def open(self) -> _damacy.Store:
        key = (self.url, self.options)
        with _LOCK:
            store = _STORES.get(key)
        if store is None:
            store = _damacy.Store.open(self.url, **dict(self.options))
            with _LOCK:
                store = _STORES.setdefault(key, store)
        return store


def _fsspec_target(store: Any) -> _StoreTarget | str:
    fs = store.fs
    protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    path = str(store.path)
    if {"http", "https"} & set(protocols):
        return _StoreTarget(path.rstrip("/"))
    if {"s3", "s3a"} & set(protocols):
        client = dict(getattr(fs, "client_kwargs", None) or {})
        options: dict[str, Any] = {}
        endpoint = client.get("endpoint_url") or getattr(fs, "endpoint_url", None)
        if endpoint:
            options["endpoint"] = endpoint
        if client.get("region_name"):
            options["region"] = client["region_name"]
        key, secret = getattr(fs, "key", None), getattr(fs, "secret", None)
        if key and secret:
            options["access_key_id"] = key
            options["secret_access_key"] = secret
        if getattr(fs, "anon", False):
            options["anonymous"] = True
        return _StoreTarget("s3://" + path.strip("/"), tuple(sorted(options.items())))
    if {"file", "local"} & set(protocols):
        return _StoreTarget(path)
    return f"FsspecStore over {'/'.join(protocols)} has no damacy store"


def _obstore_target(store: Any) -> _StoreTarget | str:
    inner = store.store
    name = type(inner).__name__
    prefix = str(getattr(inner, "prefix", None) or "").strip("/")
    if name == "LocalStore" and prefix:
        return _StoreTarget("/" + prefix)
    if name == "HTTPStore" and getattr(inner, "url", None):
        url = str(inner.url).rstrip("/")
        return _StoreTarget(url + ("/" + prefix if prefix else ""))
    if name == "S3Store":
        try:
            raw = dict(getattr(inner, "config", None) or {})
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # noqa: BLE001 - obstore raises a PanicException (a BaseException) for some configs
            return f"ObjectStore over S3Store: its config cannot be read ({type(e).__name__}: {e})"
        config = {str(k).lower(): v for k, v in raw.items()}
        bucket = config.get("bucket") or config.get("aws_bucket") or config.get("aws_bucket_name")
        if bucket:
            options: dict[str, Any] = {}
            for ours, theirs in (
                ("endpoint", ("endpoint", "aws_endpoint", "aws_endpoint_url")),
                ("region", ("region", "aws_region")),
                ("access_key_id", ("access_key_id", "aws_access_key_id")),
                ("secret_access_key", ("secret_access_key", "aws_secret_access_key")),
            ):
                for t in theirs:
                    if config.get(t):
                        options[ours] = str(config[t])
                        break
            if str(config.get("skip_signature", "")).lower() == "true":
                options["anonymous"] = True
            url = f"s3://{bucket}" + ("/" + prefix if prefix else "")
            return _StoreTarget(url, tuple(sorted(options.items())))
    return f"ObjectStore over {name} has no damacy store"


def _reads_as(store: Any, cls: type) -> bool:
    """Whether ``store`` reads exactly as ``cls`` does: an instance of it (or of a subclass) whose
    read methods are ``cls``'s own. A subclass that overrides how it reads, and a mock built with
    ``spec=cls`` (which passes ``isinstance``), are not: damacy would bypass what they do."""
    kind = type(store)
    if not issubclass(kind, cls):
        return False
    return all(
        getattr(kind, name, None) is getattr(cls, name, None) for name in ("get", "get_partial_values", "exists")
    )


def _store_target(store: Any) -> _StoreTarget | str:
    """A damacy store for a zarr store, or why there is none."""
    from zarr.storage import FsspecStore, LocalStore

    if _reads_as(store, LocalStore):
        return _StoreTarget(str(store.root))
    if _reads_as(store, FsspecStore):
        return _fsspec_target(store)
    try:
        from zarr.storage import ObjectStore
    except ImportError:  # pragma: no cover - zarr without obstore support
        ObjectStore = None  # type: ignore[assignment,misc]  # noqa: N806
    if ObjectStore is not None and _reads_as(store, ObjectStore):
        return _obstore_target(store)
    return (
        f"{type(store).__name__} has no damacy store (damacy maps LocalStore, FsspecStore and ObjectStore "
        "whose reads are not overridden)"
    )


# ---------------------------------------------------------------------------------------------
# Selections


class _Unsupported(Exception):
    """Why a read cannot go through damacy: (category, message)."""

    def __init__(self, category: str, message: str) -> None:
        super().__init__(message)
        self.category = category


def _metadata_document(md: Any, name: str) -> Any:
    """The array's metadata document (``zarr.json`` or ``.zarray``) as zarr writes it, which is
    what damacy's reader parses; metadata zarr reads but will not write (behind a config flag)
    is read by zarr-python instead."""
    try:
        # Host buffers: the document is parsed on the host (under enable_gpu() the default
        # prototype would copy it to the device and back).
        return md.to_buffer_dict(_cpu_buffer.buffer_prototype)[name]
    except Exception as e:  # noqa: BLE001 - any refusal means: not through damacy
        raise _Unsupported("array", f"zarr cannot serialise the array's metadata for damacy: {e}") from None


def _axis(sel: Any, what: str) -> tuple[int, int, int]:
    """(start, step, count) of one axis of a selection: a slice, or an integer array that is
    an increasing arithmetic progression (what orthogonal indexing passes for ranges)."""
    if isinstance(sel, slice):
        start, stop, step = sel.start or 0, sel.stop, sel.step or 1
        if stop is None or step < 1:
            raise _Unsupported("selection", f"{what} slice {sel!r} is not normalised")
        return start, step, len(range(start, stop, step))
    if isinstance(sel, np.ndarray):
        if sel.dtype == bool:
            sel = np.flatnonzero(sel)
        if sel.dtype.kind not in "iu":
            raise _Unsupported("selection", f"{what} selection of dtype {sel.dtype}")
        flat = sel.ravel()
        n = flat.size
        if n == 0:
            return 0, 1, 0
        start = int(flat[0])
        step = int(flat[1] - flat[0]) if n > 1 else 1
        if step < 1 or start < 0 or (n > 2 and not np.array_equal(np.diff(flat), np.full(n - 1, step))):
            raise _Unsupported("selection", f"{what} selection is an integer array that is not a strided range")
        return start, step, n
    raise _Unsupported("selection", f"{what} selection {type(sel).__name__} is not a slice")


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _key_parser(sep: str, *, default: bool) -> Any:
    """Chunk coordinates from a chunk key (the part after the array's path): ``c/1/2`` or
    ``c.1.2`` for zarr v3's default encoding, ``1/2`` or ``1.2`` for the v2 encoding."""

    def parse(tail: str) -> tuple[int, ...]:
        if default:
            if not tail.startswith("c" + sep):
                raise ValueError(tail)
            tail = tail[2:]
        return tuple(int(c) for c in tail.split(sep))

    return parse


@dataclass
class _ArrayView:
    """An array as damacy sees it: its handle, where its chunk keys start, how to parse them,
    and the handles that read it as another dtype (zarr ``out=`` buffers of another dtype)."""

    handle: Any
    prefix: str
    parse_key: Any
    casts: dict[str, Any] = field(default_factory=dict)

    def read_as(self, dtype: str) -> Any:
        """The handle that reads the array as ``dtype``: floating-point outputs take every
        source dtype (rounded to nearest even, as numpy's assignment into zarr's output does);
        an integer output that cannot hold the array's values is read by zarr-python."""
        if dtype == self.handle.out_dtype:
            return self.handle
        handle = self.casts.get(dtype)
        if handle is None:
            try:
                handle = self.handle.with_output_dtype(dtype)
            except _damacy.InvalidArgument as e:
                raise _Unsupported("dtype", f"damacy reads {self.handle.out_dtype}, the output is {dtype}: {e}") from None
            self.casts[dtype] = handle
        return handle


def _evolve(pipeline: BatchedCodecPipeline, spec: ArraySpec) -> BatchedCodecPipeline:
    """``pipeline.evolve_from_array_spec(spec)``; zarr 3.1's passes a generator that its
    ``codecs_from_list`` iterates twice, so there the codecs are evolved here."""
    if _ZARR_VERSION >= (3, 2):
        return pipeline.evolve_from_array_spec(spec)
    codecs = tuple(c.evolve_from_array_spec(array_spec=spec) for c in pipeline)
    return BatchedCodecPipeline.from_codecs(codecs, batch_size=pipeline.batch_size)


# ---------------------------------------------------------------------------------------------
# The pipeline


class GpuCodecPipeline(CodecPipeline):
    """A zarr-python codec pipeline that reads through damacy (see the module docs).

    Built by zarr through :meth:`from_array_metadata_and_store` for arrays (reads go through
    damacy) and :meth:`from_codecs` for codec chains alone (the sharding codec's inner
    pipelines: everything is zarr-python's).
    """

    def __init__(
        self,
        fallback: BatchedCodecPipeline,
        *,
        metadata: ArrayV2Metadata | ArrayV3Metadata | None = None,
        store: Any = None,
    ) -> None:
        self._fallback = fallback
        self._metadata = metadata
        self._store = store
        # Opened lazily at the first read, keyed by where the store is then (a LocalStore can
        # be moved): (target, view or why not).
        self._view: tuple[tuple[_StoreTarget | str, int], _ArrayView | _Unsupported] | None = None
        self._lock = threading.Lock()
        self._lock_generation = _GENERATION

    # Pickled with the array (multiprocessing): the lock and the engine handles stay behind.
    def __getstate__(self) -> dict[str, Any]:
        return {"fallback": self._fallback, "metadata": self._metadata, "store": self._store}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["fallback"], metadata=state["metadata"], store=state["store"])  # type: ignore[misc]

    # zarr compares arrays field by field, this pipeline included.
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GpuCodecPipeline):
            return NotImplemented
        return (self._fallback, self._metadata, self._store) == (other._fallback, other._metadata, other._store)

    def __hash__(self) -> int:
        return hash((type(self), self._fallback))

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_codecs(cls, codecs: Iterable[Any], *, batch_size: int | None = None) -> GpuCodecPipeline:
        """A pipeline for a codec chain alone; every call is zarr-python's."""
        return cls(BatchedCodecPipeline.from_codecs(tuple(codecs), batch_size=batch_size))

    @classmethod
    def from_array_metadata_and_store(cls, array_metadata: Any, store: Any) -> GpuCodecPipeline:
        """The pipeline of one array of ``store``: reads through damacy where it can."""
        if isinstance(array_metadata, ArrayV3Metadata):
            fallback = BatchedCodecPipeline.from_codecs(array_metadata.codecs)
            chunk_shape = getattr(array_metadata.chunk_grid, "chunk_shape", None)
            spec = ArraySpec(
                shape=tuple(chunk_shape) if chunk_shape is not None else (1,) * len(array_metadata.shape),
                dtype=array_metadata.data_type,
                fill_value=array_metadata.fill_value,
                config=ArrayConfig.from_dict({}),
                prototype=default_buffer_prototype(),
            )
        elif isinstance(array_metadata, ArrayV2Metadata):
            from zarr.codecs._v2 import V2Codec

            fallback = BatchedCodecPipeline.from_codecs(
                [V2Codec(filters=array_metadata.filters, compressor=array_metadata.compressor)]
            )
            spec = ArraySpec(
                shape=array_metadata.chunks,
                dtype=array_metadata.dtype,
                fill_value=array_metadata.fill_value,
                config=ArrayConfig.from_dict({"order": array_metadata.order}),
                prototype=default_buffer_prototype(),
            )
        else:
            raise TypeError(f"unknown array metadata {type(array_metadata).__name__}")
        return cls(_evolve(fallback, spec), metadata=array_metadata, store=store)

    def evolve_from_array_spec(self, array_spec: ArraySpec) -> GpuCodecPipeline:
        return type(self)(_evolve(self._fallback, array_spec), metadata=self._metadata, store=self._store)

    # -- what zarr asks of every pipeline -----------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        return iter(self._fallback)

    @property
    def batch_size(self) -> int:
        return self._fallback.batch_size

    @property
    def supports_partial_decode(self) -> bool:
        return self._fallback.supports_partial_decode

    @property
    def supports_partial_encode(self) -> bool:
        return self._fallback.supports_partial_encode

    def validate(self, **kwargs: Any) -> None:
        self._fallback.validate(**kwargs)

    def compute_encoded_size(self, byte_length: int, array_spec: ArraySpec) -> int:
        return self._fallback.compute_encoded_size(byte_length, array_spec)

    async def decode(self, chunk_bytes_and_specs: Iterable[Any]) -> Iterable[Any]:
        return await self._fallback.decode(chunk_bytes_and_specs)

    async def encode(self, chunk_arrays_and_specs: Iterable[Any]) -> Iterable[Any]:
        return await self._fallback.encode(chunk_arrays_and_specs)

    async def write(self, batch_info: Iterable[Any], value: Any, drop_axes: tuple[int, ...] = ()) -> None:
        with _STATS.lock:
            _STATS.writes += 1
        await self._fallback.write(batch_info, value, drop_axes)
        # The chunks changed under any cached decode state: nothing is cached but metadata.

    def __repr__(self) -> str:
        mode = "array" if self._metadata is not None else "codecs"
        return f"GpuCodecPipeline({mode}, codecs={tuple(self)!r})"

    # -- reads --------------------------------------------------------------------------------

    @staticmethod
    def stats() -> dict[str, Any]:
        """The counters of :func:`damacy.zarr_stats` (see there)."""
        return stats()

    @staticmethod
    def reset_stats() -> None:
        """Zero the counters."""
        reset_stats()

    async def read(self, batch_info: Iterable[Any], out: Any, drop_axes: tuple[int, ...] = ()) -> Any:
        batch_info = list(batch_info)
        if self._metadata is None:
            with _STATS.lock:
                _STATS.delegated_reads += 1
            return await self._fallback.read(batch_info, out, drop_axes)
        try:
            job = self._plan(batch_info, out, drop_axes)
        except _Unsupported as why:
            return await self._fall_back(why, batch_info, out, drop_axes)
        reader, handle, chunks, target, shape, strides, swap = job
        if isinstance(target, _DeviceArray):
            await asyncio.to_thread(
                reader.read_chunks_into_device,
                handle, chunks, target.ptr, shape, strides, target.dtype.name, target.stream,
            )  # fmt: skip
            with _STATS.lock:
                _STATS.reads += 1
                _STATS.device_reads += 1
                _STATS.chunks += len(chunks)
            return tuple({"status": "present"} for _ in batch_info)
        # A 0-d output (every axis dropped) exports no shape: hand over a 1-element view.
        buffer = target.reshape(1) if target.ndim == 0 else target
        await asyncio.to_thread(reader.read_chunks_into, handle, chunks, buffer, shape, strides)
        if swap is not None:
            for sel in swap:
                target[sel] = target[sel].byteswap()
        with _STATS.lock:
            _STATS.reads += 1
            _STATS.chunks += len(chunks)
        return tuple({"status": "present"} for _ in batch_info)

    async def _fall_back(self, why: _Unsupported, batch_info: list[Any], out: Any, drop_axes: tuple[int, ...]) -> Any:
        if _cfg("strict", False):
            raise _damacy.Unsupported(f"damacy.GpuCodecPipeline cannot read this ({why}); codec_pipeline.strict is set")
        warnings.warn(
            f"damacy.GpuCodecPipeline falls back to zarr-python's BatchedCodecPipeline: {why}",
            FallbackWarning,
            stacklevel=2,
        )
        with _STATS.lock:
            _STATS.fallback_reads += 1
            _STATS.fallbacks[why.category] += 1
        return await self._fallback.read(batch_info, out, drop_axes)

    def _array_view(self, first_key: str) -> _ArrayView:
        """Opens the array in damacy once per pipeline and store location (and once per
        metadata per process)."""
        target = (_store_target(self._store), _GENERATION)
        if self._lock_generation != _GENERATION:  # forked: the parent's lock may be held
            self._lock = threading.Lock()
            self._lock_generation = _GENERATION
            if self._view is not None:  # the parent's view is never dropped here (_INHERITED)
                _INHERITED.append(self._view)
        with self._lock:
            if self._view is None or self._view[0] != target:
                try:
                    view: _ArrayView | _Unsupported = self._open_view(target[0], first_key)
                except _Unsupported as why:
                    view = why
                self._view = (target, view)
            view = self._view[1]
        if isinstance(view, _Unsupported):
            raise view
        return view

    def _open_view(self, target: _StoreTarget | str, first_key: str) -> _ArrayView:
        md = self._metadata
        if isinstance(target, str):
            raise _Unsupported("store", target)
        assert md is not None
        ndim = len(md.shape)
        if ndim == 0:
            raise _Unsupported("array", "0-d arrays are read by zarr-python")
        if isinstance(md, ArrayV3Metadata):
            encoding = md.chunk_key_encoding
            name = getattr(encoding, "name", None)
            sep = getattr(encoding, "separator", "/")
            if name not in ("default", "v2"):
                raise _Unsupported("chunk_key", f"chunk key encoding {name!r}")
            decode = _key_parser(sep, default=name == "default")
            components = (ndim + (name == "default")) if sep == "/" else 1
            # RegularChunkGrid (zarr 3.1) or RegularChunkGridMetadata (3.4); not rectilinear.
            grid = type(md.chunk_grid).__name__
            if not grid.startswith("Regular"):
                raise _Unsupported("array", f"chunk grid {grid} (damacy reads regular chunk grids)")
            doc = _metadata_document(md, "zarr.json")
        else:
            sep = md.dimension_separator or "."
            decode = _key_parser(sep, default=False)
            components = ndim if sep == "/" else 1
            doc = _metadata_document(md, ".zarray")
        parts = first_key.split("/")
        if len(parts) < components:
            raise _Unsupported("chunk_key", f"chunk key {first_key!r} does not match the encoding")
        prefix = "/".join(parts[: len(parts) - components])
        meta_json = doc.to_bytes().decode()
        key = (target, prefix, meta_json, _cfg("validate_checksums", True))
        with _LOCK:
            handle = _ARRAYS.get(key)
        if handle is None:
            try:
                store = target.open()
                handle = _reader().open_array(
                    store, prefix or "/", metadata=meta_json, validate_checksums=bool(key[3])
                )
            except (_damacy.Unsupported, _damacy.DecodeError) as e:
                raise _Unsupported("array", str(e)) from None
            with _LOCK:
                if len(_ARRAYS) >= _MAX_ARRAYS:
                    _ARRAYS.clear()
                _ARRAYS[key] = handle
        return _ArrayView(handle, prefix, decode)

    def _plan(self, batch_info: list[Any], out: Any, drop_axes: tuple[int, ...]) -> tuple[Any, ...]:
        target = out.as_ndarray_like()
        if not isinstance(target, np.ndarray):
            target = _DeviceArray.of(target, _reader())
        dtype = target.dtype
        if dtype.name not in _DTYPES or dtype.fields is not None:
            raise _Unsupported("dtype", f"data type {dtype} is not one damacy decodes")
        if not batch_info:
            raise _Unsupported("selection", "an empty batch")
        first = batch_info[0][0]
        if not hasattr(first, "path") or getattr(first, "store", None) is not self._store:
            raise _Unsupported("store", f"chunks come from a {type(first).__name__}, not this array's store")
        config = getattr(batch_info[0][1], "config", None)
        if getattr(config, "read_missing_chunks", True) is False:
            raise _Unsupported("missing_chunks", "read_missing_chunks=False needs per-chunk presence")
        view = self._array_view(str(first.path))
        handle = view.read_as(dtype.name)
        ndim = len(handle.shape)
        plen = len(view.prefix) + 1 if view.prefix else 0
        chunks = []
        kept: list[int] | None = None
        for getter, _spec, chunk_sel, out_sel, _complete in batch_info:
            key = str(getter.path)
            if view.prefix and not key.startswith(view.prefix + "/"):
                raise _Unsupported("chunk_key", f"chunk key {key!r} is outside array {view.prefix!r}")
            try:
                coords = tuple(view.parse_key(key[plen:]))
            except ValueError:
                raise _Unsupported("chunk_key", f"chunk key {key!r} does not parse") from None
            if not isinstance(chunk_sel, tuple) or len(chunk_sel) != ndim or len(coords) != ndim:
                raise _Unsupported("selection", "a coordinate or mask selection (vindex)")
            if not isinstance(out_sel, tuple):
                raise _Unsupported("selection", "a coordinate or mask output selection (vindex)")
            sel = []
            axes = []
            for a, s in enumerate(chunk_sel):
                if _is_int(s):
                    sel.append((int(s), 1, 1))
                    continue
                if isinstance(s, np.ndarray) and s.ndim not in (1, ndim):
                    raise _Unsupported("selection", "a coordinate selection (vindex)")
                if isinstance(s, np.ndarray) and ndim > 1 and s.ndim == 1:
                    raise _Unsupported("selection", "a coordinate selection (vindex)")
                sel.append(_axis(s, "chunk"))
                if a not in drop_axes:
                    axes.append(a)
            if kept is None:
                kept = axes
            elif kept != axes:
                raise _Unsupported("selection", "chunks that drop different axes")
            if len(out_sel) != len(axes) or len(axes) != target.ndim:
                raise _Unsupported("selection", "an output selection that does not match the output's axes")
            out_axes = [(0, 1, 1)] * ndim
            for a, o in zip(axes, out_sel, strict=True):
                out_axes[a] = _axis(o, "output")
                if out_axes[a][2] != sel[a][2]:
                    raise _Unsupported("selection", "chunk and output selections of different lengths")
            chunks.append((coords, sel, out_axes))
        assert kept is not None
        shape = [1] * ndim
        strides = [0] * ndim
        for j, a in enumerate(kept):
            shape[a] = target.shape[j]
            strides[a] = target.strides[j]
        swap = None
        if dtype.byteorder not in ("=", "|", _NATIVE) and isinstance(target, _DeviceArray):
            raise _Unsupported("dtype", f"a device array of byte order {dtype.byteorder!r}")
        if dtype.byteorder not in ("=", "|", _NATIVE):
            # damacy writes native byte order: write through a native view, then swap back
            # exactly the elements written.
            target = target.view(dtype.newbyteorder("="))
            swap = [tuple(slice(o[0], o[0] + (o[2] - 1) * o[1] + 1, o[1]) for a, o in enumerate(c[2]) if a in kept) for c in chunks]
        return _reader(), handle, chunks, target, shape, strides, swap


@dataclass(frozen=True)
class _DeviceArray:
    """zarr's output in device memory (a CuPy array under ``zarr.config.enable_gpu()``, or any
    object with a ``__cuda_array_interface__``) on the reader's device."""

    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: np.dtype[Any]
    stream: int

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @classmethod
    def of(cls, target: Any, reader: _damacy.Reader) -> _DeviceArray:
        kind = f"{type(target).__module__}.{type(target).__name__}"
        cai = getattr(target, "__cuda_array_interface__", None)
        if not isinstance(cai, dict):
            raise _Unsupported("output", f"the output is a {kind}: neither a numpy array nor device memory")
        device = reader.device
        if device is None:
            raise _Unsupported(
                "output",
                f"the output is a {kind} in device memory and damacy decodes on the CPU here "
                f"({reader.executor_note}); set codec_pipeline.executor to 'gpu' or 'auto' on a GPU machine",
            )
        backend, ordinal = device
        if backend != "cuda" and kind.startswith("cupy."):
            raise _Unsupported("output", f"the output is a {kind} and damacy runs {reader.executor_note}")
        target_device = getattr(getattr(target, "device", None), "id", None)
        if backend == "cuda" and target_device is not None and int(target_device) != ordinal:
            raise _Unsupported(
                "output",
                f"the output is on CUDA device {target_device} and damacy decodes on device {ordinal} "
                "(set codec_pipeline.device)",
            )
        ptr, readonly = cai["data"]
        if readonly:
            raise _Unsupported("output", f"the output {kind} is read-only")
        dtype = np.dtype(cai["typestr"])
        shape = tuple(int(n) for n in cai["shape"])
        strides = cai.get("strides")
        if strides is None:
            strides = tuple(int(s) * dtype.itemsize for s in _c_strides(shape))
        return cls(int(ptr), shape, tuple(int(s) for s in strides), dtype, _stream_of(target, cai))


def _c_strides(shape: tuple[int, ...]) -> list[int]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return strides[::-1]


def _stream_of(target: Any, cai: dict[str, Any]) -> int:
    """The CUstream that orders work on ``target``: CuPy's current stream for CuPy arrays, else
    the interface's ``stream`` (0, the legacy default stream, when it names none)."""
    if type(target).__module__.startswith("cupy"):
        import cupy  # type: ignore[import-not-found]

        return int(cupy.cuda.get_current_stream().ptr)
    stream = cai.get("stream")
    return int(stream) if stream else 0


GpuCodecPipeline.__module__ = "damacy"

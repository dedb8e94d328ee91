"""Type stubs of the extension module ``damacy._damacy`` (Rust, PyO3)."""

from typing import Any, Sequence

__version__: str

class Error(Exception): ...
class InvalidArgument(Error): ...
class Unsupported(InvalidArgument): ...
class NotFound(Error): ...

class StorageError(Error):
    kind: str
    """``not_found``, ``permission_denied``, ``transient``, ``range_not_satisfied``, ``config`` or ``other``."""

class DecodeError(Error): ...
class DeviceError(Error): ...
class OutOfMemory(Error): ...
class Timeout(Error): ...
class Closed(Error): ...

class Store:
    @staticmethod
    def open(
        url: str,
        *,
        endpoint: str | None = None,
        region: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        anonymous: bool = False,
        retries: int | None = None,
    ) -> Store: ...
    @property
    def url(self) -> str: ...
    @property
    def kind(self) -> str: ...

class Array:
    @property
    def path(self) -> str: ...
    @property
    def shape(self) -> list[int]: ...
    @property
    def chunk_shape(self) -> list[int]: ...
    @property
    def grid_shape(self) -> list[int]: ...
    @property
    def dtype(self) -> str: ...
    @property
    def out_dtype(self) -> str: ...
    @property
    def zarr_format(self) -> int: ...
    @property
    def route(self) -> str: ...

_Axis = tuple[int, int, int]

class Reader:
    def __init__(
        self,
        *,
        executor: str = "auto",
        device: int | None = None,
        n_io_threads: int | None = None,
        n_compute_threads: int | None = None,
        reads_in_flight: int | None = None,
        shard_index_cache_bytes: int | None = None,
        metadata_cache_entries: int | None = None,
        device_buffer_bytes: int | None = None,
        host_buffer_bytes: int | None = None,
    ) -> None: ...
    @property
    def executor_note(self) -> str: ...
    def stats(self) -> dict[str, int | float]: ...
    def open_array(
        self,
        store: Store,
        path: str,
        *,
        metadata: str | None = None,
        output_dtype: str | None = None,
        validate_checksums: bool = True,
        out_of_bounds: str = "error",
    ) -> Array: ...
    def read_chunks_into(
        self,
        array: Array,
        chunks: Sequence[tuple[Sequence[int], Sequence[_Axis], Sequence[_Axis]]],
        out: Any,
        shape: Sequence[int],
        strides: Sequence[int],
    ) -> None: ...

class IndexSpace:
    def __init__(
        self, lengths: Sequence[int], *, chunk_size: int = 1, chunks_per_shard: int = 1, row_bytes: int = 1
    ) -> None: ...
    def __len__(self) -> int: ...
    @property
    def array_count(self) -> int: ...

class CropSpace:
    def __init__(
        self,
        arrays: Sequence[tuple[Sequence[int], Sequence[int], Sequence[int] | None, int]],
        crop_shape: Sequence[int],
        *,
        count: int | None = None,
        stride: Sequence[int] | None = None,
        placement: str = "anywhere",
    ) -> None: ...
    def __len__(self) -> int: ...
    @property
    def crop_shape(self) -> list[int]: ...

class Plan:
    def __init__(
        self,
        space: IndexSpace | CropSpace,
        *,
        rank: int = 0,
        world: int = 1,
        batch_size: int = 1,
        mode: str = "strided",
        granularity: str = "sample",
        group_level: str = "chunk",
        shuffle: str = "full",
        window: int = 1,
        equal_length: str = "pad",
        seed: int = 0,
        epoch: int = 0,
        resume: tuple[int, int, int, int] | None = None,
    ) -> None: ...
    def __len__(self) -> int: ...
    @property
    def n_batches(self) -> int: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def epoch(self) -> int: ...
    @property
    def is_elastic(self) -> bool: ...
    def checkpoint(self, batches_done: int) -> tuple[int, int, int, int]: ...
    def entries(self, start: int, count: int) -> tuple[list[int], list[bool]]: ...
    def batch_bounds(self, b: int) -> tuple[int, int]: ...
    def worker_batches(self, worker: int, workers: int, split: str = "interleaved") -> list[int]: ...
    def resolve(self, id: int) -> tuple[Any, ...]: ...
    def resolve_many(self, ids: Sequence[int]) -> list[tuple[Any, ...]]: ...

def rank_from_env() -> tuple[int, int, int | None]: ...
def _panic_for_tests() -> None: ...

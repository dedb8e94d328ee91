"""damacy: stream regions of zarr arrays into batched tensors for training.

- :class:`damacy.GpuCodecPipeline` — a zarr-python codec pipeline whose reads go through
  damacy's engine: ``zarr.config.set({"codec_pipeline.path": "damacy.GpuCodecPipeline"})``.
- :mod:`damacy.samplers` — per-rank sample plans (strided or contiguous shares, shuffles,
  equal-length policies, data-loader workers, resumable state).
- :class:`damacy.Sample` — one region of one array, what a sampler yields.
- :class:`damacy.Error` and its subclasses for every engine error.
"""

from damacy._damacy import (
    Array,
    Closed,
    DecodeError,
    DeviceError,
    Error,
    InvalidArgument,
    NotFound,
    OutOfMemory,
    Reader,
    StorageError,
    Store,
    Timeout,
    Unsupported,
    __version__,
)
from damacy._sample import Sample
from damacy._warnings import DamacyWarning, FallbackWarning

__all__ = [
    "Array",
    "Closed",
    "DamacyWarning",
    "DecodeError",
    "DeviceError",
    "Error",
    "FallbackWarning",
    "GpuCodecPipeline",
    "InvalidArgument",
    "NotFound",
    "OutOfMemory",
    "Reader",
    "Sample",
    "StorageError",
    "Store",
    "Timeout",
    "Unsupported",
    "__version__",
    "samplers",
    "zarr_stats",
]


def __getattr__(name: str) -> object:
    # zarr is imported only when its pipeline is asked for (zarr itself does, through the
    # `zarr.codec_pipeline` entry point).
    if name == "GpuCodecPipeline":
        from damacy._zarr import GpuCodecPipeline

        return GpuCodecPipeline
    if name == "zarr_stats":
        from damacy._zarr import stats

        return stats
    if name == "samplers":
        import importlib

        return importlib.import_module("damacy.samplers")
    raise AttributeError(f"module 'damacy' has no attribute {name!r}")

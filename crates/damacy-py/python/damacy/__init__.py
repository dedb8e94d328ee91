"""damacy: stream regions of zarr arrays into batched tensors for training.

- :class:`damacy.Pipeline` with :class:`damacy.Config` — push :class:`damacy.Sample` regions,
  pop :class:`damacy.Batch` tensors (``numpy.from_dlpack``/``torch.from_dlpack``, zero-copy).
- :class:`damacy.GpuCodecPipeline` — a zarr-python codec pipeline whose reads go through
  damacy's engine: ``zarr.config.set({"codec_pipeline.path": "damacy.GpuCodecPipeline"})``.
- :mod:`damacy.samplers` — per-rank sample plans (strided or contiguous shares, shuffles,
  equal-length policies, data-loader workers, resumable state).
- :class:`damacy.Sample` — one region of one array (or of several: an image and its labels),
  what a sampler yields: one ``(start, stop)`` pair or slice per axis, or a
  :class:`damacy.Region` ``(start, shape)``.
- :class:`damacy.Error` and its subclasses for every engine error.
"""

from damacy._damacy import (
    Array,
    Batch,
    BatchInfo,
    Closed,
    DecodeError,
    DeviceError,
    Error,
    Exhausted,
    InvalidArgument,
    NotFound,
    OutOfMemory,
    PipelineStats,
    PoolStarved,
    Reader,
    StageStats,
    StorageError,
    Store,
    Tensor,
    Timeout,
    Unsupported,
    __version__,
)
from damacy._config import Config, Sizes
from damacy._pipeline import Pipeline
from damacy._sample import Region, Sample
from damacy._warnings import DamacyWarning, FallbackWarning

__all__ = [
    "Array",
    "Batch",
    "BatchInfo",
    "Closed",
    "Config",
    "DamacyWarning",
    "DecodeError",
    "DeviceError",
    "Error",
    "Exhausted",
    "FallbackWarning",
    "GpuCodecPipeline",
    "InvalidArgument",
    "NotFound",
    "OutOfMemory",
    "Pipeline",
    "PipelineStats",
    "PoolStarved",
    "Reader",
    "Region",
    "Sample",
    "Sizes",
    "StageStats",
    "StorageError",
    "Store",
    "Tensor",
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

"""``damacy.Sample``: one region of one array, or of several arrays at once."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_FORMS = (
    "give the region as slices (`(slice(0, 64), slice(8, 72))` or `numpy.s_[0:64, 8:72]`), "
    "or as `(start, shape)` with one entry per axis (`((0, 8), (64, 64))`)"
)


def _as_int(x: Any, what: str) -> int:
    try:
        v = operator.index(x)
    except TypeError:
        raise TypeError(f"{what} is {x!r}, not an integer; {_FORMS}") from None
    if isinstance(x, bool):
        raise TypeError(f"{what} is a bool; {_FORMS}")
    return v


def _parse_region(region: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if isinstance(region, slice):
        region = (region,)
    if not isinstance(region, (tuple, list)) or len(region) == 0:
        raise TypeError(f"region {region!r} is not a region; {_FORMS}")
    if all(isinstance(s, slice) for s in region):
        start, shape = [], []
        for axis, s in enumerate(region):
            if s.step not in (None, 1):
                raise ValueError(f"region axis {axis}: slice {s!r} has step {s.step}; regions are contiguous (step 1)")
            if s.stop is None:
                raise ValueError(f"region axis {axis}: slice {s!r} has no stop; give both ends")
            lo = _as_int(s.start if s.start is not None else 0, f"region axis {axis} start")
            hi = _as_int(s.stop, f"region axis {axis} stop")
            if lo < 0 or hi <= lo:
                raise ValueError(f"region axis {axis}: slice {s!r} is empty or negative; use 0 <= start < stop")
            start.append(lo)
            shape.append(hi - lo)
        return tuple(start), tuple(shape)
    if (
        len(region) == 2
        and all(isinstance(p, (tuple, list)) for p in region)
        and len(region[0]) == len(region[1])
        and len(region[0]) > 0
    ):
        start = tuple(_as_int(v, f"region start[{i}]") for i, v in enumerate(region[0]))
        shape = tuple(_as_int(v, f"region shape[{i}]") for i, v in enumerate(region[1]))
        if any(v < 0 for v in start) or any(v < 1 for v in shape):
            raise ValueError(f"region start {start} / shape {shape}: starts must be >= 0 and extents >= 1")
        return start, shape
    raise TypeError(f"region {region!r} mixes integers and slices or is malformed; {_FORMS}")


@dataclass(frozen=True, init=False)
class Sample:
    """One region of one array, or the same region of several arrays: ``Sample(uri, region)``.

    ``uri`` names the array (a local path, ``file://``, ``s3://``, ``gs://``, ``az://`` or
    ``http(s)://`` URL of the array inside its store); a tuple or list of URIs names several
    arrays read at the same region (an image and its labels): the batch then holds one tensor
    per array, in this order (``batch.tensors``; set ``Config.arrays_per_sample``). ``region``
    is a tuple of slices (as ``numpy.s_[0:64, 8:72]``) or ``(start, shape)``; a bare integer is
    rejected, since it would silently drop an axis.

    >>> import numpy as np
    >>> Sample("data.zarr/raw", np.s_[0:64, 8:72]).shape
    (64, 64)
    >>> Sample("data.zarr/raw", ((0, 8), (64, 64))) == Sample("data.zarr/raw", np.s_[0:64, 8:72])
    True
    >>> Sample(("data.zarr/image", "data.zarr/labels"), np.s_[0:64, 0:64]).uris
    ('data.zarr/image', 'data.zarr/labels')
    """

    uris: tuple[str, ...]
    start: tuple[int, ...]
    shape: tuple[int, ...]

    def __init__(self, uri: str | Sequence[str], region: Any) -> None:
        uris = (uri,) if isinstance(uri, str) else tuple(uri) if isinstance(uri, (tuple, list)) else None
        if not uris or not all(isinstance(u, str) and u for u in uris):
            raise TypeError(
                f"uri {uri!r} is not a non-empty string naming an array, or a tuple of them (several arrays "
                "read at the same region)"
            )
        start, shape = _parse_region(region)
        object.__setattr__(self, "uris", uris)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "shape", shape)

    @property
    def uri(self) -> str:
        """The array's URI (the first array's, when the sample names several)."""
        return self.uris[0]

    @property
    def region(self) -> tuple[slice, ...]:
        """The region as slices."""
        return tuple(slice(s, s + n) for s, n in zip(self.start, self.shape, strict=True))

    def __repr__(self) -> str:
        axes = ", ".join(f"{s}:{s + n}" for s, n in zip(self.start, self.shape, strict=True))
        uri = self.uris[0] if len(self.uris) == 1 else self.uris
        return f"damacy.Sample({uri!r}, [{axes}])"

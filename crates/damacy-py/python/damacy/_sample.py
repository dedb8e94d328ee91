"""``damacy.Sample``: one region of one array, or of several arrays at once."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_FORMS = (
    "give one (start, stop) pair or slice per axis: `((0, 16), (0, 32))`, "
    "`(slice(0, 16), slice(0, 32))` or `numpy.s_[0:16, 0:32]` (a bare slice, `slice(0, 64)`, for one axis); "
    "for a start and a shape, `damacy.Region(start, shape)`"
)
_SHAPE_HINT = "a bare tuple means (start, stop) per axis; for (start, shape) use damacy.Region(start, shape)"


def _as_int(x: Any, what: str) -> int:
    if isinstance(x, bool):
        raise TypeError(f"{what} is a bool; {_FORMS}")
    try:
        return operator.index(x)
    except TypeError:
        raise TypeError(f"{what} is {x!r}, not an integer; {_FORMS}") from None


@dataclass(frozen=True, init=False)
class Region:
    """A region by its start and its shape: ``Region(start, shape)``, one entry of each per
    axis. ``damacy.Sample(uri, Region((0, 8), (64, 64)))`` is rows 0–63, columns 8–71, the
    same as ``damacy.Sample(uri, ((0, 64), (8, 72)))``.

    A bare tuple given to :class:`Sample` always means one ``(start, stop)`` pair (or slice)
    per axis; this class is how a start and a shape are given, so the two are never guessed
    from the lengths of tuples.

    >>> r = Region((0, 8), (64, 64))
    >>> r.stop
    (64, 72)
    >>> r.slices
    (slice(0, 64, None), slice(8, 72, None))
    """

    start: tuple[int, ...]
    shape: tuple[int, ...]

    def __init__(self, start: Sequence[int], shape: Sequence[int]) -> None:
        for name, v in (("start", start), ("shape", shape)):
            if isinstance(v, (str, bytes)) or not isinstance(v, Sequence) and not hasattr(v, "tolist"):
                raise TypeError(f"Region {name} is {v!r}; give one integer per axis, e.g. Region((0, 8), (64, 64))")
        start_t = tuple(_as_int(v, f"Region start[{a}]") for a, v in enumerate(list(start)))
        shape_t = tuple(_as_int(v, f"Region shape[{a}]") for a, v in enumerate(list(shape)))
        if len(start_t) != len(shape_t) or not start_t:
            raise ValueError(
                f"Region start {start_t} and shape {shape_t}: give one start and one extent per axis (and at least one axis)"
            )
        for a, (lo, n) in enumerate(zip(start_t, shape_t, strict=True)):
            if lo < 0:
                raise ValueError(f"Region axis {a}: start {lo} is negative")
            if n < 1:
                raise ValueError(f"Region axis {a}: extent {n} is empty; extents are at least 1")
        object.__setattr__(self, "start", start_t)
        object.__setattr__(self, "shape", shape_t)

    @property
    def stop(self) -> tuple[int, ...]:
        """The end of each axis (exclusive)."""
        return tuple(s + n for s, n in zip(self.start, self.shape, strict=True))

    @property
    def slices(self) -> tuple[slice, ...]:
        """The region as slices, one per axis."""
        return tuple(slice(s, s + n) for s, n in zip(self.start, self.shape, strict=True))

    def __repr__(self) -> str:
        return f"damacy.Region(start={self.start}, shape={self.shape})"


def _axis(axis: int, item: Any) -> tuple[int, int]:
    """One axis of a region: a slice or a (start, stop) pair, as (start, extent)."""
    if not isinstance(item, (tuple, list, slice)) and getattr(item, "ndim", None) == 1:
        item = item.tolist()  # a numpy (start, stop) row
    if isinstance(item, slice):
        if item.step not in (None, 1):
            raise ValueError(f"region axis {axis}: slice {item!r} has step {item.step}; regions are contiguous (step 1)")
        if item.stop is None:
            raise ValueError(f"region axis {axis}: slice {item!r} has no stop; give both ends")
        lo = _as_int(item.start if item.start is not None else 0, f"region axis {axis} start")
        hi = _as_int(item.stop, f"region axis {axis} stop")
    elif isinstance(item, (tuple, list)):
        if len(item) != 2:
            raise TypeError(
                f"region axis {axis} is {tuple(item)!r}: a (start, stop) pair has two integers; {_SHAPE_HINT}"
            )
        lo = _as_int(item[0], f"region axis {axis} start")
        hi = _as_int(item[1], f"region axis {axis} stop")
    elif isinstance(item, bool) or hasattr(item, "__index__"):
        raise TypeError(
            f"region axis {axis} is the integer {item!r}: a bare integer would drop the axis; {_FORMS}"
        )
    else:
        raise TypeError(f"region axis {axis} is {item!r}, neither a (start, stop) pair nor a slice; {_FORMS}")
    if lo < 0:
        raise ValueError(f"region axis {axis}: start {lo} is negative; use 0 <= start < stop")
    if hi <= lo:
        raise ValueError(f"region axis {axis}: ({lo}, {hi}) is empty, stop must be greater than start; {_SHAPE_HINT}")
    return lo, hi - lo


def _parse_region(region: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``region`` as (start, shape): a :class:`Region`, a slice (one axis), or a tuple or list
    of one ``(start, stop)`` pair or slice per axis (a numpy array of shape ``(ndim, 2)`` too,
    the form of bounding boxes)."""
    if isinstance(region, Region):
        return region.start, region.shape
    if isinstance(region, slice):
        region = (region,)
    elif not isinstance(region, (tuple, list, str, bytes)) and getattr(region, "ndim", None) == 2:
        region = region.tolist()  # a numpy (ndim, 2) array of (start, stop) rows
    if not isinstance(region, (tuple, list)) or len(region) == 0:
        raise TypeError(f"region {region!r} is not a region; {_FORMS}")
    axes = [_axis(a, item) for a, item in enumerate(region)]
    return tuple(lo for lo, _ in axes), tuple(n for _, n in axes)


@dataclass(frozen=True, init=False)
class Sample:
    """One region of one array, or the same region of several arrays: ``Sample(uri, region)``.

    ``uri`` names the array (a local path, ``file://``, ``s3://``, ``gs://``, ``az://`` or
    ``http(s)://`` URL of the array inside its store); a tuple or list of URIs names several
    arrays read at the same region (an image and its labels): the batch then holds one tensor
    per array, in this order (``batch.tensors``; set ``Config.arrays_per_sample``).

    ``region`` gives one ``(start, stop)`` pair or slice per axis, as bounding boxes usually
    are: ``((0, 16), (0, 32), (0, 32))``, ``(slice(0, 16), slice(0, 32), slice(0, 32))`` or
    ``numpy.s_[0:16, 0:32, 0:32]`` (pairs and slices may be mixed; a numpy array of shape
    ``(ndim, 2)`` works too). A start and a shape are given as :class:`damacy.Region`
    ``(start, shape)``: a bare tuple is never read as one. A bare integer is rejected, since it
    would silently drop an axis; malformed regions raise ``TypeError`` or ``ValueError`` naming
    the axis.

    >>> import numpy as np
    >>> Sample("data.zarr/raw", ((0, 64), (8, 72))).shape
    (64, 64)
    >>> Sample("data.zarr/raw", ((0, 64), (8, 72))) == Sample("data.zarr/raw", np.s_[0:64, 8:72])
    True
    >>> Sample("data.zarr/raw", Region((0, 8), (64, 64))) == Sample("data.zarr/raw", np.s_[0:64, 8:72])
    True
    >>> Sample(("data.zarr/image", "data.zarr/labels"), np.s_[0:64, 0:64]).uris
    ('data.zarr/image', 'data.zarr/labels')
    """

    uris: tuple[str, ...]
    start: tuple[int, ...]
    shape: tuple[int, ...]

    def __init__(self, uri: str | Sequence[str], region: Region | Sequence[Any] | slice) -> None:
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

"""Errors: the damacy.Error hierarchy, mapped from the engine; no panic crosses into Python."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import zarr

import damacy
from conftest import DAMACY, FIXTURES


def test_hierarchy():
    for cls in (damacy.InvalidArgument, damacy.NotFound, damacy.StorageError, damacy.DecodeError,
                damacy.DeviceError, damacy.OutOfMemory, damacy.Timeout, damacy.Closed, damacy.Unsupported):
        assert issubclass(cls, damacy.Error) and cls.__module__ == "damacy"
    assert issubclass(damacy.Unsupported, damacy.InvalidArgument)
    assert issubclass(damacy.Error, Exception)


def test_invalid_argument():
    with pytest.raises(damacy.InvalidArgument, match="executor"):
        damacy.Reader(executor="quantum")
    with pytest.raises(damacy.InvalidArgument, match="out_of_bounds"):
        damacy.Reader(executor="cpu").open_array(damacy.Store.open(str(FIXTURES)), "v3/raw", out_of_bounds="wrap")


def test_not_found():
    with pytest.raises(damacy.NotFound, match="no folder"):
        damacy.Store.open("/nonexistent/damacy/store")
    store = damacy.Store.open(str(FIXTURES))
    with pytest.raises(damacy.NotFound, match="no zarr array"):
        damacy.Reader(executor="cpu").open_array(store, "v3/not_an_array")


def test_decode_error_names_the_chunk(tmp_path):
    dst = tmp_path / "z"
    shutil.copytree(FIXTURES / "v3/zstd_l3_ck", dst)
    chunk = next(p for p in sorted((dst / "c").rglob("*")) if p.is_file())
    chunk.write_bytes(b"\x00" * 16)
    with zarr.config.set(DAMACY), pytest.raises(damacy.DecodeError, match="chunk"):
        zarr.open_array(str(dst), mode="r")[...]


def test_storage_error_kind(tmp_path):
    """A shard cut short: its index lies past the end of the object."""
    dst = tmp_path / "s"
    shutil.copytree(FIXTURES / "v3/sharded_zstd_index_end", dst)
    shard = next(p for p in sorted((dst / "c").rglob("*")) if p.is_file())
    shard.write_bytes(shard.read_bytes()[:8])
    with zarr.config.set(DAMACY), pytest.raises(damacy.Error) as info:
        zarr.open_array(str(dst), mode="r")[...]
    err = info.value
    assert isinstance(err, (damacy.StorageError, damacy.DecodeError)), type(err)
    if isinstance(err, damacy.StorageError):
        assert err.kind in ("range_not_satisfied", "other")


def test_gpu_executor_without_gpu_is_an_error():
    try:
        reader = damacy.Reader(executor="gpu")
    except damacy.Error as e:
        assert isinstance(e, (damacy.DeviceError, damacy.InvalidArgument)), type(e)
    else:  # a machine with a GPU
        assert "device" in reader.executor_note


def test_panic_becomes_damacy_error():
    with pytest.raises(damacy.Error, match="internal error.*deliberate panic"):
        damacy._damacy._panic_for_tests()


def test_read_chunks_into_checks_the_output():
    reader = damacy.Reader(executor="cpu")
    array = reader.open_array(damacy.Store.open(str(FIXTURES)), "v3/bytes_le_uint16_r3")
    out = np.zeros((5, 4, 3), dtype="uint16")
    chunk = ((0, 0, 0), [(0, 1, 5), (0, 1, 4), (0, 1, 3)], [(0, 1, 5), (0, 1, 4), (0, 1, 3)])
    reader.read_chunks_into(array, [chunk], out, [5, 4, 3], list(out.strides))
    assert out.any()
    with pytest.raises(damacy.InvalidArgument, match="read-only"):
        ro = np.zeros((5, 4, 3), dtype="uint16")
        ro.flags.writeable = False
        reader.read_chunks_into(array, [chunk], ro, [5, 4, 3], list(ro.strides))
    with pytest.raises(damacy.InvalidArgument, match="holds|dtype|reads as"):
        f = np.zeros((5, 4, 3), dtype="float32")
        reader.read_chunks_into(array, [chunk], f, [5, 4, 3], list(f.strides))
    with pytest.raises(damacy.InvalidArgument, match="outside|reaches"):
        reader.read_chunks_into(array, [chunk], out, [5, 4, 3], [1000, 6, 2])

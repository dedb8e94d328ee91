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


def _machine_has_a_gpu() -> bool:
    """Whether damacy binds a GPU here (``auto`` with a device falls back to the CPU only on a
    machine without a usable one)."""
    return damacy.Reader(executor="auto", device=0).device is not None


def test_gpu_executor_without_gpu_is_a_device_error():
    """No usable GPU under ``executor="gpu"`` is ``damacy.DeviceError`` (the device is missing;
    the argument is fine), never ``InvalidArgument``; ``auto`` decodes on the CPU and says why."""
    if _machine_has_a_gpu():
        pytest.skip("this machine has a usable GPU: executor='gpu' binds it (tests/python/test_gpu.py)")
    for make in (lambda: damacy.Reader(executor="gpu"), lambda: damacy.Reader(executor="gpu", device=0),
                 lambda: damacy.Pipeline(batch_size=1, executor="gpu", n_io_threads=1, n_compute_threads=1)):
        with pytest.raises(damacy.DeviceError, match="executor gpu: no usable GPU") as info:
            make()
        assert not isinstance(info.value, damacy.InvalidArgument)
    auto = damacy.Reader(executor="auto")
    note = auto.executor_note
    assert auto.device is None and note.startswith("cpu (") and note != "cpu (the CPU executor was chosen)", note
    with damacy.Pipeline(batch_size=1, executor="auto", n_io_threads=1, n_compute_threads=1) as p:
        assert p.executor.startswith("cpu (") and p.executor != "cpu (the CPU executor was chosen)", p.executor


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_storage_error_from_an_unreachable_store():
    """An HTTP store nobody listens on: the read fails at the connection, after the store's
    retries (none here), as ``damacy.StorageError`` with a ``kind``, naming the store."""
    url = f"http://127.0.0.1:{_closed_port()}/data.zarr"
    store = damacy.Store.open(url, retries=0)
    with pytest.raises(damacy.StorageError) as info:
        damacy.Reader(executor="cpu").open_array(store, "raw")
    err = info.value
    assert not isinstance(err, damacy.NotFound)
    assert err.kind == "transient", err.kind  # a refused connection, retried (here: 0 times)
    assert "127.0.0.1" in str(err), str(err)


def test_out_of_memory_for_a_batch_the_host_cannot_hold():
    """A batch buffer larger than any address space (two samples of 2^50 float32: 8 PiB)
    cannot be reserved: ``damacy.OutOfMemory`` saying what to lower, before any read. (On the
    CPU this is the one budget the host enforces: the device budgets are checked by Config.)"""
    shape = (1 << 22, 1 << 22, 1 << 6)  # 2^50 elements: 4 PiB of float32 per sample
    with pytest.raises(damacy.OutOfMemory, match="batch_size or depth"):
        damacy.Pipeline(batch_size=2, sample_shape=shape, dtype="float32", executor="cpu", n_io_threads=1,
                        n_compute_threads=1).close()


def test_sample_regions_reject_bare_and_mixed_integers_showing_the_accepted_forms():
    forms = ("numpy.s_[0:64, 8:72]", "(start, shape)", "slice(0, 64)")
    for region, needle in ((5, "is not a region"), (np.int64(3), "is not a region"),
                           ((slice(0, 4), 3), "mixes integers and slices"), (np.s_[0:4, 2], "mixes integers and slices"),
                           ((3, slice(0, 4)), "mixes integers and slices"), ((1, 2), "mixes integers and slices")):
        with pytest.raises(TypeError) as info:
            damacy.Sample("data.zarr/raw", region)
        message = str(info.value)
        assert needle in message, message
        for form in forms:
            assert form in message, (region, message)
    # The accepted forms themselves.
    assert damacy.Sample("a", np.s_[0:4, 2:3]) == damacy.Sample("a", ((0, 2), (4, 1)))
    assert damacy.Sample("a", slice(1, 3)).shape == (2,)


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

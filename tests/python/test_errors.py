"""Errors: the damacy.Error hierarchy, mapped from the engine; no panic crosses into Python."""

from __future__ import annotations

import re
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


def test_sample_regions_are_start_stop_pairs_or_slices_per_axis():
    """The reference loader's form: one (start, stop) pair or slice per axis, mixed freely, as
    tuples, lists or a numpy (ndim, 2) array; (start, shape) only through damacy.Region."""
    want = damacy.Sample("v.zarr/raw", np.s_[0:16, 0:32, 8:40])
    assert (want.start, want.shape) == ((0, 0, 8), (16, 32, 32))
    for region in (
        ((0, 16), (0, 32), (8, 40)),
        (slice(0, 16), slice(0, 32), slice(8, 40)),
        [[0, 16], [0, 32], [8, 40]],
        ((0, 16), slice(0, 32), (np.int64(8), np.int32(40))),
        np.array([[0, 16], [0, 32], [8, 40]]),
        [np.array([0, 16]), np.array([0, 32]), np.array([8, 40])],
        damacy.Region((0, 0, 8), (16, 32, 32)),
        damacy.Region(np.array([0, 0, 8]), [16, 32, 32]),
    ):
        assert damacy.Sample("v.zarr/raw", region) == want, region
    assert damacy.Sample("a", slice(1, 3)).shape == (2,)
    assert damacy.Sample("a", ((5, 7),)).shape == (2,)
    # A two-axis bare tuple is never read as (start, shape).
    assert damacy.Sample("a", ((0, 8), (64, 72))).shape == (8, 8)
    r = damacy.Region((0, 8), (64, 64))
    assert r.stop == (64, 72) and r.slices == np.s_[0:64, 8:72] and "shape=(64, 64)" in repr(r)
    assert damacy.Sample("a", r).region == r.slices


def test_malformed_regions_name_the_axis_and_the_accepted_forms():
    forms = ("(start, stop) pair or slice per axis", "numpy.s_[0:16, 0:32]", "damacy.Region(start, shape)")
    for region, error, needle in (
        (5, TypeError, "is not a region"),
        (np.int64(3), TypeError, "is not a region"),
        ((), TypeError, "is not a region"),
        ("0:4", TypeError, "is not a region"),
        ((slice(0, 4), 3), TypeError, "region axis 1 is the integer 3"),
        (np.s_[0:4, 2], TypeError, "region axis 1 is the integer 2"),
        ((1, 2), TypeError, "region axis 0 is the integer 1"),
        (((0, 0, 0), (16, 16, 20)), TypeError, "region axis 0 is (0, 0, 0): a (start, stop) pair has two integers"),
        (((0, 1.5), (0, 4)), TypeError, "region axis 0 stop is 1.5, not an integer"),
        (((0, True), (0, 4)), TypeError, "region axis 0 stop is a bool"),
        (((0, 4), "ab"), TypeError, "region axis 1 is 'ab'"),
        (((0, 4), (3, 3)), ValueError, "region axis 1: (3, 3) is empty"),
        (((0, 4), (8, 2)), ValueError, "region axis 1: (8, 2) is empty"),
        (((-1, 4),), ValueError, "region axis 0: start -1 is negative"),
        ((slice(0, 4), slice(0, 8, 2)), ValueError, "region axis 1: slice"),
        ((slice(0, None),), ValueError, "region axis 0: slice"),
    ):
        with pytest.raises(error) as info:
            damacy.Sample("data.zarr/raw", region)
        message = str(info.value)
        assert needle in message, (region, message)
        if error is TypeError and "not an integer" not in needle and "bool" not in needle:
            assert any(f in message for f in forms), (region, message)
    # An old (start, shape) tuple that happens to be a valid pair per axis cannot be told
    # apart; one that is empty or has three entries per axis says how to give a start and shape.
    with pytest.raises(ValueError, match=r"\(start, shape\) use damacy.Region\(start, shape\)"):
        damacy.Sample("a", ((0, 8), (64, 64)))
    for start, shape, error, needle in (
        ((0, 0), (4,), ValueError, "one start and one extent per axis"),
        ((0, -1), (4, 4), ValueError, "Region axis 1: start -1 is negative"),
        ((0, 0), (4, 0), ValueError, "Region axis 1: extent 0 is empty"),
        ("01", (4, 4), TypeError, "Region start is '01'"),
        ((0, 0.5), (4, 4), TypeError, "Region start[1] is 0.5"),
    ):
        with pytest.raises(error, match=re.escape(needle)):
            damacy.Region(start, shape)


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


@pytest.mark.parametrize("kind, cls", [
    ("invalid_argument", damacy.InvalidArgument),
    ("unsupported", damacy.Unsupported),
    ("not_found", damacy.NotFound),
    ("storage", damacy.StorageError),
    ("io_driver_stopped", damacy.StorageError),
    ("decode", damacy.DecodeError),
    ("metadata", damacy.DecodeError),
    ("device", damacy.DeviceError),
    ("out_of_memory", damacy.OutOfMemory),
    ("internal", damacy.Error),
])
def test_each_engine_error_kind_maps_to_its_class(kind, cls):
    """Every kind of engine error raises its own class; an internal failure (a panic, a poisoned
    lock, a thread that could not start) is the base ``damacy.Error``, no subclass."""
    with pytest.raises(damacy.Error) as info:
        damacy._damacy._engine_error_for_tests(kind)
    assert type(info.value) is cls, (kind, type(info.value))
    if kind == "storage":
        assert info.value.kind == "permission_denied"
    if kind == "io_driver_stopped":
        assert info.value.kind == "other" and "I/O driver stopped" in str(info.value)

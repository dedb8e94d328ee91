"""damacy.Config / damacy.Pipeline / damacy.Batch on the CPU executor: batches equal zarr-python's
reads, DLPack export (legacy and versioned capsules, lifetimes), lazy pushes with flat memory,
timeouts, errors, the LOCAL_RANK warning, Ctrl-C during a blocking pop, two ranks."""

from __future__ import annotations

import copy
import ctypes
import dataclasses
import gc
import itertools
import json
import os
import pathlib
import pydoc
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
import zarr

import damacy

HERE = pathlib.Path(__file__).resolve().parent

# Few threads: the tests run in parallel on small machines.
SMALL = dict(executor="cpu", n_io_threads=1, n_compute_threads=1, n_workers=1)


def cfg(**knobs) -> damacy.Config:
    return damacy.Config(**{**SMALL, **knobs})


@pytest.fixture(scope="module")
def arrays(tmp_path_factory) -> dict[str, tuple[str, np.ndarray]]:
    """Two small zarr v3 arrays written by zarr-python: sharded zstd, and plain (no codec)."""
    root = tmp_path_factory.mktemp("pipeline")
    rng = np.random.default_rng(7)
    out = {}
    data = rng.integers(0, 60000, size=(40, 24, 20), dtype=np.uint16)
    path = str(root / "sharded.zarr")
    a = zarr.create_array(store=path, shape=data.shape, dtype=data.dtype, chunks=(8, 8, 10), shards=(16, 16, 20),
                          compressors=zarr.codecs.ZstdCodec(level=3))
    a[...] = data
    out["sharded_zstd"] = (path, data)
    data = rng.standard_normal(size=(30, 33)).astype(np.float32)
    path = str(root / "plain.zarr")
    a = zarr.create_array(store=path, shape=data.shape, dtype=data.dtype, chunks=(7, 11), compressors=None)
    a[...] = data
    out["plain"] = (path, data)
    return out


def regions(shape, extent, n, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        start = tuple(int(rng.integers(0, s - e + 1)) for s, e in zip(shape, extent, strict=True))
        out.append(tuple(slice(s, s + e) for s, e in zip(start, extent, strict=True)))
    return out


def capsule_name(capsule) -> str:
    get = ctypes.pythonapi.PyCapsule_GetName
    get.restype, get.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return get(capsule).decode()


# ------------------------------------------------------------------------------------ Config


def test_config_is_frozen_keyword_only_and_replaceable():
    c = damacy.Config(batch_size=8, sample_shape=[4, 4], dtype="bf16", executor="cpu")
    assert c.sample_shape == (4, 4) and c.dtype == "bf16"
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.batch_size = 4
    with pytest.raises(TypeError):
        damacy.Config(8)  # keyword-only
    d = dataclasses.replace(c, batch_size=16)
    assert (d.batch_size, d.dtype, c.batch_size) == (16, "bf16", 8)
    assert d.sizes.batch_bytes == 16 * 4 * 4 * 2 and c.sizes.batch_bytes == 8 * 4 * 4 * 2
    assert c.__replace__(depth=3).sizes.slots == 3 + c.n_workers
    if sys.version_info >= (3, 13):
        assert copy.replace(c, batch_size=2).batch_size == 2
    assert d == dataclasses.replace(c, batch_size=16) and hash(d) == hash(dataclasses.replace(c, batch_size=16))
    # A numpy dtype is named.
    assert damacy.Config(batch_size=1, dtype=np.float32).dtype == "float32"


def test_config_repr_shows_every_derived_size_and_help_explains_the_knobs():
    c = damacy.Config(batch_size=8, sample_shape=(4, 4), dtype="float32", depth=3, n_workers=2, executor="cpu")
    r = repr(c)
    s = c.sizes
    assert (s.slots, s.lookahead, s.batch_bytes, s.pool_bytes) == (5, 24, 512, 2560)
    for needle in ("batch_size=8", "lookahead=24 samples", "slots=5", "batch_bytes=512", "pool_bytes=2560",
                   f"shard_index_cache_bytes={s.shard_index_cache_bytes}", f"shard_index_floor={s.shard_index_floor}",
                   "metadata_cache_entries=1024"):
        assert needle in r, (needle, r)
    assert "5 slots (depth 3 + 2 workers)" in c.describe()
    doc = pydoc.render_doc(damacy.Config, renderer=pydoc.plaintext)
    for f in dataclasses.fields(damacy.Config):
        assert re.search(rf"^[ |]*{f.name}( \[.*\])?$", doc, re.M), f"help(damacy.Config) does not explain {f.name}"
    secret = damacy.Config(batch_size=1, store_options={"access_key_id": "k", "secret_access_key": "hunter2"})
    assert "hunter2" not in repr(secret)


@pytest.mark.parametrize(
    ("knobs", "error", "needle"),
    [
        (dict(batch_size=0), damacy.InvalidArgument, "Config.batch_size is 0"),
        (dict(batch_size=4, depth=0), damacy.InvalidArgument, "Config.depth is 0"),
        (dict(batch_size=8, lookahead=3), damacy.InvalidArgument, "Config.lookahead is 3"),
        (dict(batch_size=4, dtype="complex64"), damacy.InvalidArgument, "Config.dtype"),
        (dict(batch_size=4, executor="quantum"), damacy.InvalidArgument, "Config.executor"),
        (dict(batch_size=4, on_error="ignore"), damacy.InvalidArgument, "on_error"),
        (dict(batch_size=4, out_of_bounds="wrap"), damacy.InvalidArgument, "Config.out_of_bounds"),
        (dict(batch_size=4, pop_timeout=0), damacy.InvalidArgument, "Config.pop_timeout"),
        (dict(batch_size=-1), damacy.InvalidArgument, "Config.batch_size is -1"),
        (dict(batch_size=4, store_options={"password": "x"}), damacy.InvalidArgument, "unknown keys"),
        (dict(batch_size="8"), TypeError, "Config.batch_size"),
        (dict(batch_size=4, sample_shape=64), TypeError, "Config.sample_shape"),
        (dict(batch_size=4, arrays_per_sample=0), damacy.InvalidArgument, "Config.arrays_per_sample is 0"),
    ],
)
def test_invalid_configs_name_the_knob(knobs, error, needle):
    with pytest.raises(error, match=needle.replace(".", r"\.")):
        damacy.Config(**knobs)


# ------------------------------------------------------------------------------------ batches


@pytest.mark.parametrize("name", ["sharded_zstd", "plain"])
def test_numpy_from_dlpack_equals_zarr_regions(arrays, name):
    path, data = arrays[name]
    extent = (5, 7, 6)[: data.ndim]
    wanted = regions(data.shape, extent, 23, seed=len(name))
    reference = zarr.open_array(path, mode="r")
    got = []
    with damacy.Pipeline(cfg(batch_size=4)) as p:
        p.push(damacy.Sample(path, r) for r in wanted)
        assert p.pending >= 1
        for batch in p.batches():
            a = np.from_dlpack(batch)
            assert batch.__dlpack_device__() == (1, 0) and batch.device == "cpu"
            assert a.dtype == data.dtype and a.shape == batch.shape == (len(batch), *extent)
            assert a.ctypes.data == batch.info.device_ptr, "numpy.from_dlpack copied"
            assert [s.region for s in batch.info.samples] == [s.region for s in batch.samples]
            got.extend(a.copy())
        assert p.pending == 0
        stats = p.stats()
    assert len(got) == len(wanted)
    for g, r in zip(got, wanted, strict=True):
        np.testing.assert_array_equal(g, reference[r])
        np.testing.assert_array_equal(g, data[r])
    assert stats.batches == 6 and stats.samples == 23
    assert stats.read.count == 6 and stats.decode.count > 0 and stats.io.bytes_in > 0
    table = str(stats)
    for stage in ("plan", "read", "io", "decode", "assemble", "pop wait", "delivered: 6 batches, 23 samples"):
        assert stage in table, table
    assert stats.as_dict()["read"]["count"] == 6


def test_multi_array_samples_give_one_tensor_per_array(tmp_path):
    """`Sample((image, labels), region)`: the batch holds one tensor per array, in the order of
    the URIs, each exported by DLPack on its own; the batch itself refuses a single export."""
    rng = np.random.default_rng(11)
    image = rng.integers(0, 60000, size=(20, 18), dtype=np.uint16)
    labels = rng.integers(0, 5, size=(20, 18), dtype=np.uint8)
    uris = []
    for name, data, chunks in (("image", image, (8, 6)), ("labels", labels, (5, 9))):
        path = str(tmp_path / "pair.zarr" / name)
        a = zarr.create_array(store=path, shape=data.shape, dtype=data.dtype, chunks=chunks)
        a[...] = data
        uris.append(path)
    wanted = regions(image.shape, (4, 5), 7, seed=3)
    samples = [damacy.Sample(tuple(uris), r) for r in wanted]
    assert samples[0].uris == tuple(uris) and samples[0].uri == uris[0]
    assert damacy.Sample(uris, wanted[0]) == samples[0] and "labels" in repr(samples[0])
    for bad in ((), ("a", ""), ("a", 3)):
        with pytest.raises(TypeError, match="not a non-empty string"):
            damacy.Sample(bad, wanted[0])
    config = cfg(batch_size=3, arrays_per_sample=2, sample_shape=(4, 5), dtype="float32")
    assert config.sizes.batch_bytes == 2 * 3 * 4 * 5 * 4
    got_image, got_labels = [], []
    with damacy.Pipeline(cfg(batch_size=3, arrays_per_sample=2)) as p:
        p.push(samples)
        for batch in p.batches():
            assert len(batch.tensors) == 2 and batch.dtypes == ["uint16", "uint8"]
            assert batch.info.dtypes == ["uint16", "uint8"] and len(batch.info.device_ptrs) == 2
            with pytest.raises(BufferError, match=r"holds 2 tensors .*batch\.tensors\[i\]"):
                np.from_dlpack(batch)
            img, lab = (np.from_dlpack(t) for t in batch.tensors)
            assert [t.index for t in batch.tensors] == [0, 1]
            assert img.ctypes.data == batch.tensors[0].device_ptr == batch.info.device_ptrs[0]
            assert lab.ctypes.data == batch.info.device_ptrs[1] and lab.nbytes == batch.info.tensor_nbytes[1]
            assert img.shape == lab.shape == batch.shape == (len(batch), 4, 5)
            assert batch.samples[0].uris == tuple(uris)
            got_image.extend(img.copy())
            got_labels.extend(lab.copy())
    for r, gi, gl in zip(wanted, got_image, got_labels, strict=True):
        np.testing.assert_array_equal(gi, image[r])
        np.testing.assert_array_equal(gl, labels[r])
    # A sample naming another number of arrays than the batches hold is an error naming both.
    with damacy.Pipeline(cfg(batch_size=1, arrays_per_sample=2)) as p:
        p.push([damacy.Sample(uris[0], wanted[0])])
        with pytest.raises(damacy.InvalidArgument, match="names 1 arrays but the batches hold 2 tensors"):
            p.pop(timeout=30)


def test_dtype_cast_and_preallocated_buffers(arrays):
    path, data = arrays["sharded_zstd"]
    c = cfg(batch_size=3, sample_shape=(4, 4, 4), dtype="float32")
    assert c.sizes.batch_bytes == 3 * 64 * 4
    with damacy.Pipeline(c) as p:
        p.push([damacy.Sample(path, np.s_[i : i + 4, 0:4, 0:4]) for i in range(3)])
        with p.pop() as batch:
            a = np.from_dlpack(batch)
            assert a.dtype == np.float32
            np.testing.assert_array_equal(a, np.stack([data[i : i + 4, 0:4, 0:4] for i in range(3)]).astype(np.float32))
        assert batch.released


def test_dlpack_capsules_legacy_and_versioned(arrays):
    path, data = arrays["plain"]
    with damacy.Pipeline(cfg(batch_size=2)) as p:
        p.push([damacy.Sample(path, np.s_[0:3, 0:5]), damacy.Sample(path, np.s_[3:6, 5:10])])
        batch = p.pop()
        assert capsule_name(batch.__dlpack__()) == "dltensor"
        assert capsule_name(batch.__dlpack__(max_version=(0, 8))) == "dltensor"
        assert capsule_name(batch.__dlpack__(max_version=(1, 0))) == "dltensor_versioned"
        assert capsule_name(batch.__dlpack__(max_version=(1, 2), dl_device=(1, 0), copy=False)) == "dltensor_versioned"
        with pytest.raises(BufferError, match="dl_device"):
            batch.__dlpack__(max_version=(1, 0), dl_device=(2, 0))
        # copy=True: the consumer gets its own memory.
        copied = np.from_dlpack(batch, copy=True)
        assert copied.ctypes.data != batch.info.device_ptr
        np.testing.assert_array_equal(copied, np.stack([data[0:3, 0:5], data[3:6, 5:10]]))
        batch.release()
        batch.release()  # idempotent
        with pytest.raises(BufferError, match="released"):
            batch.__dlpack__()
        assert "released" in repr(batch)


def test_dlpack_stream_of_a_host_batch_is_none_only(arrays):
    """The array-API standard: a kDLCPU export takes ``stream=None`` only (devices without
    streams). Host batches, and ``dl_device=(1, 0)`` copies, refuse any other value with a
    ``ValueError`` that says so; ``None`` (what numpy and torch pass for the host) works."""
    path, data = arrays["plain"]
    with damacy.Pipeline(cfg(batch_size=1)) as p:
        p.push([damacy.Sample(path, np.s_[0:3, 0:5])])
        with p.pop(timeout=30) as batch:
            assert batch.__dlpack_device__() == (1, 0)
            for stream in (0, 1, 2, -1, 12345):
                with pytest.raises(ValueError, match=rf"stream={stream}\).*kDLCPU.*stream=None"):
                    batch.__dlpack__(stream=stream)
                with pytest.raises(ValueError, match="kDLCPU"):
                    batch.__dlpack__(stream=stream, max_version=(1, 0), dl_device=(1, 0), copy=True)
            assert capsule_name(batch.__dlpack__(stream=None)) == "dltensor"
            assert capsule_name(batch.__dlpack__(stream=None, max_version=(1, 0))) == "dltensor_versioned"
            # A refused export leaves the batch whole and exportable.
            np.testing.assert_array_equal(np.from_dlpack(batch)[0], data[0:3, 0:5])


def test_stats_reset_starts_the_counters_afresh(arrays):
    """Counters after ``stats_reset()`` hold only what came later. Each push is popped to the
    end first (nothing is read ahead then), so every count is exact."""
    path, data = arrays["plain"]
    with damacy.Pipeline(cfg(batch_size=2)) as p:
        p.push([damacy.Sample(path, np.s_[i : i + 2, 0:4]) for i in range(4)])
        assert [np.from_dlpack(b).shape for b in p.batches()] == [(2, 2, 4)] * 2
        before = p.stats()
        assert (before.batches, before.samples, before.read.count) == (2, 4, 2), str(before)
        assert before.io.bytes_in > 0 and before.read.time_s > 0
        p.stats_reset()
        zero = p.stats()
        assert (zero.batches, zero.samples, zero.read.count, zero.decode.count, zero.io.bytes_in) == (0, 0, 0, 0, 0), str(zero)
        assert zero.read.time_s == 0 and "delivered: 0 batches, 0 samples" in str(zero)
        p.push([damacy.Sample(path, np.s_[i : i + 2, 4:8]) for i in range(6)])
        got = [np.from_dlpack(b).copy() for b in p.batches()]
        assert len(got) == 3
        np.testing.assert_array_equal(got[2][1], data[5:7, 4:8])
        after = p.stats()
        assert (after.batches, after.samples, after.read.count) == (3, 6, 3), str(after)
        assert after.as_dict()["batches"] == 3 and "delivered: 3 batches, 6 samples" in str(after)


def test_exported_memory_outlives_release_and_keeps_the_buffer_out_of_the_pool(arrays):
    """The rule: release() (or dropping the Batch) while a DLPack consumer holds the memory
    defers the buffer's return to the pool until the consumer frees it."""
    path, data = arrays["plain"]
    with damacy.Pipeline(cfg(batch_size=1, depth=1)) as p:
        p.push(damacy.Sample(path, np.s_[i : i + 2, 0:4]) for i in range(6))
        batch = p.pop()
        a = np.from_dlpack(batch)
        expected = data[0:2, 0:4].copy()
        batch.release()
        del batch
        gc.collect()
        # The consumer still holds batch 0's buffer: with depth=1 no other batch may come.
        with pytest.raises(damacy.PoolStarved, match="Config.depth"):
            p.pop(timeout=5)
        np.testing.assert_array_equal(a[0], expected)
        del a
        gc.collect()
        with p.pop(timeout=5) as b:
            np.testing.assert_array_equal(np.from_dlpack(b)[0], data[1:3, 0:4])
        # A capsule that no consumer took frees itself.
        with p.pop(timeout=5) as b:
            cap = b.__dlpack__(max_version=(1, 0))
        del cap
        gc.collect()
        with p.pop(timeout=5) as b:
            np.testing.assert_array_equal(np.from_dlpack(b)[0], data[3:5, 0:4])


def test_torch_from_dlpack(arrays):
    torch = pytest.importorskip("torch", reason="torch is not installed (make test does not install it)")
    path, data = arrays["sharded_zstd"]
    with damacy.Pipeline(cfg(batch_size=2)) as p:
        p.push([damacy.Sample(path, np.s_[0:2, 0:3, 0:4]), damacy.Sample(path, np.s_[5:7, 1:4, 2:6])])
        with p.pop() as batch:
            t = torch.from_dlpack(batch)
            assert t.data_ptr() == batch.info.device_ptr
            np.testing.assert_array_equal(t.numpy(), np.stack([data[0:2, 0:3, 0:4], data[5:7, 1:4, 2:6]]))


# ------------------------------------------------------------------------------------ pushing


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="RSS is read from /proc (Linux)")
def test_an_infinite_generator_is_pulled_lazily_with_flat_memory(arrays):
    path, data = arrays["sharded_zstd"]
    pulled = itertools.count()

    def endless():
        rng = np.random.default_rng(1)
        while True:
            next(pulled)
            i, j = int(rng.integers(0, 25)), int(rng.integers(0, 9))
            yield damacy.Sample(path, ((i, i + 16), (j, j + 16), (0, 20)))

    # 80 KiB batches: 400 of them would add 32 MiB if buffers (or batches) leaked.
    c = cfg(batch_size=8, sample_shape=(16, 16, 20))
    with damacy.Pipeline(c) as p:
        p.push(endless())
        for batch in p.batches(40):
            np.from_dlpack(batch).sum()
        before = rss_bytes()
        for batch in p.batches(400):
            assert np.from_dlpack(batch).shape == (8, 16, 16, 20)
        grown = rss_bytes() - before
        ahead = next(pulled) - 440 * 8
    assert grown < 8 << 20, f"RSS grew by {grown} bytes over 400 batches"
    # Never more than the lookahead (plus the batches being formed) ahead of the pops.
    assert 0 <= ahead <= c.sizes.lookahead + c.sizes.slots * c.batch_size + 1, ahead


def test_iterable_errors_surface_at_pop(arrays):
    path, _ = arrays["plain"]

    def failing():
        yield damacy.Sample(path, np.s_[0:2, 0:2])
        raise ValueError("the sample source broke")

    with damacy.Pipeline(cfg(batch_size=1)) as p:
        p.push(failing())
        outcomes = []
        for _ in range(3):
            try:
                outcomes.append(p.pop(timeout=5).shape)
            except ValueError as e:
                outcomes.append(str(e))
            except damacy.Exhausted:
                outcomes.append("exhausted")
        assert sorted(map(str, outcomes)) == sorted(["(1, 2, 2)", "the sample source broke", "exhausted"]), outcomes
        p.push(["not a sample"])
        with pytest.raises(TypeError, match="item 0 .* not a damacy.Sample"):
            p.pop(timeout=5)
        for bad in ("abc", damacy.Sample(path, np.s_[0:1, 0:1]), 5):
            with pytest.raises(TypeError, match="iterable of damacy.Sample"):
                p.push(bad)


def test_pop_timeout_says_what_starves():
    with damacy.Pipeline(cfg(batch_size=2, pop_timeout=30)) as p:
        # The GIL is released while pop waits: another Python thread keeps running.
        spins, stop = [0], threading.Event()

        def spin():
            while not stop.is_set():
                spins[0] += 1

        spinner = threading.Thread(target=spin)
        spinner.start()
        try:
            before = spins[0]
            started = time.monotonic()
            with pytest.raises(damacy.Timeout, match="no samples were pushed"):
                p.pop(timeout=0.3)
            during = spins[0] - before
        finally:
            stop.set()
            spinner.join()
        assert time.monotonic() - started < 5
        assert during > 10_000, f"another thread ran only {during} loops while pop waited"

        def slow():
            time.sleep(3)
            yield from ()

        p.push(slow())
        with pytest.raises(damacy.Timeout, match="sample source starves"):
            p.pop(timeout=0.3)
        with pytest.raises(damacy.InvalidArgument, match="timeout"):
            p.pop(timeout=-1)


def test_sample_errors_name_the_sample_and_the_pipeline_goes_on(arrays, tmp_path):
    path, data = arrays["plain"]
    missing = str(tmp_path / "missing.zarr")
    with damacy.Pipeline(cfg(batch_size=1)) as p:
        p.push([
            damacy.Sample(missing, np.s_[0:2, 0:2]),
            damacy.Sample(path, np.s_[29:31, 0:2]),  # past the end of axis 0 (30)
            damacy.Sample(path, np.s_[0:2, 0:2]),
        ])
        with pytest.raises(damacy.NotFound) as e:
            p.pop(timeout=10)
        assert "missing.zarr" in str(e.value)
        with pytest.raises(damacy.Error) as e:
            p.pop(timeout=10)
        assert isinstance(e.value, damacy.InvalidArgument), type(e.value)
        assert "plain.zarr" in str(e.value) and "29:31" in str(e.value), str(e.value)
        with p.pop(timeout=10) as b:
            np.testing.assert_array_equal(np.from_dlpack(b)[0], data[0:2, 0:2])
        assert p.stats().failed_batches == 2
        with pytest.raises(damacy.Exhausted):
            p.pop(timeout=10)
    with damacy.Pipeline(cfg(batch_size=1, on_error="skip")) as p:
        p.push([damacy.Sample(missing, np.s_[0:2, 0:2]), damacy.Sample(path, np.s_[0:2, 0:2])])
        with p.pop(timeout=10) as b:
            assert [s.uri for s in b.samples] == [path]
        assert p.stats().skipped == 1


def test_depth_closed_and_batches(arrays):
    path, _ = arrays["plain"]
    p = damacy.Pipeline(cfg(batch_size=1, depth=1))
    p.push([damacy.Sample(path, np.s_[i : i + 1, 0:1]) for i in range(5)])
    held = p.pop(timeout=10)
    with pytest.raises(damacy.PoolStarved, match="you hold 1 batches"):
        p.pop(timeout=10)
    held.release()
    assert [b.index for b in p.batches(2)] == [1, 2]
    assert [len(b) for b in p.batches()] == [1, 1]
    p.close()
    p.close()
    with pytest.raises(damacy.Closed):
        p.push([damacy.Sample(path, np.s_[0:1, 0:1])])
    with pytest.raises(damacy.Closed):
        p.pop(timeout=1)
    # Pipeline(**knobs) and Pipeline(config, **overrides).
    assert damacy.Pipeline(batch_size=3, executor="cpu").config.batch_size == 3
    assert damacy.Pipeline(cfg(batch_size=3), batch_size=5).config.batch_size == 5
    with pytest.raises(TypeError):
        damacy.Pipeline({"batch_size": 3})


def test_local_rank_warning_through_the_environment(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "0")
    with pytest.warns(UserWarning, match="LOCAL_RANK=0 but Config.device=1"):
        damacy.Pipeline(cfg(batch_size=1, device=1)).close()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        damacy.Pipeline(cfg(batch_size=1, device=0)).close()
        monkeypatch.delenv("LOCAL_RANK")
        damacy.Pipeline(cfg(batch_size=1, device=1)).close()


# ------------------------------------------------------------------------------------ processes


def test_ctrl_c_during_a_blocking_pop_raises_keyboard_interrupt():
    script = textwrap.dedent(
        """
        import faulthandler, signal, sys, time, damacy
        # Python keeps SIGINT ignored when it starts with it ignored (as under a shell's
        # background job): a Ctrl-C would then never reach Python at all, damacy or not.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        faulthandler.dump_traceback_later(15, exit=True)  # a hang shows where, in stderr
        p = damacy.Pipeline(damacy.Config(batch_size=2, executor="cpu", n_io_threads=1, n_compute_threads=1))
        print("waiting", flush=True)
        started = time.monotonic()
        try:
            p.pop(timeout=60)
        except KeyboardInterrupt:
            print(f"interrupted after {time.monotonic() - started:.2f}", flush=True)
            sys.exit(0)
        sys.exit(3)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "waiting"
        time.sleep(0.5)
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        try:
            out, err = child.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
            raise AssertionError(f"no exit 20 s after SIGINT; stdout: {out!r}; stderr: {err!r}") from None
        elapsed = time.monotonic() - sent
    finally:
        child.kill()
    assert child.returncode == 0, (out, err)
    assert "interrupted after" in out
    assert elapsed < 5, f"the pop took {elapsed:.1f} s to notice Ctrl-C"


def test_two_ranks_cover_the_dataset_exactly_once(arrays, tmp_path):
    path, data = arrays["sharded_zstd"]
    procs = []
    for rank in range(2):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
        out = tmp_path / f"rank{rank}.json"
        procs.append((out, subprocess.Popen([sys.executable, str(HERE / "_rank_worker.py"), path, str(out)], env=env,
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    results = []
    for out, proc in procs:
        stdout, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 0, (stdout, stderr)
        results.append(json.loads(out.read_text()))
    crops = [tuple(map(tuple, c)) for r in results for c in r["crops"]]
    everything = {(i, j, k) for i in range(0, 40, 8) for j in range(0, 24, 8) for k in range(0, 20, 10)}
    assert len(crops) == len(everything) == 30 and set(s for s, _ in crops) == everything
    assert set(results[0]["starts"]).isdisjoint(results[1]["starts"])
    # What each rank read is the data of its crops.
    for r in results:
        expected = sum(int(data[i : i + 8, j : j + 8, k : k + 10].astype(np.int64).sum())
                       for (i, j, k), _ in r["crops"])
        assert r["total"] == expected


def test_ddp_example_runs_on_one_cpu_process():
    example = HERE.parents[1] / "examples" / "ddp_train.py"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    run = subprocess.run([sys.executable, str(example), "--no-torch", "--steps", "3", "--epochs", "1"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "delivered: 3 batches, 12 samples" in run.stdout, run.stdout
    try:
        import torch  # noqa: F401
    except ImportError:
        run = subprocess.run([sys.executable, str(example), "--steps", "1"], env=env, capture_output=True, text=True,
                             timeout=120)
        assert run.returncode != 0 and "pip install torch" in run.stderr, (run.stdout, run.stderr)


def test_device_batches_through_the_kernel_emulator(arrays):
    """The device route's batches (device memory, a ready event, consumer fencing) on the kernel
    emulator, whose device memory is host memory: exported as kDLCPU after the ready event."""
    path, data = arrays["sharded_zstd"]
    try:
        p = damacy.Pipeline(cfg(batch_size=2, executor="emulated", device_buffer_bytes=64 << 20,
                                host_buffer_bytes=16 << 20))
    except damacy.Unsupported as e:
        pytest.skip(f"this wheel has no kernel emulator (build it with --features emulate): {e}")
    with p:
        assert "emulat" in p.executor
        wanted = [np.s_[0:4, 0:8, 0:10], np.s_[9:13, 3:11, 5:15], np.s_[30:34, 10:18, 10:20]]
        p.push(damacy.Sample(path, r) for r in wanted)
        got = []
        for batch in p.batches():
            assert batch.device == "emulated" and batch.__dlpack_device__() == (1, 0)
            a = np.from_dlpack(batch)
            assert a.ctypes.data == batch.info.device_ptr
            got.extend(a.copy())
            # A consumer event is meaningless on the emulator's host memory: accepted, ignored.
            batch.release(12345)
        for g, r in zip(got, wanted, strict=True):
            np.testing.assert_array_equal(g, data[r])
        with pytest.raises(damacy.Exhausted):
            p.pop(timeout=5)


@pytest.mark.parametrize("executor", ["cpu", "emulated"])
def test_a_forked_child_can_drop_the_parents_pipeline(arrays, executor):
    """A child forked from a process with a running pipeline (a DataLoader worker, a
    multiprocessing pool) has none of its threads: closing or dropping the inherited pipeline
    there leaves them to the parent instead of joining threads that do not exist."""
    import warnings

    path, data = arrays["sharded_zstd"]
    knobs = {"device_buffer_bytes": 64 << 20, "host_buffer_bytes": 16 << 20} if executor == "emulated" else {}
    try:
        p = damacy.Pipeline(cfg(batch_size=2, executor=executor, **knobs))
    except damacy.Unsupported as e:
        pytest.skip(f"this wheel has no kernel emulator (build it with --features emulate): {e}")
    with p:
        p.push(damacy.Sample(path, np.s_[0:4, 0:8, 0:10]) for _ in range(2))
        with p.pop(timeout=60) as batch:  # the pipeline's threads (and the emulator's) run
            np.testing.assert_array_equal(np.from_dlpack(batch)[0], data[0:4, 0:8, 0:10])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads running
            pid = os.fork()
        if pid == 0:  # the child: no pytest, no exceptions past here
            code = 0
            try:
                p.close()
                del p
                gc.collect()
            except BaseException:  # noqa: BLE001
                code = 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


# ------------------------------------------------------------ float casts, torch-style devices


def _bf16_bits(x: np.ndarray) -> np.ndarray:
    """bfloat16 bits of ``x`` rounded to nearest even, as ``torch.Tensor.to(torch.bfloat16)``
    does (numpy has no bfloat16; uint16 values are exact in float32, so this rounds once)."""
    b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def _raw_bits(batch) -> np.ndarray:
    """A host (or emulator) batch's 2-byte elements as uint16, after its ready event (numpy
    cannot import a bfloat16 DLPack tensor)."""
    batch.__dlpack__()  # waits for the batch, as a consumer's export does
    raw = ctypes.string_at(batch.info.device_ptr, batch.info.tensor_nbytes[0])
    return np.frombuffer(raw, dtype=np.uint16).reshape(batch.info.shape)


def test_config_lanes_reach_the_device_executor(arrays):
    """``Config.lanes``: validated like the other counts, ``None`` by default (one lane per
    worker); two lanes under one worker on the emulator: the executor says so, and a batch split
    over both lanes is right."""
    assert damacy.Config(batch_size=1).lanes is None
    with pytest.raises(damacy.InvalidArgument, match="lanes"):
        damacy.Config(batch_size=1, lanes=0)
    with pytest.raises(TypeError, match="lanes"):
        damacy.Config(batch_size=1, lanes="2")
    path, data = arrays["sharded_zstd"]
    try:
        p = damacy.Pipeline(cfg(batch_size=3, executor="emulated", lanes=2, device_buffer_bytes=128 << 20,
                                host_buffer_bytes=32 << 20))
    except damacy.Unsupported as e:
        pytest.skip(f"this wheel has no kernel emulator (build it with --features emulate): {e}")
    with p:
        assert "2 lanes" in p.executor, p.executor
        wanted = [np.s_[0:4, 0:8, 0:10], np.s_[9:13, 3:11, 5:15], np.s_[30:34, 10:18, 10:20]]
        p.push(damacy.Sample(path, r) for r in wanted)
        with p.pop(timeout=60) as batch:
            got = np.from_dlpack(batch).copy()
    for g, r in zip(got, wanted, strict=True):
        np.testing.assert_array_equal(g, data[r])


@pytest.mark.parametrize("executor", ["cpu", "emulated"])
def test_reference_loader_bf16_example_runs_on_uint16(arrays, executor, monkeypatch):
    """The reference loader's torchrun example, ``Config(batch_size=8, dtype="bf16",
    device=local_rank, ...)`` with one ``(start, stop)`` pair per axis, on a uint16 volume:
    bfloat16 batches rounded to nearest even, no ``allow_lossy_cast`` needed."""
    monkeypatch.setenv("LOCAL_RANK", "0")
    local_rank = int(os.environ["LOCAL_RANK"])
    path, data = arrays["sharded_zstd"]  # uint16 up to 60000: bfloat16 keeps 8 significant bits
    knobs = {"device_buffer_bytes": 64 << 20, "host_buffer_bytes": 16 << 20} if executor == "emulated" else {}
    config = damacy.Config(batch_size=8, dtype="bf16", device=local_rank, sample_shape=(8, 8, 10),
                           executor=executor, n_io_threads=1, n_compute_threads=1, n_workers=1, **knobs)
    assert config.device == 0 and config.dtype == "bf16" and not config.allow_lossy_cast
    boxes = [((z, z + 8), (y, y + 8), (x, x + 10)) for z, y, x in
             [(0, 0, 0), (3, 5, 7), (16, 16, 10), (31, 8, 2), (32, 16, 10), (9, 9, 9), (20, 1, 3), (12, 15, 0)]]
    try:
        p = damacy.Pipeline(config)
    except damacy.Unsupported as e:
        pytest.skip(f"this wheel has no kernel emulator (build it with --features emulate): {e}")
    with p:
        p.push(damacy.Sample(path, box) for box in boxes)
        with p.pop(timeout=60) as batch:
            assert batch.info.dtype == "bfloat16" and tuple(batch.info.shape) == (8, 8, 8, 10)
            got = _raw_bits(batch)
    src = np.stack([data[tuple(slice(a, b) for a, b in box)] for box in boxes])
    want = _bf16_bits(src)
    np.testing.assert_array_equal(got, want)
    truncated = (src.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    assert (want != truncated).sum() > 100, "the data has values that round up (the test can tell rounding from truncation)"
    # Exact values: 32897 = 2^15 + 129 rounds up to 2^15 + 256; 257 ties to 256.
    assert _bf16_bits(np.array([32897, 257], np.uint16)).tolist() == [0x4701, 0x4380]


def test_float_dtypes_take_every_source_and_integer_targets_stay_guarded(arrays):
    path, data = arrays["sharded_zstd"]
    region = ((0, 4), (0, 8), (0, 10))
    want = data[0:4, 0:8, 0:10]
    for dtype, ref in (("float32", want.astype(np.float32)), ("float16", want.astype(np.float16))):
        with damacy.Pipeline(cfg(batch_size=1, dtype=dtype)) as p:
            p.push([damacy.Sample(path, region)])
            with p.pop(timeout=60) as batch:
                got = np.from_dlpack(batch)[0]
                assert got.dtype == ref.dtype
                np.testing.assert_array_equal(got, ref)  # numpy's astype: uint16 > 65504 is inf in float16
    # uint16 into int16 would wrap silently: refused, naming allow_lossy_cast's job.
    with damacy.Pipeline(cfg(batch_size=1, dtype="int16")) as p:
        p.push([damacy.Sample(path, region)])
        with pytest.raises(damacy.InvalidArgument, match="int16.*uint16|uint16.*int16"):
            p.pop(timeout=60)
    with damacy.Pipeline(cfg(batch_size=1, dtype="int16", allow_lossy_cast=True)) as p:
        p.push([damacy.Sample(path, region)])
        with p.pop(timeout=60) as batch:
            np.testing.assert_array_equal(np.from_dlpack(batch)[0], want.astype(np.int16))


def test_config_device_takes_the_forms_torch_users_write(arrays, monkeypatch):
    import types

    monkeypatch.setenv("LOCAL_RANK", "0")
    assert damacy.Config(batch_size=1, device=3).device == 3
    assert damacy.Config(batch_size=1, device="cuda:2").device == 2
    assert damacy.Config(batch_size=1, device=" CUDA:1 ").device == 1
    assert damacy.Config(batch_size=1, device="cuda").device is None
    assert damacy.Config(batch_size=1, device=np.int64(1)).device == 1
    assert damacy.Config(batch_size=1, device=types.SimpleNamespace(type="cuda", index=1)).device == 1
    assert damacy.Config(batch_size=1, device=types.SimpleNamespace(type="cuda", index=None)).device is None
    assert damacy.Config(batch_size=1, device=types.SimpleNamespace(type="cpu", index=None)).device == "cpu"
    for bad, error, needle in (
        ("gpu:0", damacy.InvalidArgument, "Config.device is 'gpu:0'"),
        ("cuda:x", damacy.InvalidArgument, "'cuda:N'"),
        ("cuda:-1", damacy.InvalidArgument, "'cuda:N'"),
        (-1, damacy.InvalidArgument, "Config.device is -1"),
        (True, TypeError, "Config.device is a bool"),
        (1.0, TypeError, "Config.device is 1.0"),
        (types.SimpleNamespace(type="mps", index=0), damacy.InvalidArgument, "a mps device"),
    ):
        with pytest.raises(error, match=re.escape(needle)):
            damacy.Config(batch_size=1, device=bad)
    # "cpu": host batches; the "auto" executor decodes on the CPU, "gpu" contradicts it.
    c = damacy.Config(batch_size=1, device="cpu", n_io_threads=1, n_compute_threads=1, n_workers=1)
    assert c.device == "cpu" and c.executor == "auto" and "device='cpu'" in repr(c)
    with pytest.raises(damacy.InvalidArgument, match="device='cpu'.*executor='gpu'"):
        damacy.Config(batch_size=1, device="cpu", executor="gpu")
    path, data = arrays["plain"]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no LOCAL_RANK warning for host batches
        p = damacy.Pipeline(c)
    with p:
        assert p.executor.startswith("cpu"), p.executor
        p.push([damacy.Sample(path, ((0, 3), (0, 5)))])
        with p.pop(timeout=60) as batch:
            assert batch.__dlpack_device__() == (1, 0)
            np.testing.assert_array_equal(np.from_dlpack(batch)[0], data[0:3, 0:5])

"""damacy.GpuCodecPipeline against zarr-python's own pipeline, on every fixture."""

from __future__ import annotations

import shutil
import traceback
import warnings

import numpy as np
import pytest
import zarr
import zarr.storage

import damacy
from conftest import ARRAYS, DAMACY, DEFAULT, FIXTURES

ZARR_VERSION = tuple(int(p) for p in zarr.__version__.split(".")[:2])


def _open(path, **kwargs):
    return zarr.open_array(str(FIXTURES / path), mode="r", **kwargs)


def _random_selection(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple:
    """Slices with random bounds and steps, sometimes an integer (a dropped axis)."""
    sel = []
    for n in shape:
        kind = rng.integers(0, 5)
        if kind == 0 and n > 0:
            sel.append(int(rng.integers(0, n)))
        else:
            a, b = sorted(int(x) for x in rng.integers(0, n + 1, size=2))
            if a == b:
                b = min(n, a + 1)
            step = int(rng.integers(1, 4)) if kind == 1 else 1
            sel.append(slice(a, b, step))
    return tuple(sel)


@pytest.mark.parametrize("path", ARRAYS)
def test_fixture_equals_default_pipeline(path, zarr_stats):
    with zarr.config.set(DEFAULT):
        ref_array = _open(path)
        ref = ref_array[...]
        rng = np.random.default_rng(abs(hash(path)) % (1 << 32))
        selections = [_random_selection(rng, ref_array.shape) for _ in range(4)]
        refs = [ref_array[s] for s in selections]
    with zarr.config.set(DAMACY), warnings.catch_warnings():
        warnings.simplefilter("error", damacy.FallbackWarning)
        array = _open(path)
        assert type(array._async_array.codec_pipeline).__name__ == "GpuCodecPipeline"
        got = array[...]
        assert got.dtype == ref.dtype and got.shape == ref.shape
        np.testing.assert_array_equal(got, ref)
        for s, r in zip(selections, refs, strict=True):
            g = array[s]
            assert np.shape(g) == np.shape(r), s
            np.testing.assert_array_equal(g, r, err_msg=f"selection {s}")
    counts = zarr_stats()
    assert counts["fallback_reads"] == 0, counts
    assert counts["reads"] >= 1 + sum(1 for r in refs if np.size(r) > 0)


def test_orthogonal_ranges_go_through_damacy(zarr_stats):
    with zarr.config.set(DEFAULT):
        ref = _open("v3/zstd_l3_ck")
        idx = (np.arange(2, 30, 3), slice(None), [1, 2, 3])
        want = ref.oindex[idx]
    with zarr.config.set(DAMACY):
        got = _open("v3/zstd_l3_ck").oindex[idx]
    np.testing.assert_array_equal(got, want)
    assert zarr_stats()["fallback_reads"] == 0 and zarr_stats()["reads"] == 1


def test_user_out_buffer_with_strides(zarr_stats):
    """`out` given by the caller, non-contiguous (a view with negative strides)."""
    from zarr.core.buffer import default_buffer_prototype

    with zarr.config.set(DEFAULT):
        want = _open("v3/blosc_zstd_byte_ts2_small")[...]
    with zarr.config.set(DAMACY):
        array = _open("v3/blosc_zstd_byte_ts2_small")
        backing = np.zeros(want.shape[::-1] + (2,), dtype=want.dtype)
        view = backing[..., 1].T[::-1, ...][::-1, ...]
        assert not view.flags.c_contiguous
        out = default_buffer_prototype().nd_buffer.from_ndarray_like(view)
        array.get_basic_selection(Ellipsis, out=out)
    np.testing.assert_array_equal(view, want)
    assert zarr_stats()["reads"] == 1


def test_writes_are_delegated_and_read_back(tmp_path, zarr_stats):
    data = np.arange(40 * 30, dtype="float32").reshape(40, 30)
    with zarr.config.set(DAMACY):
        a = zarr.create_array(str(tmp_path / "w"), shape=data.shape, chunks=(16, 8), dtype="float32")
        a[...] = data
        a[3:9, 4:6] = -1
        data[3:9, 4:6] = -1
        np.testing.assert_array_equal(a[...], data)
        # Rewritten in place with another shape and dtype: no stale metadata.
        b = zarr.create_array(str(tmp_path / "w"), shape=(7,), chunks=(3,), dtype="int16", overwrite=True)
        b[...] = np.arange(7, dtype="int16")
        np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "w"))[...], np.arange(7))
    counts = zarr_stats()
    assert counts["writes"] >= 3 and counts["reads"] >= 2 and counts["fallback_reads"] == 0


def test_sharded_write_then_read(tmp_path, zarr_stats):
    data = np.random.default_rng(1).integers(0, 1000, size=(64, 48), dtype="uint16")
    with zarr.config.set(DAMACY):
        a = zarr.create_array(
            str(tmp_path / "s"), shape=data.shape, chunks=(8, 8), shards=(32, 16), dtype="uint16"
        )
        a[...] = data  # the sharding codec encodes inner chunks through from_codecs pipelines
        np.testing.assert_array_equal(a[5:50:3, 7:40], data[5:50:3, 7:40])
    assert zarr_stats()["reads"] == 1 and zarr_stats()["fallback_reads"] == 0


# -- fallbacks, each hit and counted --------------------------------------------------------


def _fallback(read, category, zarr_stats):
    with pytest.warns(damacy.FallbackWarning):
        got = read()
    counts = zarr_stats()
    assert counts["fallbacks"].get(category, 0) >= 1, counts
    return got


def test_fallback_store(zarr_stats):
    with zarr.config.set(DAMACY):
        a = zarr.create_array(zarr.storage.MemoryStore(), shape=(10,), chunks=(4,), dtype="int32")
        a[...] = np.arange(10)
        got = _fallback(lambda: a[...], "store", zarr_stats)
    np.testing.assert_array_equal(got, np.arange(10))


def test_fallback_selection(zarr_stats):
    with zarr.config.set(DEFAULT):
        ref = _open("v3/zstd_l3_ck")
        want_v = ref.vindex[[0, 5, 9], [1, 2, 3], [0, 0, 1]]
        want_o = ref.oindex[[7, 1, 3], :, :]
    with zarr.config.set(DAMACY):
        a = _open("v3/zstd_l3_ck")
        np.testing.assert_array_equal(_fallback(lambda: a.vindex[[0, 5, 9], [1, 2, 3], [0, 0, 1]], "selection", zarr_stats), want_v)
        np.testing.assert_array_equal(_fallback(lambda: a.oindex[[7, 1, 3], :, :], "selection", zarr_stats), want_o)


def test_fallback_dtype(tmp_path, zarr_stats):
    data = (np.arange(12) + 1j).astype("complex64")
    with zarr.config.set(DAMACY):
        a = zarr.create_array(str(tmp_path / "c"), shape=(12,), chunks=(5,), dtype="complex64")
        a[...] = data
        np.testing.assert_array_equal(_fallback(lambda: a[...], "dtype", zarr_stats), data)


def test_fallback_array(tmp_path, zarr_stats):
    with zarr.config.set(DAMACY):
        a = zarr.create_array(str(tmp_path / "z"), shape=(), dtype="float64", fill_value=2.5)
        a[...] = 7.0
        assert _fallback(lambda: a[...], "array", zarr_stats) == 7.0


def _register_test_chunk_key_encoding():
    """A chunk key encoding of the user's own (zarr's registry takes any): keys ``k-1-2``."""
    from dataclasses import dataclass
    from typing import ClassVar

    from zarr.core.chunk_key_encodings import ChunkKeyEncoding
    from zarr.registry import register_chunk_key_encoding

    @dataclass(frozen=True)
    class DashedKeys(ChunkKeyEncoding):
        name: ClassVar[str] = "damacy_test.dashed"

        def encode_chunk_key(self, chunk_coords: tuple[int, ...]) -> str:
            return "-".join(("k", *map(str, chunk_coords)))

        def decode_chunk_key(self, chunk_key: str) -> tuple[int, ...]:
            return tuple(int(c) for c in chunk_key.split("-")[1:])

    register_chunk_key_encoding(DashedKeys.name, DashedKeys)
    return DashedKeys


def test_fallback_chunk_key(tmp_path, zarr_stats):
    """A chunk key encoding damacy does not know (the user's own, registered with zarr): zarr
    reads it, once, with a warning naming the encoding, counted under ``chunk_key``."""
    DashedKeys = _register_test_chunk_key_encoding()  # noqa: N806
    data = np.arange(6 * 8, dtype="uint16").reshape(6, 8)
    with zarr.config.set(DAMACY):
        a = zarr.create_array(str(tmp_path / "k"), shape=data.shape, chunks=(4, 3), dtype="uint16",
                              chunk_key_encoding=DashedKeys())
        a[...] = data
        assert sorted(p.name for p in (tmp_path / "k").iterdir())[:2] == ["k-0-0", "k-0-1"]
        damacy.GpuCodecPipeline.reset_stats()
        with pytest.warns(damacy.FallbackWarning, match="chunk key encoding 'damacy_test.dashed'"):
            got = zarr.open_array(str(tmp_path / "k"), mode="r")[...]
    np.testing.assert_array_equal(got, data)
    counts = zarr_stats()
    assert counts["fallback_reads"] == 1 and counts["fallbacks"] == {"chunk_key": 1} and counts["reads"] == 0, counts
    with zarr.config.set({**DAMACY, "codec_pipeline.strict": True}), pytest.raises(damacy.Unsupported, match="chunk key"):
        zarr.open_array(str(tmp_path / "k"), mode="r")[...]


def _register_test_codec():
    """A bytes-to-bytes codec zarr-python runs and zarrs has never heard of: XOR with 0x5A."""
    from dataclasses import dataclass

    from zarr.abc.codec import BytesBytesCodec
    from zarr.registry import register_codec

    @dataclass(frozen=True)
    class XorCodec(BytesBytesCodec):
        is_fixed_size = True

        @classmethod
        def from_dict(cls, data):
            return cls()

        def to_dict(self):
            return {"name": "damacy_test.xor"}

        async def _decode_single(self, chunk_bytes, chunk_spec):
            raw = np.frombuffer(chunk_bytes.to_bytes(), dtype="uint8") ^ 0x5A
            return chunk_spec.prototype.buffer.from_bytes(raw.tobytes())

        async def _encode_single(self, chunk_bytes, chunk_spec):
            return await self._decode_single(chunk_bytes, chunk_spec)

        def compute_encoded_size(self, input_byte_length, _chunk_spec):
            return input_byte_length

    register_codec("damacy_test.xor", XorCodec)
    return XorCodec


def test_fallback_codec_outside_zarrs(tmp_path, zarr_stats):
    """A codec zarrs does not know: damacy cannot open the array (``Unsupported``), so zarr
    reads it, once, with a warning, counted under ``array``."""
    XorCodec = _register_test_codec()  # noqa: N806
    data = np.arange(50, dtype="int32") * 7
    with zarr.config.set(DAMACY):
        a = zarr.create_array(str(tmp_path / "x"), shape=data.shape, chunks=(16,), dtype="int32",
                              compressors=[XorCodec()])
        a[...] = data
        assert "damacy_test.xor" in (tmp_path / "x" / "zarr.json").read_text()
        damacy.GpuCodecPipeline.reset_stats()
        with pytest.warns(damacy.FallbackWarning, match="damacy_test.xor"):
            got = zarr.open_array(str(tmp_path / "x"), mode="r")[...]
    np.testing.assert_array_equal(got, data)
    counts = zarr_stats()
    assert counts["fallback_reads"] == 1 and counts["fallbacks"] == {"array": 1} and counts["reads"] == 0, counts
    # damacy's own reader says why, as Unsupported.
    reader = damacy.Reader(executor="cpu")
    with pytest.raises(damacy.Unsupported, match="damacy_test.xor"):
        reader.open_array(damacy.Store.open(str(tmp_path)), "x")


def test_auto_without_a_device_or_context_reads_on_the_cpu(monkeypatch):
    """``executor="auto"`` with no ``codec_pipeline.device`` on a GPU machine where no CUDA
    context is current: the engine refuses the binding (``InvalidArgument``, ARCHITECTURE §5);
    zarr's pipeline then reads on the CPU. ``gpu``, or a device given, still raise. (A stand-in
    Reader plays the GPU machine.)"""
    from damacy import _zarr

    real = damacy.Reader
    built = []

    def reader(*, executor, device=None, **knobs):
        built.append((executor, device))
        if executor in ("auto", "gpu"):
            raise damacy.InvalidArgument("no CUcontext is current: set Config.device (e.g. to LOCAL_RANK)")
        return real(executor=executor, device=device, **knobs)

    monkeypatch.setattr(_zarr._damacy, "Reader", reader)
    monkeypatch.setattr(_zarr, "_READERS", {})
    with zarr.config.set({**DAMACY, "codec_pipeline.executor": "auto", "codec_pipeline.n_io_threads": 3}):
        r = _zarr._reader()
        assert r.device is None and "CPU executor" in r.executor_note
        assert _zarr._reader() is r and built == [("auto", None), ("cpu", None)]
        got = _open("v3/zstd_l3_ck")[...]
    with zarr.config.set(DEFAULT):
        np.testing.assert_array_equal(got, _open("v3/zstd_l3_ck")[...])
    for config in ({"codec_pipeline.executor": "gpu"}, {"codec_pipeline.executor": "auto", "codec_pipeline.device": 0}):
        with zarr.config.set({**DAMACY, **config}), pytest.raises(damacy.InvalidArgument, match="no CUcontext"):
            _zarr._reader()


def test_fallback_rectilinear_chunk_grid(tmp_path, zarr_stats):
    """Rectilinear chunk grids (zarr 3.4, behind `array.rectilinear_chunks`) are read by zarr:
    damacy reads regular grids, and zarr refuses to serialise such metadata without the flag."""
    if not hasattr(pytest.importorskip("zarr.core.metadata.v3"), "RectilinearChunkGridMetadata"):
        pytest.skip("this zarr has no rectilinear chunk grids")
    data = np.arange(20 * 6, dtype="int16").reshape(20, 6)
    with zarr.config.set({**DAMACY, "array.rectilinear_chunks": True}):
        a = zarr.create_array(str(tmp_path / "r"), shape=data.shape, chunks=[[5, 10, 5], [6]], dtype="int16")
        a[...] = data
        np.testing.assert_array_equal(_fallback(lambda: a[...], "array", zarr_stats), data)


@pytest.mark.skipif(ZARR_VERSION < (3, 2), reason="read_missing_chunks is a zarr 3.2+ setting")
def test_fallback_missing_chunks(tmp_path, zarr_stats):
    with zarr.config.set({**DAMACY, "array.read_missing_chunks": False}):
        a = zarr.create_array(str(tmp_path / "m"), shape=(10,), chunks=(5,), dtype="int8")
        a[:5] = 1
        with pytest.warns(damacy.FallbackWarning), pytest.raises(Exception, match="c/1|missing|not found"):
            a[...]
    assert zarr_stats()["fallbacks"].get("missing_chunks", 0) == 1


def test_strict_raises_instead(zarr_stats):
    with zarr.config.set({**DAMACY, "codec_pipeline.strict": True}):
        a = zarr.create_array(zarr.storage.MemoryStore(), shape=(10,), chunks=(4,), dtype="int32")
        with pytest.raises(damacy.Unsupported, match="MemoryStore"):
            a[...]
    assert zarr_stats()["fallback_reads"] == 0


def test_output_that_is_neither_numpy_nor_device_memory_is_refused_under_strict():
    """An NDBuffer whose array is neither numpy nor exposes ``__cuda_array_interface__``
    falls back (here: raises under strict), naming what it is."""
    import asyncio

    class NotNumpy:
        def __init__(self, arr):
            self.arr = arr

    class FakeOut:
        def as_ndarray_like(self):
            return NotNumpy(np.zeros(4))

    with zarr.config.set({**DAMACY, "codec_pipeline.strict": True}):
        a = _open("v3/bytes_le_uint8_r1")
        pipeline = a._async_array.codec_pipeline
        getter = a._async_array.store_path / "c/0"
        # The output is examined before the chunk spec, so none is needed here.
        with pytest.raises(damacy.Unsupported, match="neither a numpy array nor device memory"):
            asyncio.run(pipeline.read([(getter, None, (slice(0, 4, 1),), (slice(0, 4, 1),), False)], FakeOut()))


class _EmulatedDeviceArray:
    """What zarr's output is under ``zarr.config.enable_gpu()`` (a CuPy array), as far as the
    pipeline sees it: an object with a ``__cuda_array_interface__``. On the kernel emulator
    device memory is host memory, so the interface points at a numpy array's bytes."""

    def __init__(self, arr: np.ndarray):
        self.arr = arr

    @property
    def dtype(self):
        return self.arr.dtype

    @property
    def __cuda_array_interface__(self):
        return {
            "version": 3,
            "shape": self.arr.shape,
            "typestr": self.arr.dtype.str,
            "data": (self.arr.ctypes.data, False),
            "strides": self.arr.strides,
            "stream": 1,
        }


def _device_prototype():
    """A buffer prototype whose NDBuffers hand the pipeline an emulated device array."""
    from zarr.core.buffer import BufferPrototype, cpu

    class DeviceNDBuffer(cpu.NDBuffer):
        def as_ndarray_like(self):
            return _EmulatedDeviceArray(self._data)

    return BufferPrototype(buffer=cpu.Buffer, nd_buffer=DeviceNDBuffer)


def test_device_output_is_written_on_the_device_route_of_the_emulator(zarr_stats):
    """zarr's output in device memory (``enable_gpu()``): damacy decodes every fixture straight
    into it (device-route chains on the device, others through a host copy), for random strided
    selections, equal to zarr's own pipeline; none falls back."""
    try:
        damacy.Reader(executor="emulated")
    except damacy.Unsupported as e:
        pytest.skip(f"this wheel has no kernel emulator (build it with --features emulate): {e}")
    emulated = {**DAMACY, "codec_pipeline.executor": "emulated", "codec_pipeline.strict": True}
    rng = np.random.default_rng(5)
    prototype = _device_prototype()
    read = 0
    for path in ARRAYS:
        with zarr.config.set(DEFAULT):
            a = _open(path)
            if a.ndim == 0 or a.dtype.byteorder == ">":
                continue
            # Whole reads of every fixture on the emulator are the test above; one random
            # (strided, axis-dropping) selection each here keeps the test short.
            sels = [_random_selection(rng, a.shape)]
            refs = [a[sel] for sel in sels]
        with zarr.config.set(emulated):
            a = _open(path)
            for sel, ref in zip(sels, refs, strict=True):
                got = a.get_basic_selection(sel, prototype=prototype)
                got = got.arr if isinstance(got, _EmulatedDeviceArray) else got
                np.testing.assert_array_equal(np.asarray(got), ref, err_msg=f"{path} {sel}")
                read += 1
    stats = zarr_stats()
    assert read > 50 and stats["fallback_reads"] == 0, stats
    assert stats["device_reads"] == read, stats


def test_device_output_with_a_cpu_reader_falls_back(zarr_stats):
    """Device memory as the output while damacy decodes on the CPU: a fallback that says how
    to route it to the GPU (an error under strict)."""
    prototype = _device_prototype()
    with zarr.config.set({**DAMACY, "codec_pipeline.executor": "cpu", "codec_pipeline.strict": True}):
        a = _open("v3/blosc_lz4_byte_ts2_large")
        with pytest.raises(damacy.Unsupported, match="decodes on the CPU here"):
            a.get_basic_selection((slice(0, 4),) * a.ndim, prototype=prototype)
    with zarr.config.set({**DAMACY, "codec_pipeline.executor": "cpu"}):
        a = _open("v3/blosc_lz4_byte_ts2_large")
        with pytest.warns(damacy.FallbackWarning, match="device memory"):
            got = a.get_basic_selection((slice(0, 4),) * a.ndim, prototype=prototype)
    with zarr.config.set(DEFAULT):
        want = _open("v3/blosc_lz4_byte_ts2_large")[(slice(0, 4),) * a.ndim]
    got = got.arr if isinstance(got, _EmulatedDeviceArray) else got
    np.testing.assert_array_equal(np.asarray(got), want)
    assert zarr_stats()["fallbacks"].get("output") == 1


def test_decode_and_encode_work_for_from_codecs_pipelines():
    """What the sharding codec calls on its inner and index pipelines."""
    import asyncio

    from zarr.codecs import BytesCodec, ZstdCodec
    from zarr.core.array_spec import ArrayConfig, ArraySpec
    from zarr.core.buffer import default_buffer_prototype

    pipeline = damacy.GpuCodecPipeline.from_codecs([BytesCodec(), ZstdCodec(level=1)])
    dtype = zarr.open_array(str(FIXTURES / "v3/zstd_l3_ck"), mode="r").metadata.data_type
    spec = ArraySpec(
        shape=(4, 5),
        dtype=dtype,
        fill_value=dtype.default_scalar(),
        config=ArrayConfig.from_dict({}),
        prototype=default_buffer_prototype(),
    )
    pipeline = pipeline.evolve_from_array_spec(spec)
    data = np.arange(20, dtype=dtype.to_native_dtype()).reshape(4, 5)
    nd = default_buffer_prototype().nd_buffer.from_ndarray_like(data)
    (encoded,) = asyncio.run(pipeline.encode([(nd, spec)]))
    assert encoded is not None and len(encoded.to_bytes()) > 0
    (decoded,) = asyncio.run(pipeline.decode([(encoded, spec)]))
    np.testing.assert_array_equal(decoded.as_ndarray_like(), data)


def test_validate_checksums_config(tmp_path):
    """A corrupt crc32c chunk: an error with checksums on, the bytes decode with them off."""
    src = FIXTURES / "v3/crc32c_bytes"
    dst = tmp_path / "crc"
    shutil.copytree(src, dst)
    chunk = next(p for p in sorted((dst / "c").rglob("*")) if p.is_file())
    raw = bytearray(chunk.read_bytes())
    raw[0] ^= 0xFF
    chunk.write_bytes(bytes(raw))
    with zarr.config.set(DAMACY):
        with pytest.raises(damacy.DecodeError, match="crc32c|checksum"):
            zarr.open_array(str(dst), mode="r")[...]
    with zarr.config.set({**DAMACY, "codec_pipeline.validate_checksums": False}):
        zarr.open_array(str(dst), mode="r")[...]


def test_entry_point_registers_the_class():
    from zarr.registry import get_pipeline_class

    with zarr.config.set(DAMACY):
        assert get_pipeline_class() is damacy.GpuCodecPipeline


def test_reads_in_a_forked_child(zarr_stats):
    """The engine's threads do not survive fork: a child rebuilds its readers and reads."""
    import multiprocessing

    with zarr.config.set(DAMACY):
        a = _open("v3/sharded_zstd_index_end")
        want = a[...]  # the parent's reader exists before the fork
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(1) as pool:
            got = pool.apply_async(_child_read, ("v3/sharded_zstd_index_end",)).get(timeout=60)
    np.testing.assert_array_equal(got, want)


def _child_read(path):
    with zarr.config.set(DAMACY):
        return _open(path)[...]


def test_every_fixture_through_the_device_route_on_the_kernel_emulator(zarr_stats):
    """``codec_pipeline.executor = "emulated"``: the device route (batched kernels, device
    assembly) behind zarr-python, on every fixture, equals zarr's own pipeline; the arrays whose
    chain the device decodes are counted as decoded there."""
    try:
        damacy.Reader(executor="emulated")
    except damacy.Unsupported as e:
        pytest.skip(f"this wheel has no kernel emulator (build it with --features emulate): {e}")
    emulated = {**DAMACY, "codec_pipeline.executor": "emulated", "codec_pipeline.strict": True}
    from damacy import _zarr

    with zarr.config.set(emulated):
        before = _zarr._reader().stats()
    for path in ARRAYS:
        with zarr.config.set(DEFAULT):
            ref = _open(path)[...]
        with zarr.config.set(emulated):
            got = _open(path)[...]
        np.testing.assert_array_equal(got, ref, err_msg=path)
    with zarr.config.set(emulated):
        after = _zarr._reader().stats()
    assert zarr_stats()["fallback_reads"] == 0
    # zstd, gzip, zlib and blosc chains (most of the corpus) decode on the device
    assert after["units_decoded_device"] - before["units_decoded_device"] >= len(ARRAYS) // 2, (before, after)


@pytest.mark.parametrize("flag", [[], ["--host"]])
def test_zarr_gpu_example_runs(flag):
    """examples/zarr_gpu.py end to end: the host route here (the GPU route is
    tests/python/test_gpu.py's), every selection equal to zarr's, no fallback."""
    import subprocess
    import sys

    example = FIXTURES.parent / "examples" / "zarr_gpu.py"
    run = subprocess.run([sys.executable, str(example), *flag], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    if not flag and lines and lines[0].startswith("GPU route"):
        pytest.skip("this machine takes the GPU route (tested in tests/python/test_gpu.py)")
    assert lines[0].startswith("host route: numpy outputs ("), run.stdout
    assert "--host" in lines[0] or not flag, lines[0]
    body = lines[1:]
    assert len(body) == 3 and all("20 selections equal" in l and ", 0 fallbacks" in l and "into numpy" in l for l in body), run.stdout
    assert all(" 0 reads" not in l for l in body), run.stdout


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # uint16 > 65504 is inf in float16
def test_out_buffers_of_a_float_dtype_are_cast_by_damacy(tmp_path, zarr_stats):
    """zarr's ``out=`` of another dtype: floating-point outputs take every source dtype through
    damacy (rounded to nearest even, as numpy's assignment into zarr's own output rounds);
    an integer output that cannot hold the array's range falls back to zarr-python."""
    from zarr.core.buffer import default_buffer_prototype

    rng = np.random.default_rng(28)
    cases = {
        "u16": rng.integers(0, 65536, size=(20, 30), dtype=np.uint16),
        "i32": rng.integers(-(2**31), 2**31, size=(20, 30), dtype=np.int32),
        "i64": (rng.integers(-(2**62), 2**62, size=(20, 30), dtype=np.int64) | 1),
        "f64": rng.standard_normal(size=(20, 30)) * 1e3,
    }
    for name, data in cases.items():
        with zarr.config.set(DEFAULT):
            a = zarr.create_array(str(tmp_path / name), shape=data.shape, dtype=data.dtype, chunks=(7, 11),
                                  shards=(14, 22), compressors=zarr.codecs.ZstdCodec(level=1))
            a[...] = data
        for out_dtype in (np.float32, np.float16, np.float64):
            with zarr.config.set(DEFAULT):
                want = np.empty(data.shape, out_dtype)
                _open_at(tmp_path / name).get_basic_selection(
                    Ellipsis, out=default_buffer_prototype().nd_buffer.from_ndarray_like(want))
            np.testing.assert_array_equal(want, data.astype(out_dtype))  # zarr's own: numpy's rounding
            damacy.GpuCodecPipeline.reset_stats()
            with zarr.config.set({**DAMACY, "codec_pipeline.strict": True}):
                got = np.full(data.shape, -7, out_dtype)
                _open_at(tmp_path / name).get_basic_selection(
                    Ellipsis, out=default_buffer_prototype().nd_buffer.from_ndarray_like(got))
            np.testing.assert_array_equal(got, want, err_msg=f"{name} -> {np.dtype(out_dtype)}")
            assert zarr_stats()["reads"] == 1 and zarr_stats()["fallback_reads"] == 0, zarr_stats()
    # Device outputs (enable_gpu's CuPy arrays; here the emulator's host-visible device memory):
    # cast on the device route.
    try:
        damacy.Reader(executor="emulated")
    except damacy.Unsupported:
        pass  # a wheel without the kernel emulator: the host legs above are the test
    else:
        device_out = _device_prototype().nd_buffer
        for name in ("u16", "i32"):
            for out_dtype in (np.float32, np.float16):
                damacy.GpuCodecPipeline.reset_stats()
                got = np.full(cases[name].shape, -7, out_dtype)
                with zarr.config.set({**DAMACY, "codec_pipeline.executor": "emulated", "codec_pipeline.strict": True}):
                    _open_at(tmp_path / name).get_basic_selection(Ellipsis, out=device_out(got))
                np.testing.assert_array_equal(got, cases[name].astype(out_dtype), err_msg=f"{name} on the device route")
                assert zarr_stats()["device_reads"] == 1, zarr_stats()
    # uint16 into int8 would wrap silently: zarr-python reads it (numpy's assignment).
    damacy.GpuCodecPipeline.reset_stats()
    with zarr.config.set(DAMACY), pytest.warns(damacy.FallbackWarning, match="the output is int8.*uint16"):
        got = np.empty((20, 30), np.int8)
        _open_at(tmp_path / "u16").get_basic_selection(
            Ellipsis, out=default_buffer_prototype().nd_buffer.from_ndarray_like(got))
    np.testing.assert_array_equal(got, cases["u16"].astype(np.int8))
    assert zarr_stats()["fallbacks"]["dtype"] == 1, zarr_stats()


def _open_at(path):
    return zarr.open_array(str(path), mode="r")


_CAI_WARNING = (
    "Creating a zarr.buffer.gpu.Buffer with an array that does not support the __cuda_array_interface__ "
    "for zero-copy transfers, falling back to slow copy based path"
)


_WRAPPED_FROM: list[list[str]] = []  # the call stacks of the stand-in's warnings


class _DeviceLike(np.ndarray):
    """Host memory posing as device memory: it has a ``__cuda_array_interface__``, as a CuPy
    array has (CuPy is not installed here)."""

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ctypes.data, False),
                "strides": None, "version": 3}  # fmt: skip


def _gpu_like_buffer_class():
    """A stand-in for ``zarr.buffer.gpu.Buffer`` (what ``zarr.config.enable_gpu()`` selects):
    host memory, built the way gpu.Buffer builds itself, with gpu.Buffer's warning when it is
    handed an array without ``__cuda_array_interface__`` (zarr/core/buffer/gpu.py)."""
    from zarr.core.buffer import cpu

    class GpuLikeBuffer(cpu.Buffer):
        def __init__(self, array_like):
            if not hasattr(array_like, "__cuda_array_interface__"):
                _WRAPPED_FROM.append([f.filename for f in traceback.extract_stack()])
                warnings.warn(_CAI_WARNING, UserWarning, stacklevel=2)
            super().__init__(np.asarray(array_like).view(_DeviceLike))

        @classmethod
        def from_bytes(cls, bytes_like):  # gpu.Buffer: cp.frombuffer, device memory
            return cls(np.frombuffer(bytes_like, dtype="B").view(_DeviceLike))

        def as_numpy_array(self):  # gpu.Buffer: cp.asnumpy, a host array
            return np.array(self._data).view(np.ndarray)

    return GpuLikeBuffer


def test_reads_through_damacy_make_zarr_wrap_no_host_array_as_a_device_buffer(zarr_stats):
    """Issue 28: under ``enable_gpu()`` zarr warned "Creating a zarr.buffer.gpu.Buffer with an
    array that does not support the __cuda_array_interface__". The warning is zarr-python's own:
    its crc32c codec (zarr/codecs/crc32c_.py, decoding a shard index) and bytes codec hand
    ``Buffer.from_array_like`` a numpy array. damacy's reads build no zarr Buffer: they write into
    zarr's output through its memory (a CuPy array's ``__cuda_array_interface__`` pointer under
    enable_gpu). With a stand-in for gpu.Buffer (CuPy is absent here), reads of a sharded,
    crc32c-indexed array warn through zarr-python's pipeline and not through damacy's."""
    from zarr.registry import register_buffer

    register_buffer(_gpu_like_buffer_class(), qualname="damacy_tests.GpuLikeBuffer")
    path = "v3/sharded_zstd_index_end"
    for config, warns in ((DAMACY, False), (DEFAULT, True)):
        with zarr.config.set(config):
            a = _open(path)  # the metadata is read with host buffers, as zarr.open_array does
            with zarr.config.set({"buffer": "damacy_tests.GpuLikeBuffer"}), warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                whole = a[...]
                part = a[3:17:2, 5, ::3]
        hits = [f"{w.filename}:{w.lineno}" for w in seen if "__cuda_array_interface__" in str(w.message)]
        assert bool(hits) == warns, (config, hits)
        if warns:  # zarr-python's crc32c codec, decoding the shard indexes
            assert any(any(f.endswith("crc32c_.py") for f in stack) for stack in _WRAPPED_FROM), _WRAPPED_FROM
        _WRAPPED_FROM.clear()
        np.testing.assert_array_equal(part, whole[3:17:2, 5, ::3])
    assert zarr_stats()["reads"] == 2 and zarr_stats()["fallback_reads"] == 0, zarr_stats()

"""On a GPU (skipped without one, saying why): damacy.Pipeline batches on the device taken by
torch and CuPy through DLPack, and zarr-python reading into CuPy arrays under
``zarr.config.enable_gpu()`` through damacy.GpuCodecPipeline, each equal to zarr-python's CPU
reads. ``benches/gpu/run.sh python`` runs these on a lent GPU machine."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

import damacy
from conftest import DEFAULT, FIXTURES, MANIFEST


def _gpu_reader_or_skip() -> None:
    try:
        reader = damacy.Reader(executor="gpu", device=0)
    except damacy.Error as e:
        pytest.skip(f"no usable GPU for damacy's gpu executor: {e}")
    if reader.device is None or reader.device[0] != "cuda":
        pytest.skip(f"damacy's reader does not decode on a GPU here ({reader.executor_note})")


@pytest.fixture(scope="module")
def cupy():
    cp = pytest.importorskip("cupy", reason="CuPy is not installed (make test does not install it)")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("CuPy sees no CUDA device")
    except cp.cuda.runtime.CUDARuntimeError as e:
        pytest.skip(f"CuPy has no CUDA device: {e}")
    _gpu_reader_or_skip()
    return cp


@pytest.fixture(scope="module")
def torch():
    t = pytest.importorskip("torch", reason="torch is not installed (make test does not install it)")
    if not t.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    _gpu_reader_or_skip()
    return t


ARRAYS = ["v3/sharded_zstd_index_end", "v3/blosc_lz4_byte_ts2_large", "v3/blosc_zstd_byte_ts4_large", "v2/zlib_C"]


def _crops(path: str, n: int, seed: int) -> tuple[list[damacy.Sample], np.ndarray]:
    with zarr.config.set(DEFAULT):
        a = zarr.open_array(str(FIXTURES / path), mode="r")
        rng = np.random.default_rng(seed)
        size = [min(8, s) for s in a.shape]
        starts = [[int(rng.integers(0, s - e + 1)) for s, e in zip(a.shape, size, strict=True)] for _ in range(n)]
        want = np.stack([a[tuple(slice(s, s + e) for s, e in zip(st, size, strict=True))] for st in starts])
    return [damacy.Sample(str(FIXTURES / path), damacy.Region(st, size)) for st in starts], want


@pytest.mark.parametrize("path", ARRAYS)
def test_torch_from_dlpack_of_a_device_batch(torch, path):
    samples, want = _crops(path, 4, seed=1)
    with damacy.Pipeline(damacy.Config(batch_size=4, executor="gpu", device=0)) as p:
        p.push(samples)
        with p.pop(timeout=120) as batch:
            t = torch.from_dlpack(batch)
            assert t.is_cuda and t.data_ptr() == batch.info.device_ptr
            np.testing.assert_array_equal(t.cpu().numpy(), want)


def test_dlpack_stream_values_of_a_device_batch(torch):
    """kDLCUDA exports per the array-API standard: 0 is disallowed (``ValueError``); 1 (legacy
    default), 2 (per-thread default), a stream handle, -1 and None are taken; a host copy
    (``dl_device=(1, 0)``) takes None only."""
    samples, want = _crops(ARRAYS[0], 2, seed=3)
    with damacy.Pipeline(damacy.Config(batch_size=2, executor="gpu", device=0)) as p:
        p.push(samples)
        with p.pop(timeout=120) as batch:
            assert batch.__dlpack_device__() == (2, 0)
            with pytest.raises(ValueError, match=r"stream=0\).*ambiguous"):
                batch.__dlpack__(stream=0)
            with pytest.raises(ValueError, match="kDLCPU"):
                batch.__dlpack__(stream=1, max_version=(1, 0), dl_device=(1, 0))
            side = torch.cuda.Stream()
            for stream in (None, 1, 2, -1, side.cuda_stream):
                batch.__dlpack__(stream=stream, max_version=(1, 0))
            torch.cuda.synchronize()
            np.testing.assert_array_equal(torch.from_dlpack(batch).cpu().numpy(), want)


def test_zarr_gpu_example_takes_the_gpu_route(cupy):
    import subprocess
    import sys

    example = FIXTURES.parent / "examples" / "zarr_gpu.py"
    run = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "GPU route" in run.stdout and "on the device" in run.stdout, run.stdout


@pytest.mark.parametrize("path", ARRAYS)
def test_cupy_from_dlpack_of_a_device_batch(cupy, path):
    samples, want = _crops(path, 4, seed=2)
    with damacy.Pipeline(damacy.Config(batch_size=4, executor="gpu", device=0)) as p:
        p.push(samples)
        with p.pop(timeout=120) as batch:
            x = cupy.from_dlpack(batch)
            assert isinstance(x, cupy.ndarray) and x.data.ptr == batch.info.device_ptr
            np.testing.assert_array_equal(cupy.asnumpy(x), want)


GPU_READS = [a["path"] for a in MANIFEST["arrays"] if len(a["shape"]) > 0]


@pytest.mark.parametrize("path", GPU_READS)
def test_zarr_enable_gpu_reads_into_cupy_through_damacy(cupy, path):
    """Strict: a fallback would raise. Whole array and one random strided selection."""
    with zarr.config.set(DEFAULT):
        a = zarr.open_array(str(FIXTURES / path), mode="r")
        if a.dtype.byteorder == ">":
            pytest.skip(f"{a.dtype}: CuPy holds native byte order only")
        rng = np.random.default_rng(len(path))
        sels = [(slice(None),) * a.ndim]
        sels.append(tuple(slice(int(rng.integers(0, n)), n, int(rng.integers(1, 3))) for n in a.shape))
        refs = [np.asarray(a[s]) for s in sels]
    damacy.GpuCodecPipeline.reset_stats()
    config = {"codec_pipeline.path": "damacy.GpuCodecPipeline", "codec_pipeline.executor": "gpu",
              "codec_pipeline.strict": True}  # fmt: skip
    for sel, ref in zip(sels, refs, strict=True):
        with zarr.config.set(config), zarr.config.enable_gpu():
            got = zarr.open_array(str(FIXTURES / path), mode="r")[sel]
        assert isinstance(got, cupy.ndarray), type(got)
        np.testing.assert_array_equal(cupy.asnumpy(got), ref, err_msg=f"{path} {sel}")
    stats = damacy.GpuCodecPipeline.stats()
    assert stats["device_reads"] == len(sels) and stats["fallback_reads"] == 0, stats

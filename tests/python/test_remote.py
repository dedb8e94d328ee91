"""damacy.GpuCodecPipeline on remote zarr stores: zarr's FsspecStore over HTTP and S3 (s3fs)
and its ObjectStore (obstore) over S3 and HTTP, mapped to damacy's own stores, against the
local fixtures read by zarr's default pipeline; and the storage error kinds of a refusing server. The servers are the ones `make test` starts
(tests/services/services.sh: nginx serving fixtures/, moto's S3 server holding them); without
them these tests skip and say so."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import zarr
import zarr.storage

import damacy
from conftest import DAMACY, DEFAULT, FIXTURES

HTTP = os.environ.get("DAMACY_TEST_HTTP_URL")
S3 = os.environ.get("DAMACY_TEST_S3_URL")
S3_ENDPOINT = os.environ.get("DAMACY_TEST_S3_ENDPOINT")
# sharded zstd, blosc, gzip, a v2 array: the stores' paths of most reads
PATHS = ["v3/sharded_zstd_index_end", "v3/blosc_lz4_byte_ts4_large", "v3/gzip_l6", "v2/zlib_C"]


def _existing() -> list[str]:
    return [p for p in PATHS if (FIXTURES / p).is_dir()]


def _reference(path: str) -> np.ndarray:
    with zarr.config.set(DEFAULT):
        return zarr.open_array(str(FIXTURES / path), mode="r")[...]


def _read_through_damacy(store, path: str) -> np.ndarray:
    with zarr.config.set({**DAMACY, "codec_pipeline.strict": True}), warnings.catch_warnings():
        warnings.simplefilter("error", damacy.FallbackWarning)
        array = zarr.open_array(store, mode="r")
        assert type(array._async_array.codec_pipeline).__name__ == "GpuCodecPipeline"
        got = array[...]
        rng = np.random.default_rng(len(path))
        for _ in range(3):
            start = [int(rng.integers(0, n)) for n in array.shape]
            sel = tuple(slice(a, int(rng.integers(a + 1, n + 1))) for a, n in zip(start, array.shape))
            np.testing.assert_array_equal(array[sel], got[sel], err_msg=f"{path} {sel}")
        return got


def test_paths_exist():
    assert _existing() == PATHS, "the remote tests' fixtures moved: update PATHS"


@pytest.mark.skipif(not HTTP, reason="no HTTP fixture server (DAMACY_TEST_HTTP_URL; make test starts nginx)")
@pytest.mark.parametrize("path", PATHS)
def test_fsspec_http_store(path, zarr_stats):
    pytest.importorskip("aiohttp", reason="fsspec's HTTP filesystem needs aiohttp")
    store = zarr.storage.FsspecStore.from_url(f"{HTTP}/{path}", read_only=True)
    np.testing.assert_array_equal(_read_through_damacy(store, path), _reference(path))
    counts = zarr_stats()
    assert counts["reads"] >= 1 and counts["fallback_reads"] == 0, counts


@pytest.mark.skipif(not (S3 and S3_ENDPOINT), reason="no S3 fixture server (DAMACY_TEST_S3_URL; make test starts moto)")
@pytest.mark.parametrize("path", PATHS)
def test_obstore_s3_store(path, zarr_stats):
    obstore_store = pytest.importorskip("obstore.store", reason="zarr's ObjectStore needs obstore")
    bucket = S3.removeprefix("s3://").strip("/")
    inner = obstore_store.S3Store(
        bucket,
        prefix=path,
        config={"aws_endpoint": S3_ENDPOINT, "aws_region": "us-east-1",
                "aws_access_key_id": "testing", "aws_secret_access_key": "testing"},
        client_options={"allow_http": True},
    )
    store = zarr.storage.ObjectStore(inner, read_only=True)
    np.testing.assert_array_equal(_read_through_damacy(store, path), _reference(path))
    counts = zarr_stats()
    assert counts["reads"] >= 1 and counts["fallback_reads"] == 0, counts


@pytest.mark.skipif(not (S3 and S3_ENDPOINT), reason="no S3 fixture server (DAMACY_TEST_S3_URL; make test starts moto)")
def test_obstore_config_that_cannot_be_read_falls_back(zarr_stats):
    """obstore 0.12 panics when asked for the config of an S3Store built with unprefixed keys:
    damacy then falls back to zarr's pipeline with a warning, and the values are still right."""
    obstore_store = pytest.importorskip("obstore.store", reason="zarr's ObjectStore needs obstore")
    path = PATHS[0]
    inner = obstore_store.S3Store(
        S3.removeprefix("s3://").strip("/"),
        prefix=path,
        config={"endpoint": S3_ENDPOINT, "allow_http": "true", "region": "us-east-1",
                "access_key_id": "testing", "secret_access_key": "testing"},
    )
    try:
        dict(inner.config)
        pytest.skip("this obstore reads back unprefixed configs: nothing to fall back from")
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # noqa: BLE001 - the panic under test
        pass
    store = zarr.storage.ObjectStore(inner, read_only=True)
    with zarr.config.set(DAMACY), pytest.warns(damacy.FallbackWarning, match="config cannot be read"):
        got = zarr.open_array(store, mode="r")[...]
    np.testing.assert_array_equal(got, _reference(path))
    assert zarr_stats()["fallback_reads"] >= 1


S3_CREDENTIALS = {"key": "testing", "secret": "testing"}


@pytest.mark.skipif(not (S3 and S3_ENDPOINT), reason="no S3 fixture server (DAMACY_TEST_S3_URL; make test starts moto)")
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("endpoint_in", ["client_kwargs", "endpoint_url"])
def test_fsspec_s3_store(path, endpoint_in, zarr_stats):
    """s3fs's filesystem: the endpoint given either way s3fs takes it, and its credentials."""
    pytest.importorskip("s3fs", reason="zarr's FsspecStore over s3 needs s3fs")
    options = dict(S3_CREDENTIALS)
    if endpoint_in == "client_kwargs":
        options["client_kwargs"] = {"endpoint_url": S3_ENDPOINT, "region_name": "us-east-1"}
    else:
        options["endpoint_url"] = S3_ENDPOINT
    store = zarr.storage.FsspecStore.from_url(f"{S3.rstrip('/')}/{path}", storage_options=options, read_only=True)
    np.testing.assert_array_equal(_read_through_damacy(store, path), _reference(path))
    counts = zarr_stats()
    assert counts["reads"] >= 1 and counts["fallback_reads"] == 0, counts


@pytest.mark.skipif(not HTTP, reason="no HTTP fixture server (DAMACY_TEST_HTTP_URL; make test starts nginx)")
@pytest.mark.parametrize("path", PATHS)
def test_obstore_http_store(path, zarr_stats):
    obstore_store = pytest.importorskip("obstore.store", reason="zarr's ObjectStore needs obstore")
    inner = obstore_store.HTTPStore.from_url(f"{HTTP}/{path}", client_options={"allow_http": True})
    store = zarr.storage.ObjectStore(inner, read_only=True)
    np.testing.assert_array_equal(_read_through_damacy(store, path), _reference(path))
    counts = zarr_stats()
    assert counts["reads"] >= 1 and counts["fallback_reads"] == 0, counts


@pytest.mark.skipif(not HTTP, reason="no HTTP fixture server (DAMACY_TEST_HTTP_URL; make test starts nginx)")
def test_a_refusing_server_is_a_permission_denied_storage_error():
    """nginx answers 403 under /forbidden/: ``damacy.StorageError`` of kind
    ``permission_denied`` (not ``NotFound``), naming the URL."""
    store = damacy.Store.open(f"{HTTP}/forbidden", retries=0)
    with pytest.raises(damacy.StorageError) as info:
        damacy.Reader(executor="cpu").open_array(store, "v3/gzip_l6")
    assert info.value.kind == "permission_denied", (info.value.kind, str(info.value))
    assert not isinstance(info.value, damacy.NotFound)
    assert "forbidden" in str(info.value), str(info.value)

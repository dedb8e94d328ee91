#!/usr/bin/env python3
"""zarr-python's own test suite, from the sdist of the installed zarr version, run with
``damacy.GpuCodecPipeline`` forced (``ZARR_CODEC_PIPELINE__PATH``, which zarr's config reads
from the environment, so it holds in every test and every xdist worker).

    python tests/python/zarr_suite.py [--subset] [--workers N] [-- extra pytest args]

The sdist is fetched once with ``pip download --no-binary :all: --no-deps zarr==<version>``
into ``.zarr-suite/`` and its test dependencies are installed into the running environment.
``--subset`` runs the part that exercises reads and writes through the pipeline (what
``make test`` runs); without it the whole suite runs (``make zarr-suite``). A plugin records
``damacy.zarr_stats()`` in every worker, and the summary prints how many reads damacy decoded
and how many fell back, so a run that silently used zarr's own pipeline cannot pass unnoticed.

Excluded, and why (keep this short):
- ``tests/test_api/test_synchronous.py``: docstring-consistency tests whose parameter ids hold
  function addresses, which differ between xdist workers (collection fails); no pipeline use.
- ``tests/test_config.py::test_config_defaults_set`` and ``::test_config_codec_pipeline_class``:
  they assert the default value of ``codec_pipeline.path``, which this run replaces on purpose.
- ``tests/test_codecs/test_sharding.py::test_sharding_partial_shard_read__index_chunk_slice_fails``
  (zarr ≥ 3.2): it monkeypatches zarr's own ``_ShardIndex.get_chunk_slice`` to fail and expects
  the fill value; damacy's pipeline reads shards with its own index code, which the patch does
  not reach (a failing index read through the store is tested, and passes, beside it).
- ``tests/test_examples.py``, ``tests/test_docs.py``: run example scripts with ``uv`` and
  docs snippets; no pipeline use and need network tools.
- ``tests/benchmarks``: timing, not behaviour.

Measured, the whole suite (``make zarr-suite``): zarr 3.1.6 on Python 3.11 on 2026-11-27, 5192
passed, 374 skipped, 7 xfailed, none failed (2.5 min with 2 workers; damacy decoded 1165 reads,
7422 fell back, 4354 were the sharding codec's inner reads); zarr 3.4.2 on Python 3.13 on
2026-11-27, 12314 passed, 1325 skipped, 4 xfailed, none failed (2 min with 2 workers; damacy
decoded 2452 reads, 13961 fell back, 11636 were the sharding codec's inner reads); 4 tests of
``tests/test_metadata/test_repair.py`` had failed on 2026-11-24 until rectilinear chunk grids
were made to fall back.
The subset ``make test`` runs adds ``tests/test_metadata`` since then.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tarfile
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CACHE = ROOT / ".zarr-suite"
TEST_DEPS = ["pytest-asyncio", "hypothesis", "numpydoc", "tomlkit", "pytest-xdist"]

IGNORED = [
    "tests/test_api/test_synchronous.py",
    "tests/test_examples.py",
    "tests/test_docs.py",
    "tests/benchmarks",
]
EXCLUDED = [
    "tests/test_config.py::test_config_defaults_set",
    "tests/test_config.py::test_config_codec_pipeline_class",
    "tests/test_codecs/test_sharding.py::test_sharding_partial_shard_read__index_chunk_slice_fails",
]
# Reads and writes through the pipeline on every store, dtype and codec; about a minute.
SUBSET = [
    "tests/test_indexing.py",
    "tests/test_codecs",
    "tests/test_v2.py",
    "tests/test_array.py",
    "tests/test_metadata",
]

PLUGIN = '''
import json, os, atexit
def pytest_sessionfinish(session, exitstatus):
    import damacy
    out = os.environ["DAMACY_SUITE_STATS"]
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.path.join(out, worker + ".json"), "w") as f:
        json.dump(damacy.zarr_stats(), f)
'''


def sdist(version: str) -> pathlib.Path:
    src = CACHE / f"zarr-{version}"
    if (src / "tests").is_dir():
        return src
    CACHE.mkdir(exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps",
         f"zarr=={version}", "-d", str(CACHE)],
        check=True,
    )
    with tarfile.open(CACHE / f"zarr-{version}.tar.gz") as tar:
        tar.extractall(CACHE, filter="data")
    return src


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subset", action="store_true", help="only the read/write-heavy part")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("pytest_args", nargs="*")
    args = ap.parse_args()

    import zarr

    version = zarr.__version__
    src = sdist(version)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *TEST_DEPS], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        plugin_dir = pathlib.Path(tmp) / "plugin"
        plugin_dir.mkdir()
        (plugin_dir / "damacy_suite_plugin.py").write_text(PLUGIN)
        stats_dir = pathlib.Path(tmp) / "stats"
        stats_dir.mkdir()
        env = {
            **os.environ,
            "ZARR_CODEC_PIPELINE__PATH": "damacy.GpuCodecPipeline",
            "DAMACY_SUITE_STATS": str(stats_dir),
            "PYTHONPATH": os.pathsep.join([str(plugin_dir), os.environ.get("PYTHONPATH", "")]),
        }
        cmd = [
            sys.executable, "-m", "pytest", *(SUBSET if args.subset else ["tests"]),
            "-p", "damacy_suite_plugin", "-p", "no:cacheprovider",
            "-o", "addopts=", "-q", "-rfE", "--tb=short",
            "-W", "ignore::damacy.FallbackWarning",
            *(["-n", str(args.workers)] if args.workers > 1 else []),
            *[f"--ignore={p}" for p in IGNORED],
            *[f"--deselect={t}" for t in EXCLUDED],
            *args.pytest_args,
        ]
        print(f"zarr {version} test suite with damacy.GpuCodecPipeline: {' '.join(cmd[3:])}", flush=True)
        rc = subprocess.run(cmd, cwd=src, env=env).returncode
        totals: dict[str, int] = {}
        for f in stats_dir.glob("*.json"):
            for k, v in json.loads(f.read_text()).items():
                if isinstance(v, int):
                    totals[k] = totals.get(k, 0) + v
        print(f"damacy.zarr_stats() over all workers: {totals}")
        if rc == 0 and totals.get("reads", 0) == 0:
            print("no read went through damacy: the pipeline was not in use", file=sys.stderr)
            return 1
    return rc


if __name__ == "__main__":
    sys.exit(main())

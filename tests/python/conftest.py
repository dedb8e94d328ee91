"""Shared helpers of the Python tests: the fixture corpus and pipeline switches."""

from __future__ import annotations

import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
ARRAYS = [a["path"] for a in MANIFEST["arrays"]]

DAMACY = {"codec_pipeline.path": "damacy.GpuCodecPipeline"}
DEFAULT = {"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}


@pytest.fixture
def zarr_stats():
    """damacy's zarr counters, zeroed before the test."""
    import damacy

    damacy.GpuCodecPipeline.reset_stats()
    return damacy.GpuCodecPipeline.stats

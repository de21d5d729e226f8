"""Shared fixtures: tiny synthetic graphs, a private data root, and a way to run a function in M
real worker processes (through the same launcher the CLI uses)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED_DATASETS = ROOT.parent / "shared" / "datasets"

from digest.cli import import_methods  # noqa: E402  (every method, so TrainConfig.of knows them)

import_methods()


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    """A writable, empty data root for this test (never the user's ./data)."""
    root = tmp_path / "data"
    root.mkdir()
    monkeypatch.setenv("DIGEST_DATA", str(root))
    return root


def needs_shared(name: str):
    """Skip (with the reason) when ../shared/datasets/<name> is absent."""
    return pytest.mark.skipif(not (SHARED_DATASETS / name).exists(),
                              reason=f"{SHARED_DATASETS / name} is absent (real-data test)")

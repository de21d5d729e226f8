"""pytest-benchmark micro-benchmarks (docs/performance.md). Not part of the default test run (pytest.ini's
testpaths is tests/); run them with

    . scripts/env.sh && python -m pytest benchmarks --benchmark-only

Multi-worker benchmarks start a persistent group of real worker processes (gloo, like
``python -m digest train --workers M``) and drive it one call at a time, so the timed call is one
distributed epoch (or exchange loop), not process start-up.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)


@pytest.fixture(scope="session")
def data_root(tmp_path_factory, ):
    """A private data root for the partition caches the benchmarks build."""
    import os
    root = tmp_path_factory.mktemp("bench-data")
    old = os.environ.get("DIGEST_DATA")
    os.environ["DIGEST_DATA"] = str(root)
    yield root
    if old is None:
        os.environ.pop("DIGEST_DATA", None)
    else:
        os.environ["DIGEST_DATA"] = old

"""Shared fixtures: a private data root per test and per session, the warm worker pool, a test
module's ``world`` (its one multi-worker launch), the ``slow`` tier. The shared code itself (graphs,
the one-launch worker harness, the command-line runners) is tests/helpers.py; the experiment
fixtures (run folders without training) are tests/fake_runs.py."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "tests"):  # the project; helpers.py, fake_runs.py from every folder
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from digest.methods import load_all  # noqa: E402
from digest.training.run import WORKER_MODULES  # noqa: E402

load_all()  # every method, so TrainConfig.of knows their options


def pytest_sessionstart(session):
    """Start the worker pool's forkserver now: it imports torch, torch_geometric and every method
    in the background while the tests are collected, so that the first launch finds it warm."""
    from digest.runtime.launch import prestart
    prestart(WORKER_MODULES)


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    """A writable, empty data root for this test (never the user's ./data)."""
    root = tmp_path / "data"
    root.mkdir()
    monkeypatch.setenv("DIGEST_DATA", str(root))
    return root


@pytest.fixture(scope="session")
def shared_data(tmp_path_factory):
    """One data root for the whole session, for tests that only read what they generate (the same
    synthetic graph and partition are then built once): never the user's ./data."""
    return tmp_path_factory.mktemp("shared_data")


@pytest.fixture
def session_data(shared_data, monkeypatch):
    """``shared_data`` as this test's DIGEST_DATA."""
    monkeypatch.setenv("DIGEST_DATA", str(shared_data))
    return shared_data


@dataclass
class World:
    """What ``world`` launched: the graph, its partition folder, ``fn``'s results by rank."""
    graph: Any
    part_dir: Path
    ranks: list

    @property
    def halo_rows(self) -> int:
        """Rows one exchange sends, all workers together (the partition's halo sizes)."""
        from digest.data.cache import load_book
        return sum(load_book(self.part_dir).stats["halo_sizes"])


@pytest.fixture(scope="module")
def world(request, tmp_path_factory) -> World:
    """The test module's ONE launch of real workers, shared by its tests: its ``WORLD`` dict names
    ``fn(cfg, rt, part, **rest)`` (module-level), ``cfg`` (its dataset name names the partition),
    ``workers``, ``graph`` (``helpers.small_graph``'s arguments), optionally ``out_dir=True`` (a
    fresh folder passed as ``out_dir``), and the rest of ``fn``'s keyword arguments (``runs``)."""
    from helpers import launch_world, small_graph
    spec = dict(request.module.WORLD)
    fn, cfg, workers = spec.pop("fn"), spec.pop("cfg"), spec.pop("workers")
    graph = small_graph(**spec.pop("graph"))
    if spec.pop("out_dir", False):
        spec["out_dir"] = str(tmp_path_factory.mktemp("run"))
    part_dir, ranks = launch_world(tmp_path_factory.mktemp("data"), cfg.data.dataset, workers, fn,
                                   cfg, graph, **spec)
    return World(graph, part_dir, ranks)

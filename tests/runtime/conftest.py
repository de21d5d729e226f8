"""The emulated cluster's fixture (tests of digest/runtime/netem.py): whether network namespaces
can be made here, and ``clean``, which follows this test's own emulated runs and checks that
nothing of them is left (never another run's: other emulated runs may share the host)."""
from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import psutil
import pytest

from digest.runtime import netns


@functools.cache
def why_not() -> str | None:
    """Why emulated runs cannot be made here (None: they can); probed once, when first asked."""
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "iproute2 (ip, tc) is not installed"
    if os.geteuid() != 0:
        return "needs root (the runs create network namespaces, veths, a bridge, tbf qdiscs)"
    probe = f"dg-{os.urandom(3).hex()}-w0"
    if subprocess.run(["ip", "netns", "add", probe], capture_output=True).returncode != 0:
        return "`ip netns add` is not permitted here"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None




class OwnRuns:
    """The emulated runs started by this test (by this process or one of its descendants): a
    thread reads the run records (netns.state_dir()/<run>.json) while the test runs and keeps
    those whose owner is ours. Other emulated runs on the host, concurrent or not, are not ours."""

    def __init__(self):
        self.records: dict[str, dict] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self):
        me = os.getpid()
        while not self._stop.is_set():
            try:
                mine = {me, *(p.pid for p in psutil.Process(me).children(recursive=True))}
            except psutil.Error:
                mine = {me}
            for path in netns.state_dir().glob("*.json"):
                try:
                    record = json.loads(path.read_text())
                except (OSError, ValueError):
                    continue
                if record.get("owner") in mine:
                    self.records.setdefault(record["run"], {**record, "path": str(path)})
            self._stop.wait(0.05)

    def add(self, cluster) -> None:
        """A cluster this test made itself (its record may come and go between two reads)."""
        self.records[cluster.run] = {"run": cluster.run, "namespaces": cluster.namespaces,
                                     "path": str(cluster.record_path), "cgroups": []}

    def namespaces(self, suffix: str) -> list[str]:
        """This test's runs' namespaces that exist now, ending in ``suffix`` (e.g. -w1)."""
        return [n for r in self.records.values() for n in r["namespaces"]
                if n.endswith(suffix) and (netns.NETNS_DIR / n).exists()]

    def left(self) -> list[str]:
        """What of this test's runs still exists: namespaces, records, hosts files, cgroups."""
        out = []
        for r in self.records.values():
            out += [f"namespace {n}" for n in r["namespaces"] if (netns.NETNS_DIR / n).exists()]
            record = Path(r["path"])
            out += [f"file {p}" for p in (record, record.with_suffix(".hosts")) if p.exists()]
            out += [f"cgroup {c}" for c in r.get("cgroups") or [] if Path(c).exists()]
        return out

    def stop(self):
        self._stop.set()
        self._thread.join()


@pytest.fixture(scope="module")
def namespaces_here():
    """Skips, with the reason, where network namespaces are not available (for module-scoped
    fixtures, which run before ``clean``)."""
    if why_not() is not None:
        pytest.skip(why_not())


@pytest.fixture
def clean():
    """This test's emulated runs (OwnRuns); afterwards nothing of them is left, once the watchdog
    of a killed run has had its chance (waited for, up to 30 s). Skips, with the reason, where
    network namespaces are not available."""
    if why_not() is not None:
        pytest.skip(why_not())
    runs = OwnRuns()
    yield runs
    runs.stop()
    deadline = time.monotonic() + 30
    while runs.left() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not runs.left(), f"left behind: {runs.left()}"

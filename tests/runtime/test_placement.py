"""digest/runtime/placement.py: pinning with more workers than cores, and per-worker cgroup cpu
quotas (created, joined, capped, removed)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from digest.runtime import placement


@pytest.fixture
def two_cores(monkeypatch):
    pinned = {}
    monkeypatch.setattr(placement.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(placement.os, "sched_setaffinity", lambda pid, cores: pinned.update(c=cores))
    return pinned


def test_pin_puts_worker_w_on_core_w_mod_c(two_cores):
    rec = placement.pin(3, 4)
    assert two_cores["c"] == {1} and rec["core"] == 1
    rec = placement.pin(2, 4)
    assert two_cores["c"] == {0} and rec["core"] == 0


def test_no_pinning_when_cores_suffice_or_off(two_cores):
    assert placement.pin(1, 2) == {"pinning": "not needed: 2 workers on 2 cores"}
    assert placement.pin(3, 4, "off") == {"pinning": "off"}
    assert "c" not in two_cores


def test_quota_off_or_unavailable_says_why():
    q = placement.CpuQuota("t0", 4, cores=2, enabled=False)
    with q:
        assert q.worker_env() == {}
    assert q.describe() == {"cpu_quota": "none: off (--cpu-quota off)"}


@pytest.mark.slow
@pytest.mark.skipif(placement.controller()[0] is None, reason="no writable cgroup cpu controller "
                    "(root and cgroup v1 cpu or v2 cpu.max needed)")
def test_quota_caps_each_worker_and_is_removed():
    run = f"test{os.getpid()}"
    with placement.CpuQuota(run, 4, cores=2) as q:
        assert q.describe()["cpu_quota_cores"] == 0.5
        path = Path(q.paths[1])
        quota = (path / ("cpu.max" if q.kind == "v2" else "cpu.cfs_quota_us")).read_text().split()[0]
        assert int(quota) == placement.PERIOD_US // 2
        env = {**os.environ, **q.worker_env(), "RANK": "1", "PYTHONPATH": str(Path.cwd())}
        code = ("from digest.runtime import placement; placement.enter_from_env(); "
                "print(open('/proc/self/cgroup').read())")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             timeout=120, cwd=Path(__file__).resolve().parents[2]).stdout
        assert f"digest-{run}-w1" in out
        assert json.loads(q.worker_env()[placement.QUOTA_ENV]) == q.paths
    assert not any(Path(p).exists() for p in q.paths)


def _busy_cgroup(tmp_path) -> Path:
    """A stand-in for a cgroup whose last process has not left yet: rmdir fails while it holds
    a file (the real one lists no pid here, so nothing is killed)."""
    group = tmp_path / "digest-t-w0"
    group.mkdir()
    (group / "cgroup.procs").write_text("")
    return group


def test_remove_waits_for_the_last_process_to_leave(tmp_path):
    group = _busy_cgroup(tmp_path)
    threading.Timer(0.3, (group / "cgroup.procs").unlink).start()  # the process leaves, late
    assert placement.remove([group], wait=10) == []
    assert not group.exists()


def test_remove_returns_what_it_could_not_delete(tmp_path):
    group = _busy_cgroup(tmp_path)
    assert placement.remove([group, tmp_path / "never-made"], wait=0.2) == [str(group)]


def test_a_record_whose_cgroup_stays_is_kept_for_the_next_reap(tmp_path, monkeypatch):
    from digest.runtime import netns
    record = tmp_path / "r.json"
    record.write_text(json.dumps({"namespaces": [], "cgroups": ["x"]}))
    monkeypatch.setattr(placement, "remove", lambda paths: ["x"])
    netns.reap(record)
    assert record.exists()  # reap_stale at the next run tries again
    monkeypatch.setattr(placement, "remove", lambda paths: [])
    netns.reap(record)
    assert not record.exists()

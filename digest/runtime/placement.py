"""Symmetric contention: where a worker may run (docs/performance.md, timing; docs/methods.md
section 11).

- ``pin``: with more workers on a node than cores, worker w runs on core w mod C only
  (``os.sched_setaffinity``), so every core carries the same number of workers instead of
  whatever the scheduler settles on (which can leave one worker alone on a core and three on the
  other, and so make one method look faster than another by placement alone).
- ``CpuQuota``: under ``--emulate-network``, each worker in a cgroup of its own capped at C/M
  cores (cgroup v2 ``cpu.max``, or v1 ``cpu.cfs_quota_us``), so that an emulated worker is a node
  of C/M cores rather than a process that may borrow an idle peer's core.

Both are recorded in summary.json; where unavailable the record says why, and the run goes on.
"""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

QUOTA_ENV = "DIGEST_CPU_QUOTA"
PERIOD_US = 100_000
V1 = Path("/sys/fs/cgroup/cpu")
V2 = Path("/sys/fs/cgroup")


def pin(local_rank: int, local_world: int, mode: str = "auto") -> dict:
    """Pin this worker when the node has fewer cores than workers; returns the record."""
    cores = sorted(os.sched_getaffinity(0))
    if mode == "off":
        return {"pinning": "off"}
    if local_world <= len(cores):
        return {"pinning": f"not needed: {local_world} workers on {len(cores)} cores"}
    core = cores[local_rank % len(cores)]
    try:
        os.sched_setaffinity(0, {core})
    except OSError as e:
        return {"pinning": f"unavailable: {e.strerror}"}
    return {"pinning": f"worker {local_rank} on core {core} (w mod {len(cores)})", "core": core}


def controller() -> tuple[str, Path] | tuple[None, str]:
    """('v2', root) or ('v1', cpu hierarchy) where this process may create cpu cgroups, else
    (None, why)."""
    if (V2 / "cgroup.controllers").exists():
        controllers = (V2 / "cgroup.subtree_control").read_text().split()
        if "cpu" in controllers and os.access(V2, os.W_OK):
            return "v2", V2
        return None, "cgroup v2 without the cpu controller delegated here"
    if (V1 / "cpu.cfs_quota_us").exists():
        if os.access(V1, os.W_OK):
            return "v1", V1
        return None, f"{V1} is not writable (root needed)"
    return None, "no cgroup cpu controller on this machine"


class CpuQuota:
    """``with CpuQuota(run, world, cores) as q: launch(..., env=q.worker_env())``: one cgroup per
    rank, each capped at ``cores / world`` cores; each worker joins its own (``enter_from_env``)."""

    def __init__(self, run: str, world: int, cores: int | None = None, enabled: bool = True):
        self.world = world
        self.cores = cores or len(os.sched_getaffinity(0))
        self.share = self.cores / world
        self.kind, where = controller() if enabled else (None, "off (--cpu-quota off)")
        self.reason = None if self.kind else where
        self.paths = [str(where / f"digest-{run}-w{r}") for r in range(world)] if self.kind else []

    def __enter__(self) -> "CpuQuota":
        quota = max(1000, int(self.share * PERIOD_US))
        try:
            for p in map(Path, self.paths):
                p.mkdir(exist_ok=True)
                if self.kind == "v2":
                    (p / "cpu.max").write_text(f"{quota} {PERIOD_US}")
                else:
                    (p / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                    (p / "cpu.cfs_quota_us").write_text(str(quota))
        except OSError as e:
            remove(self.paths, wait=0)  # nothing joined them yet: waiting cannot help
            self.kind, self.paths, self.reason = None, [], f"cgroup write failed: {e.strerror}"
        return self

    def __exit__(self, *exc) -> None:
        remove(self.paths)

    def worker_env(self) -> dict:
        return {QUOTA_ENV: json.dumps(self.paths)} if self.paths else {}

    def describe(self) -> dict:
        if not self.paths:
            return {"cpu_quota": f"none: {self.reason}"}
        return {"cpu_quota": f"{self.share:g} cores per worker ({self.cores} cores / {self.world} "
                             f"workers, cgroup {self.kind})", "cpu_quota_cores": self.share}


def enter_from_env() -> None:
    """In a launched worker: join this rank's cgroup (a no-op without a quota)."""
    paths = os.environ.get(QUOTA_ENV)
    if paths:
        path = Path(json.loads(paths)[int(os.environ["RANK"])])
        (path / "cgroup.procs").write_text(str(os.getpid()))  # its threads and children follow


def remove(paths, wait: float = 10.0) -> list[str]:
    """Kill what is left in ``paths`` (this run's processes only) and delete them; returns the
    ones still there after ``wait`` seconds. A SIGKILLed process stays in its cgroup until it has
    exited (a while on a loaded machine), so the delete is retried meanwhile."""
    left = []
    for p in map(Path, paths):
        deadline = time.monotonic() + wait
        while p.exists():
            try:
                pids = (p / "cgroup.procs").read_text().split()
            except OSError:
                pids = []
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
            try:
                p.rmdir()
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() > deadline:
                    left.append(str(p))
                    break
                time.sleep(0.05)
    return left

"""Workers that stop answering without exiting (a process stopped by SIGSTOP or a debugger, a
machine frozen under it), seen from the local launcher.

Their peers' collectives time out (``--timeout``) and exit as "a peer stopped answering"
(launch.PEER_LOST): on their own those exits name the survivors, not the silent rank, and
torch.distributed.elastic then waits 30 s for the stopped process to honour a SIGTERM it cannot
receive. So each worker records its pid under its rank (``register``); the launcher's ``Watch``
thread notes every rank whose process is stopped and SIGKILLs it (the run is over: nothing it
holds can be saved), so that the launcher names it, once another rank has exited or once it has
stayed stopped for ``DIGEST_STOPPED_GRACE_S`` seconds (``GRACE_S`` by default), whichever comes
first: a stopped worker ends the run after the grace, not after the collective timeout (300 s by
default). ``DIGEST_STOPPED_GRACE_S=off`` keeps a worker that you paused under a debugger (or
stopped on purpose) alive for as long as its peers' ``--timeout`` allows.

The other way round, a worker whose launcher is gone (killed by SIGKILL, which it cannot pass on)
ends itself within ``ORPHAN_POLL_S``: its peers are alive and would otherwise train on to the end
with no one to collect the run, writing into a folder that may be a new run's by then."""
from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path

from ..errors import UsageError

_DIR = "DIGEST_PID_DIR"
_LAUNCHER = "DIGEST_LAUNCHER_PID"
ORPHAN_POLL_S = 1.0
_PREFIX = "digest-pids-"
GRACE_ENV = "DIGEST_STOPPED_GRACE_S"
# How long a worker may stay stopped before the run ends naming it: long enough for a deliberate
# pause of a few seconds (a SIGSTOP / SIGCONT, a look with a debugger), short against the default
# collective timeout (300 s). A slow step never counts: a running worker is not in a stopped state.
GRACE_S = 30.0
# A process is stopped (SIGSTOP, Ctrl-Z) or held by a debugger at a breakpoint (ptrace)
_STOPPED = ("stopped", "tracing-stop")


def grace_from_env() -> float | None:
    """``DIGEST_STOPPED_GRACE_S``: seconds (> 0), or ``off`` (never end the run for a stopped
    worker: its peers' ``--timeout`` still does); ``GRACE_S`` when unset. UsageError otherwise."""
    text = os.environ.get(GRACE_ENV, "").strip().lower()
    if not text:
        return GRACE_S
    if text in ("off", "none", "never"):
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise UsageError(f"{GRACE_ENV}={text!r}: give seconds > 0, or off")
    return value


def register() -> None:
    """In a worker: record this process's pid under its rank, and end this process once the
    launcher is gone (both no-ops outside the launcher, e.g. under torchrun)."""
    where = os.environ.get(_DIR)
    if where and "RANK" in os.environ:
        Path(where, os.environ["RANK"]).write_text(str(os.getpid()))
    launcher = os.environ.get(_LAUNCHER, "")
    if launcher.isdigit():
        threading.Thread(target=_end_when_gone, args=(int(launcher),), daemon=True,
                         name="digest-orphan-guard").start()


def _end_when_gone(launcher: int) -> None:
    """SIGKILL this process once ``launcher`` has exited (gone, or a zombie not yet reaped)."""
    import psutil
    while True:
        time.sleep(ORPHAN_POLL_S)
        try:
            alive = psutil.Process(launcher).status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            alive = False
        if not alive:
            os.kill(os.getpid(), signal.SIGKILL)


def _sweep() -> None:
    """Remove the pid folders of launchers that are gone: ``__exit__`` removes its own, but a
    launcher killed by SIGKILL cannot (each folder is named after its launcher's pid)."""
    import psutil
    for d in Path(tempfile.gettempdir()).glob(f"{_PREFIX}*-*"):
        pid = d.name[len(_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(d, ignore_errors=True)


class Watch(threading.Thread):
    """``with Watch() as w: launch(..., env=w.env)``; ``w.stopped``: the ranks found stopped;
    ``w.ended``: {rank: seconds} of those ended because they stayed stopped ``grace`` seconds.

    Args:
        interval: seconds between two looks at the workers' states.
        grace: seconds a rank may stay stopped (None: no limit); ``grace_from_env()`` when not
            given."""

    def __init__(self, interval: float = 0.5, grace: float | None | str = "env"):
        super().__init__(daemon=True, name="digest-unresponsive")
        self.grace = grace_from_env() if grace == "env" else grace
        _sweep()
        self.dir = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-")
        self.env = {_DIR: self.dir, _LAUNCHER: str(os.getpid())}
        self.stopped: set[int] = set()
        self.ended: dict[int, float] = {}
        self._killed: set[int] = set()
        self.interval, self._done = interval, threading.Event()

    def __enter__(self) -> "Watch":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self.join()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _processes(self) -> dict:
        """{rank: (psutil.Process, its status)}; a process already gone has status "dead"."""
        import psutil
        out = {}
        for f in Path(self.dir).iterdir():
            try:
                p = psutil.Process(int(f.read_text()))
                out[int(f.name)] = (p, p.status())
            except psutil.Error:  # gone (or a zombie psutil cannot read)
                out[int(f.name)] = (None, psutil.STATUS_DEAD)
            except (ValueError, OSError):  # being written this instant
                pass
        return out

    def run(self) -> None:
        import psutil
        since: dict[int, float] = {}  # rank -> when it was first seen stopped, this time
        last = time.monotonic()
        while not self._done.wait(self.interval):
            now = time.monotonic()
            if now - last > 4 * self.interval + 1:  # this launcher was itself stopped (Ctrl-Z):
                since.clear()                        # its workers' stop was no one's failure
            last = now
            procs = self._processes()
            stopped = {r for r, (_, s) in procs.items() if s in _STOPPED}
            since = {r: since.get(r, now) for r in stopped}
            overdue = {r for r, t in since.items()
                       if self.grace is not None and now - t >= self.grace}
            peer_gone = any(s in (psutil.STATUS_DEAD, psutil.STATUS_ZOMBIE)
                            for _, s in procs.values())
            for rank in (stopped if peer_gone else overdue):
                if rank in overdue and rank not in self.ended:
                    self.ended[rank] = now - since[rank]
                try:
                    procs[rank][0].send_signal(signal.SIGKILL)
                    self._killed.add(rank)
                except psutil.Error:  # gone meanwhile
                    pass
            # stopped now, or killed while stopped (a rank that was stopped and resumed is not)
            self.stopped = stopped | self._killed

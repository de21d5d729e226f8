"""Workers that stop answering without exiting (a process stopped by SIGSTOP or a debugger, a
machine frozen under it), seen from the local launcher.

Their peers' collectives time out (``--timeout``) and exit as "a peer stopped answering"
(launch.PEER_LOST): on their own those exits name the survivors, not the silent rank, and
torch.distributed.elastic then waits 30 s for the stopped process to honour a SIGTERM it cannot
receive. So each worker records its pid under its rank (``register``); the launcher's ``Watch``
thread notes every rank whose process is stopped and, once another rank has exited, SIGKILLs the
stopped ones (the run is over: nothing they hold can be saved) and names them."""
from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
from pathlib import Path

_DIR = "DIGEST_PID_DIR"
_PREFIX = "digest-pids-"


def register() -> None:
    """In a worker: record this process's pid under its rank (a no-op outside the launcher)."""
    where = os.environ.get(_DIR)
    if where and "RANK" in os.environ:
        Path(where, os.environ["RANK"]).write_text(str(os.getpid()))


def _sweep() -> None:
    """Remove the pid folders of launchers that are gone: ``__exit__`` removes its own, but a
    launcher killed by SIGKILL cannot (each folder is named after its launcher's pid)."""
    import psutil
    for d in Path(tempfile.gettempdir()).glob(f"{_PREFIX}*-*"):
        pid = d.name[len(_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(d, ignore_errors=True)


class Watch(threading.Thread):
    """``with Watch() as w: launch(..., env=w.env)``; ``w.stopped``: the ranks found stopped."""

    def __init__(self, interval: float = 0.5):
        super().__init__(daemon=True, name="digest-unresponsive")
        _sweep()
        self.dir = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-")
        self.env = {_DIR: self.dir}
        self.stopped: set[int] = set()
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
        while not self._done.wait(self.interval):
            procs = self._processes()
            self.stopped |= {r for r, (_, s) in procs.items() if s == psutil.STATUS_STOPPED}
            if any(s in (psutil.STATUS_DEAD, psutil.STATUS_ZOMBIE) for _, s in procs.values()):
                for rank in self.stopped:
                    p = procs.get(rank, (None, None))[0]
                    try:
                        if p is not None:
                            p.send_signal(signal.SIGKILL)
                    except psutil.Error:  # gone meanwhile
                        pass

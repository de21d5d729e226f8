"""Run a command as a user would (a real subprocess in a session of its own), watching every
process it starts, so that a caller (the reliability tests, the fault campaign) can say how it
ended and whether anything outlived it."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil


@dataclass
class Watched:
    rc: int
    stdout: str
    stderr: str
    seconds: float
    survivors: list  # descendants still alive (not zombies) 5 s after the command ended

    @property
    def lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _kill(procs) -> None:
    """SIGKILL every process of ``procs`` still alive (not one that already went)."""
    for p in procs:
        if alive(p):
            try:
                p.kill()
            except psutil.Error:
                pass


def terminal_signals() -> None:
    """In the child: SIGINT and SIGQUIT as in a terminal (a shell's background job ignores them)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def run(argv: list, cwd, env: dict, timeout: float = 180, interrupt_after: float | None = None,
        interrupt_when: Path | None = None) -> Watched:
    """``argv`` in ``cwd`` with exactly ``env``; ``interrupt_after`` seconds, or once the file
    ``interrupt_when`` exists: Ctrl-C, i.e. SIGINT to the whole process group, as a terminal sends
    it (``seconds`` then counts from the interrupt). Past ``timeout`` seconds the group is
    SIGKILLed, with every process it started that left the group, and TimeoutError raised.
    Survivors are SIGKILLed after they are counted."""
    cwd = Path(cwd)
    cwd.mkdir(parents=True, exist_ok=True)
    out, err = cwd / f".out{time.monotonic_ns()}", cwd / f".err{time.monotonic_ns()}"
    t0 = time.monotonic()
    with open(out, "w") as fo, open(err, "w") as fe:
        proc = subprocess.Popen([str(a) for a in argv], cwd=cwd, env=env, stdout=fo, stderr=fe,
                                start_new_session=True, preexec_fn=terminal_signals)
        seen: dict[int, psutil.Process] = {}
        while proc.poll() is None:
            due = interrupt_after is not None and time.monotonic() - t0 > interrupt_after
            if due or (interrupt_when is not None and Path(interrupt_when).exists()):
                os.killpg(proc.pid, signal.SIGINT)
                interrupt_after, interrupt_when, t0 = None, None, time.monotonic()
            if time.monotonic() - t0 > timeout:  # the group, and whatever left it (setsid)
                os.killpg(proc.pid, signal.SIGKILL)
                _kill(seen.values())
                proc.wait()
                raise TimeoutError(f"{' '.join(map(str, argv))} hung (> {timeout:.0f} s)")
            try:
                for c in psutil.Process(proc.pid).children(recursive=True):
                    seen.setdefault(c.pid, c)
            except psutil.Error:
                pass
            time.sleep(0.1)
    seconds = time.monotonic() - t0
    deadline = time.monotonic() + 5
    while any(alive(p) for p in seen.values()) and time.monotonic() < deadline:
        time.sleep(0.2)
    survivors = [p.pid for p in seen.values() if alive(p)]
    _kill(seen.values())  # never leave them behind, whatever the caller concludes
    result = Watched(proc.returncode, out.read_text(), err.read_text(), seconds, survivors)
    out.unlink()
    err.unlink()
    return result

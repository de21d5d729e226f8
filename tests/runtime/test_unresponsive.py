"""digest/runtime/unresponsive.py on plain processes: a stopped rank is noted, and killed once another
rank has exited; a running one is left alone."""
from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import psutil

from digest.runtime.unresponsive import Watch


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen(["sleep", "60"])


def test_a_stopped_rank_is_named_and_killed_once_a_peer_exits():
    ranks = [_sleeper() for _ in range(3)]
    try:
        with Watch(interval=0.05) as watch:
            for rank, p in enumerate(ranks):
                Path(watch.dir, str(rank)).write_text(str(p.pid))
            ranks[1].send_signal(signal.SIGSTOP)
            deadline = time.monotonic() + 10
            while watch.stopped != {1} and time.monotonic() < deadline:  # noted at its next poll
                time.sleep(0.05)
            assert watch.stopped == {1} and ranks[1].poll() is None  # no peer gone: waits
            ranks[0].kill()  # a peer's collective timed out: it exits
            ranks[0].wait()
            deadline = time.monotonic() + 10
            while ranks[1].poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        assert ranks[1].returncode == -signal.SIGKILL
        assert ranks[2].poll() is None  # running: left to the launcher
        assert not Path(watch.dir).exists()
    finally:
        for p in ranks:
            p.kill()
            p.wait()


def test_register_writes_the_pid_under_the_rank(tmp_path, monkeypatch):
    from digest.runtime.unresponsive import register
    monkeypatch.setenv("DIGEST_PID_DIR", str(tmp_path))
    monkeypatch.setenv("RANK", "3")
    register()
    assert (tmp_path / "3").read_text() == str(psutil.Process().pid)


def test_a_dead_launchers_pid_folder_is_swept(tmp_path, monkeypatch):
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen(["true"])
    dead.wait()
    gone = tmp_path / f"digest-pids-{dead.pid}-abc"  # a launcher SIGKILLed mid-run left it
    mine = tmp_path / f"digest-pids-{psutil.Process().pid}-def"  # a live launcher's
    other = tmp_path / "digest-pids-xyz"  # not named after a pid: not ours to judge
    for d in (gone, mine, other):
        d.mkdir()
    watch = Watch()
    assert not gone.exists() and mine.exists() and other.exists()
    assert Path(watch.dir).parent == tmp_path and Path(watch.dir).name.startswith(mine.name[:-3])

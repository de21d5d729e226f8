"""digest/runtime/unresponsive.py on plain processes: a stopped rank is noted, and killed once another
rank has exited or once it stayed stopped for the grace; a running one, one resumed within the
grace, and any with the grace off are left alone."""
from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from digest.errors import UsageError
from digest.runtime.unresponsive import GRACE_ENV, GRACE_S, Watch, grace_from_env


@contextlib.contextmanager
def watched(count: int, **watch_args):
    """``count`` sleeping processes registered as ranks 0.. with a running ``Watch``; yields
    (watch, processes); every process is killed afterwards."""
    ranks = [subprocess.Popen(["sleep", "60"]) for _ in range(count)]
    try:
        with Watch(interval=0.05, **watch_args) as watch:
            for rank, p in enumerate(ranks):
                Path(watch.dir, str(rank)).write_text(str(p.pid))
            yield watch, ranks
    finally:
        for p in ranks:
            p.kill()
            p.wait()


def _until(condition, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_a_stopped_rank_is_named_and_killed_once_a_peer_exits():
    with watched(3, grace=None) as (watch, ranks):
        ranks[1].send_signal(signal.SIGSTOP)
        _until(lambda: watch.stopped == {1})  # noted at its next poll
        assert watch.stopped == {1} and ranks[1].poll() is None  # no peer gone: waits
        ranks[0].kill()  # a peer's collective timed out: it exits
        ranks[0].wait()
        _until(lambda: ranks[1].poll() is not None)
        assert ranks[1].returncode == -signal.SIGKILL
        assert ranks[2].poll() is None  # running: left to the launcher
    assert not Path(watch.dir).exists()


def test_a_rank_stopped_for_the_grace_is_killed_and_named_without_a_peer_exiting():
    with watched(2, grace=0.6) as (watch, ranks):
        t0 = time.monotonic()
        ranks[1].send_signal(signal.SIGSTOP)
        _until(lambda: ranks[1].poll() is not None)
        waited = time.monotonic() - t0
        assert ranks[1].returncode == -signal.SIGKILL and 0.6 <= waited < 5, waited
        assert watch.stopped == {1} and set(watch.ended) == {1} and watch.ended[1] >= 0.6
        assert ranks[0].poll() is None  # running: left alone


def test_a_rank_resumed_within_the_grace_is_left_alone_and_not_named():
    with watched(2, grace=1.5) as (watch, ranks):
        ranks[1].send_signal(signal.SIGSTOP)
        _until(lambda: watch.stopped == {1})
        assert watch.stopped == {1}
        ranks[1].send_signal(signal.SIGCONT)  # a short pause (a look with a debugger)
        _until(lambda: watch.stopped == set())
        time.sleep(2)  # past the grace: the pause's clock was reset when it resumed
        assert watch.stopped == set() and watch.ended == {} and ranks[1].poll() is None


def test_with_the_grace_off_a_stopped_rank_is_only_noted(monkeypatch):
    monkeypatch.setenv(GRACE_ENV, "off")
    with watched(2) as (watch, ranks):  # the grace from the environment
        assert watch.grace is None
        ranks[1].send_signal(signal.SIGSTOP)
        _until(lambda: watch.stopped == {1})
        time.sleep(1)
        assert watch.stopped == {1} and watch.ended == {} and ranks[1].poll() is None


@pytest.mark.parametrize("text, want", [("", GRACE_S), ("2.5", 2.5), (" OFF ", None),
                                        ("never", None)])
def test_the_grace_from_the_environment(monkeypatch, text, want):
    monkeypatch.setenv(GRACE_ENV, text)
    assert grace_from_env() == want


@pytest.mark.parametrize("text", ["0", "-1", "soon", "inf", "nan"])
def test_a_bad_grace_is_a_usage_error_naming_the_variable(monkeypatch, text):
    monkeypatch.setenv(GRACE_ENV, text)
    with pytest.raises(UsageError, match=f"^{GRACE_ENV}="):
        grace_from_env()


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


@pytest.mark.slow  # two interpreters from scratch
def test_a_worker_whose_launcher_was_killed_ends_itself(tmp_path):
    """A launcher SIGKILLed cannot stop its workers; each ends itself within about a second of
    the launcher's end (``DIGEST_LAUNCHER_PID``, set by ``Watch.env``), where its peers would
    train on. The worker here: a process that registered under that variable, then sleeps."""
    import sys
    worker = ("import os, time; from digest.runtime.unresponsive import register; register(); "
              "print(os.getpid(), flush=True); time.sleep(60)")
    launcher = subprocess.Popen(  # the launcher: starts the worker with its own pid, then waits
        [sys.executable, "-c", "import os, subprocess, sys, time; "
         "p = subprocess.Popen([sys.executable, '-c', sys.argv[1]], stdout=sys.stdout, "
         "env={**os.environ, 'DIGEST_LAUNCHER_PID': str(os.getpid())}); time.sleep(60)", worker],
        stdout=subprocess.PIPE, text=True)
    try:
        pid = int(launcher.stdout.readline())
        assert psutil.pid_exists(pid)
        launcher.kill()
        launcher.wait()
        _until(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie")
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
    finally:
        launcher.kill()


def test_the_watch_names_its_launcher_for_the_workers():
    watch = Watch()
    assert watch.env["DIGEST_LAUNCHER_PID"] == str(psutil.Process().pid)

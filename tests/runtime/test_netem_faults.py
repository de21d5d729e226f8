"""Faults on the emulated wire: a worker's link taken down for good ends the run with one line
naming it; one back within the timeout lets the run go on, with the uninterrupted run's results.
Behind 50 Mbit/s links, a link cut for good, a worker stopped and one killed each end the run in
one line naming the rank, and a resume gives the uninterrupted run's every row. In network
namespaces, from scratch (slow tier); skipped with the reason where namespaces are not available."""
from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest

from helpers import cli, metrics_of

pytestmark = pytest.mark.slow


def _take_link_down(out, runs, seconds_down: float | None, when: dict):
    """Once the run has progress (progress.csv) take rank 1's link down inside its namespace
    (`ip link set eth0 down`, as an operator or a failing cable would), for good or for
    ``seconds_down``. Records "down" / "up" only when the command worked: a run that ended
    first (its namespace gone) leaves them unset, so the test fails by its assertion, not by an
    exception in this thread."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        ns = runs.namespaces("-w1")  # this test's run's rank 1
        if ns and (out / "progress.csv").exists():
            break
        time.sleep(0.1)
    else:
        return
    link = ["ip", "-n", ns[0], "link", "set", "eth0"]
    if subprocess.run([*link, "down"], capture_output=True).returncode == 0:
        when["down"] = time.monotonic()
    if seconds_down is not None and "down" in when:
        time.sleep(seconds_down)
        if subprocess.run([*link, "up"], capture_output=True).returncode == 0:
            when["up"] = time.monotonic()


def _run_with_link_fault(tmp_path, runs, seconds_down, epochs):
    out, when, timeout = tmp_path / "run", {}, 10
    fault = threading.Thread(target=_take_link_down, args=(out, runs, seconds_down, when),
                             daemon=True)
    fault.start()
    start = time.monotonic()
    done = cli(["train", "--dataset", "synthetic:nodes=300,seed=1", "--workers", 2, "--hidden", 16,
                "--epochs", epochs, "--timeout", timeout, "--no-progress", "--out", out,
                "--emulate-network", "100mbit"], tmp_path / "data", tmp_path, timeout=300)
    fault.join(timeout=10)
    assert "down" in when, "the run ended before its link went down: " + done.stderr[-2000:]
    # the launcher's exit - link down; `when` says whether the link came back while the run lived
    return done, out, start + done.seconds - when["down"], timeout, when


def test_a_link_taken_down_ends_the_run_with_one_line_naming_it(tmp_path, clean):
    """Rank 1's link goes down mid-run for good: no reset reaches anyone, so the collective
    in flight times out (--timeout 10); the run ends with one line that names the lost rank and
    the cause, not before the timeout (it timed out: no reset ended it earlier); no result,
    nothing half-written, no namespace or process left."""
    done, out, after, timeout, _ = _run_with_link_fault(tmp_path, clean, None, 100000)
    assert done.rc == 1 and done.survivors == [], done.stderr[-2000:]
    line = done.lines[-1]
    assert line.startswith("error: lost worker rank ") and "peer stopped answering" in line, line
    assert line.endswith("; the emulated link of rank 1 was down"), line
    assert after > timeout - 1, after  # timed out, not reset (load only makes it later)
    assert not (out / "summary.json").exists() and not (out / "metrics.csv").exists()
    assert list(out.rglob("*.tmp")) == []


def test_a_link_back_within_the_timeout_lets_the_run_continue(tmp_path, clean):
    """Down for 3 s, then up (--timeout 10): TCP retransmits, gloo never notices; the run
    completes. 1,000 epochs (about 11 ms each here) so that the run is still going when the link
    comes back up: 60 could end in the second after the first progress.csv."""
    done, out, _, _, when = _run_with_link_fault(tmp_path, clean, 3.0, 1000)
    assert done.rc == 0 and done.survivors == [], done.stderr[-2000:]
    assert "up" in when, "the run ended before the link came back up"
    assert json.loads((out / "summary.json").read_text())["epochs"] == 1000


# -- faults behind a slow link, each followed by a resume equal to an uninterrupted run ----------
# digest/runtime/faults.py's hook acts at a step after the first committed checkpoint: rank 1
# SIGKILLed, SIGSTOPped, or its link cut (for good, or for a few seconds: ``cut,...,seconds=S``)
SLOW = ["--dataset", "synthetic:nodes=300,seed=1", "--workers", 2, "--hidden", 16, "--epochs", 24,
        "--checkpoint-every", 6, "--emulate-network", "50mbit", "--no-progress"]
AT = 8  # the fault's first step, with the checkpoint of step 6 committed


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, namespaces_here):
    """The run every faulted one must equal, behind the same 50 Mbit/s links (its metrics rows
    and its wall time)."""
    tmp = tmp_path_factory.mktemp("uninterrupted")
    done = cli(["train", *SLOW, "--timeout", 60, "--out", tmp / "run"], tmp / "data", tmp,
               timeout=300)
    assert done.rc == 0, done.stderr[-2000:]
    return metrics_of(tmp / "run" / "metrics.csv"), done.seconds


def _faulted(tmp_path, fault: str, timeout: float):
    out = tmp_path / "run"
    committed = out / "checkpoint" / "config.json"
    env = {"DIGEST_FAULT": f"{fault},rank=1,from={AT},after={committed}"}
    done = cli(["train", *SLOW, "--timeout", timeout, "--out", out], tmp_path / "data", tmp_path,
               env=env, timeout=300)
    return done, out


def _resumes_exactly(tmp_path, out, want) -> None:
    assert not (out / "summary.json").exists() and list(out.rglob("*.tmp")) == []
    resumed = cli(["train", "--resume", out, "--no-progress"], tmp_path / "data", tmp_path,
                  timeout=300)
    assert resumed.rc == 0 and resumed.survivors == [], resumed.stderr[-2000:]
    assert metrics_of(out / "metrics.csv") == want


def test_behind_a_slow_link_a_link_cut_for_seconds_is_ridden_out_exactly(tmp_path, clean,
                                                                           uninterrupted):
    """Rank 1's link down for 4 s (--timeout 20): TCP retransmits, the run finishes with the
    uninterrupted run's every row."""
    done, out = _faulted(tmp_path, "cut,seconds=4", 20)
    assert done.rc == 0 and done.survivors == [], done.stderr[-2000:]
    assert metrics_of(out / "metrics.csv") == uninterrupted[0]


@pytest.mark.parametrize("fault, says, within", [
    ("cut", "stopped answering); the emulated link of rank 1 was down", 90),  # the collective times out (60 s)
    ("stop", "rank 1 (stopped answering: its process stayed stopped for 30 s", 90),  # the grace
    ("kill", "rank 1 (killed by signal SIGKILL)", 30)])  # at once
def test_behind_a_slow_link_a_lost_rank_ends_the_run_naming_it_then_resume_is_exact(
        tmp_path, clean, uninterrupted, fault, says, within):
    """--timeout 60 behind 50 Mbit/s: rank 1's link cut for good, rank 1 stopped, or rank 1
    killed ends the run in one line naming rank 1, within ``within`` seconds of the fault (the run
    reached it in less than the uninterrupted run's time); leaves nothing behind; ``--resume``
    then gives the uninterrupted run's every row."""
    done, out = _faulted(tmp_path, fault, 60)
    assert done.rc == 1 and done.survivors == [] and "Traceback" not in done.stderr, \
        done.stderr[-2000:]
    line = done.lines[-1]
    # a cut names the rank whose link was down after the ranks whose collectives failed
    assert line.startswith("error: lost worker rank ") and says in line, line
    assert done.seconds < within + uninterrupted[1], (done.seconds, uninterrupted[1])
    _resumes_exactly(tmp_path, out, uninterrupted[0])

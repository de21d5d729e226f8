"""Faults on the emulated wire : a worker's link taken down for
good ends the run with one line naming it; one back within the timeout lets the run go on. In
network namespaces, from scratch (slow tier); skipped where namespaces are not available."""
from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest

from helpers import cli

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

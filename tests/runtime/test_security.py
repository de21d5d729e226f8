"""A single-node run listens on loopback only (issue 21): torch.distributed has no authentication,
so a port open on every interface lets anyone who finds it write into the run's store."""
from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from experiments.watch import terminal_signals as _terminal_signals
from helpers import DATASET, ROOT


def _listeners(root: psutil.Process) -> dict:
    """{(pid, address, port)} of every listening TCP socket and unconnected UDP socket of
    ``root`` and its descendants, right now."""
    found = {}
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return found
    for p in procs:
        try:
            for c in p.net_connections("inet"):
                if c.status == psutil.CONN_LISTEN or (c.type == 2 and not c.raddr):
                    found[(p.pid, c.laddr.ip, c.laddr.port)] = p.pid
        except psutil.Error:
            pass
    return found


@pytest.mark.slow
@pytest.mark.parametrize("method", ["exact", "digest-async"])
def test_a_single_node_run_listens_on_loopback_only(method, tmp_path):
    """Every listener of a 2-worker run (the launcher's rendezvous stores, gloo's pairs; for
    DIGEST-A also the rpc store and the TensorPipe agents of the workers and the server), sampled
    while it trains, is on a loopback address."""
    env = {**os.environ, "DIGEST_DATA": str(tmp_path / "data"), "PYTHONPATH": str(ROOT)}
    err = open(tmp_path / "err", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "digest", "train", "--dataset", DATASET, "--method", method,
         "--workers", "2", "--hidden", "16", "--epochs", "100000", "--eval-every", "100000",
         "--no-progress", "--out", str(tmp_path / "run")], cwd=tmp_path, env=env,
        stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
        preexec_fn=_terminal_signals)
    owners = 1 + 2 + (method == "digest-async")  # launcher, workers (and DIGEST-A's server)
    seen, deadline, enough = {}, time.monotonic() + 120, None
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            seen.update(_listeners(psutil.Process(proc.pid)))
            if enough is None and len(set(seen.values())) >= owners:
                enough = time.monotonic() + 2.0  # keep sampling a little: late listeners too
            if enough is not None and time.monotonic() > enough:
                break
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the run stops its workers itself
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        err.close()
    assert len(set(seen.values())) >= owners, (seen, (tmp_path / "err").read_text()[-2000:])
    outside = sorted(k for k in seen if not ipaddress.ip_address(k[1]).is_loopback)
    assert outside == [], f"listening outside loopback (pid, address, port): {outside}"

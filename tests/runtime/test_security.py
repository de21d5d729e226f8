"""A single-node run listens on loopback only: torch.distributed has no authentication,
so a port open on every interface lets anyone who finds it write into the run's store."""
from __future__ import annotations

import ipaddress
import threading
import time

import psutil
import pytest

from helpers import DATASET, cli


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


def _launcher(out) -> psutil.Process | None:
    """The run's own process (`python -m digest train ... --out OUT`), once it exists."""
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if str(out) in cmd and "digest" in cmd and "train" in cmd:
            return p
    return None


@pytest.mark.slow
@pytest.mark.parametrize("method", ["exact", "digest-async"])
def test_a_single_node_run_listens_on_loopback_only(method, tmp_path):
    """Every listener of a 2-worker run (the launcher's rendezvous stores, gloo's pairs; for
    DIGEST-A also the rpc store and the TensorPipe agents of the workers and the server), sampled
    while it trains, is on a loopback address. The run is helpers.cli's (its own session); once
    the sampling is done, Ctrl-C ends it."""
    out, stop, result = tmp_path / "run", tmp_path / "stop", {}
    args = ["train", "--dataset", DATASET, "--method", method, "--workers", 2, "--hidden", 16,
            "--epochs", 100000, "--eval-every", 100000, "--no-progress", "--out", out]
    run = threading.Thread(target=lambda: result.update(done=cli(
        args, tmp_path / "data", tmp_path, interrupt_when=stop)), daemon=True)
    run.start()
    owners = 1 + 2 + (method == "digest-async")  # launcher, workers (and DIGEST-A's server)
    seen, deadline, enough = {}, time.monotonic() + 240, None
    try:
        while run.is_alive() and time.monotonic() < deadline:
            launcher = _launcher(out)
            if launcher is not None:
                seen.update(_listeners(launcher))
            if enough is None and len(set(seen.values())) >= owners:
                enough = time.monotonic() + 2.0  # keep sampling a little: late listeners too
            if enough is not None and time.monotonic() > enough:
                break
            time.sleep(0.2)
    finally:
        stop.touch()  # Ctrl-C: the run stops its workers itself
        run.join(timeout=300)
    err = result["done"].stderr[-2000:] if "done" in result else "(the run did not end)"
    assert len(set(seen.values())) >= owners, (seen, err)
    outside = sorted(k for k in seen if not ipaddress.ip_address(k[1]).is_loopback)
    assert outside == [], f"listening outside loopback (pid, address, port): {outside}"
    assert result["done"].survivors == []

"""digest/asynchronous/server.py: the server's bookkeeping and budget; its process ending the run when it
cannot join, and going when its rank 0 is killed. Started, seeded and serving real workers, it is
exercised by every DIGEST-A run in test_async_runs.py."""
from __future__ import annotations

import select
import signal
import socket
import subprocess
import sys
import threading
import time

import psutil
import pytest
import torch

from digest.asynchronous.server import ParameterServer, ServerProcess
from experiments.studies.faults.watch import alive as _alive
from helpers import ROOT


def test_server_counts_version_lag_and_serves_only_newer_blocks():
    model = torch.nn.Linear(3, 2)
    srv = ParameterServer(model.parameters(), lr=0.1, weight_decay=0.0, world=2, budget=3,
                          snapshot_versions=[2])
    g = torch.ones(sum(p.numel() for p in model.parameters()))
    flat0, v, steps, lag, done = srv.push_grads(0, 0, g)  # worker 0 computed on version 0
    assert (v, steps, lag, done) == (1, [1, 0], 0, False)
    _, v, steps, lag, done = srv.push_grads(1, 0, g)  # worker 1 also on version 0: one missed
    assert (v, steps, lag, done) == (2, [1, 1], 1, False)
    assert 2 in srv.snapshots and srv.snapshot(2)[1].numel() == g.numel()
    flat0.zero_()  # what a caller gets is a copy, not the server's parameters
    assert srv.params[0].abs().sum() > 0
    # the budget: the 3rd gradient is applied and its reply says done; later ones are dropped
    flat, v, steps, _, done = srv.push_grads(0, 2, g)
    assert flat is not None and (v, steps, done) == (3, [2, 1], True)
    before = srv.params[0].detach().clone()
    flat, v, steps, _, done = srv.push_grads(1, 1, g)
    assert flat is None and (v, steps, done) == (3, [2, 1], True)
    assert torch.equal(srv.params[0], before) and len(srv.times) == 3
    assert srv.times == sorted(srv.times)
    # rows: owner 0 sends 2 rows to worker 1 (none to itself), tagged with its step count; a
    # block is asked for by its push number (seq), which the server counts per owner
    srv.push_rows(0, 5, torch.arange(8.).view(2, 4), [0, 2])
    got = srv.pull_rows(1, known=[0, 0])
    assert got[1] is None and got[0][1:] == (5, 1)
    assert torch.equal(got[0][0], torch.arange(8.).view(2, 4))
    assert srv.pull_rows(1, known=[1, 0]) == [None, None]  # nothing newer than what it holds
    assert srv.pull_rows(0, known=[0, 0]) == [None, None]
    # the same tag pushed again (DIGEST-A's seed and its push after step 0 both carry tag 0:
    # see docs/digest-a.md) is still a newer block
    srv.push_rows(0, 5, torch.ones(2, 4), [0, 2])
    got = srv.pull_rows(1, known=[1, 0])
    assert got[0][1:] == (5, 2) and torch.equal(got[0][0], torch.ones(2, 4))


@pytest.mark.slow
def test_a_server_that_cannot_join_ends_the_run_with_one_line(capfd):
    with socket.socket() as s:  # a port nobody listens on (rank 0's rpc store is not there)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lost = threading.Event()
    codes = []
    proc = ServerProcess(2, timeout_s=3, on_early_exit=lambda code: (codes.append(code), lost.set()))
    proc.start("127.0.0.1", port)
    assert lost.wait(60), "the early exit was not noticed"
    assert codes == [1]
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: DIGEST-A's server process: "), err


@pytest.mark.slow
def test_the_server_goes_when_rank_0_is_killed(tmp_path):
    """A SIGKILLed rank 0 cannot stop its server: the server's watchdog sees its parent gone."""
    with socket.socket() as s:  # nobody listens: the server keeps trying to join for 60 s
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rank0 = subprocess.Popen(
        [sys.executable, "-c", "import time; from digest.asynchronous.server import ServerProcess; "
         f"p = ServerProcess(2, 60, on_early_exit=print); p.start('127.0.0.1', {port}); "
         "print(p.proc.pid, flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT)
    server = None
    try:
        ready, _, _ = select.select([rank0.stdout], [], [], 60)  # never a blocking read
        assert ready, "rank 0 printed no server pid within 60 s"
        server = psutil.Process(int(rank0.stdout.readline()))
        assert _alive(server)  # serving (trying to join)
        rank0.send_signal(signal.SIGKILL)
        rank0.wait()
        deadline = time.monotonic() + 20
        while _alive(server) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(server), "the server outlived its rank 0"
    finally:
        rank0.kill()
        if server is not None and _alive(server):
            server.kill()  # a failed test leaves nothing behind

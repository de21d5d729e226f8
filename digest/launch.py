"""The local launcher: ``--workers M`` starts M worker processes through torch.distributed's own
elastic launcher (the machinery behind torchrun), on a free port, with failures surfaced.

Under ``torchrun`` this module is bypassed: torchrun already started the workers and set
RANK / LOCAL_RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT.
"""
from __future__ import annotations

import logging
import os
import socket
import uuid


class WorkerFailed(RuntimeError):
    """One or more workers exited non-zero; the message names the ranks."""


def under_torchrun() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ and "MASTER_ADDR" in os.environ


def free_port() -> int:
    """A port the OS says is free right now (never a hard-coded one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(fn, args: tuple, nprocs: int, monitor_interval: float = 0.5):
    """Run ``fn(*args)`` in ``nprocs`` processes on this machine; returns rank 0's return value."""
    return launch_all(fn, args, nprocs, monitor_interval).get(0)


def launch_all(fn, args: tuple, nprocs: int, monitor_interval: float = 0.5) -> dict:
    """Run ``fn(*args)`` in ``nprocs`` processes; returns {rank: return value}.

    When any worker dies (signal, exception, exit code) the agent stops the others and we raise
    ``WorkerFailed`` naming the lost ranks.
    """
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    for name in ("torch.distributed.elastic", "torch.distributed.launcher"):
        logging.getLogger(name).setLevel(logging.ERROR)  # we report failures ourselves, once
    config = LaunchConfig(
        min_nodes=1, max_nodes=1, nproc_per_node=nprocs, run_id=uuid.uuid4().hex,
        rdzv_backend="c10d", rdzv_endpoint=f"127.0.0.1:{free_port()}", max_restarts=0,
        monitor_interval=monitor_interval, start_method="spawn",
    )
    try:
        results = elastic_launch(config, fn)(*args)
    except ChildFailedError as e:
        lost = []
        for rank, failure in sorted(e.failures.items()):
            how = (f"killed by signal {failure.signal_name()}" if failure.exitcode < 0
                   else f"exit code {failure.exitcode}")
            lost.append(f"rank {rank} ({how})")
        raise WorkerFailed("lost worker " + ", ".join(lost)) from None
    return results

"""A persistent group of M worker processes (real torch.distributed over gloo), driven call by call
from the benchmark process, so that a timed call is one distributed epoch or exchange loop."""
from __future__ import annotations

import multiprocessing as mp
import os
import sys


def _serve(conn, rank: int, world: int, port: int, make, args: tuple, sys_path: list) -> None:
    sys.path[:0] = [p for p in sys_path if p not in sys.path]
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    try:
        import warnings
        warnings.filterwarnings("ignore")
        import torch

        from digest.runtime import comm, perf
        from digest.training import metrics
        rt = comm.setup(120.0, "cpu")
        # as run.worker: the node's cores shared by its workers, allocator tuned
        torch.set_num_threads(max(1, metrics.available_cores() // world))
        perf.tune_allocator()
        fns = make(rt, *args)
        conn.send(("ok", None))
        while True:
            name, a = conn.recv()
            if name == "close":
                comm.teardown()
                conn.send(("ok", None))
                return
            conn.send(("ok", fns[name](*a)))
    except BaseException as e:  # noqa: BLE001 - reported by the caller
        conn.send(("error", f"rank {rank}: {type(e).__name__}: {e}"))


class WorkerGroup:
    """``make(runtime, *args) -> {name: fn}`` runs once in every worker; ``call(name, *a)`` runs
    ``fn(*a)`` on every rank and returns the results by rank."""

    def __init__(self, world: int, make, *args):
        from digest.runtime.launch import free_port
        ctx = mp.get_context("spawn")
        port = free_port()
        self.conns, self.procs = [], []
        for r in range(world):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_serve, args=(child, r, world, port, make, args, list(sys.path)),
                            daemon=True)
            p.start()
            self.conns.append(parent)
            self.procs.append(p)
        self._gather()

    def _gather(self) -> list:
        out = []
        for c in self.conns:
            tag, val = c.recv()
            if tag == "error":
                self.kill()
                raise RuntimeError(val)
            out.append(val)
        return out

    def call(self, name: str, *a) -> list:
        for c in self.conns:
            c.send((name, a))
        return self._gather()

    def kill(self) -> None:
        for p in self.procs:
            if p.is_alive():
                p.kill()
            p.join(timeout=10)

    def close(self) -> None:
        try:
            for c in self.conns:
                c.send(("close", ()))
            for c in self.conns:
                c.recv()
        except (OSError, EOFError):
            pass
        for p in self.procs:
            p.join(timeout=30)
        self.kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

"""DIGEST-A's loop (docs/digest-a.md): ``AsyncTrainer`` swaps only Trainer's epoch loop; every
worker trains without a barrier against the server process that rank 0 starts, the budget of
M x epochs gradients is global, checkpoints are taken at a held server version."""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from ..methods import register
from ..policies.store import StoreOptions
from ..runtime import comm
from ..training import checkpoint, records
from ..files import write_text_atomic
from ..training.metrics import csv_text
from ..training.trainer import PROGRESS, Loop, Trainer
from . import server
from .client import AsyncClient, AsyncParamPolicy, AsyncStaleHalo, load_flat, snapshot_epochs, to_cpu

@dataclass
class Position:
    """Where one worker stands in a DIGEST-A run (its checkpoint file keeps it): the number of its
    next step, the records of its applied steps, its computed steps the server dropped, and its
    loop clock in seconds (pauses for checkpoints, and the time between a kill and --resume,
    excluded)."""
    step: int = 0
    rows: list = field(default_factory=list)
    discarded: int = 0
    elapsed: float = 0.0


class AsyncTrainer(Trainer):
    """Trainer whose epoch loop has no collective between the start-up fill and the end: each
    worker steps at its own pace, keeping its own records, until the server's budget of M x epochs
    gradients is spent; then one barrier, exact collective evaluation of the server's parameter
    snapshots, and rank 0 merges the records into one row per server epoch. With
    ``--checkpoint-every N`` the server holds every N server epochs: every worker stops, and
    together they write a checkpoint (module docstring)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.pos = Position()
        self.server_state = None  # rank 0, while checkpointing or resuming: the server's state

    # -- checkpoints ---------------------------------------------------------------------------
    def restore(self) -> None:
        super().restore()
        if self.start_epoch > self.cfg.optim.epochs:
            raise ValueError(f"the checkpoint is at server epoch {self.start_epoch}, beyond "
                             f"--epochs {self.cfg.optim.epochs}")

    def extra_state(self) -> dict:
        return {"position": asdict(self.pos), "client": self.params.client.state_dict(),
                "server": self.server_state}

    def load_extra_state(self, state: dict) -> None:
        self.pos = Position(**state["position"])
        self.params.client.load_state_dict(state["client"])
        self.server_state = state["server"]

    def _checkpoint(self, out_dir: Path, epoch: int) -> None:
        """Collective, while the server holds at version M x ``epoch`` (or at the end of the
        budget): rank 0 fetches the server's state, every rank writes its file (checkpoint.save
        commits the set once all are in place), rank 0 writes progress.csv; then rank 0 releases
        the server, and a barrier keeps everyone from pushing before it is released (a gradient
        pushed earlier would be dropped and stop its worker again, alone)."""
        rank = self.rt.rank
        if rank == 0:
            self.server_state = comm.rpc_sync(server.NAME, server.state_dict)
        checkpoint.save(out_dir, self, epoch)
        everyone = comm.all_gather_object({"rows": self.pos.rows})
        if rank == 0:  # progress of an unfinished run (no evaluation: that comes at the end)
            M = self.rt.world_size
            rows = records.server_epochs(everyone, {}, self.server_state["times"], M)
            write_text_atomic(out_dir / PROGRESS, csv_text(rows), fsync=False)
            self.server_state = None
            comm.rpc_sync(server.NAME, server.release)
        comm.barrier()

    # -- training ------------------------------------------------------------------------------
    def _seed_server(self, snap_epochs: list[int]) -> None:
        """Rank 0, once everyone has joined: the server gets the initial parameters, or (--resume)
        the state it had at the checkpoint."""
        cfg, M = self.cfg, self.rt.world_size
        # lr / M per arrival: M arrivals (a server epoch) ~ one synchronous step (docstring)
        comm.rpc_sync(server.NAME, server.setup, (
            [p.detach().cpu() for p in self.model.parameters()], cfg.optim.lr / M,
            cfg.optim.weight_decay, M, M * cfg.optim.epochs, [M * e for e in snap_epochs],
            M * cfg.runtime.checkpoint_every))
        if self.server_state is not None:
            comm.rpc_sync(server.NAME, server.load_state, (to_cpu(self.server_state),))
            self.server_state = None

    def _steps(self, loop: Loop) -> None:
        """This worker's steps, at its own pace, until a reply says stop (the budget is spent, or
        the server holds for a checkpoint); a step whose gradient arrives after that is dropped
        (``discarded``) and runs again, with the same number, after a hold."""
        client, M, pos = self.params.client, self.rt.world_size, self.pos
        t_start = time.perf_counter() - pos.elapsed  # the clock goes on where it stopped
        while True:
            step = pos.step
            # the step that spends the budget does not sleep: the worker stops as soon as it is
            # done (one applied at a hold sleeps as it would have without the checkpoint)
            rec = loop.step(step, lambda: self.step(step), sleep=lambda: not client.done,
                            applied=lambda: self.params.applied)
            if rec is None:
                pos.discarded += 1
                break
            loop.prof.after(step)
            pos.rows.append({**rec, "t_end": time.perf_counter() - t_start})
            loop.bar.update(client.version // M - loop.bar.n)
            pos.step += 1
            if client.stop:
                break
        pos.elapsed = time.perf_counter() - t_start

    def train(self, out_dir: Path) -> dict:
        cfg, rank, M = self.cfg, self.rt.rank, self.rt.world_size
        epochs, timeout, every = cfg.optim.epochs, cfg.runtime.timeout, cfg.runtime.checkpoint_every
        snap_epochs = snapshot_epochs(epochs, cfg.optim.eval_every)
        proc = server.ServerProcess(M + 1, timeout) if rank == 0 else None
        client = self.params.client
        ok, times, snaps = False, [], {}
        try:
            comm.rpc_init(timeout, extra=1, start_extra=proc.start if proc else None)
            if rank == 0:  # everyone has joined: seed the server
                proc.joined.set()
                self._seed_server(snap_epochs)
            # start-up: the exact fill that seeds the store (collective); a resumed worker has its
            # store already (the server has everyone's blocks), so this does nothing then
            self.policy.before_step(self.pos.step, self.forward)
            if rank == 0:  # the server's clock starts (or goes on) as the workers are let go
                comm.rpc_sync(server.NAME, server.start_clock)
            comm.barrier()  # the store is seeded by everyone: from here on, nobody waits
            loop = Loop(self, epochs, f"{cfg.method} x{M} (server epochs)", record_sleep=True,
                        first=self.pos.step)
            while True:  # ends: every push either spends one unit of the finite budget or stops
                self._steps(loop)
                # every worker stopped at the same version (the server applies nothing more
                # until released), so all of them agree on what comes next
                held, epoch = not client.done, client.version // M
                if held or (every and epoch % every == 0 and epoch > self.start_epoch):
                    self._checkpoint(out_dir, epoch)
                if not held:
                    break
            # a worker whose budget ran out before or inside the window says so
            loop.close(len(self.pos.rows))
            if rank == 0:  # the budget is spent, so the server's record is final: fetch it
                times = comm.rpc_sync(server.NAME, server.times)
                snaps = {v // M: comm.rpc_sync(server.NAME, server.snapshot, (v,))
                         for v in comm.rpc_sync(server.NAME, server.kept)}
            ok = True
        finally:  # graceful = wait for every worker's last call; after an error: just stop
            try:
                comm.rpc_shutdown(graceful=ok, timeout_s=timeout)
            finally:  # even if the shutdown itself failed (a peer lost at the very end)
                if proc is not None:
                    proc.stop(graceful=ok)
        evals = self._evaluate_snapshots(snaps)
        pos = self.pos
        everyone = comm.all_gather_object({"rows": pos.rows, "loop_time": pos.elapsed,
                                           "discarded": pos.discarded,
                                           "factor": loop.straggle.factor})
        if rank != 0:
            return {}
        self.rows = records.server_epochs(everyone, evals, times, M)
        return records.async_summary(everyone, self.rows)

    def _evaluate_snapshots(self, snaps: dict) -> dict[int, dict]:
        """Exact collective inference of each kept server snapshot (rank 0 holds them, as
        ``snaps[e] = (wall s, flat parameters)``, and broadcasts each; which epochs: rank 0's
        list, since a resumed run may keep snapshots of the schedule it was started with too);
        the model ends holding the server's final parameters."""
        M = self.rt.world_size
        dev = next(self.model.parameters()).device
        size = sum(p.numel() for p in self.model.parameters())
        out = {}
        for e in comm.all_gather_object(sorted(snaps))[0]:
            if self.rt.rank == 0:
                wall, flat = snaps.pop(e)
                flat = flat.to(dev)
            else:
                wall, flat = None, torch.empty(size, device=dev)
            comm.broadcast_(flat)
            load_flat(self.model, flat)
            t1 = time.perf_counter()
            out[e] = {**self.evaluate(), "eval_time": time.perf_counter() - t1,
                      "server_version": M * e, "server_wall_time": wall}
        return out


@register("digest-async", "DIGEST-A: asynchronous DIGEST, parameter server + representation store "
          "over rpc in a server process (--slow-workers to add stragglers)",
          options=(StoreOptions,), trainer=AsyncTrainer, asynchronous=True,
          traffic="asynchronous: its pushes, pulls and trajectory follow the workers' timing")
def digest_async(cfg, part, plan, model):
    M = comm.world_size()
    client = AsyncClient(comm.rank(), M, cfg.runtime.timeout, budget=M * cfg.optim.epochs)
    return AsyncStaleHalo(part, plan, model, cfg, client), AsyncParamPolicy(client)

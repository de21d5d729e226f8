"""DIGEST-A: asynchronous DIGEST for heterogeneous workers (METHODS.md section 4, last bullets).

No barrier between workers while they train. A server process of their own (digest/server.py,
started by rank 0; not rank 0 itself, which would serve its own worker first) hosts the parameter
server and the representation store, both reached through torch.distributed.rpc (their handlers
run in its rpc thread pool, under one lock):

- every step, each worker runs forward/backward on its partition with a stale halo (layer 0: the
  exact input features as always; hidden layers: rows from the store), sends its gradient to the
  server, which applies it at once (Adam) and answers with the latest parameters, the new version
  number, every worker's step count and whether the training budget is spent;
- every I of its OWN steps a worker pushes the hidden rows of its boundary nodes (one block per
  destination worker, all hidden layers side by side, tagged with the owner's step count) and
  pulls, for its halo, whatever blocks the store holds that are newer than the ones it has.

Start-up (one exact forward that fills the store, as in synchronous DIGEST) and the end (final
barrier, evaluation) are collective; the training steps in between are not. Evaluation never
interrupts training: the server snapshots its parameters at chosen server epochs (with their wall
time), and after training every snapshot is evaluated with exact collective inference, which
gives the accuracy-versus-time curve without a barrier during training.

What an "epoch" is here: M gradients applied by the server (M = workers) are one epoch's worth of
work, a SERVER EPOCH: synchronous training applies one full-graph gradient per epoch, the sum of
the M workers' partition gradients, and DIGEST-A applies M partition gradients (each scaled to
estimate the full one, see below) in that time, from whichever workers delivered them. Server
epoch e (1-based) is complete when the server's version reaches M x e. A worker's own step (one
forward/backward over its partition) is a STEP; fast workers take more steps than slow ones.

Stopping rule: a global budget of M x ``epochs`` gradients. The server applies gradients until
the budget is spent; the reply to the gradient that spends it says so (``done``), and so does the
reply to any later push, whose gradient is then dropped, not applied. Every worker stops at the
first reply that says done: nobody trains alone on stale parameters at the end (which is what a
per-worker count of ``epochs`` own steps did: the fast workers finished first and the straggler's
last steps pulled the final parameters towards its partition). Each worker still in flight when
the budget is spent loses at most one computed step (counted in ``discarded_by_worker``).

Metrics: metrics.csv has one row per server epoch (``epoch`` = e - 1, 0-based as elsewhere):
``wall_time`` = seconds (server clock, from the start barrier) at which the server applied
gradient M x e, ``epoch_time`` = the time that server epoch took; ``train_loss`` = the sum over
workers of each worker's latest loss (its share of the full-graph loss) among the gradients
applied so far; bytes / messages = those of the steps whose gradients were applied in the epoch,
compute / comm time = the max over workers of their steps' totals in it; ``steps_w{r}`` = how
many of the epoch's M gradients came from worker r, ``steps_done_w{r}`` its cumulative count; the
evaluation columns = the server's parameters at the end of that epoch. summary.json keeps the
per-worker pace: ``steps_by_worker`` (gradients applied), ``grad_share_by_worker`` (the same as
fractions of all applied gradients), ``train_time_by_worker`` (its clock
until its last applied step ended), ``steps_per_s_by_worker``, ``steps_per_s_fast`` /
``steps_per_s_slow`` (means over the workers not slowed / slowed), and ``server_epochs_per_s``.

Staleness actually seen, per worker and step (metric columns):
- ``staleness_param``: server version when this worker's gradient arrived minus the version of the
  parameters it was computed with (0 = nobody else updated in between).
- ``staleness_repr`` / ``staleness_repr_max``: age of the halo rows used in this step, in their
  OWNERS' steps (owner's completed steps when this step's gradient arrived minus the owner's step
  count when it computed the rows), mean / max over the owners this worker has halo rows from.
  Same definition as synchronous DIGEST's ``staleness_repr`` when everyone runs in lockstep.

A straggler (``--slow-workers RANK:FACTOR``, digest/straggler.py, the same rule as for the
synchronous methods) sleeps (FACTOR - 1) x its measured compute time after every step, so it is
FACTOR times slower; here nobody waits for it, it just contributes fewer of the gradients.

Gradient scaling: each worker's loss is its share of the full-graph mean loss times M (as in model
averaging), so every gradient the server applies estimates the full-graph gradient; the server
takes one Adam step per arriving gradient (M x epochs steps in all) with learning rate lr / M, so
that M arrivals (one "server epoch") move the parameters about as far as one synchronous step
(Adam's step size does not shrink with the gradient's scale, so the full lr per arrival would
move the parameters up to M times as far per epoch as the synchronous methods do). With M = 1
DIGEST-A is step for step synchronous DIGEST.
"""
from __future__ import annotations

import time
from pathlib import Path

import torch
from torch import Tensor

from . import comm, records, server
from .methods import register
from .params import ParamPolicy, flatten, grads_of, unflatten
from .store import StaleHalo, StoreOptions
from .trainer import Loop, Trainer

MAX_SNAPSHOTS = 50  # parameter snapshots the server keeps for the post-hoc evaluation curve


def snapshot_epochs(epochs: int, eval_every: int, cap: int = MAX_SNAPSHOTS) -> list[int]:
    """Server epochs (1-based; epoch e = version M x e) whose parameters are kept for evaluation:
    every ``eval_every``-th and the last, thinned evenly to at most ``cap``."""
    eps = list(range(eval_every, epochs + 1, eval_every))
    if not eps or eps[-1] != epochs:
        eps.append(epochs)
    if len(eps) > cap:
        picks = sorted({round(i * (len(eps) - 1) / (cap - 1)) for i in range(cap)})
        eps = [eps[i] for i in picks]
    return eps


# -- the worker side -------------------------------------------------------------------------------
class AsyncClient:
    """What one worker knows of the server: the version of its parameters, every worker's step
    count as of its last gradient push, and whether the training budget is spent (``done``)."""

    SERVER = server.NAME

    def __init__(self, rank: int, world: int, timeout_s: float):
        self.rank, self.world, self.timeout = rank, world, timeout_s
        self.version = 0
        self.steps = [0] * world
        self.done = False

    def push_grads(self, flat_grad: Tensor) -> tuple[Tensor | None, int]:
        """(latest parameters, or None when the gradient was dropped: budget spent; its lag)."""
        flat, version, steps, lag, done = comm.rpc_sync(
            self.SERVER, server.push_grads, (self.rank, self.version, flat_grad), "params", self.timeout)
        self.version, self.steps, self.done = version, steps, done
        return flat, lag

    def push_rows(self, tag: int, rows: Tensor, counts: list[int]) -> None:
        comm.rpc_sync(self.SERVER, server.push_rows, (self.rank, tag, rows, list(counts)), "store",
                      self.timeout)

    def pull_rows(self, known: list[int]) -> list:
        return comm.rpc_sync(self.SERVER, server.pull_rows, (self.rank, list(known)), "store",
                             self.timeout)


class AsyncParamPolicy(ParamPolicy):
    """after_backward: the gradient goes to the server, which applies it and answers with the
    latest parameters; apply: those parameters replace the local ones (the server's Adam is the
    only optimiser: the local one never steps). ``applied``: whether the server applied this
    step's gradient (False once the budget is spent)."""

    def __init__(self, client: AsyncClient):
        self.client = client
        self.loss_scale = float(client.world)
        self.lag = None
        self.applied = False
        self._latest = None

    def after_backward(self, model):
        self._latest, self.lag = self.client.push_grads(flatten(grads_of(model)).cpu())
        self.applied = self._latest is not None

    @torch.no_grad()
    def apply(self, step, opt, model):
        if self._latest is None:  # dropped (budget spent): the final parameters are the server's
            return
        load_flat(model, self._latest)

    def state(self) -> dict:
        return {"staleness_param": self.lag, "param_version": self.client.version}


@torch.no_grad()
def load_flat(model, flat: Tensor) -> None:
    """Copy a flat parameter vector into ``model``'s parameters."""
    params = [p.data for p in model.parameters()]
    for p, v in zip(params, unflatten(flat.to(params[0].device), params)):
        p.copy_(v)


class AsyncStaleHalo(StaleHalo):
    """StaleHalo whose store is the server's: push and pull every I of this worker's own steps."""

    def __init__(self, part, plan, model, cfg, client: AsyncClient):
        super().__init__(part, plan, model, cfg)
        self.client = client
        self.owners = [p for p, c in enumerate(plan.recv_counts) if c and p != part.rank]
        self.tags = [0] * client.world  # owner's step count when it computed the rows held
        self.seqs = [0] * client.world  # server's push number of the rows held (1 = the seed)
        self.pieces: list[Tensor] = []  # per owner: its rows of the halo, hidden layers side by side
        self.age_max = None
        self.started = False

    def before_step(self, step, forward):
        if not self.started:  # start-up: one exact forward (collective), then seed the server
            self.started = True
            self._fill(forward)
            self.synced_at = step
            if self.store:
                full = torch.cat([self.store[l] for l in self._layers()], 1)
                self.pieces = list(full.split(self.plan.recv_counts))
                self.push(tag=0)
                # the fill's rows ARE every owner's seed push (its push number 1, before the
                # barrier): ask only for later ones
                self.seqs = [1] * self.client.world

    def after_step(self, step):
        # age of the rows this step used, in their owners' steps, as of this step's gradient push
        ages = [self.client.steps[p] - self.tags[p] for p in self.owners]
        self.age = sum(ages) / len(ages) if ages else 0.0
        self.age_max = max(ages) if ages else 0
        if (step + 1) % self.interval == 0 and self.latest and not self.client.done:
            self.push(tag=step)
            self.pull()
            self.syncs += 1
            self.synced_at = step

    def state(self):
        return {"staleness_repr": self.age, "staleness_repr_max": self.age_max,
                "store_syncs": self.syncs}

    # -- the store, through the server ---------------------------------------------------------
    def _layers(self) -> list[int]:
        return sorted(self.store)

    def push(self, tag: int) -> None:
        send = torch.cat([self.latest[l].index_select(0, self.plan.send_flat)
                          for l in self._layers()], 1)
        self.client.push_rows(tag, send.cpu(), self.plan.send_counts)

    def pull(self) -> None:
        got = self.client.pull_rows(self.seqs)
        dev = self.pieces[0].device if self.pieces else None
        changed = False
        for owner, item in enumerate(got):
            if item is not None and self.plan.recv_counts[owner]:
                rows, tag, seq = item
                self.pieces[owner], self.tags[owner], self.seqs[owner] = rows.to(dev), int(tag), int(seq)
                changed = True
        if changed:
            layers = self._layers()
            full = torch.cat(self.pieces)
            for l, rows in zip(layers, full.split([self.widths[l] for l in layers], 1)):
                self.store[l] = rows


class AsyncTrainer(Trainer):
    """Trainer whose epoch loop has no collective between the start-up fill and the end: each
    worker steps at its own pace, keeping its own records, until the server's budget of M x epochs
    gradients is spent; then one barrier, exact collective evaluation of the server's parameter
    snapshots, and rank 0 merges the records into one row per server epoch."""

    def restore(self) -> None:
        rt = self.cfg.runtime
        if rt.resume or rt.checkpoint_every:
            raise ValueError("digest-async cannot checkpoint or resume (the server's state is "
                             "not saved); drop --resume / --checkpoint-every")

    def train(self, out_dir: Path) -> dict:
        cfg, rank, M = self.cfg, self.rt.rank, self.rt.world_size
        epochs, timeout = cfg.optim.epochs, cfg.runtime.timeout
        snap_epochs = snapshot_epochs(epochs, cfg.optim.eval_every)
        proc = server.ServerProcess(M + 1, timeout) if rank == 0 else None
        client = self.params.client
        mine, ok, discarded, times, snaps = [], False, 0, [], {}
        try:
            comm.rpc_init(timeout, extra=1, start_extra=proc.start if proc else None)
            if rank == 0:  # everyone has joined: seed the server with the initial parameters
                proc.joined.set()
                # lr / M per arrival: M arrivals (a server epoch) ~ one synchronous step (docstring)
                comm.rpc_sync(server.NAME, server.setup, (
                    [p.detach().cpu() for p in self.model.parameters()], cfg.optim.lr / M,
                    cfg.optim.weight_decay, M, M * epochs, [M * e for e in snap_epochs]))
            self.policy.before_step(0, self.forward)
            if rank == 0:  # the server's clock starts as the workers are let go
                comm.rpc_sync(server.NAME, server.start_clock)
            comm.barrier()  # the store is seeded by everyone: from here on, nobody waits
            t_start = time.perf_counter()
            loop = Loop(self, epochs, f"{cfg.method} x{M} (server epochs)", record_sleep=True)
            step = 0
            while True:  # ends: every push either spends one unit of the finite budget or says done
                # the last applied step does not sleep: the worker stops as soon as it is done
                rec = loop.step(step, lambda: self.step(step), sleep=lambda: not client.done,
                                applied=lambda: self.params.applied)
                if rec is None:  # the budget was spent before this gradient arrived
                    discarded += 1
                    break
                loop.prof.after(step)
                mine.append({**rec, "t_end": time.perf_counter() - t_start})
                loop.bar.update(client.version // M - loop.bar.n)
                step += 1
                if client.done:
                    break
            loop_time = time.perf_counter() - t_start
            loop.close(len(mine))  # a worker whose budget ran out before or inside the window says so
            if rank == 0:  # the budget is spent, so the server's record is final: fetch it
                times = comm.rpc_sync(server.NAME, server.times)
                snaps = {e: comm.rpc_sync(server.NAME, server.snapshot, (M * e,)) for e in snap_epochs}
            ok = True
        finally:  # graceful = wait for every worker's last call; after an error: just stop
            try:
                comm.rpc_shutdown(graceful=ok, timeout_s=timeout)
            finally:  # even if the shutdown itself failed (a peer lost at the very end)
                if proc is not None:
                    proc.stop(graceful=ok)
        evals = self._evaluate_snapshots(snap_epochs, snaps)
        everyone = comm.all_gather_object({"rows": mine, "loop_time": loop_time,
                                           "discarded": discarded, "factor": loop.straggle.factor})
        if rank != 0:
            return {}
        self.rows = records.server_epochs(everyone, evals, times, M)
        return records.async_summary(everyone, self.rows)

    def _evaluate_snapshots(self, snap_epochs: list[int], snaps: dict) -> dict[int, dict]:
        """Exact collective inference of each kept server snapshot (rank 0 holds them, as
        ``snaps[e] = (wall s, flat parameters)``, and broadcasts each); the model ends holding
        the server's final parameters."""
        M = self.rt.world_size
        dev = next(self.model.parameters()).device
        size = sum(p.numel() for p in self.model.parameters())
        out = {}
        for e in snap_epochs:
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
          options=(StoreOptions,), trainer=AsyncTrainer)
def digest_async(cfg, part, plan, model):
    client = AsyncClient(comm.rank(), comm.world_size(), cfg.runtime.timeout)
    return AsyncStaleHalo(part, plan, model, cfg, client), AsyncParamPolicy(client)

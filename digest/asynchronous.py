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
the budget is spent loses at most one computed step (counted in ``discarded_by_worker``, with
those lost at checkpoints, below).

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

Checkpoint and resume (``--checkpoint-every N``, ``--resume DIR``): a checkpoint is taken at the
version M x N x k itself, not at some moment of each worker's. The server HOLDS there
(digest/server.py): the gradient that reaches that version is applied and its reply says stop,
like the one that spends the budget; every later gradient is dropped (its worker's step is
``discarded`` and runs again, with the same step number, after the hold). Every worker therefore
stops at the same version, and together they write the set (digest/checkpoint.py: one file per
rank, atomic, committed when all are in place; a damaged file is refused in one line): rank 0's
holds the server's state as it is at that version (parameters, Adam's state, the version and
per-worker applied counts = the budget consumed, the times of every version applied, the store's
blocks with their tags and push numbers, the evaluation snapshots); every rank's holds its
position (next step number, records of its applied steps, discarded steps, its loop clock), its
halo (the store rows it holds, by owner, with their tags and push numbers), the version and
parameters it holds, and its RNG states. Then the server is released (after a barrier, so that
nobody pushes before) and training goes on; its clock and each worker's exclude the pause. The
last server epoch is checkpointed too when N divides it (as in synchronous training).

``--resume DIR`` seeds a fresh server with that state instead of the initial parameters, skips
the start-up fill (every worker has its halo and the server every worker's blocks) and restarts
both clocks where they stopped. The resumed run spends exactly the rest of the same budget
(M x epochs gradients in all), and metrics.csv / summary.json cover the whole run: the rows of
server epochs before the checkpoint come from the workers' saved records, the evaluation of
every snapshot (those before the checkpoint too) runs at the end, as always.

What is preserved exactly: the budget and its count so far, the server's parameters and
optimiser at the checkpoint's version, the store, each worker's position, parameters and halo,
and the records and clock readings before the checkpoint. What is not: the arrival order of
gradients after it (and so which worker supplies which of the remaining gradients, the
staleness seen, and the parameters from there on), which depends on scheduling as in any
DIGEST-A run; in an uninterrupted run with checkpoints, the hold itself also changes the order
of arrivals just after it (every worker restarts at once). So a resumed run is a valid
continuation with the same budget, not a replay: its accuracy matches an uninterrupted run's
within run-to-run noise (tests/test_async_resume.py), not bit for bit. Each hold costs every
worker at most one computed step (in ``discarded_by_worker``, besides the one at the end).

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
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from . import checkpoint, comm, records, server
from .methods import register
from .metrics import atomic_write, csv_text
from .params import ParamPolicy, flatten, grads_of, unflatten
from .store import StaleHalo, StoreOptions
from .trainer import PROGRESS, Loop, Trainer

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
    """What one worker knows of the server, as of its last gradient push: the version of its
    parameters, every worker's step count, whether its gradient was ``applied``, whether the
    reply said ``stop`` (the budget is spent, or the server holds for a checkpoint) and whether
    the training budget of ``budget`` gradients is spent (``done``)."""

    SERVER = server.NAME

    def __init__(self, rank: int, world: int, timeout_s: float, budget: int):
        self.rank, self.world, self.timeout, self.budget = rank, world, timeout_s, budget
        self.version = 0
        self.steps = [0] * world
        self.applied = self.stop = self.done = False

    def push_grads(self, flat_grad: Tensor) -> tuple[Tensor | None, int]:
        """(latest parameters, or None when the gradient was dropped: the server had stopped;
        its lag)."""
        flat, version, steps, lag, stop = comm.rpc_sync(
            self.SERVER, server.push_grads, (self.rank, self.version, flat_grad), "params", self.timeout)
        self.version, self.steps, self.stop = version, steps, stop
        self.applied, self.done = flat is not None, version >= self.budget
        return flat, lag

    def state_dict(self) -> dict:
        return {"version": self.version, "steps": list(self.steps)}

    def load_state_dict(self, state: dict) -> None:
        self.version, self.steps = state["version"], list(state["steps"])

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
        self.applied = self.client.applied

    @torch.no_grad()
    def apply(self, step, opt, model):
        if self._latest is None:  # dropped (the server had stopped): keep the parameters held
            return
        load_flat(model, self._latest)

    def state(self) -> dict:
        return {"staleness_param": self.lag, "param_version": self.client.version}


def _cpu(obj):
    """``obj`` with every tensor in it on the CPU: the server process is CPU only (rpc would need
    a device map for CUDA tensors), and a checkpoint is loaded onto the worker's device."""
    if isinstance(obj, Tensor):
        return obj.cpu()
    if isinstance(obj, dict):
        return {k: _cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_cpu(v) for v in obj)
    return obj


@torch.no_grad()
def load_flat(model, flat: Tensor) -> None:
    """Copy a flat parameter vector into ``model``'s parameters."""
    params = [p.data for p in model.parameters()]
    for p, v in zip(params, unflatten(flat.to(params[0].device), params)):
        p.copy_(v)


class AsyncStaleHalo(StaleHalo):
    """StaleHalo whose store is the server's: push and pull after this worker's own step t when
    ``due(t)``: every I of its own steps ((t + 1) % I == 0)."""

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
        # not after a dropped step (it does not count: the same step number runs again), nor
        # once the budget is spent (nobody would read the rows); a step applied at a hold for a
        # checkpoint syncs as it would without the checkpoint; ``due`` last: a schedule may
        # measure something there (baselines/vanishing_async.py)
        if self.latest and self.client.applied and not self.client.done and self.due(step):
            self.push(tag=step)
            self.pull()
            self.syncs += 1
            self.synced_at = step

    def state(self):
        return {"staleness_repr": self.age, "staleness_repr_max": self.age_max,
                "store_syncs": self.syncs}

    def state_dict(self):
        """The halo as held (the store, by layer, and by owner with its tags and push numbers),
        and whether the start-up fill is done: a resumed worker neither fills nor seeds again."""
        return {**super().state_dict(), "tags": list(self.tags), "seqs": list(self.seqs),
                "pieces": list(self.pieces), "started": self.started}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.tags, self.seqs = list(state["tags"]), list(state["seqs"])
        self.pieces, self.started = list(state["pieces"]), state["started"]

    # -- the store, through the server ---------------------------------------------------------
    def _layers(self) -> list[int]:
        return sorted(self.store)

    def push(self, tag: int) -> None:
        self.client.push_rows(tag, self.boundary_rows().cpu(), self.plan.send_counts)

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
            atomic_write(out_dir / PROGRESS, csv_text(rows), fsync=False)
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
            comm.rpc_sync(server.NAME, server.load_state, (_cpu(self.server_state),))
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
          options=(StoreOptions,), trainer=AsyncTrainer)
def digest_async(cfg, part, plan, model):
    M = comm.world_size()
    client = AsyncClient(comm.rank(), M, cfg.runtime.timeout, budget=M * cfg.optim.epochs)
    return AsyncStaleHalo(part, plan, model, cfg, client), AsyncParamPolicy(client)

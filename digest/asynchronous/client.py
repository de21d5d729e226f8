"""DIGEST-A's worker side (docs/digest-a.md): what a worker knows of the server (``AsyncClient``,
over torch.distributed.rpc), its parameter policy (push the gradient, take the latest parameters)
and its halo policy (DIGEST's stale halo, refreshed by pushes and pulls of the store's blocks)."""
from __future__ import annotations

import torch
from torch import Tensor

from ..policies.params import ParamPolicy, flatten, grads_of, unflatten
from ..policies.store import StaleHalo
from ..runtime import comm
from . import server

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


def to_cpu(obj):
    """``obj`` with every tensor in it on the CPU: the server process is CPU only (rpc would need
    a device map for CUDA tensors), and a checkpoint is loaded onto the worker's device."""
    if isinstance(obj, Tensor):
        return obj.cpu()
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v) for v in obj)
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

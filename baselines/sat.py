"""SAT (docs/methods.md section 10.1; Bai, Yu, Chai, Cheng, Zhao, arXiv 2308.13466): DIGEST's stale
halo rows replaced, between store refreshes, by a small learned predictor's extrapolation.

- Base: DIGEST (digest/policies/store.py ``StaleHalo``) unchanged: interval I
  (``--sync-interval``), push/pull at sync steps, the exact fill before step 0, stale rows carry
  no gradient. SAT changes only the halo tensor hidden layer l (1..L-1) reads.
- Temporal graph T_m of worker m: the subgraph of G induced on V_m and its halo H_m, both edge
  directions, halo-halo edges included, self-loops added; built once at start-up. The halo-halo
  edges are not in a worker's part: the owner of an edge's destination finds it, and the edge
  lists travel once by ``comm.all_gather_object`` (start-up topology, like the partition, not
  training bytes). Snapshot of layer l at step t: [this step's inner rows h^l_t[V_m] (detached);
  the store rows of H_m], appended every step; the predictor reads the last W
  (``--sat-window``, default 5, fewer at the start).
- Predictor P_l (one per hidden layer and worker; baselines/sat_predictor.py): a one-layer LSTM
  (width F_l, zero initial state) run per node over the window in time order, its final hidden
  state through a 2-layer GCN on T_m (F_l -> F_l -> F_l, ReLU between, plain sum aggregation, no
  degree normalisation: the reference code's ``nn.LSTM`` + ``GCN(num_layers=2,
  normalize=False)``); its rows of H_m are the prediction. Only H_m's outputs are used, so it
  runs on the 2-hop neighbourhood of H_m in T_m (the same output; a test compares it with all of
  T_m). ``--sat-predictor identity`` returns the last snapshot's halo rows, i.e. the store rows:
  DIGEST, for tests and as an ablation; ``mean`` returns the window's mean (nothing learned),
  an ablation asking whether the rows' own history predicts them. ``--sat-residual`` adds the
  GCN's output (last layer zero-initialised) to a base, the last snapshot or, with
  ``--sat-base mean``, the window's mean: untrained, the predictor is DIGEST or ``mean``.
- Use: the prediction, detached (no gradient from the GNN loss reaches P, nothing is sent), from
  P_l's first training step on; before it DIGEST's store rows *(choice: warm-up)*.
  The guard ``--sat-gate`` (on by default *(choice)*; ``--no-sat-gate``: the reference code's
  reading, the prediction always): at each sync, a layer whose prediction error exceeded the
  staleness error reads the store rows until a later sync's prediction does better. Why: the
  predictor is meant to beat the store rows, and the sync is the one moment it can see that it
  does not; a predictor that diverges would otherwise feed the GNN rows worse than DIGEST's.
- Training, at sync steps only (the only moments fresh rows exist): the prediction made in step
  s's forward (its graph kept) against the rows DIGEST's pull just brought, Z_s; loss = sum over
  layers of the MSE over halo rows and columns; one Adam step (``--sat-lr``, default 0.1, the
  reference code's ``lr_aux``). ``--sat-replay R`` adds the R - 1 previous sync pairs (their windows
  kept, predicted again with the current predictor). Predictors are private (no bytes); with
  ``--sat-shared`` their gradients are averaged over workers at each sync (counted as params).
  Predictor parameters start equal on every worker (seeded by run seed and layer, without
  touching the training's random stream).

Metrics (per step; at sync steps for the errors): everything DIGEST reports (``staleness_repr``,
``store_syncs``, ``stale_err_l{l}`` = ||S_old - Z|| / ||Z||), plus ``pred_err_l{l}`` =
||H^ - Z|| / ||Z|| of the same sync, ``served_err_l{l}`` = the same error of the rows the sync step
read (the prediction, or with the guard closed or before the first update the store rows:
then equal to ``stale_err_l{l}``), ``sat_loss``, ``sat_used_l{l}`` (1: this step read the
prediction), with the guard ``sat_gate_l{l}`` (1 = closed at this sync: store rows until the
next) and ``sat_gate_closed`` (running count of the (sync, layer) pairs closed so far),
``sat_time`` (seconds of predictor forward, backward and update: compute apart from the GNN's),
``sat_mem_mb`` (predictor parameters, optimiser state, snapshot windows and kept pairs).

Shapes: ``halo(l, h_inner [n_inner, F]) -> [n_halo, F]``; a window ``[k, W, F]`` over the k nodes
the predictor runs on.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from digest.methods import register
from digest.options import Options, option
from digest.policies.params import ParamOptions, flatten, grads_of, make_param_policy, unflatten
from digest.policies.counting import Sizes, Step, Unpredictable
from digest.policies.store import StaleHalo, StoreOptions, digest_step
from digest.runtime import comm
from digest.seeds import mix

from .sat_predictor import TemporalGraph, make_predictor, temporal_edges
from .sat_sync import SyncSnapshots

PREDICTORS = ("lstm-gcn", "identity", "mean")
SNAPSHOTS = ("step", "sync")
BASES = ("last", "mean")


@dataclass
class SatOptions(Options):
    """SAT: learned predictions of halo rows between store syncs."""
    sat_predictor: str = option("lstm-gcn", "the predictor: lstm-gcn (LSTM over the window, then "
                                "a 2-layer sum-aggregation GCN on the temporal graph) or identity "
                                "(returns the store rows: DIGEST) or mean (the window's mean, "
                                "nothing learned: an ablation)", choices=PREDICTORS)
    sat_window: int = option(5, "snapshots W the predictor reads")
    sat_lr: float = option(0.1, "Adam learning rate of the predictors (reference lr_aux)")
    sat_replay: int = option(1, "sync pairs each predictor update trains on (the newest and the "
                             "R - 1 before it)")
    sat_residual: bool = option(False, "predict a correction to a base, the store rows or "
                                "--sat-base's (last layer zero-initialised: untrained, the "
                                "predictor is the base) instead of the rows themselves (reference)")
    sat_base: str = option("last", "with --sat-residual, what the correction is added to: last "
                           "(the store rows) or mean (the window's mean: the untrained predictor "
                           "is --sat-predictor mean)", choices=BASES)
    sat_snapshots: str = option("step", "when the window gains a snapshot: step (every step: "
                                "this step's inner rows beside the store rows) or sync (at each "
                                "sync: fresh inner and halo rows, so the window holds the halo "
                                "rows' own history; baselines/sat_sync.py)", choices=SNAPSHOTS)
    sat_steps: int = option(1, "Adam steps per predictor update (one update per sync)")
    sat_gate: bool = option(True, "the guard, on by default (a choice): at each sync, a layer "
                            "whose prediction error exceeded the staleness error reads the store "
                            "rows (DIGEST's) until a later sync's prediction does better; "
                            "--no-sat-gate: the reference code's reading (the prediction always)")
    sat_shared: bool = option(False, "average the predictors' gradients over workers at each sync "
                              "(counted as params); default: private predictors, zero bytes")

    def check_group(self, cfg) -> None:
        if self.sat_predictor not in PREDICTORS:
            raise ValueError(f"--sat-predictor must be one of {', '.join(PREDICTORS)}")
        if self.sat_window < 1:
            raise ValueError("--sat-window must be >= 1")
        if not self.sat_lr > 0:
            raise ValueError("--sat-lr must be > 0")
        if self.sat_replay < 1:
            raise ValueError("--sat-replay must be >= 1")
        if self.sat_snapshots not in SNAPSHOTS:
            raise ValueError(f"--sat-snapshots must be one of {', '.join(SNAPSHOTS)}")
        if self.sat_steps < 1:
            raise ValueError("--sat-steps must be >= 1")
        if self.sat_base != "last" and not (self.sat_residual and self.sat_predictor == "lstm-gcn"):
            raise ValueError("--sat-base mean needs --sat-residual and --sat-predictor lstm-gcn")


# -- the policy -----------------------------------------------------------------------------------

class SatHalo(StaleHalo):
    """DIGEST's stale halo with predicted rows between syncs (module docstring)."""

    def __init__(self, part, plan, model, cfg):
        super().__init__(part, plan, model, cfg)
        o = cfg.options
        self.window, self.gate_on, self.shared = o.sat_window, o.sat_gate, o.sat_shared
        self.replay, self.steps = o.sat_replay, o.sat_steps
        dev = plan.send_flat.device
        src, dst = temporal_edges(part)
        self.graph = TemporalGraph(part.n_inner, part.n_halo, src, dst).to(dev)
        self.hidden = list(range(1, len(self.widths) - 1))
        self.predictors = nn.ModuleDict({
            str(l): make_predictor(o.sat_predictor, self.widths[l], mix(cfg.seed, l, 7),
                                   o.sat_residual, o.sat_base)
            for l in self.hidden}).to(dev)
        params = list(self.predictors.parameters())
        self.opt = torch.optim.Adam(params, lr=o.sat_lr) if params else None
        self.snaps: dict[int, deque] = {l: deque(maxlen=self.window) for l in self.hidden}
        self.trained = {l: False for l in self.hidden}
        self.closed = {l: False for l in self.hidden}  # the guard: store rows until next sync
        self.closings = 0  # (sync, layer) pairs the guard closed so far: sat_gate_closed
        self.kept: dict[int, tuple[Tensor, Tensor]] = {}  # layer -> (prediction, its window)
        self.pairs: dict[int, deque] = {l: deque(maxlen=max(0, self.replay - 1))
                                        for l in self.hidden}  # (window, target) of past syncs
        self.has_halo = part.n_halo > 0
        self.step = 0
        self._reset_metrics()

    def _reset_metrics(self) -> None:
        self._time, self._loss = 0.0, None
        self._pred_err: dict[int, float | None] = {}
        self._used: dict[int, int] = {}
        self._gate: dict[int, int] = {}
        self._served_err: dict[int, float | None] = {}

    # -- the policy ---------------------------------------------------------------------------
    def before_step(self, step, forward):
        super().before_step(step, forward)
        self.step = step
        self._reset_metrics()
        self.kept = {}

    def halo(self, layer, h_inner):
        rows = super().halo(layer, h_inner)  # the store rows (DIGEST)
        self._used[layer] = 0
        if not self.has_halo:
            return rows
        t0 = time.perf_counter()
        g = self.graph
        snap = torch.cat([h_inner.detach(), rows]).index_select(0, g.nodes)
        self.snaps[layer].append(snap)
        due = self.due(self.step)
        use = self.trained[layer] and not self.closed[layer]
        if use or due:
            window = torch.stack(list(self.snaps[layer]), 1)  # [k, W_t, F], oldest first
            with torch.set_grad_enabled(due and self.opt is not None):
                pred = self.predict(layer, window)
            if due:
                self.kept[layer] = (pred, window)
            if use:
                rows = pred.detach()
                self.used[layer] = rows
                self._used[layer] = 1
        self._time += time.perf_counter() - t0
        return rows

    def after_step(self, step):
        super().after_step(step)  # a due step: DIGEST's push and pull (store = fresh rows Z)
        if self.due(step):
            t0 = time.perf_counter()
            self._train()
            self._time += time.perf_counter() - t0

    def _train(self) -> None:
        """Update from this sync's (prediction, fresh rows) pairs and the replayed ones."""
        pairs, first = {}, {}
        for l, (pred, window) in self.kept.items():
            Z = self.store[l]
            self._pred_err[l] = self.stale_error(pred.detach(), Z)
            pairs[l], first[l] = [(window, Z), *self.pairs[l]], pred
            if self.replay > 1:
                self.pairs[l].append((window.detach(), Z))
        self._fit(pairs, first)
        self._mark_trained()
        self.kept = {}

    def predict(self, layer: int, window: Tensor) -> Tensor:
        """The predictor's halo rows from ``window`` [k, W_t, F] -> [n_halo, F]."""
        out = self.predictors[str(layer)](window, self.graph.adj)
        return out.index_select(0, self.graph.halo_pos)

    def _fit(self, pairs: dict, first: dict | None = None) -> None:
        """``--sat-steps`` Adam steps on the loss sum over layers and their (window, fresh rows)
        pairs; ``first``: predictions already made from the first pairs' windows (with their
        graph), used by the first step. sat_loss reports the first step's loss."""
        first = dict(first or {})
        if self.opt is None:  # identity: nothing to train, the loss is still reported
            if first:
                self._loss = float(sum(F.mse_loss(p.detach(), pairs[l][0][1])
                                       for l, p in first.items()))
            return
        for k in range(self.steps):
            losses = []
            for l, items in pairs.items():
                for i, (window, Z) in enumerate(items):
                    pred = first.pop(l) if i == 0 and l in first else self.predict(l, window)
                    losses.append(F.mse_loss(pred, Z))
            self.opt.zero_grad(set_to_none=True)
            if losses and any(x.requires_grad for x in losses):
                loss = sum(losses)
                loss.backward()
                if k == 0:
                    self._loss = float(loss.detach())
            if self.shared and comm.world_size() > 1:  # every worker, halo or not: collective
                params = list(self.predictors.parameters())
                grads = grads_of(self.predictors)
                flat = comm.all_reduce_(flatten(grads), "params")
                flat /= comm.world_size()
                for p, v in zip(params, unflatten(flat, grads)):
                    p.grad = v
            self.opt.step()

    def _mark_trained(self) -> None:
        """After an update (the store holds the fresh rows Z): the error of the rows this step
        read; predictions may be read from now on; the guard closes a layer whose prediction
        error at this sync exceeded the staleness error, and opens it when it does not."""
        for l in self.hidden:
            if l in self.used:
                self._served_err[l] = self.stale_error(self.used[l], self.store[l])
            self.trained[l] = True
            if self.gate_on:
                stale, pred = self.errors.get(l), self._pred_err.get(l)
                self.closed[l] = stale is not None and pred is not None and pred > stale
                self._gate[l] = int(self.closed[l])
                self.closings += self._gate[l]

    # -- metrics and checkpoints --------------------------------------------------------------
    def memory_mb(self) -> float:
        tensors = [*self.predictors.parameters()]
        if self.opt is not None:
            tensors += [v for s in self.opt.state.values() for v in s.values()
                        if isinstance(v, Tensor)]
        tensors += [s for q in self.snaps.values() for s in q]
        tensors += [t for q in self.pairs.values() for pair in q for t in pair]
        return sum(t.numel() * t.element_size() for t in tensors) / 2 ** 20

    def state(self):
        out = super().state()
        out.update({f"pred_err_l{l}": e for l, e in self._pred_err.items()})
        out.update({f"served_err_l{l}": e for l, e in self._served_err.items()})
        out.update({f"sat_used_l{l}": u for l, u in self._used.items()})
        if self.gate_on:
            out.update({f"sat_gate_l{l}": g for l, g in self._gate.items()})
            out["sat_gate_closed"] = self.closings
        out.update(sat_loss=self._loss, sat_time=self._time, sat_mem_mb=self.memory_mb())
        return out

    def state_dict(self):
        return {**super().state_dict(), "predictors": self.predictors.state_dict(),
                "opt": self.opt.state_dict() if self.opt is not None else None,
                "snaps": {l: list(q) for l, q in self.snaps.items()},
                "pairs": {l: list(q) for l, q in self.pairs.items()},
                "trained": dict(self.trained), "closed": dict(self.closed),
                "closings": self.closings}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.predictors.load_state_dict(state["predictors"])
        if self.opt is not None and state["opt"] is not None:
            self.opt.load_state_dict(state["opt"])
        for l in self.hidden:
            self.snaps[l].clear()
            self.snaps[l].extend(state["snaps"][l])
            self.pairs[l].clear()
            self.pairs[l].extend(state["pairs"][l])
        self.trained, self.closed = dict(state["trained"]), dict(state["closed"])
        self.closings = state.get("closings", 0)  # a checkpoint from before the count: none


class SyncSatHalo(SyncSnapshots, SatHalo):
    """``--sat-snapshots sync``: snapshots at syncs (baselines/sat_sync.py)."""


def sat_step(sizes: Sizes, step: int) -> Step:
    """DIGEST's bytes (the predictors are private); their compute is not in advise's model."""
    if sizes.options.sat_shared:
        raise Unpredictable("--sat-shared: the predictors' gradient all-reduce is not counted")
    step_count = digest_step(sizes, step)
    step_count.unmodelled = "predictor (an LSTM and a GCN on the temporal graph per hidden layer)"
    return step_count


@register("sat", "SAT: DIGEST whose stale halo rows are replaced between syncs by a learned "
          "predictor (LSTM + GCN on the temporal graph) trained online at each sync",
          options=(StoreOptions, SatOptions, ParamOptions), traffic=sat_step)
def sat(cfg, part, plan, model):
    policy = SyncSatHalo if cfg.options.sat_snapshots == "sync" else SatHalo
    return policy(part, plan, model, cfg), make_param_policy(cfg)

"""DIGEST with staleness that vanishes (docs/methods.md section 8.5; our own, never reported as
DIGEST).

DIGEST keeps its halo rows up to I steps stale for the whole run; VARCO's convergence argument is
that the communication error must vanish as training ends. ``--sync-schedule`` decides after
each step whether to sync the store (the step's own rows out, the halo's in: DIGEST's sync):

- ``fixed``: every I steps (DIGEST itself, for a like-for-like control);
- ``decreasing``: the interval falls linearly from I to 1 over training,
  I(t) = max(1, ceil(I - (I - 1) t / (T - 1))) at step t of T, and a sync happens once
  t - (step of the last sync) >= I(t) (the fill before step 0 counts as a sync at step -1), so the
  last steps are exact-like;
- ``drift``: a sync happens when the relative drift ||h_now - h_pushed|| / ||h_pushed|| of the
  boundary rows (all hidden layers) since the last sync reaches ``--drift-threshold`` TAU on ANY
  worker, never later than I steps. *(choice)* The synchronous store sync is one collective
  all-to-all, so the workers decide together: one all-reduce of their drifts (max) per step,
  counted as ``store`` bytes. TAU = 0 syncs every step.

The drift schedule's dropout noise floor (docs/methods.md sections 8.3/8.5; how and when:
noise_floor.py): the drift compares training-mode rows, which two forward passes with the same
parameters and different dropout masks already set apart, so a TAU below that floor syncs at every
step. Measured before step 0 and before the last step (drift schedule only), in the rows of those
steps: ``noise_floor`` (the criterion's own quantity: every hidden layer's boundary rows side by
side) and ``noise_floor_l<l>`` (layer l alone), each the largest over the workers, as the decision
takes the largest drift. At dropout 0 both are 0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from digest.runtime import comm
from digest.options import Options, option
from digest.methods import register
from digest.policies.params import ParamOptions, make_param_policy
from digest.policies.counting import Sizes, Step, Unpredictable
from digest.policies.store import StaleHalo, StoreOptions, stale_step

from .noise_floor import boundary_draws, probe_steps, relative


@dataclass
class ScheduleOptions(Options):
    """Vanishing staleness: when DIGEST's store syncs"""
    sync_schedule: str = option("decreasing", "fixed: every I steps; decreasing: interval "
                                "falls linearly from I to 1; drift: when the boundary rows "
                                "drifted more than --drift-threshold, at most I steps apart",
                                choices=("fixed", "decreasing", "drift"))
    drift_threshold: float = option(0.1, "relative drift TAU of the boundary rows that triggers "
                                    "a sync (drift schedule)")

    def group_period(self) -> int | None:  # a decreasing or drift schedule has none
        return 1 if self.sync_schedule == "fixed" else None

    def group_follows_values(self) -> bool:  # a sync when the rows drifted
        return self.sync_schedule == "drift"

    def check_group(self, cfg) -> None:
        if not self.drift_threshold >= 0:  # (NaN too)
            raise ValueError("--drift-threshold must be >= 0")


def interval_for(progress: float, first: int) -> int:
    """The decreasing schedule's interval at ``progress`` (0 = the first step, 1 = the last):
    ``first`` falling linearly to 1."""
    return max(1, math.ceil(first - (first - 1) * progress - 1e-9))


def interval_at(step: int, first: int, epochs: int) -> int:
    """I(t) of the decreasing schedule: ``first`` at step 0, 1 at the last step."""
    return interval_for(step / (epochs - 1), first) if epochs > 1 else 1


def relative_drift(now: torch.Tensor, pushed: torch.Tensor) -> float:
    """||now - pushed|| / ||pushed|| (Frobenius): how far boundary rows moved since their push."""
    return float((now - pushed).norm() / pushed.norm().clamp_min(1e-12))


class Scheduled:
    """The schedule's side of a vanishing halo (synchronous here, DIGEST-A's in
    vanishing_async.py): the step of the last sync and the boundary rows it pushed (both
    checkpointed), the decision, and the state it reports. ``interval_now()``: the decreasing
    schedule's interval at this step; ``agree(drift)``: the drift the decision uses."""

    def init_schedule(self, cfg) -> None:
        self.schedule, self.tau = cfg.options.sync_schedule, cfg.options.drift_threshold
        self.last = -1  # step of the last sync (the fill: the step before the first)
        self.pushed: torch.Tensor | None = None  # boundary rows at the last sync, layers side by side
        self.drift = None

    def pushed_at(self, step: int) -> None:
        self.last, self.pushed = step, self.boundary_rows()

    def scheduled(self, step: int, interval_now, agree=lambda drift: drift) -> bool:
        gap = step - self.last
        if self.schedule == "fixed":
            return gap >= self.interval
        if self.schedule == "decreasing":
            return gap >= interval_now()
        self.drift = agree(relative_drift(self.boundary_rows(), self.pushed))
        return gap >= self.interval or self.drift >= self.tau

    def reported_interval(self) -> int | None:
        raise NotImplementedError

    def state(self):
        out = super().state()
        if self.schedule == "decreasing":
            out["sync_interval_now"] = self.reported_interval()
        if self.schedule == "drift":
            out["drift"] = self.drift
        return out

    def state_dict(self):
        return {**super().state_dict(), "last": self.last, "pushed": self.pushed}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.last, self.pushed = state["last"], state["pushed"]


class VanishingHalo(Scheduled, StaleHalo):
    """StaleHalo whose sync steps follow ``--sync-schedule`` (module docstring)."""

    def __init__(self, part, plan, model, cfg):
        super().__init__(part, plan, model, cfg)
        self.init_schedule(cfg)
        self.epochs, self.seed = cfg.optim.epochs, cfg.seed
        self.probes = probe_steps(self.epochs) if self.schedule == "drift" else set()
        self.floor: dict[str, float] = {}  # this step's noise-floor columns (probe steps)

    def before_step(self, step, forward):
        filling = not self.store
        super().before_step(step, forward)
        if filling:  # the fill's rows are the first push
            self.pushed_at(step - 1)
        self.floor = self.noise_floor(step, forward) if step in self.probes else {}

    def noise_floor(self, step, forward) -> dict[str, float]:
        """The drift criterion between two mask draws at this step's parameters (module doc),
        the largest over the workers."""
        a, b = boundary_draws(self.model, forward, self.plan, self.seed, step)
        layers = sorted(b)
        if not layers:  # no hidden layer is exchanged (the same on every worker)
            return {}
        side = [torch.cat([d[l] for l in layers], 1) for d in (a, b)]  # as boundary_rows()
        both = [relative(*side)]
        both += [relative(a[l], b[l]) for l in layers]
        worst = comm.all_reduce_(torch.tensor([v or 0.0 for v in both], dtype=torch.float64),
                                 None, op=comm.dist.ReduceOp.MAX).tolist()
        return {"noise_floor": worst[0],
                **{f"noise_floor_l{l}": v for l, v in zip(layers, worst[1:])}}

    def state(self):
        return {**super().state(), **self.floor}

    def due(self, step: int) -> bool:
        def agree(mine):  # the sync is collective: the largest drift of any worker decides
            return float(comm.all_reduce_(torch.tensor([mine], dtype=torch.float64), "store",
                                          op=comm.dist.ReduceOp.MAX))
        return self.scheduled(step, lambda: interval_at(step, self.interval, self.epochs), agree)

    def sync(self, step: int = 0) -> None:
        super().sync(step)
        self.pushed_at(step)

    def reported_interval(self):  # the interval at the last sync
        return interval_at(self.synced_at or 0, self.interval, self.epochs)


def vanishing_step(sizes: Sizes, step: int) -> Step:
    """DIGEST's count with the schedule's syncs (fixed or decreasing: known in advance; drift:
    not). The fill is the sync of step -1."""
    o = sizes.options
    if o.sync_schedule == "drift":
        raise Unpredictable("--sync-schedule drift: its syncs follow the boundary rows' drift")
    last, due = -1, False
    for t in range(step + 1):
        due = t - last >= (o.sync_interval if o.sync_schedule == "fixed"
                           else interval_at(t, o.sync_interval, sizes.epochs))
        last = t if due else last
    return stale_step(sizes, step, due)


@register("digest-vanishing", "DIGEST whose staleness vanishes: store syncs on a decreasing "
          "interval or on boundary-row drift (--sync-schedule); our own, not DIGEST",
          options=(StoreOptions, ScheduleOptions, ParamOptions), traffic=vanishing_step)
def digest_vanishing(cfg, part, plan, model):
    return VanishingHalo(part, plan, model, cfg), make_param_policy(cfg)

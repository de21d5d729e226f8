"""Every registered method's traffic on a job, step by step, from the method's own step count
(``register(..., traffic=...)``; digest/policies/counting.py): bytes per epoch as runs record them
(``bytes_total`` of metrics.csv: every worker's bytes, summed), per category and per worker.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import methods
from ..config import TrainConfig
from ..models import MODELS
from ..policies.counting import Sizes, Step, Unpredictable
from .job import Job


@dataclass
class Counted:
    """One method's steps on a job, or why there are none.

    Args:
        method: its name. steps: ``Step`` per epoch 0 .. T-1 (empty when ``reason``).
        reason: one line saying why the method cannot be counted in advance, or ``""``.
        cfg: the run configuration it was counted for.
    """

    method: str
    steps: list
    reason: str
    cfg: TrainConfig

    def bytes(self, step: int) -> int:
        """Bytes every worker sends at ``step``, summed (metrics.csv's ``bytes_total``)."""
        return sum(sum(c.sent) for c in self.steps[step].collectives)

    def by_category(self, step: int) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.steps[step].collectives:
            out[c.category] = out.get(c.category, 0) + sum(c.sent)
        return out

    def mean_bytes(self, first: int = 0, last: int | None = None) -> float:
        """Mean bytes per epoch over epochs ``first`` .. ``last - 1`` (default: the whole run,
        summary.json's ``mean_bytes_per_epoch``)."""
        last = len(self.steps) if last is None else last
        return sum(self.bytes(t) for t in range(first, last)) / max(1, last - first)


def parameters(job: Job, cfg: TrainConfig) -> tuple[list[int], int]:
    """The model's widths F_0 .. F_L and its number of parameters (the model is built, on CPU,
    as every worker builds it)."""
    m = cfg.model
    model = MODELS[m.model](job.features, m.hidden, job.classes, m.layers, m.dropout,
                            m.batch_norm)
    return list(model.widths), sum(p.numel() for p in model.parameters())


def sizes_of(job: Job, cfg: TrainConfig) -> Sizes:
    widths, params = parameters(job, cfg)
    return Sizes([list(r) for r in job.send], widths, params, list(job.fetch), cfg)


def count(job: Job, cfg: TrainConfig) -> Counted:
    """``cfg.method``'s steps over ``cfg.optim.epochs`` epochs on ``job``."""
    fn = methods.get(cfg.method).traffic
    if fn is None:
        return Counted(cfg.method, [], "the method declares no step count "
                       "(register(..., traffic=...), digest/policies/counting.py)", cfg)
    if isinstance(fn, str):
        return Counted(cfg.method, [], fn, cfg)
    sizes = sizes_of(job, cfg)
    try:
        steps = [fn(sizes, t) for t in range(cfg.optim.epochs)]
    except Unpredictable as e:
        return Counted(cfg.method, [], str(e), cfg)
    return Counted(cfg.method, steps, "", cfg)


def step_of(counted: Counted, t: int) -> Step:
    return counted.steps[t]

"""One method's predicted per-epoch times on a job: its step counts (traffic.py) priced by the
time model (cost.py) with each worker's work (work.py). docs/methods.md section 13.

A per-epoch time is the mean over a window of whole epochs that leaves out the first ``WARMUP``
(docs/methods.md section 11), as the benchmark times a run: periodic work (a store sync every I
steps, averaging every K) is paid in the window as often as in the run.
"""
from __future__ import annotations

from dataclasses import dataclass

from .cost import Network, Rates, step_seconds
from .job import Job
from .protocol import WARMUP
from .traffic import Counted, parameters
from .work import MODELLED, step_work



@dataclass
class Timing:
    """Per-step predictions of one method (``steps[t]``: ``step_seconds``'s dict for epoch t),
    or the reason there are none."""

    steps: list
    reason: str = ""

    def mean(self, key: str = "time", first: int = WARMUP, last: int | None = None) -> float:
        """Mean of ``key`` over epochs ``first`` .. ``last - 1`` (fewer epochs than the warm-up:
        over all of them)."""
        last = len(self.steps) if last is None else last
        first = first if first < last else 0
        return sum(s[key] for s in self.steps[first:last]) / max(1, last - first)


def predict(job: Job, counted: Counted, rates: Rates, net: Network, share: float = 1.0,
            last: int | None = None) -> Timing:
    """Every step's time of ``counted`` (up to epoch ``last``, default all) on ``job``.

    Args:
        share: workers per core (1: each worker a core, or a device, of its own)."""
    if counted.reason:
        return Timing([], counted.reason)
    cfg = counted.cfg
    m = cfg.model
    if m.model not in MODELLED:
        return Timing([], f"no compute model for --model {m.model} (only "
                          f"{', '.join(MODELLED)}): its attention kernels are not counted")
    widths, params = parameters(job, cfg)
    works: dict = {}

    def work(halo: str, backward: bool = True):
        if (halo, backward) not in works:
            works[halo, backward] = [step_work(p, widths, m.model, halo, m.dropout, job.sparse_x,
                                               params, backward) for p in job.parts]
        return works[halo, backward]

    steps = []
    for step in counted.steps[:last]:
        if step.unmodelled:
            return Timing([], f"its {step.unmodelled} is not in the compute model")
        steps.append(step_seconds(step, work(step.halo), work("grad", False), net, rates, share))
    return Timing(steps)

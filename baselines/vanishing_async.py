"""DIGEST-A with staleness that vanishes (docs/methods.md section 8.5: "and DIGEST-A where it
applies"; our own, never reported as DIGEST-A).

The schedules of baselines/vanishing.py, decided by each worker alone after each of its own
steps, since DIGEST-A has no collective while it trains. A sync is DIGEST-A's: push this worker's
boundary rows to the server's store, pull the newer halo blocks it holds.

- ``fixed``: every I of the worker's own steps (DIGEST-A itself, step for step);
- ``decreasing``: the interval falls linearly from I to 1 over the training BUDGET, read from the
  server's version in the reply to this step's gradient: progress = (version - 1) / (M E - 1).
  *(choice)* The budget, not the worker's own step count: a straggler takes fewer steps than E,
  but its rows matter most at the end like everyone's; with one worker it is the synchronous
  formula step for step;
- ``drift``: this worker's OWN boundary rows drifted by TAU since its last push, never later than
  I steps (the issue's wording). Unlike synchronous DIGEST no all-reduce agrees on a common
  decision: nobody waits for anybody, and the drift costs no bytes.
"""
from __future__ import annotations

from digest.runtime import comm
from digest.asynchronous import AsyncClient, AsyncParamPolicy, AsyncStaleHalo, AsyncTrainer
from digest.methods import register
from digest.policies.store import StoreOptions

from .vanishing import ScheduleOptions, Scheduled, interval_for


class AsyncVanishingHalo(Scheduled, AsyncStaleHalo):
    """AsyncStaleHalo whose sync steps follow ``--sync-schedule`` (module docstring)."""

    def __init__(self, part, plan, model, cfg, client: AsyncClient):
        super().__init__(part, plan, model, cfg, client)
        self.init_schedule(cfg)
        self.interval_now = None

    def before_step(self, step, forward):
        seeding = not self.started
        super().before_step(step, forward)
        if seeding and self.latest:  # the seed push: the fill's rows
            self.pushed_at(step - 1)

    def progress(self) -> float:
        """Share of the training budget spent, by the server's version after this step's
        gradient: 0 at the first gradient, 1 at the last."""
        return (self.client.version - 1) / max(1, self.client.budget - 1)

    def due(self, step: int) -> bool:
        def interval_now():
            self.interval_now = interval_for(self.progress(), self.interval)
            return self.interval_now
        return self.scheduled(step, interval_now)  # drift: this worker's own, no collective

    def after_step(self, step):
        before = self.syncs
        super().after_step(step)
        if self.syncs > before:
            self.pushed_at(step)

    def reported_interval(self):  # the interval at this worker's latest step
        return self.interval_now


@register("digest-async-vanishing", "DIGEST-A whose staleness vanishes: each worker pushes on a "
          "decreasing interval or on its own boundary-row drift (--sync-schedule); our own",
          options=(StoreOptions, ScheduleOptions), trainer=AsyncTrainer, asynchronous=True,
          traffic="asynchronous: its pushes, pulls and trajectory follow the workers' timing")
def digest_async_vanishing(cfg, part, plan, model):
    M = comm.world_size()
    client = AsyncClient(comm.rank(), M, cfg.runtime.timeout, budget=M * cfg.optim.epochs)
    return AsyncVanishingHalo(part, plan, model, cfg, client), AsyncParamPolicy(client)

"""SAT with sync snapshots (``--sat-snapshots sync``; docs/methods.md 10.1, a choice).

Why: with a snapshot every step (baselines/sat.py) and W < I, every halo row of the window is
the same store row; the predictor sees no history of the rows it must predict, only the inner
rows' drift. Here the window gains a snapshot at each store sync instead: [this step's inner
rows ; the rows just pulled], both fresh, so the halo rows' own last W refreshes are in it (the
reference code appends a snapshot when its history is refreshed, which is what a sync is here).

- After the sync at step s (and after the fill before step 0), the predictor reads the window
  and predicts the halo rows of the NEXT sync, Z_{s+I} (no gradient): ``next``.
- Step t in (s, s+I] reads lerp(store rows, next, (t - s) / I): the store rows are exact at s
  and the prediction is for s + I; in between, rows are taken to move linearly *(choice)*. At
  the sync step itself the forward reads ``next`` in full, so ``pred_err`` (next against the
  rows the sync brings) and DIGEST's ``stale_err`` compare the rows the same step would read.
- Training at the sync s + I: the pair (window as it was at s, Z_{s+I}) and the R - 1 replayed
  pairs; ``--sat-steps`` Adam steps. Warm-up as sat.py: store rows until the first update.
- Identity predictor: ``next`` = the last snapshot's halo rows = the store rows: DIGEST.

Shapes: windows ``[k, W, F]`` over the predictor's k nodes; ``next[l]`` ``[n_halo, F_l]``.
"""
from __future__ import annotations

import time

import torch
from torch import Tensor

from digest.policies.store import StaleHalo


class SyncSnapshots:
    """SAT whose window holds the last W syncs' fresh rows (module docstring): a mixin placed
    before ``SatHalo`` (baselines/sat.py ``SyncSatHalo``), so that this file does not import it."""

    def __init__(self, part, plan, model, cfg):
        super().__init__(part, plan, model, cfg)
        self.next: dict[int, Tensor] = {}  # layer -> predicted halo rows of the next sync

    def before_step(self, step, forward):
        filling = not self.store
        super().before_step(step, forward)
        if filling:  # the fill's rows are fresh: the window's first snapshot
            self._snapshot()

    def halo(self, layer, h_inner):
        rows = StaleHalo.halo(self, layer, h_inner)  # the store rows; keeps this step's inner rows
        self._used[layer] = 0
        nxt = self.next.get(layer)
        if nxt is None or self.closed[layer]:
            return rows
        rows = torch.lerp(rows, nxt, min(1.0, self.age / self.interval))
        self.used[layer] = rows
        self._used[layer] = 1
        return rows

    def after_step(self, step):
        StaleHalo.after_step(self, step)  # a due step: push and pull, the store = fresh rows Z
        if not self.due(step):
            return
        t0 = time.perf_counter()
        pairs = {}
        for l in self.hidden:
            if not self.snaps[l]:
                continue
            Z, window = self.store[l], torch.stack(list(self.snaps[l]), 1)
            if l in self.next:
                self._pred_err[l] = self.stale_error(self.next[l], Z)
            pairs[l] = [(window, Z), *self.pairs[l]]
            if self.replay > 1:
                self.pairs[l].append((window, Z))
        self._fit(pairs)  # every worker, halo or not (--sat-shared all-reduces)
        self._mark_trained()
        self._snapshot()
        self._time += time.perf_counter() - t0

    @torch.no_grad()
    def _snapshot(self) -> None:
        """Append [inner rows ; store rows] (both fresh now) and predict the next sync's rows."""
        if not self.has_halo:
            return
        for l in self.hidden:
            if l not in self.latest:
                continue
            snap = torch.cat([self.latest[l], self.store[l]]).index_select(0, self.graph.nodes)
            self.snaps[l].append(snap)
            if self.trained[l]:
                self.next[l] = self.predict(l, torch.stack(list(self.snaps[l]), 1))

    # -- metrics and checkpoints --------------------------------------------------------------
    def memory_mb(self) -> float:
        extra = sum(t.numel() * t.element_size() for t in self.next.values())
        return super().memory_mb() + extra / 2 ** 20

    def state_dict(self):
        return {**super().state_dict(), "next": dict(self.next)}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.next = dict(state["next"])

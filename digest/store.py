"""DIGEST's representation store and its stale halo policy (METHODS.md section 4).

Logically the store is a key-value map (layer, global node id) -> h^l. Synchronously it is
realised without a server: at a sync step every worker pushes the boundary rows it computed in
that step's forward pass and pulls its halo rows, both in ONE all-to-all between the workers that
share cut edges (all hidden layers packed side by side). Between syncs the pulled rows are reused
as constants: no gradient flows into them and nothing is sent back.
"""
from __future__ import annotations

import torch
from torch import Tensor

from . import comm
from .halo import HaloPlan, HaloPolicy, exchange
from .part import LocalPart


class StaleHalo(HaloPolicy):
    """Halo rows of hidden layers 1..L-1 come from the store, refreshed after every step t with
    (t + 1) % I == 0; layer-0 halo rows are the exact input features (fetched once)."""

    def __init__(self, part: LocalPart, plan: HaloPlan, model, cfg):
        super().__init__(part, plan)
        self.model = model
        self.interval = cfg.sync_interval
        self.widths = model.widths  # widths[l] = columns of h^l
        self.store: dict[int, Tensor] = {}  # layer -> stale halo rows [n_halo, F_l]
        self.latest: dict[int, Tensor] = {}  # layer -> this step's inner rows (to push)
        self.synced_at = None  # the step whose forward computed the rows in the store
        self.age = None  # steps between that step and the one now using them
        self.syncs = 0

    # -- the policy -------------------------------------------------------------------------
    def before_step(self, step, forward):
        if not self.store:  # start (or a resume without a store): one exact forward pass
            self._fill(forward)
            self.synced_at = step
        self.age = step - self.synced_at

    def halo(self, layer, h_inner):
        self.latest[layer] = h_inner.detach()
        return torch.cat([h_inner, self.store[layer]])

    def after_step(self, step):
        if (step + 1) % self.interval == 0:
            self.sync()
            self.synced_at = step

    def state(self):
        return {"staleness_repr": self.age, "store_syncs": self.syncs}

    # -- the store ----------------------------------------------------------------------------
    def sync(self) -> None:
        """Push boundary rows of every hidden layer, pull halo rows: one all-to-all."""
        layers = sorted(self.latest)
        if not layers:
            return
        send = torch.cat([self.latest[l].index_select(0, self.plan.send_flat) for l in layers], 1)
        recv = comm.all_to_all_rows(send, self.plan.send_counts, self.plan.recv_counts, "store")
        for l, rows in zip(layers, recv.split([self.widths[l] for l in layers], 1)):
            self.store[l] = rows
        self.syncs += 1

    @torch.no_grad()
    def _fill(self, forward) -> None:
        """Exact forward pass (no dropout) whose exchanged halo rows become the first store."""
        def exact(layer, h_inner):
            self.store[layer] = exchange(h_inner, self.plan, "store")
            return torch.cat([h_inner, self.store[layer]])
        training = self.model.training
        self.model.eval()
        forward(exact)
        self.model.train(training)

    def state_dict(self):
        return {"store": self.store, "synced_at": self.synced_at, "syncs": self.syncs}

    def load_state_dict(self, state):
        self.store, self.synced_at, self.syncs = state["store"], state["synced_at"], state["syncs"]

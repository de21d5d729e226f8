"""DIGEST's representation store and its stale halo policy (docs/methods.md section 4).

Logically the store is a key-value map (layer, global node id) -> h^l. Synchronously it is
realised without a server: at a sync step every worker pushes the boundary rows it computed in
that step's forward pass and pulls its halo rows, both in ONE all-to-all between the workers that
share cut edges (all hidden layers packed side by side; with an explicit ``--compressor slice`` or
``random`` each layer's block is first cut to ceil(F / r(t)) columns, see compress.py). Between
syncs the pulled rows are reused as constants: no gradient flows into them and nothing is sent back.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..data.local_graph import LocalPart
from ..methods import register
from ..options import Options, option
from ..runtime import comm
from .compress import CompressionOptions, compressor_factory, parse_layers, width
from .counting import Sizes, Step
from .halo import HaloPlan, HaloPolicy, exchange
from .params import ParamOptions, make_param_policy


@dataclass
class StoreOptions(Options):
    """DIGEST's representation store."""
    sync_interval: int = option(10, "stale-representation sync interval I (steps)")

    def group_period(self) -> int:  # the store refresh
        return self.sync_interval

    def check_group(self, cfg) -> None:
        if self.sync_interval < 1:
            raise ValueError("--sync-interval must be >= 1")
        if getattr(self, "compressor", None) == "learned":
            raise ValueError("--compressor learned cannot train under DIGEST (store rows are "
                             "constants, no gradient reaches the codec); use slice or random")


class StaleHalo(HaloPolicy):
    """Halo rows of hidden layers 1..L-1 come from the store, refreshed after every step t with
    (t + 1) % I == 0; layer-0 halo rows are the exact input features (fetched once)."""

    def __init__(self, part: LocalPart, plan: HaloPlan, model, cfg):
        super().__init__(part, plan)
        self.model = model
        self.interval = cfg.options.sync_interval
        self.widths = model.widths  # widths[l] = columns of h^l
        self.store: dict[int, Tensor] = {}  # layer -> stale halo rows [n_halo, F_l]
        self.latest: dict[int, Tensor] = {}  # layer -> this step's inner rows (to push)
        self.used: dict[int, Tensor] = {}  # layer -> the stale halo rows this step read
        self.synced_at = None  # the step whose forward computed the rows in the store
        self.age = None  # steps between that step and the one now using them
        self.syncs = 0
        self.errors: dict[int, float] = {}  # layer -> relative error of the rows replaced (at a sync)
        # Store compression only when asked for: --compressor auto/none keeps the exact sync.
        # Layers: --comp-layers, default every stored layer 1..L-1.
        comp = cfg.options if isinstance(cfg.options, CompressionOptions) else None
        name = "none" if comp is None or comp.compressor == "auto" else comp.compressor
        L = len(self.widths) - 1
        layers = [] if name == "none" else parse_layers(comp.comp_layers, L, list(range(1, L)))
        make = compressor_factory(name, cfg.seed)
        self.codecs = {l: make(l, self.widths[l]) for l in layers}
        self.comp, self.epochs, self.ratio = comp, cfg.optim.epochs, 1.0

    # -- the policy -------------------------------------------------------------------------
    def before_step(self, step, forward):
        if not self.store:  # start (or a resume without a store): one exact forward pass
            self._fill(forward)
            self.synced_at = step
        self.age = step - self.synced_at

    def halo(self, layer, h_inner):
        self.latest[layer] = h_inner.detach()
        self.used[layer] = self.store[layer]
        return self.store[layer]  # a constant: no gradient is computed for these rows

    def due(self, step: int) -> bool:
        """Whether the store syncs after ``step``: every I steps (schedules: baselines/vanishing.py)."""
        return (step + 1) % self.interval == 0

    def after_step(self, step):
        self.errors = {}
        if self.due(step):
            self.sync(step)
            self.synced_at = step

    def state(self):
        out = {"staleness_repr": self.age, "store_syncs": self.syncs,
               **{f"stale_err_l{l}": e for l, e in self.errors.items()}}
        if self.codecs:  # the ratio of the last sync (1 before the first)
            out["comp_ratio"] = self.ratio
        return out

    # -- the store ----------------------------------------------------------------------------
    @torch.no_grad()
    def sync(self, step: int = 0) -> None:
        """Push boundary rows of every hidden layer, pull halo rows: one all-to-all. Layers with a
        codec are encoded to k = ceil(F / r(step)) columns first and decoded on arrival; all
        blocks, k-wide or F-wide, still travel side by side in the one all-to-all."""
        layers = sorted(self.latest)
        if not layers:
            return
        if self.codecs:
            self.ratio = self.comp.ratio(step, self.epochs)
        blocks = []
        for l in layers:
            rows = self.latest[l].index_select(0, self.plan.send_flat)
            k = width(rows.size(1), self.ratio)
            if l in self.codecs and k < rows.size(1):
                rows = self.codecs[l].encode(rows, k, step)
            blocks.append(rows)
        recv = comm.all_to_all_rows(torch.cat(blocks, 1), self.plan.send_counts,
                                    self.plan.recv_counts, "store")
        for l, rows in zip(layers, recv.split([b.size(1) for b in blocks], 1)):
            F = self.widths[l]
            fresh = self.codecs[l].decode(rows, F, step) if rows.size(1) < F else rows
            self.errors[l] = self.stale_error(self.store.get(l), fresh)
            self.store[l] = fresh
        self.syncs += 1

    def boundary_rows(self) -> Tensor:
        """This worker's boundary rows from the last forward, every hidden layer side by side,
        in send order. Shape: [sum(send_counts), sum of the hidden widths]."""
        return torch.cat([self.latest[l].index_select(0, self.plan.send_flat)
                          for l in sorted(self.latest)], 1)

    @staticmethod
    def stale_error(stale: Tensor | None, fresh: Tensor) -> float | None:
        """Staleness as error: ||stale - fresh|| / ||fresh|| (Frobenius, this
        worker's halo rows of one layer), where ``stale`` = the rows the step before this sync
        read and ``fresh`` = the owners' rows of that same step. None without rows (no halo)."""
        if stale is None or fresh.numel() == 0:
            return None
        return float((stale - fresh).norm() / fresh.norm().clamp_min(1e-12))

    @torch.no_grad()
    def _fill(self, forward) -> None:
        """Exact forward pass whose exchanged halo rows become the first store (its inner rows
        are kept too: DIGEST-A seeds its server's store with them). It runs as every later
        push's forward does, in training mode (dropout, batch-norm batch statistics), only
        without a gradient or a parameter update, so the store never holds rows of another
        kind than the ones that replace them."""
        def exact(layer, h_inner):
            self.latest[layer] = h_inner.detach()
            self.store[layer] = exchange(h_inner, self.plan, "store")
            return self.store[layer]
        forward(exact)

    def state_dict(self):
        return {"store": self.store, "synced_at": self.synced_at, "syncs": self.syncs}

    def load_state_dict(self, state):
        self.store, self.synced_at, self.syncs = state["store"], state["synced_at"], state["syncs"]


def stale_step(sizes: Sizes, step: int, sync: bool) -> Step:
    """DIGEST's step count: layer 0's features and the store's fill (one forward exchange per
    hidden layer, one extra forward pass) at step 0; parameters every step; at a sync (``sync``)
    one all-to-all of every hidden layer's boundary rows side by side, each layer cut to
    ceil(F / r(step)) columns where ``--compressor`` asks for it."""
    out = [sizes.input_fetch(), *sizes.fill("store")] if step == 0 else []
    out += sizes.param_sync(step)
    if sync and sizes.hidden:
        o = sizes.options
        name = getattr(o, "compressor", "auto")
        coded = [] if name in ("auto", "none") else parse_layers(o.comp_layers, len(sizes.widths)
                                                                  - 1, sizes.hidden)
        ratio = o.ratio(step, sizes.epochs) if coded else 1.0
        cols = sum(width(sizes.widths[l], ratio) if l in coded else sizes.widths[l]
                   for l in sizes.hidden)
        out.append(sizes.rows(4 * cols, "store"))
    return Step(out, "const", forwards=int(step == 0))


def digest_step(sizes: Sizes, step: int) -> Step:
    """A sync after every step t with (t + 1) mod I = 0."""
    return stale_step(sizes, step, (step + 1) % sizes.options.sync_interval == 0)


@register("digest", "DIGEST: stale halo representations synced every --sync-interval steps",
          options=(StoreOptions, CompressionOptions, ParamOptions), traffic=digest_step)
def digest(cfg, part, plan, model):
    return StaleHalo(part, plan, model, cfg), make_param_policy(cfg)

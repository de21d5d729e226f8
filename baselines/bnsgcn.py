"""BNS-GCN (docs/methods.md section 8.2; Wan et al., MLSys 2022): random boundary-node sampling.

Every step each owner m samples, for each peer j, floor(p |B_mj|) of the boundary rows it would
send to j (B_mj = m's rows in j's halo), uniformly without replacement, and sends only those, in
ONE all-to-all with the reduced counts; only their gradients come back. The same sample is used by
every hidden layer of the step.

Which rows: drawn from a generator seeded by (seed, step, owner, peer), which sender and receiver
both evaluate, so no index crosses the wire and none is counted *(choice, docs/methods.md: "from a
seed shared by sender and receiver")*. Bytes are the sampled rows only.

What the receiver does with the rows it did not get (they and their edges are left out of its
local graph for the step):
- GCN and GraphSAGE: the receiver builds the full halo block ``[n_halo, F]`` with zero rows where
  nothing was sampled. Both models aggregate the halo block linearly with weights fixed beforehand
  (GCN: the global-degree weights of the halo adjacency block; SAGE: a mean whose denominator is
  the full in-degree, every halo edge being in the local graph), so a zero row contributes nothing:
  exactly the edge left out, with the normalisation of the full graph, as the reference code's
  GraphSAGE (its ``in_deg`` is the full graph's). Received rows are scaled by |B_mj| / s_mj
  (s_mj = rows sampled), and by autograd their gradients by the same factor on the way back, which
  is the reference code's ``ratio`` (= p when p |B_mj| is an integer; *(reference code)*,
  docs/methods.md says 1/p), so the aggregation is unbiased.
- GAT: attention would give a zero row a weight, so the edges of unsampled halo rows are removed
  from the edge list the layer reads (a forward pre-hook on each hidden GATConv, active only for
  this policy's training forward), and rows are NOT rescaled *(choice)*: the softmax renormalises
  over the neighbours kept (the reference code's own TODO: "ratio 1 if model == 'gat'").

Layer 0 reads the exact input features, fetched once at start-up as in every method (the reference
code's ``use_pp`` precomputes layer 0's aggregation from the full features too).

``--boundary-rate p``: 1 is exact training (every row, factor 1); 0 starts no exchange at all and
every halo row is left out.

Memory: the halo block keeps its full size ``[n_halo, F]`` (zeros where unsampled), so this
implementation does not shrink the local graph or its activations; the paper's memory saving is not
reproduced by construction (peak memory is measured and reported as it is).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from digest.runtime import comm
from digest.options import Options, option
from digest.policies.counting import Sizes, Step
from digest.policies.halo import HaloPlan, HaloPolicy, exchange
from digest.methods import register
from digest.models.gat import GAT
from digest.policies.params import ParamOptions, make_param_policy


@dataclass
class BoundaryOptions(Options):
    """BNS-GCN: random boundary-node sampling."""
    boundary_rate: float = option(0.1, "fraction p of its boundary rows each owner samples per "
                                  "peer and step (1 = exact, 0 = no halo rows)")

    def check_group(self, cfg) -> None:
        if not 0 <= self.boundary_rate <= 1:
            raise ValueError("--boundary-rate must be in [0, 1]")


def sample(seed: int, step: int, owner: int, peer: int, total: int, k: int) -> Tensor:
    """k of ``range(total)``, uniformly without replacement, sorted: the same on the owner (who
    sends them) and on the peer (who receives them)."""
    if k <= 0:
        return torch.empty(0, dtype=torch.long)
    if k >= total:
        return torch.arange(total)
    key = np.random.SeedSequence([seed % 2**32, step, owner, peer]).generate_state(1)[0]
    gen = torch.Generator().manual_seed(int(key))
    return torch.randperm(total, generator=gen)[:k].sort().values


class SampledHalo(HaloPolicy):
    """Shapes: ``halo(l, h_inner [n_inner, F]) -> [n_halo, F]``; on the wire ``[sum s_mj, F]``."""

    def __init__(self, part, plan: HaloPlan, model, cfg):
        super().__init__(part, plan)
        self.p, self.seed = float(cfg.options.boundary_rate), cfg.seed
        self.me, self.M = comm.rank(), comm.world_size()
        self.alone = self.M == 1 and not sum(plan.recv_counts)
        self.n_inner, self.n_halo = part.n_inner, int(sum(plan.recv_counts))
        # floor(p |B|): the sender's p * send_counts[j] and the receiver's p * recv_counts[m] are
        # the same float product, so both sides agree
        self.send_n = [int(math.floor(self.p * c)) for c in plan.send_counts]
        self.recv_n = [int(math.floor(self.p * c)) for c in plan.recv_counts]
        self.send_off = np.cumsum([0, *plan.send_counts])
        self.recv_off = np.cumsum([0, *plan.recv_counts])
        self.device = plan.send_flat.device
        self.gat = isinstance(model, GAT)
        scale = [] if self.gat else \
            [c / n for c, n in zip(plan.recv_counts, self.recv_n) for _ in range(n)]
        self.scale = None if all(s == 1.0 for s in scale) else \
            torch.tensor(scale, dtype=torch.float32, device=self.device).unsqueeze(1)
        self.step = None
        self.sub: HaloPlan | None = None  # this step's sampled exchange
        self.recv_sel: Tensor | None = None  # halo positions received this step
        self._mask_layers: set[int] = set()  # GAT: hidden layers whose next conv drops edges
        self._keep = None  # GAT: (step, edge mask)
        if self.gat:
            for layer in range(1, len(model.convs)):
                model.convs[layer].register_forward_pre_hook(self._drop_edges(layer))

    def before_step(self, step, forward):
        self.step = step
        if self.alone:
            return
        send = [sample(self.seed, step, self.me, j, c, n) + int(self.send_off[j])
                for j, (c, n) in enumerate(zip(self.plan.send_counts, self.send_n))]
        recv = [sample(self.seed, step, m, self.me, c, n) + int(self.recv_off[m])
                for m, (c, n) in enumerate(zip(self.plan.recv_counts, self.recv_n))]
        send_pos = torch.cat(send).to(self.device)
        self.sub = HaloPlan(self.plan.send_flat.index_select(0, send_pos), list(self.send_n),
                            list(self.recv_n))
        self.recv_sel = torch.cat(recv).to(self.device)

    def halo(self, layer, h_inner):
        if self.alone:
            return None
        F = h_inner.size(1)
        if self.gat:
            self._mask_layers.add(layer)
        if self.p == 0:  # every worker knows it: no exchange is started at all
            return h_inner.new_zeros((self.n_halo, F))
        rows = exchange(h_inner, self.sub)  # sampled rows out, their gradients back
        if self.scale is not None:
            rows = rows * self.scale
        if rows.size(0) == self.n_halo:  # every row sampled (p = 1): already in halo order
            return rows
        return rows.new_zeros((self.n_halo, F)).index_copy(0, self.recv_sel, rows)

    def _drop_edges(self, layer: int):
        def hook(module, args):
            if layer not in self._mask_layers:  # not this policy's forward (evaluation)
                return None
            self._mask_layers.discard(layer)
            x, edge_index, *rest = args
            return (x, edge_index[:, self._edge_mask(edge_index)], *rest)
        return hook

    def _edge_mask(self, edge_index: Tensor) -> Tensor:
        if self._keep is None or self._keep[0] != self.step:
            ok = torch.ones(self.n_inner + self.n_halo, dtype=torch.bool, device=edge_index.device)
            ok[self.n_inner:] = False
            ok[self.n_inner + self.recv_sel.to(edge_index.device)] = True
            self._keep = (self.step, ok.index_select(0, edge_index[0]))
        return self._keep[1]

    def state(self):
        total = sum(self.plan.send_counts)
        return {"sampled_fraction": sum(self.send_n) / total if total else None}


def bnsgcn_step(sizes: Sizes, step: int) -> Step:
    """Exact's exchanges with floor(p |B_mj|) rows per (owner, peer) block, both directions."""
    p = float(sizes.options.boundary_rate)
    out = [sizes.input_fetch()] if step == 0 else []
    if p > 0:
        counts = [[int(math.floor(p * c)) for c in row] for row in sizes.send]
        for l in sizes.hidden:
            F = sizes.widths[l]
            out += [sizes.rows(4 * F, "halo_fwd", counts=counts),
                    sizes.rows(4 * F, "halo_bwd", back=True, counts=counts)]
    return Step(out + sizes.param_sync(step), "grad")


@register("bnsgcn", "BNS-GCN: each step a random fraction --boundary-rate of the boundary rows "
          "is exchanged, the rest left out", options=(BoundaryOptions, ParamOptions),
          traffic=bnsgcn_step)
def bnsgcn(cfg, part, plan, model):
    return SampledHalo(part, plan, model, cfg), make_param_policy(cfg)

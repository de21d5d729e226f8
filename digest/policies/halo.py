"""The halo exchange and the halo policies (docs/methods.md sections 1-3).

A *halo policy* answers one question per layer l >= 1: given this worker's fresh inner rows h^l,
what are the rows of its halo? The answer (rows ``[n_halo, F]``, never concatenated with the inner
rows: the model aggregates the two blocks separately) is the whole difference between methods:
exact (fetch them now, gradients flow back), none (partition-based: drop cut edges), stale
(DIGEST, in store.py), compressed (VARCO, in baselines/varco.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..data.local_graph import LocalPart
from ..methods import register
from ..options import Options, option
from ..runtime import comm
from .counting import exact_step
from .params import ParamOptions, make_param_policy


@dataclass
class HaloPlan:
    """Index lists of one worker's exchange.

    Args:
        send_flat: positions of inner rows to send, peer by peer. Shape ``[S]``.
        send_counts: rows for each peer (sum S).
        recv_counts: rows from each peer (sum = n_halo, in halo order).
    """

    send_flat: Tensor
    send_counts: list[int]
    recv_counts: list[int]

    @classmethod
    def of(cls, part: LocalPart, device=None) -> "HaloPlan":
        flat = torch.cat(part.send_idx) if part.send_idx else torch.empty(0, dtype=torch.long)
        return cls(flat.to(device), [int(s.numel()) for s in part.send_idx],
                   list(part.recv_counts))


class HaloExchange(torch.autograd.Function):
    """Forward: boundary rows out, halo rows in, one all-to-all. Backward: halo gradients go back
    to their owners in one all-to-all and are summed into the owners' row gradients (a boundary
    row sent to several peers receives the sum of their gradients)."""

    @staticmethod
    def forward(ctx, h_inner: Tensor, plan: HaloPlan, fwd: str = "halo_fwd",
                bwd: str = "halo_bwd") -> Tensor:
        ctx.plan, ctx.bwd, ctx.shape = plan, bwd, h_inner.shape
        send = h_inner.index_select(0, plan.send_flat)
        return comm.all_to_all_rows(send, plan.send_counts, plan.recv_counts, fwd)

    @staticmethod
    def backward(ctx, grad_halo: Tensor):
        plan = ctx.plan
        grad_send = comm.all_to_all_rows(grad_halo.contiguous(), plan.recv_counts,
                                         plan.send_counts, ctx.bwd)
        grad = grad_halo.new_zeros(ctx.shape).index_add_(0, plan.send_flat, grad_send)
        return grad, None, None, None


def exchange(h_inner: Tensor, plan: HaloPlan, fwd: str = "halo_fwd", bwd: str = "halo_bwd") -> Tensor:
    """Halo rows of ``h_inner``'s owners. Shapes ``[n_inner, F] -> [n_halo, F]``."""
    return HaloExchange.apply(h_inner, plan, fwd, bwd)


class HaloPolicy:
    """Base class. ``induced`` selects the local graph: False = inner + halo rows with global-degree
    normalisation; True = the induced subgraph of the inner rows (partition-based)."""

    induced = False

    def __init__(self, part: LocalPart, plan: HaloPlan):
        self.part, self.plan = part, plan

    def halo(self, layer: int, h_inner: Tensor) -> Tensor | None:  # pragma: no cover - abstract
        """The halo rows ``[n_halo, F]`` that layer ``layer`` reads beside ``h_inner``, or None
        (no halo). Rows that require grad send their gradient back to their owners."""
        raise NotImplementedError

    def before_step(self, step: int, forward) -> None:
        """Called before the forward of ``step``; ``forward(halo_fn)`` runs the model on this
        worker's inputs (DIGEST uses it to fill its store before step 0)."""

    def after_step(self, step: int) -> None:
        """Called after the optimiser step (DIGEST syncs its store here)."""

    def state(self) -> dict:
        """Method-specific metric columns (compression ratio, staleness)."""
        return {}

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class ExactHalo(HaloPolicy):
    """Propagation-based: fresh halo rows every layer of every step, gradients sent back.
    ``fwd="eval"`` keeps evaluation traffic out of the training byte counts; ``detach``: the rows
    are sent without their gradient (nothing goes back)."""

    def __init__(self, part: LocalPart, plan: HaloPlan, fwd: str = "halo_fwd",
                 detach: bool = False):
        super().__init__(part, plan)
        self.fwd, self.detach = fwd, detach

    def halo(self, layer, h_inner):
        if comm.world_size() == 1 and not sum(self.plan.recv_counts):
            return None  # one process alone has no halo
        return exchange(h_inner.detach() if self.detach else h_inner, self.plan, self.fwd)


class NoHalo(HaloPolicy):
    """Partition-based: cut edges are dropped, so there is no halo to fetch."""

    induced = True

    def halo(self, layer, h_inner):
        return None


@dataclass
class ExactOptions(Options):
    """Exact's one ablation: its halo gradient (what DIGEST gives up beside freshness)."""
    halo_grad: str = option("on", "off: the halo rows are detached, fresh forward but no halo "
                            "gradient sent back (an ablation: DIGEST's missing halo gradient "
                            "without its staleness)", choices=("on", "off"))


@register("exact", "propagation-based: fresh halos forward and backward (full communication)",
          options=(ParamOptions, ExactOptions), traffic=exact_step)
def exact(cfg, part, plan, model):
    return ExactHalo(part, plan, detach=cfg.options.halo_grad == "off"), make_param_policy(cfg)

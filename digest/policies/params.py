"""Parameter policies (a method's "parameter-sync policy"): how the replicated parameters stay
identical (docs/methods.md sections 1, 3, 4). "Sync" alone means DIGEST's store sync (store.py).

A policy is asked three things per step: the factor of the loss before backward
(``loss_scale``), what to do with the gradients after backward (``after_backward``), and to apply
the update (``apply``: the optimiser step, plus averaging or whatever the policy needs).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..options import Options, option
from ..runtime import comm


@dataclass
class ParamOptions(Options):
    """Parameters: gradient all-reduce every step, or model averaging every K local steps."""
    local_steps: int = option(1, "parameter averaging every K local steps (1 = gradient "
                              "all-reduce every step)")

    def group_period(self) -> int:  # the parameter averaging
        return self.local_steps

    def check_group(self, cfg) -> None:
        if self.local_steps < 1:
            raise ValueError("--local-steps must be >= 1")


def flatten(tensors: list[Tensor]) -> Tensor:
    """One contiguous buffer holding every tensor, in order. Shape ``[sum of numels]``."""
    return torch.cat([t.reshape(-1) for t in tensors])


def unflatten(flat: Tensor, like: list[Tensor]) -> list[Tensor]:
    """Views of ``flat`` shaped as ``like`` (no copy)."""
    return [v.view_as(t) for v, t in zip(flat.split([t.numel() for t in like]), like)]


def grads_of(model: nn.Module) -> list[Tensor]:
    return [p.grad if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]


class ParamPolicy:
    """Base class. ``loss_scale`` multiplies the globally-weighted loss before backward."""

    loss_scale = 1.0

    def after_backward(self, model: nn.Module) -> None:
        """Between backward and the update."""

    def apply(self, step: int, opt: torch.optim.Optimizer, model: nn.Module) -> None:
        """The update of ``step``: by default the local optimiser's step."""
        opt.step()

    def averaged(self, step: int) -> bool:
        """Whether the parameters after ``step`` are identical on every worker (so that evaluating
        or finishing there measures one model, not a mix of diverged local ones)."""
        return True

    def state(self) -> dict:
        """Policy-specific metric columns."""
        return {}


class GradAllReduce(ParamPolicy):
    """Sum of gradients every step. Each worker's loss is already divided by the GLOBAL number of
    training nodes, so the sum over workers is the full-graph gradient. One flat buffer, one call."""

    def after_backward(self, model):
        if comm.world_size() == 1:  # nothing to add up: skip the flatten / unflatten copies
            return
        grads = grads_of(model)
        flat = comm.all_reduce_(flatten(grads), "params")
        # the gradients become views of the reduced buffer: no copy back (the next step's
        # zero_grad sets them to None, so no step writes into another's buffer)
        for p, g in zip(model.parameters(), unflatten(flat, grads)):
            p.grad = g


class ModelAveraging(ParamPolicy):
    """PSGD-PA / local SGD: K local steps, then the mean of the parameters; the last step always
    averages, so a run ends with one model. The local loss is scaled by M so each worker takes
    steps the size of a local mean loss."""

    def __init__(self, local_steps: int, epochs: int):
        self.k, self.last = local_steps, epochs - 1
        self.loss_scale = float(comm.world_size())

    def averaged(self, step):
        return (step + 1) % self.k == 0 or step == self.last

    def apply(self, step, opt, model):
        opt.step()
        if not self.averaged(step):
            return
        params = [p.data for p in model.parameters()]
        flat = comm.all_reduce_(flatten(params), "params")
        flat /= comm.world_size()
        for p, v in zip(params, unflatten(flat, params)):
            p.copy_(v)


def make_param_policy(cfg) -> ParamPolicy:
    """Gradient all-reduce, or averaging every ``--local-steps`` K > 1 (``cfg``: a TrainConfig
    whose options include ParamOptions)."""
    k = cfg.options.local_steps
    return GradAllReduce() if k <= 1 else ModelAveraging(k, cfg.optim.epochs)

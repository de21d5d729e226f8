"""Parameter-sync policies: how replicated parameters stay identical (METHODS.md sections 1, 3, 4)."""
from __future__ import annotations

import torch
from torch import nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from . import comm


class ParamSync:
    """Base class. ``loss_scale`` multiplies the globally-weighted loss before backward."""

    loss_scale = 1.0

    def after_backward(self, model: nn.Module) -> None:
        """Between backward and the optimiser step."""

    def after_step(self, step: int, model: nn.Module) -> None:
        """After the optimiser step."""


class GradAllReduce(ParamSync):
    """Sum of gradients every step. Each worker's loss is already divided by the GLOBAL number of
    training nodes, so the sum over workers is the full-graph gradient. One flat buffer, one call."""

    def after_backward(self, model):
        if comm.world_size() == 1:  # nothing to add up: skip the flatten / unflatten copies
            return
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]
        flat = comm.all_reduce_(_flatten_dense_tensors(grads), "params")
        # the gradients become views of the reduced buffer: no copy back (the next step's
        # zero_grad sets them to None, so no step writes into another's buffer)
        for p, g in zip(model.parameters(), _unflatten_dense_tensors(flat, grads)):
            p.grad = g


class ModelAveraging(ParamSync):
    """PSGD-PA / local SGD: K local steps, then the mean of the parameters. The local loss is
    scaled by M so each worker takes steps the size of a local mean loss."""

    def __init__(self, local_steps: int):
        self.k = local_steps
        self.loss_scale = float(comm.world_size())

    def after_step(self, step, model):
        if (step + 1) % self.k:
            return
        params = [p.data for p in model.parameters()]
        flat = comm.all_reduce_(_flatten_dense_tensors(params), "params")
        flat /= comm.world_size()
        for p, v in zip(params, _unflatten_dense_tensors(flat, params)):
            p.copy_(v)


def make_param_sync(local_steps: int = 1) -> ParamSync:
    return GradAllReduce() if local_steps <= 1 else ModelAveraging(local_steps)

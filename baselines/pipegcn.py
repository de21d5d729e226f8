"""PipeGCN (docs/methods.md section 8.1; Wan et al., ICLR 2022): one-step-stale halo features AND
halo gradients, exchanged without blocking so that the exchange overlaps computation.

Hidden layer l >= 1 at step t reads the halo rows their owners computed at step t-1. As soon as
layer l's inner rows of step t exist (when the model asks for layer l's halo), their boundary rows
are sent without blocking (``comm.all_to_all_rows_async``); step t+1 waits for them when its layer
l needs them. Backward mirrors it: the gradient w.r.t. the halo rows used at step t is sent back to
the owners without blocking, and at step t+1 each owner adds what it received (summed over the
peers that read a row) to the gradient of its boundary rows of layer l, from where it flows on
through step t+1's graph into the parameters and the layers below. Both directions ride on one
autograd Function (``_PipeHalo``): forward returns the stale rows, backward starts the send of
this step's halo gradient and returns last step's received gradient for the inner rows.

Step 0 reads halo rows from one exact forward pass (no dropout) before it, as DIGEST's store fill,
and receives no gradient *(choice, docs/methods.md)*. That fill is one extra forward exchange,
counted as ``halo_fwd`` of epoch 0; from step 1 on, bytes per step equal exact's (each hidden
layer's boundary rows forward and halo gradients backward). The last step's sends are waited for at
its end (nothing is left in flight when training stops), so its ``comm_wait`` is not hidden.

Smoothing ``--pipe-smoothing GAMMA`` (0 = off, the default; 0.95 in the reference code): an
exponential average avg <- GAMMA avg + (1 - GAMMA) received, kept separately for features and
gradients of each layer, used instead of the raw received rows. *(choice)* The average starts from
the first rows received (the exact fill for features, step 0's gradients for gradients), not from
zeros as in the reference code, so that it is not biased towards zero in the first 1/(1-GAMMA)
steps. With GAMMA = 0 the arithmetic runs and gives the received rows exactly.

Time: ``comm_time`` (and ``comm_wait``, the halo part of it) counts only the seconds spent waiting
for these exchanges (plus the blocking parameter all-reduce), i.e. the communication that
computation did not hide; ``pipe_ready`` is the fraction of exchanges that had already finished when
they were needed. On CUDA (NCCL) ``wait()`` only orders the streams, so the host-side wait measured
there is not the transfer time.

Shapes: ``halo(l, h_inner [n_inner, F]) -> [n_halo, F]``; on the wire ``[S, F]`` rows out
(S = rows this worker sends, a row needed by two peers sent twice), ``[n_halo, F]`` in.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from digest.runtime import comm
from digest.options import Options, option
from digest.policies.counting import Sizes, Step
from digest.policies.halo import HaloPlan, HaloPolicy, exchange
from digest.methods import register
from digest.policies.params import ParamOptions, make_param_policy


@dataclass
class PipeOptions(Options):
    """PipeGCN: pipelined one-step-stale halo features and gradients."""
    pipe_smoothing: float = option(0.0, "exponential smoothing GAMMA of the stale features and "
                                   "gradients (0 = off; 0.95 in the reference code)")

    def check_group(self, cfg) -> None:
        if not 0 <= self.pipe_smoothing < 1:
            raise ValueError("--pipe-smoothing must be in [0, 1)")


class _PipeHalo(torch.autograd.Function):
    """Forward: the stale halo rows (values given). Backward: this step's halo gradient is sent
    to its owners without blocking; the inner rows get last step's received boundary gradient."""

    @staticmethod
    def forward(ctx, h_inner: Tensor, rows: Tensor, policy: "PipeHalo", layer: int) -> Tensor:
        ctx.policy, ctx.layer, ctx.shape = policy, layer, h_inner.shape
        return rows.clone()

    @staticmethod
    def backward(ctx, grad_halo: Tensor):
        grad = ctx.policy._backward(ctx.layer, grad_halo, ctx.shape)
        return (grad if ctx.needs_input_grad[0] else None), None, None, None


class PipeHalo(HaloPolicy):
    """Per hidden layer l: ``feat[l]`` / ``grad[l]`` hold what the next step uses (a
    ``comm.Pending`` still in flight, or its received rows), ``feat_avg`` / ``grad_avg`` the
    smoothed rows. For tests: ``used[l]`` (halo rows read this step), ``latest[l]`` (inner rows
    computed this step), ``sent[l]`` (halo gradient ``[n_halo, F]`` sent back this step),
    ``added[l]`` (boundary gradient ``[S, F]`` in send order added this step, none at step 0)."""

    def __init__(self, part, plan: HaloPlan, model, cfg, gamma: float | None = None):
        super().__init__(part, plan)
        self.model = model
        # gamma: the smoothing, by default --pipe-smoothing (Sylvie, built on this class, has none)
        self.gamma = float(cfg.options.pipe_smoothing if gamma is None else gamma)
        self.last = cfg.optim.epochs - 1
        self.alone = comm.world_size() == 1 and not sum(plan.recv_counts)
        self.feat: dict[int, object] = {}
        self.grad: dict[int, object] = {}
        self.feat_avg: dict[int, Tensor] = {}
        self.grad_avg: dict[int, Tensor] = {}
        self.used: dict[int, Tensor] = {}
        self.latest: dict[int, Tensor] = {}
        self.added: dict[int, Tensor] = {}
        self.sent: dict[int, Tensor] = {}
        self.age = None
        self._waited, self._waits, self._ready = 0.0, 0, 0

    # -- the policy ---------------------------------------------------------------------------
    def before_step(self, step, forward):
        self._waited, self._waits, self._ready = 0.0, 0, 0
        self.used, self.latest, self.added, self.sent = {}, {}, {}, {}
        if self.alone:
            self.age = 0
            return
        if not self.feat:  # start: one exact forward pass fills the halo rows of step 0
            self._fill(forward)
            self.age = 0
        else:
            self.age = 1

    def halo(self, layer, h_inner):
        if self.alone:
            return None
        plan = self.plan
        rows = self._smooth(self.feat_avg, layer, self._take(self.feat, layer))
        self.used[layer] = rows
        mine = h_inner.detach()
        self.latest[layer] = mine
        # this step's boundary rows leave now; the next step waits for them
        self.feat[layer] = self._send_feat(layer, mine.index_select(0, plan.send_flat))
        return _PipeHalo.apply(h_inner, rows, self, layer)

    def _send_feat(self, layer: int, rows: Tensor) -> comm.Pending:
        """Start sending boundary rows ``[S, F]`` (send order) of ``layer``; a subclass may
        encode them (Sylvie: quantised), its ``Pending`` then returns decoded rows."""
        plan = self.plan
        return comm.all_to_all_rows_async(rows, plan.send_counts, plan.recv_counts, "halo_fwd")

    def _send_grad(self, layer: int, grad_halo: Tensor) -> comm.Pending:
        """Start sending the halo gradient ``[n_halo, F]`` of ``layer`` back to the owners."""
        plan = self.plan
        return comm.all_to_all_rows_async(grad_halo, plan.recv_counts, plan.send_counts,
                                          "halo_bwd")

    def _backward(self, layer: int, grad_halo: Tensor, shape) -> Tensor | None:
        plan = self.plan
        before = self.grad.get(layer)  # step t-1's halo gradient for my boundary rows (or none)
        self.sent[layer] = grad_halo = grad_halo.contiguous()
        self.grad[layer] = self._send_grad(layer, grad_halo)
        if before is None:  # step 0: no incoming gradient
            return None
        g = self._smooth(self.grad_avg, layer, self._resolve(before))
        self.added[layer] = g
        return grad_halo.new_zeros(shape).index_add_(0, plan.send_flat, g)

    def after_step(self, step):
        if step >= self.last:  # nothing stays in flight after the last step
            self._drain()

    def state(self):
        return {"staleness_repr": self.age, "comm_wait": self._waited,
                "pipe_ready": self._ready / self._waits if self._waits else None}

    # -- helpers ------------------------------------------------------------------------------
    def _resolve(self, item) -> Tensor:
        if isinstance(item, comm.Pending):
            self._ready += item.ready()
            rows = item.wait()
            self._waited += item.waited
            self._waits += 1
            return rows
        return item

    def _take(self, store: dict, layer: int) -> Tensor:
        rows = self._resolve(store[layer])
        store[layer] = rows
        return rows

    def _smooth(self, avg: dict, layer: int, rows: Tensor) -> Tensor:
        """``avg <- GAMMA avg + (1 - GAMMA) rows`` (a new tensor; the first rows start it)."""
        if layer not in avg:
            avg[layer] = rows
        else:
            avg[layer] = avg[layer] * self.gamma + rows * (1.0 - self.gamma)
        return avg[layer]

    def _drain(self) -> None:
        for store in (self.feat, self.grad):
            for layer in list(store):
                store[layer] = self._resolve(store[layer])

    @torch.no_grad()
    def _fill(self, forward) -> None:
        def exact(layer, h_inner):
            self.feat[layer] = exchange(h_inner, self.plan, "halo_fwd")
            return self.feat[layer]
        training = self.model.training
        self.model.eval()
        forward(exact)
        self.model.train(training)

    # -- checkpoint: what is in flight is waited for and saved, so a resumed run continues as if
    # it had never stopped -----------------------------------------------------------------------
    def state_dict(self):
        self._drain()
        return {"feat": dict(self.feat), "grad": dict(self.grad),
                "feat_avg": dict(self.feat_avg), "grad_avg": dict(self.grad_avg)}

    def load_state_dict(self, state):
        self.feat, self.grad = dict(state["feat"]), dict(state["grad"])
        self.feat_avg, self.grad_avg = dict(state["feat_avg"]), dict(state["grad_avg"])


def pipegcn_step(sizes: Sizes, step: int) -> Step:
    """Exact's bytes, both directions started without blocking (overlapped), plus the fill's
    forward exchange and forward pass before step 0."""
    out = [sizes.input_fetch(), *sizes.fill("halo_fwd")] if step == 0 else []
    for l in sizes.hidden:
        F = sizes.widths[l]
        out += [sizes.rows(4 * F, "halo_fwd", overlapped=True),
                sizes.rows(4 * F, "halo_bwd", back=True, overlapped=True)]
    return Step(out + sizes.param_sync(step), "grad", forwards=int(step == 0))


@register("pipegcn", "PipeGCN: one-step-stale halo features and gradients, exchanged without "
          "blocking (overlapped)", options=(PipeOptions, ParamOptions), traffic=pipegcn_step)
def pipegcn(cfg, part, plan, model):
    return PipeHalo(part, plan, model, cfg), make_param_policy(cfg)

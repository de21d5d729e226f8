"""The dropout noise floor of a drift criterion (docs/methods.md sections 8.3 and 8.5).

SANCUS's skip test and the drift schedule of digest-vanishing compare TRAINING-mode boundary rows
of two steps: ||h_now - h_then|| / ||h_then||. Under dropout two forward passes differ by their
dropout masks even when the parameters did not move, so the drift has a floor below which no
threshold can act: with EPS (or TAU) under it every block is re-sent at every step. This module
measures that floor, so that a run says in its own metrics whether its threshold could ever bite.

What is measured *(choice)*: at the current parameters, two forward passes in training mode, each
with its own dropout masks and EXACT halo rows (every layer's halo fetched fresh from the owners'
pass with the same draw index, so nothing stale enters), no gradient and no parameter update; per
hidden layer l the boundary rows each pass produced (``send_flat`` order: the rows of every
(layer, peer) block) are compared as the criterion compares them. It is the floor of the
criterion itself, "drift between two forward passes with the same parameters and different
masks", not an estimate from the mask rate.

When *(choice)*: twice per run, before step 0 (the initial parameters) and before the last step
T - 1 (the trained parameters; a run of one step has the one probe), so a run's floor is known at
both ends of training for about two thirds of a step's work each (two forward passes; a step is a
forward and a backward). The probe never changes the run: the dropout masks come from a forked
random generator (the training stream is restored afterwards), batch-norm statistics are restored,
and its exchanges are not the method's traffic (category ``probe``: no ``bytes_*`` column; the
messages counter is restored). Its time is part of steps 0 and T - 1, as DIGEST's filling pass is
part of step 0. At dropout 0 the two passes are identical and the floor is exactly 0.
"""
from __future__ import annotations

import torch
from torch import Tensor

from digest.policies.halo import HaloPlan, exchange
from digest.runtime import comm
from digest.seeds import mix

PROBE = "probe"  # traffic category of the probe's exchanges: not one of comm.CATEGORIES


def probe_steps(epochs: int) -> set[int]:
    """Steps before which the floor is measured: the first and the last."""
    return {0, max(0, epochs - 1)}


@torch.no_grad()
def boundary_draws(model, forward, plan: HaloPlan, seed: int, step: int,
                   draws: int = 2) -> list[dict[int, Tensor]]:
    """``draws`` training-mode forward passes at the current parameters with exact halos, each
    with masks from its own seed. Returns per pass ``{layer l >= 1: boundary rows [S, F_l]}``
    (S = ``plan.send_flat`` rows, blocks peer by peer). Collective: every worker calls it at the
    same step."""
    rank = comm.rank()
    devices = [p.device for p in model.parameters() if p.device.type == "cuda"][:1]
    buffers = [b.clone() for b in model.buffers()]  # batch-norm running statistics
    saved = (dict(comm.traffic.bytes), comm.traffic.messages)
    out = []
    try:
        with torch.random.fork_rng(devices=devices):
            for d in range(draws):
                # a seed per (run seed, step, worker, draw): each worker and draw its own masks
                # (offset 0, base 4 for the draw: the stream the recorded runs were made with)
                torch.manual_seed(mix(mix(seed, step, rank, offset=0), d + 1, base=4, offset=0))
                rows: dict[int, Tensor] = {}

                def halo(layer, h_inner):
                    rows[layer] = h_inner.detach().index_select(0, plan.send_flat)
                    if comm.world_size() == 1 and not sum(plan.recv_counts):
                        return None  # one process alone has no halo
                    return exchange(h_inner, plan, PROBE, PROBE)
                forward(halo)
                out.append(rows)
    finally:
        for b, v in zip(model.buffers(), buffers):
            b.copy_(v)
        comm.traffic.bytes.clear()
        comm.traffic.bytes.update(saved[0])
        comm.traffic.messages = saved[1]
    return out


def relative(a: Tensor, b: Tensor) -> float | None:
    """||a - b|| / ||b|| (Frobenius), the criteria's drift; None without rows; 0 when both are
    zero (a block that cannot move has no floor)."""
    if b.numel() == 0:
        return None
    num, den = float((a - b).norm()), float(b.norm())
    return num / den if den > 0 else (0.0 if num == 0 else float("inf"))

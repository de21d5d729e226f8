"""SANCUS (docs/methods.md section 8.3): staleness-aware skipping of halo broadcasts.

Every worker keeps, per exchanged layer l >= 1 and per peer, the boundary block it last SENT to
that peer (owner side) and the halo block it last RECEIVED from it (receiver side; both sides hold
the same values). At every step and layer the owner compares its fresh boundary block with the one
it last sent: it sends fresh rows when the relative drift ||h_now - h_sent|| / ||h_sent|| (Frobenius
norms over the block) exceeds EPS (``--skip-threshold``), or when the block has been skipped S
steps in a row (``--max-staleness``, the staleness bound); otherwise the receiver reuses its cached
block. Step 0 (and the first step of a run) sends everything.

On the wire, per layer and step:
- one small all-to-all of decision flags, 1 byte per (layer, peer) that shares cut edges, counted
  in ``halo_fwd`` (a message per such peer);
- one all-to-all of the fresh blocks only (skipped peers have count 0: no rows, no message).
Backward is never skipped (reference code): the gradient of EVERY halo row used, fresh or cached,
goes back to its owner in the exact method's all-to-all and is added to the gradient of the
owner's CURRENT boundary row, as the exact method does. With EPS = 0 a block is skipped only when
it did not change at all, so training is exact.

State in metrics.csv: ``sent_fraction`` (blocks sent / (layer, peer) blocks this worker owns, this
step), ``staleness_repr`` and ``staleness_repr_max`` (mean and largest age, in steps, of the halo
blocks this worker read this step; 0 = fresh); each the mean over workers (records.combine).

The dropout noise floor of the skip test (docs/methods.md section 8.3; how and when:
noise_floor.py): the drift compares training-mode rows, which two forward passes with the same
parameters and different dropout masks already set apart, so an EPS below that floor sends every
block at every step. Measured before step 0 and before the last step, in the rows of those steps
only: ``noise_floor_l<l>`` (layer l: ||a - b|| / ||b|| over all the boundary rows this worker sends,
every block of that layer at once) and ``noise_floor_min`` (the smallest floor of any single
(layer, peer) block this worker owns: with EPS under it, dropout alone re-sends every block),
each the mean over workers. At dropout 0 both are 0.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from digest.runtime import comm

from .noise_floor import boundary_draws, probe_steps, relative
from digest.options import Options, option
from digest.policies.halo import HaloPlan, HaloPolicy
from digest.methods import register
from digest.policies.params import ParamOptions, make_param_policy


@dataclass
class SancusOptions(Options):
    """SANCUS: skip halo broadcasts of boundary blocks that barely moved."""
    skip_threshold: float = option(0.1, "EPS: send a (layer, peer) boundary block when its relative "
                                   "drift since its last send exceeds EPS (0 = exact)")
    max_staleness: int = option(10, "S: send a block skipped S steps in a row (staleness bound)")

    def group_follows_values(self) -> bool:  # a block is re-sent when it drifted
        return True

    def check_group(self, cfg) -> None:
        if not self.skip_threshold >= 0:
            raise ValueError("--skip-threshold must be >= 0")
        if self.max_staleness < 0:
            raise ValueError("--max-staleness must be >= 0")


def _ranges(counts: list[int]) -> list[tuple[int, int]]:
    out, at = [], 0
    for c in counts:
        out.append((at, at + c))
        at += c
    return out


class SkipExchange(torch.autograd.Function):
    """Forward: only the peers' blocks flagged fresh cross the wire (others have count 0); the
    receiver fills the blocks it did not get from ``cache``. Backward: the FULL halo gradient goes
    back to the owners (the exact method's all-to-all) and is summed into their row gradients.
    Shapes ``[n_inner, F] -> [n_halo, F]``."""

    @staticmethod
    def forward(ctx, h_inner: Tensor, plan: HaloPlan, send_idx: Tensor, send_counts: list[int],
                recv_counts: list[int], recv_pos: Tensor, cache: Tensor | None) -> Tensor:
        ctx.plan, ctx.shape = plan, h_inner.shape
        send = h_inner.detach().index_select(0, send_idx)
        recv = comm.all_to_all_rows(send, send_counts, recv_counts, "halo_fwd")
        if cache is None:  # first step: every block is fresh
            return recv
        return cache.clone().index_copy_(0, recv_pos, recv)

    @staticmethod
    def backward(ctx, grad_halo: Tensor):
        plan = ctx.plan
        grad_send = comm.all_to_all_rows(grad_halo.contiguous(), plan.recv_counts,
                                         plan.send_counts, "halo_bwd")
        grad = grad_halo.new_zeros(ctx.shape).index_add_(0, plan.send_flat, grad_send)
        return grad, None, None, None, None, None, None


class SkipHalo(HaloPolicy):
    """Fresh halo rows per (layer, peer) block only when the owner's block drifted by more than
    EPS or reached the staleness bound; cached blocks otherwise; gradients always sent back."""

    def __init__(self, part, plan: HaloPlan, cfg, model=None):
        super().__init__(part, plan)
        self.model, self.seed = model, cfg.seed
        self.probes = probe_steps(cfg.optim.epochs) if model is not None else set()
        self.floor: dict[str, float | None] = {}  # this step's noise-floor columns (probe steps)
        self.eps, self.bound = float(cfg.options.skip_threshold), int(cfg.options.max_staleness)
        dev = plan.send_flat.device
        self.send_ranges = _ranges(plan.send_counts)  # in send_flat, by peer
        self.recv_ranges = _ranges(plan.recv_counts)  # in the halo rows, by peer
        self.out_peers = [p for p, c in enumerate(plan.send_counts) if c]  # blocks I own
        self.in_peers = [p for p, c in enumerate(plan.recv_counts) if c]  # blocks I read
        # peer (position in out_peers) of every sent row, for per-block norms in one reduction
        self.row_block = torch.cat([torch.full((plan.send_counts[p],), i, dtype=torch.long)
                                    for i, p in enumerate(self.out_peers)] or
                                   [torch.empty(0, dtype=torch.long)]).to(dev)
        self.flag_send = [1 if c else 0 for c in plan.send_counts]
        self.flag_recv = [1 if c else 0 for c in plan.recv_counts]
        self.sent: dict[int, Tensor] = {}   # layer -> the rows last sent, [S, F] (owner side)
        self.skips: dict[int, list[int]] = {}  # layer -> consecutive skips per out peer
        self.cache: dict[int, Tensor] = {}  # layer -> the halo rows last received [n_halo, F]
        self.age: dict[int, list[int]] = {}  # layer -> age (steps) of each in peer's block
        self.step = 0
        self._sent = self._owned = 0
        self._ages: list[int] = []

    def before_step(self, step, forward):
        self.step, self._sent, self._owned, self._ages = step, 0, 0, []
        self.floor = self.noise_floor(step, forward) if step in self.probes else {}

    def noise_floor(self, step, forward) -> dict[str, float | None]:
        """The skip test's drift between two mask draws at this step's parameters (module doc)."""
        a, b = boundary_draws(self.model, forward, self.plan, self.seed, step)
        out, blocks = {}, []
        for layer in sorted(b):
            out[f"noise_floor_l{layer}"] = relative(a[layer], b[layer])
            blocks += [relative(a[layer][lo:hi], b[layer][lo:hi])
                       for lo, hi in self.send_ranges if hi > lo]
        out["noise_floor_min"] = min(blocks) if blocks else None
        return out

    # -- the decision (owner side) ------------------------------------------------------------
    @torch.no_grad()
    def decide(self, layer: int, rows: Tensor) -> list[bool]:
        """Per out peer: send fresh rows? ``rows``: this step's boundary rows ``[S, F]``."""
        last = self.sent.get(layer)
        if last is None:
            return [True] * len(self.out_peers)
        n = len(self.out_peers)
        diff = rows.new_zeros(n).index_add_(0, self.row_block, (rows - last).square().sum(1))
        base = rows.new_zeros(n).index_add_(0, self.row_block, last.square().sum(1))
        # drift = sqrt(diff / base) > EPS, without dividing: a zero block that moved is sent
        moved = (diff > (self.eps ** 2) * base).tolist()
        return [m or s >= self.bound for m, s in zip(moved, self.skips[layer])]

    def halo(self, layer, h_inner):
        if comm.world_size() == 1 and not sum(self.plan.recv_counts):
            return None  # one process alone has no halo
        plan = self.plan
        rows = h_inner.detach().index_select(0, plan.send_flat)
        fresh = self.decide(layer, rows)
        flags = torch.tensor(fresh, dtype=torch.uint8, device=rows.device).view(-1, 1)
        got = comm.all_to_all_rows(flags, self.flag_send, self.flag_recv, "halo_fwd")
        got = [bool(g) for g in got.view(-1).tolist()]  # in in_peers order
        if layer not in self.cache and not all(got):
            raise RuntimeError("SANCUS: a peer skipped a block this worker never received")
        send_on = dict(zip(self.out_peers, fresh))
        recv_on = dict(zip(self.in_peers, got))
        send_counts = [c if send_on.get(p) else 0 for p, c in enumerate(plan.send_counts)]
        recv_counts = [c if recv_on.get(p) else 0 for p, c in enumerate(plan.recv_counts)]
        dev = rows.device
        send_pos = _positions(self.send_ranges, send_on, dev)  # into send_flat / rows
        recv_pos = _positions(self.recv_ranges, recv_on, dev)  # into the halo rows
        halo = SkipExchange.apply(h_inner, plan, plan.send_flat.index_select(0, send_pos),
                                  send_counts, recv_counts, recv_pos, self.cache.get(layer))
        # owner side: what was sent is what the peer now holds
        if layer not in self.sent:
            self.sent[layer] = rows.clone()
            self.skips[layer] = [0] * len(self.out_peers)
        else:
            self.sent[layer].index_copy_(0, send_pos, rows.index_select(0, send_pos))
        self.skips[layer] = [0 if f else s + 1 for f, s in zip(fresh, self.skips[layer])]
        # receiver side
        self.cache[layer] = halo.detach()
        old = self.age.get(layer, [0] * len(self.in_peers))
        self.age[layer] = [0 if g else a + 1 for g, a in zip(got, old)]
        self._sent += sum(fresh)
        self._owned += len(fresh)
        self._ages += self.age[layer]
        return halo

    def state(self):
        ages = self._ages
        return {"sent_fraction": self._sent / self._owned if self._owned else None,
                "staleness_repr": sum(ages) / len(ages) if ages else None,
                "staleness_repr_max": max(ages) if ages else None, **self.floor}

    def state_dict(self):
        return {"sent": self.sent, "skips": self.skips, "cache": self.cache, "age": self.age}

    def load_state_dict(self, state):
        self.sent, self.skips = state["sent"], state["skips"]
        self.cache, self.age = state["cache"], state["age"]


def _positions(ranges: list[tuple[int, int]], on: dict[int, bool], device) -> Tensor:
    """Row positions of the blocks of the peers flagged on, in peer order."""
    parts = [torch.arange(a, b) for p, (a, b) in enumerate(ranges) if on.get(p) and b > a]
    return (torch.cat(parts) if parts else torch.empty(0, dtype=torch.long)).to(device)


@register("sancus", "SANCUS: a (layer, peer) halo block is re-sent only when it drifted by more "
          "than --skip-threshold or reached --max-staleness; gradients always sent back",
          options=(SancusOptions, ParamOptions),
          traffic="which blocks it re-sends follows how far its rows drift in training "
          "(bytes at most exact's)")
def sancus(cfg, part, plan, model):
    return SkipHalo(part, plan, cfg, model), make_param_policy(cfg)

"""AdaQP (docs/methods.md section 8.4): the exact method, but every exchanged row, halo features
forward and halo gradients backward, crosses the wire quantised to b bits per value with a per-row
offset and scale and unbiased stochastic rounding (baselines/quantize.py), packed into bytes and
dequantised on arrival.

- Bit assignment ``--quant-assign uniform`` (default): ``--quant-bits`` for every exchanged layer
  and both directions (the reference code's option ``uniform``; its configs' uniform width
  ``assign_bits`` is 8, hence the default).
- ``--quant-assign adaptive``: one width in {2, 4, 8} per (sender, receiver, layer, direction)
  block, chosen to minimise the summed rounding-variance bound sum_k V_k / (2^b_k - 1)^2
  (``quantize.variance_proxy``) within the bytes the uniform assignment at ``--quant-bits`` would
  send (``greedy_bits``). Our choices, not the paper's: a greedy instead of its solver (no
  commercial solver), kept only if no uniform assignment within the budget has a smaller bound;
  the budget is global over workers, peers and layers and not balanced per device (the paper
  also balances the devices' transfer times); one budget per direction, each the uniform
  assignment's bytes of that direction, because the gradient rows' V's are orders of magnitude
  below the activations' (about 1e-5 against 10 to 80 on a small synthetic graph), so one sum of
  both would put every gradient at 2 bits.
  Re-decided at step 0 (forward blocks, layer by layer, from the rows about to be sent; backward
  blocks stay at ``--quant-bits`` until statistics exist) and every ``--quant-adapt-every`` R
  steps (every block, from the statistics of the previous step). Every worker gathers every
  worker's V's (one all-gather per decision, counted in halo_fwd, its bytes taken off the forward
  budget, so halo_fwd and halo_bwd never exceed the uniform run's; when they would leave no room
  above 2 bits, e.g. at ``--quant-bits 2``, nothing is gathered and the assignment stays) and
  runs the same deterministic greedy, so all compute the same assignment. Which blocks exist and
  their rows are gathered once at start-up (M integers per worker, not counted, like the initial
  parameter broadcast). Each peer's rows are encoded at their width and all travel as one flat
  uint8 buffer per all-to-all with per-peer byte counts. The assignment and pending statistics
  are checkpointed. Metrics: ``quant_bits_l{l}`` is the row-weighted mean width of layer l over
  all blocks of both directions (bits per exchanged value), the same on every worker.
- Layer 0 (input features) is fetched once at start-up, as for every method here, so it is never
  quantised; layers 1..L-1 are, forward and backward.
- Random roundings: a generator seeded by (run seed, step, layer, direction, rank) on the rows'
  device, so a resumed run draws exactly what the uninterrupted one drew (nothing to checkpoint).
- Bytes: per exchanged row ceil(F b / 8) packed bytes + 8 (offset and scale as float32; the
  reference code sends them as bfloat16, 4 bytes, whose rounding would bias the reconstruction),
  in the one all-to-all of the exact method, in halo_fwd and halo_bwd.
- The gradient of the dequantised halo rows is taken as the identity w.r.t. the owners' rows
  (straight-through): the quantised halo gradient is added to the owners' boundary-row gradients.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from digest.runtime import comm
from digest.options import Options, option
from digest.policies.counting import Sizes, Step, Unpredictable
from digest.policies.halo import HaloPlan, HaloPolicy
from digest.methods import register
from digest.policies.params import ParamOptions, make_param_policy
from digest.seeds import mix

from .bit_assignment import greedy_bits
from .quantize import (BITS, decode, encode, generator, variance_proxy, wire_width)

FWD, BWD = 0, 1  # direction, part of the rounding seed
ASSIGN = ("uniform", "adaptive")


@dataclass
class QuantOptions(Options):
    """AdaQP: stochastic quantisation of exchanged rows."""
    quant_bits: int = option(8, "bits per value of every exchanged halo row and halo gradient "
                             "(uniform assignment; reference configs' assign_bits); adaptive: "
                             "the byte budget is what this uniform width sends",
                             choices=BITS)
    quant_assign: str = option("uniform", "uniform: --quant-bits for every block; adaptive: "
                               "bits per (sender, receiver, layer, direction) block, least "
                               "rounding variance within the uniform assignment's bytes",
                               choices=ASSIGN)
    quant_adapt_every: int = option(20, "adaptive: steps between re-decisions of the bit "
                                    "assignment (R)")

    def group_period(self) -> int:  # the bit re-assignment
        return self.quant_adapt_every if self.quant_assign == "adaptive" else 1

    def group_follows_values(self) -> bool:  # widths chosen from the values' variance
        return self.quant_assign == "adaptive"

    def check_group(self, cfg) -> None:
        if self.quant_bits not in BITS:
            raise ValueError(f"--quant-bits must be one of {', '.join(map(str, BITS))}")
        if self.quant_assign not in ASSIGN:
            raise ValueError(f"--quant-assign must be one of {', '.join(ASSIGN)}")
        if self.quant_adapt_every < 1:
            raise ValueError("--quant-adapt-every must be >= 1")


class QuantExchange(torch.autograd.Function):
    """Forward: boundary rows quantised, one all-to-all of packed bytes, halo rows dequantised.
    Backward: halo gradients quantised, sent back in one all-to-all, dequantised and summed into
    the owners' row gradients. Shapes ``[n_inner, F] -> [n_halo, F]``; on the wire uint8
    ``[rows, ceil(F b / 8) + 8]``."""

    @staticmethod
    def forward(ctx, h_inner: Tensor, plan: HaloPlan, bits: int, seeds: tuple[int, int]) -> Tensor:
        ctx.plan, ctx.bits, ctx.shape, ctx.dtype = plan, bits, h_inner.shape, h_inner.dtype
        ctx.bwd_seed = seeds[1]
        F = h_inner.size(1)
        send = h_inner.detach().index_select(0, plan.send_flat)
        wire = encode(send, bits, generator(seeds[0], h_inner.device))
        recv = comm.all_to_all_rows(wire, plan.send_counts, plan.recv_counts, "halo_fwd")
        return decode(recv, bits, F, h_inner.dtype)

    @staticmethod
    def backward(ctx, grad_halo: Tensor):
        plan, F = ctx.plan, ctx.shape[1]
        wire = encode(grad_halo, ctx.bits, generator(ctx.bwd_seed, grad_halo.device))
        recv = comm.all_to_all_rows(wire, plan.recv_counts, plan.send_counts, "halo_bwd")
        grad_send = decode(recv, ctx.bits, F, ctx.dtype)
        grad = grad_halo.new_zeros(ctx.shape).index_add_(0, plan.send_flat, grad_send)
        return grad, None, None, None


def exchange_blocks(rows: Tensor, send_counts: list[int], recv_counts: list[int],
                    send_bits: list[int], recv_bits: list[int], gen: torch.Generator,
                    category: str, dtype) -> Tensor:
    """One all-to-all of quantised rows with a bit width per peer: peer p's rows are encoded at
    ``send_bits[p]``, all wire rows travel as ONE flat uint8 buffer with per-peer byte counts
    (so the counter sees exactly the packed bytes), and the rows from peer p are decoded at
    ``recv_bits[p]``.

    Shapes: ``rows [sum(send_counts), F]`` -> ``[sum(recv_counts), F]``; on the wire uint8
    ``[sum_p send_counts[p] (ceil(F send_bits[p] / 8) + 8)]``."""
    F = rows.size(1)
    wire = [encode(chunk, b, gen).view(-1) for chunk, b in zip(rows.split(send_counts), send_bits)]
    flat = torch.cat(wire) if wire else rows.new_empty(0, dtype=torch.uint8)
    send_bytes = [n * wire_width(F, b) for n, b in zip(send_counts, send_bits)]
    recv_bytes = [n * wire_width(F, b) for n, b in zip(recv_counts, recv_bits)]
    recv = comm.all_to_all_rows(flat, send_bytes, recv_bytes, category)
    out = [decode(chunk.view(n, wire_width(F, b)), b, F, dtype)
           for chunk, n, b in zip(recv.split(recv_bytes), recv_counts, recv_bits)]
    return torch.cat(out) if out else rows.new_empty(0, F, dtype=dtype)


class AdaptiveExchange(torch.autograd.Function):
    """``QuantExchange`` with a width per peer and direction (``exchange_blocks`` both ways).

    ``bits``: per peer, (forward send, forward receive, backward send, backward receive) widths.
    ``record``: None, or a float32 ``[M]`` tensor that receives the V's of the halo gradients
    this worker sends back, per peer (statistics for the next decision)."""

    @staticmethod
    def forward(ctx, h_inner: Tensor, plan: HaloPlan, bits: tuple, seeds: tuple[int, int],
                record: Tensor | None) -> Tensor:
        ctx.plan, ctx.bits, ctx.shape, ctx.dtype = plan, bits, h_inner.shape, h_inner.dtype
        ctx.bwd_seed, ctx.record = seeds[1], record
        send = h_inner.detach().index_select(0, plan.send_flat)
        return exchange_blocks(send, plan.send_counts, plan.recv_counts, bits[0], bits[1],
                               generator(seeds[0], h_inner.device), "halo_fwd", h_inner.dtype)

    @staticmethod
    def backward(ctx, grad_halo: Tensor):
        plan = ctx.plan
        if ctx.record is not None:
            ctx.record.copy_(variance_proxy(grad_halo, plan.recv_counts))
        grad_send = exchange_blocks(grad_halo, plan.recv_counts, plan.send_counts, ctx.bits[2],
                                    ctx.bits[3], generator(ctx.bwd_seed, grad_halo.device),
                                    "halo_bwd", ctx.dtype)
        grad = grad_halo.new_zeros(ctx.shape).index_add_(0, plan.send_flat, grad_send)
        return grad, None, None, None, None


class QuantizedHalo(HaloPolicy):
    """Fresh halos every layer of every step, quantised to ``bits`` both ways."""

    def __init__(self, part, plan: HaloPlan, model, cfg):
        super().__init__(part, plan)
        self.bits, self.seed, self.step = cfg.options.quant_bits, cfg.seed, 0
        self.layers = list(range(1, len(model.widths) - 1))  # exchanged layers 1..L-1

    def before_step(self, step, forward):
        self.step = step

    def halo(self, layer, h_inner):
        if comm.world_size() == 1 and not sum(self.plan.recv_counts):
            return None  # one process alone has no halo
        me = comm.rank()
        seeds = (mix(self.seed, self.step, layer, FWD, me), mix(self.seed, self.step, layer, BWD, me))
        return QuantExchange.apply(h_inner, self.plan, self.bits, seeds)

    def state(self):
        return {f"quant_bits_l{l}": self.bits for l in self.layers}


class AdaptiveQuantizedHalo(QuantizedHalo):
    """Fresh quantised halos with a width per (sender, receiver, layer, direction) block,
    re-decided at step 0 and every R steps (module docstring; ``greedy_bits``).

    ``assign [L', 2, M, M]`` (L' exchanged layers, direction, sender, receiver) is the whole
    assignment, the same on every worker; ``rows [M, M]`` the forward rows sender -> receiver (the
    backward block receiver -> sender carries as many gradient rows)."""

    def __init__(self, part, plan, model, cfg):
        super().__init__(part, plan, model, cfg)
        self.every = cfg.options.quant_adapt_every
        self.widths = [model.widths[l] for l in self.layers]  # F of each exchanged layer
        M, dev = comm.world_size(), plan.send_flat.device
        # start-up metadata (M integers per worker, like the initial parameter broadcast): which
        # blocks exist and their sizes, so that every worker can cost every block
        counts = torch.tensor(plan.send_counts, dtype=torch.long, device=dev)
        self.rows = comm.all_gather(counts, None).cpu()
        self.rows.fill_diagonal_(0)  # a worker's rows to itself never cross the wire
        self.assign = torch.full((len(self.layers), 2, M, M), self.bits, dtype=torch.long)
        self.stats: Tensor | None = None  # [L', 2, M] this worker's V's of the collected step
        self.collect = False

    # -- the decisions ------------------------------------------------------------------------
    def blocks(self, li: int, direction: int) -> list[tuple[int, int, int]]:
        """(sender, receiver, rows) of every block of exchanged layer ``li`` in ``direction``."""
        M = self.rows.size(0)
        rows = self.rows if direction == FWD else self.rows.T
        return [(s, p, int(rows[s, p])) for s in range(M) for p in range(M) if rows[s, p] > 0]

    def solve(self, keys: list[tuple[int, int]], V: dict, budget_cut: int) -> None:
        """Assign the blocks of (layer, direction) ``keys`` from their V's (``V[li, d, s, p]``)
        within their uniform bytes minus ``budget_cut`` (the decision's own gather)."""
        blocks = [(li, d, s, p, n) for li, d in keys for s, p, n in self.blocks(li, d)]
        cost = [tuple(n * wire_width(self.widths[li], b) for b in BITS)
                for li, _, _, _, n in blocks]
        budget = sum(c[BITS.index(self.bits)] for c in cost) - budget_cut
        chosen = greedy_bits([V[k[:4]] for k in blocks], cost, budget)
        for (li, d, s, p, _), b in zip(blocks, chosen):
            self.assign[li, d, s, p] = b

    def room(self, keys: list[tuple[int, int]]) -> int:
        """Bytes the uniform assignment of ``keys``' blocks spends above the fewest bits."""
        return sum(n * (wire_width(self.widths[li], self.bits) - wire_width(self.widths[li],
                                                                             BITS[0]))
                   for li, d in keys for _, _, n in self.blocks(li, d))

    def decide(self, keys: list[tuple[int, int]], mine: Tensor) -> None:
        """Gather every worker's V's ``mine [len(keys), M]`` (row j: its blocks of ``keys[j]``,
        per receiver) and assign the blocks of ``keys``, one budget per direction: the same
        answer on every worker. The gather's bytes (counted in halo_fwd) come off the forward
        budget; when they would leave no room for an upgrade nothing is gathered and the
        assignment stays, a fact of the static block sizes, so the same on every worker."""
        M = comm.world_size()
        cut = M * (M - 1) * mine.numel() * mine.element_size()  # all workers' gather bytes
        fwd, bwd = [k for k in keys if k[1] == FWD], [k for k in keys if k[1] == BWD]
        if self.room(fwd) <= cut:
            return
        gathered = comm.all_gather(mine, "halo_fwd").cpu()  # [M, len(keys), M]
        V = {(li, d, s, p): float(gathered[s, j, p]) for j, (li, d) in enumerate(keys)
             for s in range(M) for p in range(M)}
        self.solve(fwd, V, cut)
        if bwd:
            self.solve(bwd, V, 0)

    def before_step(self, step, forward):
        self.step = step
        if step > 0 and step % self.every == 0 and self.stats is not None:
            everything = [(li, d) for li in range(len(self.layers)) for d in (FWD, BWD)]
            self.decide(everything, self.stats.view(-1, comm.world_size()))  # rows (li, d)
        self.collect = (step + 1) % self.every == 0  # statistics for the next decision
        if self.collect:
            self.stats = torch.zeros(len(self.layers), 2, comm.world_size(),
                                     device=self.plan.send_flat.device)

    # -- the exchange -------------------------------------------------------------------------
    def peer_bits(self, li: int) -> tuple[list[int], ...]:
        """(forward send, forward receive, backward send, backward receive) widths per peer."""
        me, a = comm.rank(), self.assign[li]
        return (a[FWD, me].tolist(), a[FWD, :, me].tolist(), a[BWD, me].tolist(),
                a[BWD, :, me].tolist())

    def halo(self, layer, h_inner):
        if comm.world_size() == 1 and not sum(self.plan.recv_counts):
            return None  # one process alone has no halo
        li, me = self.layers.index(layer), comm.rank()
        if self.step == 0 or self.collect:  # V's of the rows about to be sent, per receiver
            v = variance_proxy(h_inner.detach().index_select(0, self.plan.send_flat),
                               self.plan.send_counts)
            if self.step == 0:
                self.decide([(li, FWD)], v[None])  # this layer's forward blocks only
            if self.collect:
                self.stats[li, FWD] = v
        seeds = (mix(self.seed, self.step, layer, FWD, me),
                 mix(self.seed, self.step, layer, BWD, me))
        record = self.stats[li, BWD] if self.collect else None
        return AdaptiveExchange.apply(h_inner, self.plan, self.peer_bits(li), seeds, record)

    # -- metrics and checkpoints --------------------------------------------------------------
    def state(self):
        """Row-weighted mean width of each exchanged layer over the blocks of both directions
        (bits per exchanged value), the same on every worker."""
        weight = torch.stack([self.rows, self.rows.T]).double()  # [2, M, M]
        total, out = float(weight.sum()), {}
        for li, l in enumerate(self.layers):
            out[f"quant_bits_l{l}"] = (float((self.assign[li] * weight).sum()) / total
                                       if total else float(self.bits))
        return out

    def state_dict(self):
        return {"assign": self.assign.clone(),
                "stats": None if self.stats is None else self.stats.cpu()}

    def load_state_dict(self, state):
        self.assign = state["assign"].clone()
        stats = state["stats"]
        self.stats = None if stats is None else stats.to(self.plan.send_flat.device)


def adaqp_step(sizes: Sizes, step: int) -> Step:
    """Uniform: exact's exchanges, every row ceil(F b / 8) + 8 bytes; every value sent or received
    is quantised or dequantised. Adaptive: not countable in advance."""
    o = sizes.options
    if o.quant_assign == "adaptive":
        raise Unpredictable("--quant-assign adaptive: the widths follow the rows' statistics "
                            "(bytes at most the uniform assignment's)")
    out = [sizes.input_fetch()] if step == 0 else []
    M, coded = sizes.workers, [0] * sizes.workers
    for l in sizes.hidden:
        F = sizes.widths[l]
        out += [sizes.rows(wire_width(F, o.quant_bits), "halo_fwd"),
                sizes.rows(wire_width(F, o.quant_bits), "halo_bwd", back=True)]
        for r in range(M):  # rows out and in, both directions
            coded[r] += 2 * F * sum(sizes.send[r][p] + sizes.send[p][r] for p in range(M) if p != r)
    return Step(out + sizes.param_sync(step), "grad", coded=tuple(coded))


@register("adaqp", "AdaQP: exact halos and halo gradients stochastically quantised to "
          "--quant-bits bits per value (uniform), or to widths per block chosen within that "
          "budget (--quant-assign adaptive)", options=(QuantOptions, ParamOptions),
          traffic=adaqp_step)
def adaqp(cfg, part, plan, model):
    cls = AdaptiveQuantizedHalo if cfg.options.quant_assign == "adaptive" else QuantizedHalo
    return cls(part, plan, model, cfg), make_param_policy(cfg)

"""AdaQP (METHODS.md section 8.4): the exact method, but every exchanged row, halo features forward
and halo gradients backward, crosses the wire quantised to b bits per value with a per-row offset
and scale and unbiased stochastic rounding (baselines/quantize.py), packed into bytes and
dequantised on arrival.

- Bit assignment: uniform, ``--quant-bits`` for every exchanged layer and both directions (the
  reference code's option ``uniform``; its configs' uniform width ``assign_bits`` is 8, hence the
  default). The adaptive assignment (the paper's per-(peer, layer) solver) is not implemented.
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

from digest import comm
from digest.config import Options, option
from digest.halo import HaloPlan, HaloPolicy
from digest.methods import register
from digest.params import ParamOptions, make_param_policy

from .quantize import BITS, decode, encode, generator, mix

FWD, BWD = 0, 1  # direction, part of the rounding seed


@dataclass
class QuantOptions(Options):
    """AdaQP: stochastic quantisation of exchanged rows."""
    quant_bits: int = option(8, "bits per value of every exchanged halo row and halo gradient "
                             "(uniform assignment; reference configs' assign_bits)",
                             choices=BITS)

    def check_group(self, cfg) -> None:
        if self.quant_bits not in BITS:
            raise ValueError(f"--quant-bits must be one of {', '.join(map(str, BITS))}")


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


@register("adaqp", "AdaQP: exact halos and halo gradients stochastically quantised to "
          "--quant-bits bits per value", options=(QuantOptions, ParamOptions))
def adaqp(cfg, part, plan, model):
    return QuantizedHalo(part, plan, model, cfg), make_param_policy(cfg)

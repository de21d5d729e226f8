"""VARCO (docs/methods.md section 5): the exact halo exchange with each compressed layer's boundary
rows encoded to k = ceil(F / r(t)) columns before sending and decoded on arrival. Gradients flow
back through the same k-wide exchange, so forward and backward bytes both shrink by ~r(t).

Which layers (``--comp-layers``, default): every exchanged layer except the last layer's input,
i.e. l = 1..L-2 (the reference code compresses layer i's input for i < L-1; its layer 0, the input
features, is fetched once here, so it has nothing to compress). *(choice)* For L = 2 that set is
empty and VARCO would silently equal exact, so the default then compresses layer 1 (the only
exchanged one). ``--compressor auto`` means ``slice`` (the reference code's final choice).
"""
from __future__ import annotations

import torch
from torch import nn

from digest.policies.compress import CompressionOptions, compressor_factory, parse_layers, width
from digest.policies.counting import Sizes, Step
from digest.policies.halo import HaloPlan, HaloPolicy, exchange
from digest.methods import register
from digest.policies.params import ParamOptions, make_param_policy


class CompressedHalo(HaloPolicy):
    """Fresh halos every layer of every step, compressed on the chosen layers.

    Shapes: ``halo(l, h_inner [n_inner, F]) -> [n_inner + n_halo, F]``; on the wire
    ``[S, k]`` rows out, ``[n_halo, k]`` in (S = rows this worker sends, duplicates included).
    """

    def __init__(self, part, plan: HaloPlan, model, cfg):
        super().__init__(part, plan)
        self.opts, self.epochs = cfg.options, cfg.optim.epochs
        name = "slice" if self.opts.compressor == "auto" else self.opts.compressor
        L = len(model.widths) - 1
        default = list(range(1, L - 1)) or list(range(1, L))  # L = 2: layer 1 (see module doc)
        layers = [] if name == "none" else parse_layers(self.opts.comp_layers, L, default)
        make = compressor_factory(name, cfg.seed)
        self.codecs = nn.ModuleDict({str(l): make(l, model.widths[l]) for l in layers})
        if any(True for _ in self.codecs.parameters()):
            # learned: registered now (methods.build runs before the optimiser is built) so the
            # codec is optimised and its gradients are all-reduced with the model's
            model.add_module("compressor", self.codecs)
        self.schedule = "none" if name == "none" else self.opts.comp_schedule
        # encode runs on the rows actually sent, selected beforehand: this plan sends its input
        # rows in order (its backward's index_add over arange is the identity)
        S = plan.send_flat.numel()
        self.wire = HaloPlan(torch.arange(S, device=plan.send_flat.device), plan.send_counts,
                             plan.recv_counts)
        self.step, self.ratio = 0, self._ratio(0)

    def _ratio(self, step: int) -> float:
        return self.opts.ratio(step, self.epochs, self.schedule)

    def before_step(self, step, forward):
        self.step, self.ratio = step, self._ratio(step)  # r(t) is driven by the epoch

    def halo(self, layer, h_inner):
        F = h_inner.size(1)
        k = width(F, self.ratio)
        codec = self.codecs[str(layer)] if str(layer) in self.codecs else None
        if codec is None or k >= F:  # r = 1 is the exact exchange (learned maps bypassed)
            return exchange(h_inner, self.plan)
        z = codec.encode(h_inner.index_select(0, self.plan.send_flat), k, self.step)
        return codec.decode(exchange(z, self.wire), F, self.step)

    def state(self):
        ks = [width(c.features, self.ratio) for c in self.codecs.values()]
        return {"comp_ratio": self.ratio, "comp_width": sum(ks) / len(ks) if ks else None}


def varco_step(sizes: Sizes, step: int) -> Step:
    """Exact's exchanges, each compressed layer's rows and gradients ceil(F / r(t)) columns wide
    (full width where that is not narrower); learned codecs add their parameters to the
    all-reduce."""
    o, L = sizes.options, len(sizes.widths) - 1
    name = "slice" if o.compressor == "auto" else o.compressor
    layers = [] if name == "none" else parse_layers(o.comp_layers, L, list(range(1, L - 1))
                                                    or list(range(1, L)))
    ratio = o.ratio(step, sizes.epochs, "none" if name == "none" else o.comp_schedule)
    out = [sizes.input_fetch()] if step == 0 else []
    for l in sizes.hidden:
        F = sizes.widths[l]
        cols = width(F, ratio) if l in layers else F
        out += [sizes.rows(4 * cols, "halo_fwd"), sizes.rows(4 * cols, "halo_bwd", back=True)]
    codec = sum(2 * sizes.widths[l] ** 2 + 2 * sizes.widths[l] for l in layers) \
        if name == "learned" else 0
    return Step(out + sizes.param_sync(step, codec), "grad")


@register("varco", "VARCO: exact halos compressed to ceil(F / r(t)) columns, r(t) scheduled",
          options=(CompressionOptions, ParamOptions), traffic=varco_step)
def varco(cfg, part, plan, model):
    return CompressedHalo(part, plan, model, cfg), make_param_policy(cfg)

"""Column compressors for rows that cross the wire (docs/methods.md section 5), kept apart from the
exchange so that VARCO's halo exchange and DIGEST's store sync share them.

A compressor serves ONE exchanged layer (width F): the sender calls ``encode(h, k, step)`` on the
rows it is about to send, the receiver calls ``decode(z, F, step)`` on what arrived. Both are
differentiable, so under VARCO the backward pass carries the gradient of the k-wide tensor and
backward bytes shrink with the forward ones.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..options import Options, option
from ..seeds import mix


def ratio_schedule(kind: str, epoch: int, epochs: int, comp_max: float, comp_min: float,
                   slope: float, fixed_ratio: float) -> float:
    """Compression ratio r(t) >= 1 at epoch ``t`` (0-based) of ``epochs`` = T.

    ``variable`` *(reference code: JuanCervino/gnn_compress, ``sar/core/compressor.py``
    ``get_compressed_size``, which divides by T - 2)*:
    r(t) = max(r_max - s t (r_max - r_min) / (T - 2), r_min), so r reaches r_min at the first
    epoch t >= (T - 2) / s; with s = 1 that is t = T - 2, and the last two epochs (T - 2, T - 1)
    run at r_min (full width at the default r_min = 1). For T <= 2 the formula is undefined
    (T - 2 <= 0) and every epoch is one of the last two: r = r_min throughout *(choice)*.
    ``fixed``: ``fixed_ratio``. ``none``: 1.
    """
    if kind == "none":
        return 1.0
    if kind == "fixed":
        return float(fixed_ratio)
    if kind == "variable":
        span = epochs - 2
        if span <= 0:
            return float(comp_min)
        return max(comp_max - slope * epoch * (comp_max - comp_min) / span, comp_min)
    raise ValueError(f"unknown compression schedule {kind!r}")


@dataclass
class CompressionOptions(Options):
    """Compression of exchanged rows (VARCO's halos; DIGEST's store sync when asked for)."""
    compressor: str = option("auto", "compressor of exchanged rows (auto: slice for varco, none "
                             "= exact store sync for digest)",
                             choices=("auto", "slice", "random", "learned", "none"))
    comp_schedule: str = option("variable", "compression schedule r(t)",
                                choices=("variable", "fixed", "none"))
    comp_max: float = option(32.0, "initial compression ratio r_max (variable schedule)")
    comp_min: float = option(1.0, "final compression ratio r_min (variable schedule)")
    comp_slope: float = option(1.0, "slope s of the variable schedule")
    comp_ratio: float | None = option(None, "compression ratio of the fixed schedule (required "
                                      "with --comp-schedule fixed)")
    comp_layers: str = option("", "layers whose rows are compressed, e.g. 1,2 (default: VARCO "
                              "all but the last layer's input; DIGEST every stored layer)")

    def check_group(self, cfg) -> None:
        if not 1 <= self.comp_min <= self.comp_max:
            raise ValueError("need 1 <= --comp-min <= --comp-max")
        if self.comp_schedule == "fixed" and self.comp_ratio is None:
            raise ValueError("--comp-schedule fixed needs --comp-ratio")
        if self.comp_ratio is not None and not self.comp_ratio >= 1:  # (NaN too)
            raise ValueError("--comp-ratio must be >= 1")
        if not self.comp_slope >= 0:
            raise ValueError("--comp-slope must be >= 0")
        parse_layers(self.comp_layers, cfg.model.layers, [])  # a bad list: one line now

    def ratio(self, epoch: int, epochs: int, schedule: str | None = None) -> float:
        """r(epoch) under this schedule (or ``schedule``, e.g. "none" when nothing is compressed)."""
        return ratio_schedule(schedule or self.comp_schedule, epoch, epochs, self.comp_max,
                              self.comp_min, self.comp_slope, self.comp_ratio or 1.0)


def width(features: int, ratio: float) -> int:
    """Columns sent at ratio r: max(1, ceil(F / r)). The 1e-9 keeps round-off in r (say
    r = 2.0000000001) from adding a column."""
    return max(1, math.ceil(features / ratio - 1e-9))


class Compressor(nn.Module):
    """Base class, also the ``none`` kind (the identity: every column is sent).

    Args:
        layer: the exchanged layer l this codec serves (seeds ``random``).
        features: F, the columns of h^l.
        seed: run seed, shared by every worker.
    Shapes: ``encode: [rows, F] -> [rows, k]``; ``decode: [rows, k] -> [rows, F]``.
    """

    def __init__(self, layer: int, features: int, seed: int = 0):
        super().__init__()
        self.layer, self.features, self.seed = layer, features, seed

    def encode(self, h: Tensor, k: int, step: int) -> Tensor:
        return h

    def decode(self, z: Tensor, features: int, step: int) -> Tensor:
        return z


class SliceCompressor(Compressor):
    """The first k columns; the receiver zero-pads the rest (the reference code's final choice)."""

    def encode(self, h, k, step):
        return h[:, :k]

    def decode(self, z, features, step):
        return F.pad(z, (0, features - z.size(1)))


class RandomCompressor(Compressor):
    """k columns drawn without replacement by a generator seeded with (seed, layer, step), so every
    worker picks the same columns at a given step without sending them. The receiver scales by
    F / k: column j survives with probability k / F, hence E[decode(encode(h))] = h."""

    def columns(self, k: int, step: int, device) -> Tensor:
        mixed = mix(self.seed, self.layer, step, offset=0)  # offset 0: the recorded runs' stream
        gen = torch.Generator().manual_seed(mixed)  # CPU generator: same draw on any device
        return torch.randperm(self.features, generator=gen)[:k].sort().values.to(device)

    def encode(self, h, k, step):
        return h.index_select(1, self.columns(k, step, h.device))

    def decode(self, z, features, step):
        k = z.size(1)
        cols = self.columns(k, step, z.device)
        return z.new_zeros(z.size(0), features).index_copy(1, cols, z * (features / k))


class LearnedCompressor(Compressor):
    """Linear encoder F -> k and decoder k -> F trained with the model. One F x F encoder and one
    F x F decoder; width k uses the encoder's first k output units and the decoder's first k
    input units, so k may change every epoch without new parameters.

    Initialised to the identity (so it starts as ``slice`` and the reconstruction is exact at
    k = F): deterministic, hence identical on every worker without a broadcast. The owner of the
    parameters must register this module on the model BEFORE the optimiser is built, so that
    they are optimised and their gradients all-reduced like any other parameter.
    """

    def __init__(self, layer, features, seed=0):
        super().__init__(layer, features, seed)
        # raw parameters, not nn.Linear: its random init would consume the global RNG stream
        self.enc_weight = nn.Parameter(torch.eye(features))  # [F_out, F_in], rows = code units
        self.enc_bias = nn.Parameter(torch.zeros(features))
        self.dec_weight = nn.Parameter(torch.eye(features))  # [F, F], columns = code units
        self.dec_bias = nn.Parameter(torch.zeros(features))

    def encode(self, h, k, step):
        return F.linear(h, self.enc_weight[:k], self.enc_bias[:k])

    def decode(self, z, features, step):
        return F.linear(z, self.dec_weight[:, : z.size(1)], self.dec_bias)


KINDS = {"none": Compressor, "slice": SliceCompressor, "random": RandomCompressor,
         "learned": LearnedCompressor}


def compressor_factory(name: str, seed: int) -> Callable[[int, int], Compressor]:
    """``make(layer, features)`` building the ``name`` compressor of one exchanged layer."""
    if name not in KINDS:
        raise ValueError(f"unknown compressor {name!r}; choose from {', '.join(KINDS)}")
    return lambda layer, features: KINDS[name](layer, features, seed)


def parse_layers(spec: str, layers: int, default: list[int]) -> list[int]:
    """``--comp-layers`` ("1,2") as a sorted list of exchanged layers (1 <= l <= L-1);
    ``default`` when the flag is empty."""
    if not spec.strip():
        return sorted(default)
    try:
        chosen = sorted({int(s) for s in spec.split(",") if s.strip()})
    except ValueError:
        raise ValueError(f"--comp-layers {spec!r}: give layer numbers, e.g. 1,2") from None
    bad = [l for l in chosen if not 1 <= l <= layers - 1]
    if bad:
        raise ValueError(f"--comp-layers {bad}: exchanged layers are 1..{layers - 1}")
    return chosen

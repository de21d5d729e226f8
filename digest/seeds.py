"""Seed mixing: one integer seed from several (the run's seed, a step, a layer, a rank, ...), the
same on every worker and after a resume. A leaf: it imports nothing of the project, so every layer
(and every method) may use it.

``mix(*parts, base, offset)`` folds the parts left to right, ``out = out * base + part + offset``,
modulo 2^63 (what ``torch.Generator.manual_seed`` takes). A caller's (base, offset) fixes its random
stream, and with it the results of the runs already recorded (tests/cli/regression.json): AdaQP,
Sylvie, SAT and mini-batch sampling use the default offset 1; VARCO's random columns and the noise
floor's masks offset 0 (the probe's last part, its draw, with base 4).
"""
from __future__ import annotations

BASE = 1_000_003  # a prime larger than any step, layer or rank
RANGE = 2 ** 63


def mix(*parts: int, base: int = BASE, offset: int = 1) -> int:
    """One seed in [0, 2^63) from the integers ``parts``, in order (``mix(a, b) != mix(b, a)``)."""
    out = 0
    for p in parts:
        out = (out * base + int(p) + offset) % RANGE
    return out

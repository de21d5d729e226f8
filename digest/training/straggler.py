"""Emulated stragglers (``--slow-workers RANK:FACTOR[,RANK:FACTOR]``), for every method.

A slow worker sleeps, after each of its steps, (FACTOR - 1) x that step's compute time (the step
without its communication), so it runs FACTOR times slower. The same rule serves the synchronous
loop (Trainer.fit: the sleep is part of the step's wall time, since the other workers wait for the
slow one at the next collective) and DIGEST-A (asynchronous.py: nobody waits, the slow worker just
takes fewer steps). The flag's format is checked by ``config.parse_slow_workers``.
"""
from __future__ import annotations

import time

from ..config import parse_slow_workers


class Straggler:
    """After each step sleep (factor - 1) x the step's compute time (the step without its
    communication), so this worker runs ``factor`` times slower."""

    def __init__(self, factor: float = 1.0):
        self.factor = factor

    @classmethod
    def of(cls, spec: str, world: int, rank: int) -> "Straggler":
        """This rank's straggler under ``--slow-workers spec`` (factor 1: never sleeps)."""
        return cls(parse_slow_workers(spec, world).get(rank, 1.0))

    def __call__(self, compute_s: float) -> float:
        """Sleep as the rule says; returns the seconds slept."""
        pause = max(0.0, (self.factor - 1.0) * compute_s)
        if pause:
            time.sleep(pause)
        return pause

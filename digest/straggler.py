"""Emulated stragglers (``--slow-workers RANK:FACTOR[,RANK:FACTOR]``), for every method.

A slow worker sleeps, after each of its steps, (FACTOR - 1) x that step's compute time (the step
without its communication), so it runs FACTOR times slower. The same rule serves the synchronous
loop (Trainer.fit: the sleep is part of the step's wall time, since the other workers wait for the
slow one at the next collective) and DIGEST-A (asynchronous.py: nobody waits, the slow worker just
takes fewer steps). Kept in a module of its own, importable by both without a cycle.
"""
from __future__ import annotations

import time


def parse_slow_workers(spec: str, world: int) -> dict[int, float]:
    """``'1:3,2:1.5'`` -> {1: 3.0, 2: 1.5}. Raises ValueError on a malformed entry, a rank outside
    the world or a factor below 1."""
    out: dict[int, float] = {}
    for item in filter(None, (s.strip() for s in (spec or "").split(","))):
        try:
            r, f = item.split(":")
            rank, factor = int(r), float(f)
        except ValueError:
            raise ValueError(f"--slow-workers: {item!r} is not RANK:FACTOR") from None
        if not 0 <= rank < world:
            raise ValueError(f"--slow-workers: rank {rank} is outside 0..{world - 1}")
        if factor < 1:
            raise ValueError(f"--slow-workers: factor {factor} of rank {rank} must be >= 1")
        out[rank] = factor
    return out


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

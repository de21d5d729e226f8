"""Paired ratios and the words they support (docs/methods.md section 11): the median of
same-round ratios with a percentile-bootstrap interval over rounds and seeds, the A/A check of a
point, and a verdict that never contradicts its interval. Pure statistics: no runs, no files."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

REPLICATES = 2000   # bootstrap replicates per interval
LEVEL = 0.95        # interval coverage
SEED = 0            # the bootstrap's generator seed: the same tables from the same runs
AA_BAND = (0.95, 1.05)  # an A/A median outside it makes the point noisy
NO_DIFFERENCE = "no measurable difference"
INCONCLUSIVE = "inconclusive (overlaps the A/A interval)"
NOISY = "noisy point (A/A): no verdict"
ONE_PAIR = "one pair: no interval"


# -- statistics ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Interval:
    """A paired speedup: the median of ``pairs`` ratios and its bootstrap interval [lo, hi]
    (NaN with fewer than two pairs)."""
    median: float
    lo: float
    hi: float
    pairs: int

    def overlaps(self, other: "Interval") -> bool:
        return self.lo <= other.hi and other.lo <= self.hi

    @property
    def has_interval(self) -> bool:
        return not (np.isnan(self.lo) or np.isnan(self.hi))


def paired_ratio(pairs: list, replicates: int = REPLICATES, level: float = LEVEL,
                 seed: int = SEED) -> Interval | None:
    """The median over ``pairs`` of mean(ref) / mean(method), each pair a (ref times, method
    times) of one round and seed over the same timed window, and its percentile-bootstrap interval
    at ``level``: each replicate draws as many pairs as there are, with replacement (rounds and
    seeds, never the epochs inside a run). None without pairs; no interval with one."""
    ratios = np.array([np.mean(a) / np.mean(b) for a, b in
                       ((np.asarray(a, dtype=float), np.asarray(b, dtype=float)) for a, b in pairs)
                       if len(a) and len(b)])
    if not len(ratios):
        return None
    point = float(np.median(ratios))
    if len(ratios) < 2:
        return Interval(point, float("nan"), float("nan"), 1)
    rng = np.random.default_rng(seed)
    stats = np.median(ratios[rng.integers(len(ratios), size=(replicates, len(ratios)))], axis=1)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(stats, [tail, 100 - tail])
    return Interval(point, float(lo), float(hi), len(ratios))


def half_width_pct(lo: float, hi: float) -> float:
    """A noise floor's half-width, (hi - lo) / 2 of a 1x ratio, in percent."""
    return 50 * (hi - lo)


def noisy(floor: Interval | None) -> bool:
    """Whether an A/A interval says its point is too noisy for a verdict: median outside
    ``AA_BAND`` or an interval that excludes 1."""
    if floor is None:
        return False
    off = not AA_BAND[0] <= floor.median <= AA_BAND[1]
    return off or (floor.has_interval and not floor.lo <= 1 <= floor.hi)


def verdict(speedup: Interval | None, floor: Interval | None) -> str:
    """The words a speedup's interval supports, judged against its point's A/A interval (without
    one: against 1 alone). Never contradicts the interval: "faster" only when it lies above 1."""
    if speedup is None:
        return "n/a"
    if noisy(floor):
        return NOISY
    if not speedup.has_interval:
        return ONE_PAIR
    if speedup.lo <= 1 <= speedup.hi:
        return NO_DIFFERENCE
    if floor is not None and floor.has_interval and speedup.overlaps(floor):
        return INCONCLUSIVE
    return "faster" if speedup.lo > 1 else "slower"

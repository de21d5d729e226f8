"""Paired ratios and the words they support (docs/methods.md section 11): the mean of same-round
ratios with a percentile-bootstrap interval over pairs (a pair: one round at one seed), the A/A
equivalence check of a point, and a verdict that never outruns its interval. Pure statistics: no
runs, no files."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

REPLICATES = 2000   # bootstrap replicates per interval
LEVEL = 0.95        # interval coverage
SEED = 0            # the bootstrap's generator seed: the same tables from the same runs
MIN_PAIRS = 6       # pairs per (point, method) the protocol asks; fewer: the cell says so
AA_BAND = (0.95, 1.05)  # a point is clean when its A/A interval lies inside it
NO_DIFFERENCE = "no measurable difference"
NOT_CLEAN = "A/A not clean: no verdict"
ONE_PAIR = "one pair: no interval"


# -- statistics ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Interval:
    """A paired speedup: the mean of ``pairs`` ratios and its bootstrap interval [lo, hi]
    (NaN with fewer than two pairs)."""
    mean: float
    lo: float
    hi: float
    pairs: int

    def overlaps(self, other: "Interval") -> bool:
        return self.lo <= other.hi and other.lo <= self.hi

    @property
    def has_interval(self) -> bool:
        return not (np.isnan(self.lo) or np.isnan(self.hi))


def tails(n: int, level: float = LEVEL) -> tuple[float, float]:
    """The percentiles (0-100) that bound a ``level`` interval of a mean of ``n`` resampled units:
    the expanded percentile bootstrap (Hesterberg 2015, "What teachers should know about the
    bootstrap", section 4.2). A plain percentile interval of a mean is too narrow for few units
    (its spread is the sample's without the n - 1 correction, and z stands where t should): on
    6 pairs drawn from the committed A/A pairs it holds their mean 86% of the time
    (tests/experiments/test_paired.py); the tails are moved out to Phi(sqrt(n / (n - 1)) t_{n-1})
    instead, which holds it 94% of the time there. With 3 pairs or fewer they reach the extremes:
    the interval is about the range of the ratios.

    Args:
        n: units each replicate draws (pairs), >= 2.
    Shapes: (lower, upper) percentiles, lower + upper = 100."""
    q = (1 - level) / 2
    tail = 100 * stats.norm.cdf(math.sqrt(n / (n - 1)) * stats.t.ppf(q, n - 1))
    return tail, 100 - tail


def paired_ratio(pairs: list, replicates: int = REPLICATES, level: float = LEVEL,
                 seed: int = SEED) -> Interval | None:
    """The mean over ``pairs`` of mean(ref) / mean(method), each pair a (ref times, method
    times) of one round and seed over the same timed window, and its bootstrap interval at
    ``level`` (``tails``): each replicate draws as many pairs as there are, with replacement
    (rounds and seeds, never the epochs inside a run). None without pairs; no interval with one.

    Args:
        pairs: [(ref epoch times, method epoch times), ...], one per round and seed.
    Shapes: Interval.pairs = the pairs with times on both sides."""
    ratios = np.array([np.mean(a) / np.mean(b) for a, b in
                       ((np.asarray(a, dtype=float), np.asarray(b, dtype=float)) for a, b in pairs)
                       if len(a) and len(b)])
    if not len(ratios):
        return None
    point = float(np.mean(ratios))
    if len(ratios) < 2:
        return Interval(point, float("nan"), float("nan"), 1)
    rng = np.random.default_rng(seed)
    draws = np.mean(ratios[rng.integers(len(ratios), size=(replicates, len(ratios)))], axis=1)
    lo, hi = np.percentile(draws, tails(len(ratios), level))
    return Interval(point, float(lo), float(hi), len(ratios))


def half_width_pct(lo: float, hi: float) -> float:
    """A noise floor's half-width, (hi - lo) / 2 of a 1x ratio, in percent."""
    return 50 * (hi - lo)


def few_pairs(pairs: int, short: bool = False) -> str:
    """What a cell says beside its interval when it rests on fewer than ``MIN_PAIRS`` pairs (its
    interval then does not hold ``LEVEL``): '3 pairs: below the 6 the protocol asks', or with
    ``short`` (a wide table's cell) '3 pairs (< 6)'; "" with enough."""
    if pairs >= MIN_PAIRS:
        return ""
    if short:
        return f"{pairs} pair{'' if pairs == 1 else 's'} (< {MIN_PAIRS})"
    return f"{pairs} pair{'' if pairs == 1 else 's'}: below the {MIN_PAIRS} the protocol asks"


def clean(floor: Interval | None) -> bool:
    """Whether an A/A interval shows its point clean: the interval lies inside ``AA_BAND`` (an
    equivalence test: a tight interval just off 1 is a small, precise position effect; a wide one
    around 1 is noise). A point without an interval (one pair, or no A/A run) is not clean."""
    return (floor is not None and floor.has_interval
            and AA_BAND[0] <= floor.lo and floor.hi <= AA_BAND[1])


def verdict(speedup: Interval | None, floor: Interval | None) -> str:
    """The words a speedup's interval supports at its point: with an A/A run there, none unless
    the point is clean, then "faster" ("slower") where the interval lies wholly above (below) the
    A/A interval and "no measurable difference" where it overlaps it; without an A/A run, the same
    against 1 alone."""
    if speedup is None:
        return "n/a"
    if floor is not None and not clean(floor):
        return NOT_CLEAN
    if not speedup.has_interval:
        return ONE_PAIR
    lo, hi = (floor.lo, floor.hi) if floor is not None else (1.0, 1.0)
    if speedup.lo > hi:
        return "faster"
    if speedup.hi < lo:
        return "slower"
    return NO_DIFFERENCE

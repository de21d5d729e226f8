"""experiments/analysis/paired.py (docs/methods.md section 11): exact values on tiny hand-made
inputs (the mean of the ratios, the interval's widened tails, the few-pairs note, the A/A
equivalence test), then the interval's coverage on the committed A/A pairs: resampled, the 95%
interval of the mean of 6 pairs holds their mean close to 95% of the time, where the former
median of 3 rounds held its median about 75% of the time. No training."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments.analysis import paired
from experiments.analysis.paired import Interval, clean, few_pairs, paired_ratio, tails
from experiments.suites.suite import load_suite

ROOT = Path(__file__).resolve().parents[2]
TRIALS = 2000  # samples drawn from the A/A pairs per coverage estimate (standard error ~0.6%)


def test_the_speedup_is_the_mean_of_the_pairs_ratios():
    # ratios 2 / 1, 3 / 1, 7 / 1 (each pair's mean over mean): their mean 4, where a median says 3
    iv = paired_ratio([([2.0, 2.0], [1.0, 1.0]), ([3.0], [1.0]), ([6.0, 8.0], [1.0, 1.0])])
    assert (iv.mean, iv.pairs) == (4.0, 3)


def test_two_pairs_give_the_range_and_one_pair_no_interval():
    # two pairs (ratios 1 and 3): the widened tails (tails(2) ~ 0) reach the draws of one pair
    # twice, so the interval is the range of the ratios, its mean between them
    iv = paired_ratio([([1.0], [1.0]), ([3.0], [1.0])])
    assert (iv.mean, iv.lo, iv.hi, iv.pairs) == (2.0, 1.0, 3.0, 2)
    one = paired_ratio([([3.0], [1.0])])
    assert (one.mean, one.pairs, one.has_interval) == (3.0, 1, False)
    assert paired_ratio([([], [1.0])]) is None  # a run without timed epochs pairs with nothing


def test_the_tails_widen_for_few_pairs_and_tend_to_the_plain_ones():
    # Phi(sqrt(6 / 5) x t_{5, 0.025}) = Phi(1.0954 x -2.5706) = Phi(-2.8159) = 0.243%
    lo, hi = tails(6)
    assert lo == pytest.approx(0.2432, abs=1e-3) and lo + hi == pytest.approx(100.0)
    assert tails(9)[0] == pytest.approx(0.72, abs=0.01)  # t_{8}: 2.306 x sqrt(9 / 8)
    assert tails(3)[0] < 1e-5  # three pairs: the extremes
    assert tails(10**6)[0] == pytest.approx(2.5, abs=1e-3)  # many pairs: the plain 2.5%


def test_fewer_pairs_than_the_protocol_asks_are_said():
    assert paired.MIN_PAIRS == 6
    assert few_pairs(3) == "3 pairs: below the 6 the protocol asks"
    assert few_pairs(1) == "1 pair: below the 6 the protocol asks"
    assert few_pairs(3, short=True) == "3 pairs (< 6)"
    assert few_pairs(6) == "" and few_pairs(9, short=True) == ""


def test_a_point_is_clean_when_its_a_a_interval_lies_inside_the_band():
    assert clean(Interval(1.0, 0.95, 1.05, 6))  # the band's ends are inside
    assert clean(Interval(0.97, 0.96, 0.98, 6))  # tight just off 1: a small, precise effect
    assert not clean(Interval(1.0, 0.949, 1.0, 6)) and not clean(Interval(1.0, 1.0, 1.051, 6))
    assert not clean(Interval(1.0, 0.79, 1.22, 3))  # wide around 1: noise
    assert not clean(Interval(1.0, float("nan"), float("nan"), 1)) and not clean(None)


# -- coverage on the committed A/A pairs --------------------------------------------------------
def committed_aa_ratios() -> np.ndarray:
    """Every committed A/A pair's ratio, read from the run files apart from timing.py: exact's
    mean epoch time after its suite's warm-up over its twin's at the same point, seed and round
    (exact's period is one epoch: the whole run after the warm-up is its window)."""
    out = []
    for info in sorted(ROOT.glob("results/*/runs/*/exact-aa*/run.json")):
        twin = info.parent
        warmup = load_suite(twin.parents[2].name).warmup
        exact = twin.with_name(twin.name.replace("exact-aa", "exact", 1))
        times = [pd.read_csv(d / "metrics.csv")["epoch_time"].to_numpy()[warmup:]
                 for d in (exact, twin)]
        out.append(times[0].mean() / times[1].mean())
    return np.array(out)


@pytest.fixture(scope="module")
def aa():
    ratios = committed_aa_ratios()
    assert len(ratios) >= 100  # 41 points of 3 or 9 pairs
    return ratios


def coverage(population: np.ndarray, n: int, interval) -> float:
    """How often ``interval`` (a sample -> (lo, hi, the population value it estimates)) holds
    that value, over TRIALS samples of ``n`` pairs drawn from ``population`` (seeded)."""
    rng = np.random.default_rng(1)
    hits = 0
    for _ in range(TRIALS):
        lo, hi, true = interval(rng.choice(population, n))
        hits += lo <= true <= hi
    return hits / TRIALS


def test_the_interval_of_the_mean_of_6_pairs_holds_95_percent_on_a_a_data(aa):
    """The tables' interval (paired_ratio: the mean, its widened percentile bootstrap) on 6 pairs
    drawn from the committed A/A ratios holds their mean close to 95% of the time."""
    def tables(sample):
        iv = paired_ratio([([r], [1.0]) for r in sample])
        return iv.lo, iv.hi, aa.mean()

    assert 0.90 <= coverage(aa, 6, tables) <= 0.97


def test_the_former_median_of_3_and_the_plain_percentile_fall_short(aa):
    """The former rule, the median of 3 rounds with a plain percentile bootstrap, is the range of
    the three and holds the median about 75% of the time; a plain percentile interval of the mean
    of 6 is too narrow too (no n - 1, z for t), which is why paired.tails widens it."""
    rng = np.random.default_rng(0)

    def former(sample):
        draws = np.median(sample[rng.integers(3, size=(paired.REPLICATES, 3))], axis=1)
        return (*np.percentile(draws, [2.5, 97.5]), np.median(aa))

    def plain(sample):
        draws = np.mean(sample[rng.integers(6, size=(paired.REPLICATES, 6))], axis=1)
        return (*np.percentile(draws, [2.5, 97.5]), aa.mean())

    assert coverage(aa, 3, former) <= 0.80
    assert coverage(aa, 6, plain) <= 0.88

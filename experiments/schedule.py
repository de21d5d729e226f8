"""The order a suite's runs start in (docs/methods.md section 11, "Interleave").

A point of a suite is a (dataset, emulated network, worker count, seed); the runs of every method
at a point are compared with each other, so they should see the same machine. ``interleave``
orders the runs round by round: round 0 of every point, then round 1 of every point, ...; within a
round, point by point; at a point, one run of each method in turn (round-robin), the suite's
method order rotated by one each round (round r starts with the point's (r mod K)-th method of K),
so that no method always runs first (after another point's runs, or a cold file cache) or last.
A slow hour thus hits the methods of a round alike (they run back to back), and the rounds of a
point are spread over the suite's whole duration instead of falling in the same hour.

A suite without rounds (R = 1) runs point by point, every method once at each point.
"""
from __future__ import annotations

from .config import Run, network_of


def point(run: Run) -> tuple:
    """The point of a suite a run belongs to: (dataset, emulated network or None, M, seed)."""
    return run.dataset, network_of(run.label), run.workers, run.seed


def rotated(items: list, r: int) -> list:
    """``items`` rotated left by ``r`` (round r of a point starts with its r-th method)."""
    if not items:
        return []
    k = r % len(items)
    return items[k:] + items[:k]


def interleave(runs: list[Run]) -> list[Run]:
    """``runs`` (in config.expand's order) in the order to start them: rounds, then points (in the
    order they first appear), then the point's methods, rotated by the round."""
    points: dict = {}  # point -> its labels in suite order
    for run in runs:
        labels = points.setdefault(point(run), [])
        if run.label not in labels:
            labels.append(run.label)
    by_key = {(point(run), run.label, run.round): run for run in runs}
    order = []
    for r in sorted({run.round for run in runs}):
        for p, labels in points.items():
            order += [by_key[p, label, r] for label in rotated(labels, r) if (p, label, r) in by_key]
    if len(order) != len(runs):  # config.suite_from_dict refuses such suites
        raise ValueError("a run is listed twice")
    return order

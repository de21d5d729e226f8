"""The order a suite's runs start in (docs/methods.md section 11, "Interleave").

A point of a suite is a (dataset, emulated network, worker count, seed); the runs of every method
at a point are compared with each other, so they should see the same machine. ``interleave``
orders the runs round by round: round 0 of every point, then round 1 of every point, ...; within a
round, point by point; at a point, one run of each method in a seeded random order (``order``: a
permutation drawn from the point and the round, and never the previous round's order again when
the point has more than one method). A fixed or rotated order lets a position effect pose as a
speedup (with a rotation, exact's A/A twin always ran right after exact); a shuffled one spreads
every position over every method. A slow hour still hits the methods of a round alike (they run
back to back), and the rounds of a point are spread over the suite's whole duration. The runner
records each run's round and its position in its round (run.json).

A suite without rounds (R = 1) runs point by point, every method once at each point, in the
suite's order.
"""
from __future__ import annotations

import dataclasses
import zlib

import numpy as np

from .suite import Run, network_of


def point(run: Run) -> tuple:
    """The point of a suite a run belongs to: (dataset, emulated network or None, M, seed)."""
    return run.dataset, network_of(run.label), run.workers, run.seed


def order(labels: list, r: int, at: tuple) -> list:
    """The methods ``labels`` of point ``at`` in round ``r``'s order: a permutation seeded by the
    point and the round (the same suite gives the same order), redrawn where it would repeat the
    previous round's order."""
    def draw(k: int) -> list:
        seed = zlib.crc32(repr((at, k)).encode())
        return [labels[i] for i in np.random.default_rng(seed).permutation(len(labels))]
    out = draw(r)
    if r > 0 and len(labels) > 1:
        previous, tries = order(labels, r - 1, at), 0
        while out == previous:
            tries += 1
            out = draw(r + 1000 * tries)
    return out


def interleave(runs: list[Run]) -> list[Run]:
    """``runs`` (in suite.expand's order) in the order to start them: rounds, then points (in the
    order they first appear), then the point's methods in the round's shuffled ``order``; each
    run's ``position`` is its place at its point in its round."""
    points: dict = {}  # point -> its labels in suite order
    for run in runs:
        labels = points.setdefault(point(run), [])
        if run.label not in labels:
            labels.append(run.label)
    by_key = {(point(run), run.label, run.round): run for run in runs}
    shuffle = any(run.round for run in runs)  # one round: no pairs to protect, the suite's order
    out = []
    for r in sorted({run.round for run in runs}):
        for p, labels in points.items():
            ordered = order(labels, r, p) if shuffle else labels
            here = [by_key[p, label, r] for label in ordered if (p, label, r) in by_key]
            out += [dataclasses.replace(run, position=i) for i, run in enumerate(here)]
    if len(out) != len(runs):  # suite.suite_from_dict refuses such suites
        raise ValueError("a run is listed twice")
    return out

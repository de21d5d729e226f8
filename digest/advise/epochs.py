"""Epochs to a target accuracy, from the benchmark's convergence runs on the graph nearest the
user's by measured statistics (docs/methods.md section 13).

``convergence.json`` (beside this file; written from the committed runs by ``python -m
experiments.studies.advise table --write``, which ``--check`` recomputes) holds, per group of runs
(suite, graph, worker count, model, width, depth, dropout, learning rate, budget) and method
configuration, every seed's epochs to q x exact's mean best validation accuracy (q in its
``targets``; null: not reached), the test accuracy at best validation beside exact's, and each
(graph, workers) pair's statistics. Graphs are compared by

    distance = sqrt(sum over s of ((a_s - b_s) / scale_s)^2)

over s = edge cut (fraction of edges cut), halo fraction (halo rows / nodes), edge homophily and
log10 of the feature width (``SCALES``). Exact's figure comes from the nearest graph with exact
runs that reached the target (the anchor); another method's from the nearest graph with runs of it
(default options, same model and dropout), scaled by exact's epochs on the anchor over exact's in
the same runs' group, so that rows read from different graphs are still compared in one graph's
epochs. Among a graph's runs: the nearest width (the wider of two as near), then the same depth,
the nearest worker count, the most seeds. The spread over the seeds comes with the figure.

Beyond ``FAR`` (one unit of the scaled distance: a difference of one scale in one statistic) the
nearest runs of a method say little about the user's graph, whose cut and halo may make its
stale or dropped rows cost nothing or a lot: such a method is given exact's figure (the anchor's)
and says so, so that the order there is the order of the per-epoch times.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

TABLE = Path(__file__).with_name("convergence.json")
SCALES = {"edge_cut": 0.1, "halo": 0.5, "homophily": 0.1, "features": 0.5}
FAR = 1.0  # beyond this distance a method's own runs are not read: exact's epochs are assumed


def load_table(path: Path | None = None) -> dict:
    return json.loads(Path(path or TABLE).read_text())


def distance(a: dict, b: dict) -> float:
    """Between two graphs' statistics (``{"edge_cut", "halo", "homophily", "features"}``)."""
    def v(s, k):
        return math.log10(max(1, s[k])) if k == "features" else s[k]
    return math.sqrt(sum(((v(a, k) - v(b, k)) / s) ** 2 for k, s in SCALES.items()))


@dataclass(frozen=True)
class Epochs:
    """A method's epochs to target and where the figure comes from.

    Args:
        epochs: median over seeds (None: not every seed reached the target); low, high: the
            spread over the seeds that did. All three scaled by ``scale``.
        reached: seeds that reached it, of ``seeds``.
        dataset, workers, hidden, suite: the runs it was read from; distance: to the user's graph.
        scale: exact's epochs on the anchor graph over exact's on these runs (1: these runs are
            the anchor's, or the method is exact).
        accuracy_gap: mean test accuracy at best validation minus exact's, same runs (points).
    """

    epochs: float | None
    low: float | None
    high: float | None
    reached: int
    seeds: int
    dataset: str
    workers: int
    hidden: int
    suite: str
    distance: float
    accuracy_gap: float | None
    scale: float = 1.0
    anchor: str = ""
    assumed: str = ""  # set: the method's own runs are beyond FAR; this is exact's figure

    def source(self) -> str:
        out = (f"{self.suite}: {self.dataset}, M={self.workers}, hidden {self.hidden}, "
               f"{self.reached}/{self.seeds} seeds (distance {self.distance:.2f})")
        if self.scale != 1.0:
            out += f", x {self.scale:.2f} (exact's epochs on {self.anchor} / here)"
        if self.assumed:
            out = f"exact's, assumed ({self.assumed}): " + out
        return out


def _median(xs: list) -> float:
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


GROUP = ("suite", "dataset", "workers", "model", "hidden", "layers", "dropout", "lr", "budget")


def _nearest(table: dict, keep, stats: dict, hidden: int, layers: int):
    """(distance, row) of the row ``keep(row)`` accepts nearest the user's graph, or None."""
    best = None
    for row in table["rows"]:
        if not keep(row):
            continue
        g = table["graphs"][f"{row['dataset']}|{row['workers']}"]
        rank = (round(distance(stats, g), 6), abs(math.log2(row["hidden"] / hidden)),
                -row["hidden"], row["layers"] != layers,
                abs(row["workers"] - stats.get("workers", row["workers"])), -len(row["seeds"]),
                row["suite"])
        if best is None or rank < best[0]:
            best = (rank, row)
    return None if best is None else (best[0][0], best[1])


def _reached(row: dict, key: str) -> float | None:
    got = [e for e in row["epochs"][key] if e is not None]
    return _median(got) if got and len(got) == len(row["epochs"][key]) else None


def lookup(table: dict, method: str, stats: dict, target: float, model: str, hidden: int,
           layers: int, dropout: float, exclude: tuple = ()) -> Epochs | None:
    """The figure for ``method`` (default options) nearest ``stats``; None when no run has it.
    ``exclude``: datasets not to read (a held-out graph's own runs).

    Exact's figure comes from the nearest graph with exact runs (the anchor). Another method's
    from the nearest graph with its runs, scaled by exact's epochs on the anchor over exact's in
    the same group of runs, so that every row is in the anchor's epochs (figures of different
    graphs are compared as ratios to exact, not as counts)."""
    key = f"{target:g}"
    if key not in {f"{t:g}" for t in table["targets"]}:
        raise ValueError(f"--target {target:g}: the table has {', '.join(map(str, table['targets']))}")

    def ours(row, name):
        return row["method"] == name and row["default"] and row["model"] == model and \
            row["dropout"] == dropout and row["dataset"] not in exclude

    def exact_of(row):
        return next((r for r in table["rows"] if r["method"] == "exact" and r["default"]
                     and all(r[k] == row[k] for k in GROUP)), None)

    anchor = _nearest(table, lambda r: ours(r, "exact") and _reached(r, key) is not None,
                      stats, hidden, layers)
    found = _nearest(table, lambda r: ours(r, method) and (
        anchor is None or (exact_of(r) is not None and _reached(exact_of(r), key) is not None)),
        stats, hidden, layers)
    if found is None:
        return None
    dist, row = found
    if method != "exact" and anchor is not None and dist > FAR:
        far = (f"its nearest runs, {row['suite']}: {row['dataset']}, are at distance "
               f"{dist:.2f} > {FAR:g}")
        row, dist = anchor[1], anchor[0]
        return _figure(row, [e for e in row["epochs"][key] if e is not None], key, dist, 1.0, "",
                       far, row_gap(found[1]))
    scale, name = 1.0, ""
    if anchor is not None and method != "exact" and any(anchor[1][k] != row[k] for k in GROUP):
        scale = _reached(anchor[1], key) / _reached(exact_of(row), key)
        name = f"{anchor[1]['suite']}: {anchor[1]['dataset']}"
    got = [e * scale for e in row["epochs"][key] if e is not None]
    return _figure(row, got, key, dist, scale, name, "", row_gap(row))


def row_gap(row: dict) -> float | None:
    """A row's mean test accuracy at best validation minus exact's, same runs (points)."""
    test = [t for t in row["test"] if t is not None]
    exact = [t for t in row["exact_test"] if t is not None]
    return 100 * (sum(test) / len(test) - sum(exact) / len(exact)) if test and exact else None


def _figure(row: dict, got: list, key: str, dist: float, scale: float, anchor: str,
            assumed: str, gap: float | None) -> Epochs:
    return Epochs(_median(got) if len(got) == len(row["epochs"][key]) else None,
                  min(got) if got else None, max(got) if got else None, len(got),
                  len(row["epochs"][key]), row["dataset"], row["workers"], row["hidden"],
                  row["suite"], dist, gap, round(scale, 6), anchor, assumed)

"""The cross-suite headline's rows (docs/methods.md sections 7 and 11): which (suite, graph,
method) rows matter (``KEYS``), each read from the suite's committed accuracy.csv, epoch_time.csv,
runs.csv and (emulated suites) cluster_epoch_time.csv, and the speed suite's timing.csv, which
``./run_all.sh --check SUITE`` rebuilds from the committed runs. experiments/studies/across_suites/headline_render.py
writes the table.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from experiments.suites.layout import folders
from experiments.suites.suite import exact_for, network_of


PRODUCTS = ("synthetic:nodes=40000,avg_degree=25,classes=47,features=100,communities=64,"
            "locality=0.97")


@dataclass(frozen=True)
class Key:
    """Rows of one suite: ``datasets`` x ``methods`` at ``workers`` (empty: every one of the
    tables, exact aside); ``emulated``: at the lowest and the highest bandwidth."""
    suite: str
    datasets: tuple = ()
    methods: tuple = ()
    workers: int = 4
    emulated: bool = False
    speed: str | None = None  # a speed suite whose paired speedups (timing.csv) replace the ratio


KEYS = (
    Key("repro", ("synthetic", "CS", "Physics"), ("partition", "digest-I10", "digest-I10-K3",
                                                   "varco-variable"), speed="repro_speed"),
    Key("field_methods", ("Physics",), ("pipegcn", "bnsgcn-p0.1", "sancus", "adaqp-2", "adaqp-8")),
    Key("cluster", (PRODUCTS,), ("partition", "digest-I10", "varco-variable"), emulated=True,
        speed="cluster_speed"),
    Key("arxiv"),
    Key("authors_settings", ("Photo",), ("pipegcn", "pipegcn-smooth0.95", "adaqp-adaptive-4")),
    Key("sat_sylvie_minibatch", ("CS",), ("sylvie", "sat-I10", "sat-I10-sync-resmean", "minibatch")),
)


def _csv(path: Path) -> pd.DataFrame | None:
    return pd.read_csv(path, dtype={"test_at_best_val": str}) if path.exists() else None


def _row(frame: pd.DataFrame | None, dataset: str, label: str, workers: int):
    if frame is None:
        return None
    hit = frame[(frame.dataset == dataset) & (frame.method == label) & (frame.workers == workers)]
    return None if hit.empty else hit.iloc[0]


def exact_at_seeds(results: Path, dataset: str, label: str, workers: int):
    """(exact's mean test accuracy over the seeds ``label`` ran, those seeds) from runs.csv, for a
    method run at fewer seeds than exact (a seed draws the split: its accuracy is compared with
    exact's at the same seeds); None where runs.csv lacks one of them."""
    runs = _csv(results / "runs.csv")
    if runs is None:
        return None
    pick = lambda m: runs[(runs.dataset == dataset) & (runs.method == m)  # noqa: E731
                          & (runs.workers == workers)]
    seeds = sorted(set(pick(label).seed))
    exact = pick(exact_for(label))
    exact = exact[exact.seed.isin(seeds)]
    if not seeds or sorted(set(exact.seed)) != seeds:
        return None
    return float(exact.test_at_best_val.astype(float).mean()), seeds


def bandwidths(results: Path, dataset: str, workers: int) -> list[str]:
    """The highest and the lowest emulated bandwidth of exact's runs (cluster_epoch_time.csv)."""
    frame = _csv(results / "cluster_epoch_time.csv")
    if frame is None:
        return []
    rows = frame[(frame.dataset == dataset) & (frame.workers == workers) & (frame.method == "exact")]
    ordered = [bw for _, bw in sorted(zip(rows.bit_s, rows.bandwidth))]
    return list(dict.fromkeys([ordered[-1], ordered[0]])) if ordered else []



@dataclass
class Row:
    """One row of the headline: a method of a suite at a graph, M and network, with its rows of
    the committed accuracy.csv, exact's (``exact``), exact's mean at the method's seeds where it
    ran fewer (``same_seeds``: (mean, seeds), from runs.csv), and the speed suite's timing.csv row
    (None where the method was not timed there)."""
    suite: str
    dataset: str
    method: str
    workers: int
    network: str | None
    acc: pd.Series
    exact: pd.Series
    same_seeds: tuple | None
    timing: pd.Series | None


def rows(key: Key, root: Path = Path(".")) -> list[Row]:
    """The rows of one Key, from the suite's committed tables under ``root``."""
    results = root / folders(key.suite)[0]
    acc, epoch = _csv(results / "accuracy.csv"), _csv(results / "epoch_time.csv")
    if acc is None or epoch is None:
        return []
    timing = _csv(root / folders(key.speed)[0] / "timing.csv") if key.speed else None
    out = []
    for dataset in key.datasets or tuple(dict.fromkeys(acc.dataset)):
        nets = bandwidths(results, dataset, key.workers) if key.emulated else [None]
        methods = key.methods or tuple(m for m in dict.fromkeys(acc[acc.dataset == dataset].method)
                                       if m != exact_for(m) and network_of(m) is None)
        for method in methods:
            for net in nets:
                label = method if net is None else f"{method}@{net}"
                a = _row(acc, dataset, label, key.workers)
                e = _row(acc, dataset, exact_for(label), key.workers)
                if a is None or e is None or _row(epoch, dataset, label, key.workers) is None:
                    continue
                same = (exact_at_seeds(results, dataset, label, key.workers)
                        if int(a["seeds"]) < int(e["seeds"]) else None)
                out.append(Row(key.suite, dataset, method, key.workers, net, a, e, same,
                               _row(timing, dataset, label, key.workers)))
    return out

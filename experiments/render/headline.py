"""The cross-suite headline table (results/README.md and README.md, between the
``<!-- generated:headline:begin ... -->`` and ``<!-- generated:headline:end -->`` markers): one
row per (suite, graph, method) that matters, each number read from the suite's committed
accuracy.csv, epoch_time.csv and (emulated suites) cluster_epoch_time.csv, which
``./run_all.sh --check SUITE`` rebuilds from the committed runs.

Per row: test accuracy at best validation (%, mean ± std over seeds, as table 1 prints it), exact's
at the same suite, graph, M (and bandwidth; at the method's seeds, from runs.csv, where the method
ran fewer), the difference in points (from the unrounded means of
accuracy.csv), and the per-epoch speedup over exact only where a speed suite measured it under the
timing protocol (its timing.csv: paired ratio, interval and verdict beside the A/A floor;
loopback on one host, or through emulated links at the lowest and the highest bandwidth of an
emulated suite). Rows the committed tables lack are left out.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .suites.suite import exact_for, network_of
from .suites.layout import folders, page_path
from .timing import NO_DIFFERENCE, NOISY

PRODUCTS = ("synthetic:nodes=40000,avg_degree=25,classes=47,features=100,communities=64,"
            "locality=0.97")
GRAPHS = {"synthetic": "synthetic default", PRODUCTS: "sweep-40k (synthetic)",
          "synthetic:preset=arxiv-like": "arxiv-like (synthetic, calibrated)"}


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
    Key("wave2", ("Physics",), ("pipegcn", "bnsgcn-p0.1", "sancus", "adaqp-2", "adaqp-8")),
    Key("cluster", (PRODUCTS,), ("partition", "digest-I10", "varco-variable"), emulated=True,
        speed="cluster_speed"),
    Key("arxiv"),
    Key("settings", ("Photo",), ("pipegcn", "pipegcn-smooth0.95", "adaqp-adaptive-4")),
    Key("wave3", ("CS",), ("sylvie", "sat-I10", "sat-I10-sync-resmean", "minibatch")),
)
HEADER = ["suite", "graph", "method", "M", "network", "seeds", "test acc. %", "exact %",
          "Δ vs exact", "per-epoch speedup"]


def _csv(path: Path) -> pd.DataFrame | None:
    return pd.read_csv(path, dtype={"test_at_best_val": str}) if path.exists() else None


def _row(frame: pd.DataFrame | None, dataset: str, label: str, workers: int):
    if frame is None:
        return None
    hit = frame[(frame.dataset == dataset) & (frame.method == label) & (frame.workers == workers)]
    return None if hit.empty else hit.iloc[0]


def _pct(row) -> str:
    text = row.get("test_at_best_val")
    if isinstance(text, str) and text:
        return text
    mean, std = row["test_mean"] * 100, row.get("test_std")
    return f"{mean:.2f}" if std is None or pd.isna(std) else f"{mean:.2f} ± {std * 100:.2f}"


def _delta(a: float, b: float) -> str:
    d = round((a - b) * 100, 2)
    return "0.00" if d == 0 else f"{d:+.2f}"


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


def paired(timing: pd.DataFrame | None, dataset: str, label: str, workers: int) -> str | None:
    """A speed suite's per-epoch speedup (timing.csv: median of same-round ratios) with its 95%
    interval, or None where it has no such row."""
    row = _row(timing, dataset, label, workers)
    if row is None or pd.isna(row["speedup_lo"]):
        return None
    text = f"{row['speedup']:.2f}x [{row['speedup_lo']:.2f}, {row['speedup_hi']:.2f}]"
    if row["verdict"] == NOISY:
        return f"{text}, noisy point: no verdict"
    return f"{text}, {'no measurable difference' if row['verdict'] == NO_DIFFERENCE else row['verdict']}"


def rows(key: Key, root: Path = Path(".")) -> list[list[str]]:
    """The table rows of one Key, from the suite's committed tables under ``root``."""
    results = root / folders(key.suite)[0]
    acc, epoch = _csv(results / "accuracy.csv"), _csv(results / "epoch_time.csv")
    if acc is None or epoch is None:
        return []
    timing = _csv(root / folders(key.speed)[0] / "timing.csv") if key.speed else None
    datasets = key.datasets or tuple(dict.fromkeys(acc.dataset))
    out = []
    for dataset in datasets:
        nets = bandwidths(results, dataset, key.workers) if key.emulated else [None]
        methods = key.methods or tuple(m for m in dict.fromkeys(acc[acc.dataset == dataset].method)
                                       if m != exact_for(m) and network_of(m) is None)
        for method in methods:
            for net in nets:
                label = method if net is None else f"{method}@{net}"
                a = _row(acc, dataset, label, key.workers)
                e = _row(acc, dataset, exact_for(label), key.workers)
                t = _row(epoch, dataset, label, key.workers)
                if a is None or e is None or t is None:
                    continue
                exact_pct, exact_mean = _pct(e), e["test_mean"]
                same = (exact_at_seeds(results, dataset, label, key.workers)
                        if int(a["seeds"]) < int(e["seeds"]) else None)
                if same is not None:
                    exact_mean, seeds = same
                    exact_pct = (f"{exact_mean * 100:.2f} (seed{'s' if len(seeds) > 1 else ''} "
                                 f"{', '.join(str(x) for x in seeds)})")
                # a ratio without its A/A verdict is not shown (docs/methods.md section 11)
                ratio = paired(timing, dataset, label, key.workers) or "not timed with A/A"
                out.append([key.suite, GRAPHS.get(dataset, dataset), method, str(key.workers),
                            "loopback" if net is None else f"emulated {net}", str(int(a["seeds"])),
                            _pct(a), exact_pct, _delta(a["test_mean"], exact_mean), ratio])
    return out


def table(page_dir: Path, root: Path = Path("."), keys=KEYS) -> str:
    """The headline block's markdown, its links relative to ``page_dir`` (both under ``root``)."""
    body = []
    for key in keys:
        page = root / page_path(key.suite)
        target = page if page.exists() else root / folders(key.suite)[0] / "tables.md"
        link = Path(os.path.relpath(target, root / page_dir)).as_posix()
        body += [[f"[{r[0]}]({link})", *r[1:]] for r in rows(key, root)]
    lines = ["*Generated by `python -m experiments.pages` from each suite's committed accuracy.csv "
             "(rebuilt from its runs by `./run_all.sh --check SUITE`): test accuracy at best "
             "validation, mean ± std over seeds; Δ = the method's mean − exact's (points, from the "
             "unrounded means), same suite, graph, M and network; a method run at fewer seeds than "
             "exact is compared with exact at its seeds. Per-epoch speedup: only where a speed "
             "suite timed the method under the timing protocol (" + ", ".join(
                 k.speed for k in keys if k.speed) + "; docs/methods.md section 11): exact's "
             "per-epoch time (a mean over whole periods) / the method's, the median of paired "
             "same-round ratios with its 95% interval and the verdict that interval supports "
             "beside the A/A noise floor ('noisy point' where the A/A check fails); elsewhere "
             "'not timed with A/A'. Per-epoch speed is not time to accuracy: a method that needs "
             "more epochs can be faster per epoch and slower to its target.*", "",
             "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines) + "\n"

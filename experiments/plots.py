"""Plots (PNG, matplotlib Agg) from complete runs, per dataset:

    python -m experiments.plots --suite quick --runs results/quick/runs --out plots/quick [--network 10gbit,5us]

<dataset>_val_vs_epoch.png, _val_vs_time.png, _val_vs_bytes.png (every method at the largest worker
count, mean over seeds), _speedup_vs_workers.png (per-epoch speedup over exact; modeled dashed) and
_bytes_per_epoch.png (stacked by category); _stale_error.png when some method records its halo
rows' staleness as error (``stale_err_l{l}`` columns: DIGEST's ||stale - fresh|| / ||fresh|| per
layer at each store sync); _pareto.png (best test accuracy within a budget of bytes / of time,
the front marked: experiments/pareto.py).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from . import cluster, pareto  # noqa: E402
from .config import dataset_slug  # noqa: E402
from .costmodel import Network, parse_network  # noqa: E402
from .load import Loaded, load  # noqa: E402
from .tables import CATEGORIES, MiB, epoch_time, run_frame  # noqa: E402


def curves(loaded: Loaded, dataset: str, workers: int) -> dict[str, pd.DataFrame]:
    """{label: mean over seeds per evaluated epoch of val_acc, wall_time, cum_bytes}."""
    out = {}
    for label in loaded.labels:
        recs = [r.metrics for r in loaded.records
                if r.dataset == dataset and r.label == label and r.workers == workers]
        if recs:
            m = pd.concat(recs)
            m = m[m["val_acc"].notna()]
            out[label] = m.groupby("epoch")[["val_acc", "wall_time", "cum_bytes"]].mean().reset_index()
    return out


def seed_labels(loaded: Loaded, dataset: str, workers: int, labels: list) -> tuple[dict, str]:
    """Legend names and the title's phrase for curves that are means over seeds. A suite may give
    the main methods more seeds than the rest (repro: 3 at M=4); then each label says its own."""
    seeds = {label: len({r.seed for r in loaded.records if r.dataset == dataset and
                         r.label == label and r.workers == workers}) for label in labels}
    counts = sorted(set(seeds.values()))
    if len(counts) <= 1:
        return {label: label for label in labels}, f"mean of {counts[0] if counts else 0} seed(s)"
    return ({label: f"{label} ({n} seed{'s' if n > 1 else ''})" for label, n in seeds.items()},
            "mean over each method's seeds")


def _color(loaded: Loaded, label: str):
    """tab10 for up to 10 methods; tab20 beyond, so that no two of a suite's methods share one."""
    cmap = plt.get_cmap("tab10" if len(loaded.labels) <= 10 else "tab20")
    return cmap(loaded.labels.index(label) % cmap.N)


def _save(fig, path: Path, written: list) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)


def convergence(loaded: Loaded, dataset: str, out: Path, written: list) -> None:
    workers = max(r.workers for r in loaded.records if r.dataset == dataset)
    cs = curves(loaded, dataset, workers)
    named, of = seed_labels(loaded, dataset, workers, list(cs))
    axes = [("epoch", "epoch", "val_vs_epoch", 1, False),
            ("wall_time", "training wall time (s, measured)", "val_vs_time", 1, False),
            ("cum_bytes", "cumulative bytes sent (MiB, log scale)", "val_vs_bytes", MiB, True)]
    for column, xlabel, name, scale, logx in axes:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for label, c in cs.items():
            x = c[column] / scale
            keep = x > 0 if logx else x == x
            ax.plot(x[keep], c["val_acc"][keep], label=named[label], color=_color(loaded, label),
                    lw=1.4)
        if logx:
            ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("validation accuracy")
        ax.set_title(f"{dataset}: validation accuracy vs {xlabel.split(' (')[0]}\n"
                     f"M={workers} workers, {of}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
        _save(fig, out / f"{dataset_slug(dataset)}_{name}.png", written)


def speedup_plot(loaded: Loaded, dataset: str, net: Network | None, out: Path, written: list) -> None:
    """Left: per-epoch speedup over exact at the same M (METHODS.md 7). Right: over exact at M=1."""
    sub = Loaded([r for r in loaded.records if r.dataset == dataset], [dataset], loaded.labels)
    et = epoch_time(run_frame(sub, net), net)
    one = et[(et.method == "exact") & (et.workers == 1)]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    kinds = [("epoch_ms", "measured", "o-", 1.0)] + ([(f"{net.column} epoch_ms", net.column, "s--", 0.7)] if net else [])
    for label, part in et.groupby("method", sort=False):
        part = part.sort_values("workers")
        for column, kind, style, alpha in kinds:
            same_m = part[column.replace("epoch_ms", "speedup_vs_exact")]
            axes[0].plot(part.workers, same_m, style, alpha=alpha, color=_color(loaded, label),
                         label=f"{label} ({kind})")
            if len(one):
                axes[1].plot(part.workers, one[column].iloc[0] / part[column], style, alpha=alpha,
                             color=_color(loaded, label), label=f"{label} ({kind})")
    titles = ["per-epoch speedup over exact at the same M", "per-epoch speedup over exact at M=1"]
    for ax, title in zip(axes, titles):
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xticks(sorted(set(et.workers)))
        ax.set_xlabel("workers M")
        ax.set_ylabel("speedup (x)")
        ax.set_title(title if ax is axes[0] or len(one) else title + " (no M=1 run)", fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, ncol=2 if net else 1)
    fig.suptitle(f"{dataset}: speedup vs worker count ({'measured; dashed = ' + net.column if net else 'measured'})")
    _save(fig, out / f"{dataset_slug(dataset)}_speedup_vs_workers.png", written)


def bytes_plot(loaded: Loaded, dataset: str, out: Path, written: list) -> None:
    frame = run_frame(Loaded([r for r in loaded.records if r.dataset == dataset], [dataset], loaded.labels))
    cats = [c for c in CATEGORIES if c in frame.columns]
    mean = frame.groupby(["method", "workers"], sort=False)[cats].mean() / MiB
    ms = sorted(w for w in set(frame.workers) if w > 1) or sorted(set(frame.workers))
    fig, axes = plt.subplots(1, len(ms), figsize=(4 + 3 * len(ms), 4.5), sharey=True, squeeze=False)
    for ax, w in zip(axes[0], ms):
        part = mean.xs(w, level="workers")
        bottom = pd.Series(0.0, index=part.index)
        for c in cats:
            ax.bar(part.index, part[c], bottom=bottom, label=CATEGORIES[c])
            bottom += part[c]
        ax.set_title(f"M={w} workers")
        ax.tick_params(axis="x", rotation=60, labelsize=8)
        ax.grid(alpha=0.3, axis="y")
    axes[0][0].set_ylabel("MiB sent per epoch (all workers)")
    axes[0][-1].legend(fontsize=8)
    fig.suptitle(f"{dataset}: bytes sent per epoch by category")
    _save(fig, out / f"{dataset_slug(dataset)}_bytes_per_epoch.png", written)


def stale_error_plot(loaded: Loaded, dataset: str, out: Path, written: list) -> None:
    """Relative error of the stale halo rows each layer used, at each store sync, over training:
    every method whose metrics have ``stale_err_l{l}`` columns, at the largest worker count among
    them, mean over seeds (and over the workers, as metrics.csv holds it). Nothing without them."""
    recs = [r for r in loaded.records if r.dataset == dataset
            and any(c.startswith("stale_err_l") for c in r.metrics.columns)]
    if not recs:
        return
    workers = max(r.workers for r in recs)
    recs = [r for r in recs if r.workers == workers]
    labels = [label for label in loaded.labels if any(r.label == label for r in recs)]
    named, of = seed_labels(loaded, dataset, workers, labels)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    styles = ["-", "--", ":", "-."]
    for label in labels:
        m = pd.concat([r.metrics for r in recs if r.label == label])
        cols = sorted((c for c in m.columns if c.startswith("stale_err_l")),
                      key=lambda c: int(c[len("stale_err_l"):]))
        for i, col in enumerate(cols):
            curve = m[["epoch", col]].dropna().groupby("epoch")[col].mean()
            if len(curve):
                ax.plot(curve.index, curve.to_numpy(), styles[i % len(styles)], marker=".",
                        color=_color(loaded, label), lw=1.2, ms=3,
                        label=f"{named[label]}, h^{col[len('stale_err_l'):]} halo rows")
    ax.set_yscale("log")
    ax.set_xlabel("epoch of the store sync")
    ax.set_ylabel("||stale - fresh|| / ||fresh|| of the halo rows used")
    ax.set_title(f"{dataset}: staleness as error at each store sync\nM={workers} workers, {of}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    _save(fig, out / f"{dataset_slug(dataset)}_stale_error.png", written)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.plots", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", required=True)
    p.add_argument("--suite", default=None)
    p.add_argument("--out", required=True)
    p.add_argument("--network", default=None, help="add modeled speedup lines, e.g. 10gbit,5us")
    args = p.parse_args(argv)
    net = parse_network(args.network) if args.network else None
    loaded = load(args.runs, args.suite)
    if not loaded.records:
        print(f"plots: no complete runs under {args.runs}", file=sys.stderr)
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    written: list = []
    all_emulated = all(r.summary.get("emulation") for r in loaded.records)
    for dataset in loaded.datasets:
        if not all_emulated:  # their time axes are measured (loopback) times
            convergence(loaded, dataset, out, written)
            speedup_plot(loaded, dataset, net, out, written)
        bytes_plot(loaded, dataset, out, written)
        stale_error_plot(loaded, dataset, out, written)
        pareto.plot(loaded, dataset, out, written)
        if cluster.emulated(loaded):  # --emulate-network sweep: speedup vs bandwidth, val vs time
            cluster.plots(loaded, dataset, out, written)
    print(f"plots: {len(written)} PNGs -> {out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Plots (PNG, matplotlib Agg) from complete runs, per dataset:

    python -m experiments.plots --suite quick --runs results/quick/runs --out plots/quick [--network 10gbit,5us]

<dataset>_val_vs_epoch.png, _val_vs_time.png, _val_vs_bytes.png (every method at the largest worker
count, mean over seeds), _speedup_vs_workers.png (per-epoch speedup over exact; modeled pale) and
_bytes_per_epoch.png (stacked by category); _stale_error.png when some method records its halo
rows' staleness as error (``stale_err_l{l}`` columns: DIGEST's ||stale - fresh|| / ||fresh|| per
layer at each store sync); _pareto.png (best test accuracy within a budget of bytes / of time,
the front marked: experiments/pareto.py, drawn by experiments/pareto_render.py).

Every figure that draws methods draws them in small multiples of at most six a panel, each method
in the colour and marker it has in every plot (experiments/render.py).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from . import cluster, pareto_render
from .suites.suite import dataset_slug
from .costmodel import Network, parse_network
from .suites.load import Loaded, load
from .render import (curves, grid, markevery, methods_of, panel_grid, panels, pyplot, save,
                     seed_labels, style, titles)
from .tables import CATEGORIES, MiB, epoch_time, run_frame


def convergence(loaded: Loaded, dataset: str, out: Path, written: list) -> None:
    """Validation accuracy vs epoch, vs measured time, vs bytes: one figure each, at the largest
    worker count, mean over seeds; small multiples of at most render.MAX_SERIES methods."""
    workers = max(r.workers for r in loaded.records if r.dataset == dataset)
    cs = curves(loaded, dataset, workers)
    named, of = seed_labels(loaded, dataset, workers, list(cs))
    methods = methods_of(loaded)
    groups = panels(list(cs), methods)
    axes = [("epoch", "epoch", "val_vs_epoch", 1, False),
            ("wall_time", "training wall time (s, measured)", "val_vs_time", 1, False),
            ("cum_bytes", "cumulative bytes sent (MiB, log scale)", "val_vs_bytes", MiB, True)]
    for column, xlabel, name, scale, logx in axes:
        fig, panel_axes = panel_grid(len(groups), width=7 if len(groups) == 1 else 6.6, share=True)
        for ax, panel in zip(panel_axes, groups):
            for k, label in enumerate(panel.labels):
                c = cs[label]
                x = c[column] / scale
                keep = x > 0 if logx else x == x
                ax.plot(x[keep], c["val_acc"][keep], label=named[label], lw=1.4, ms=5,
                        markevery=markevery(int(keep.sum()), k, len(panel.labels)),
                        **style(label, panel.labels, methods))
            if logx:
                ax.set_xscale("log")
            ax.set_xlabel(xlabel)
            ax.set_ylabel("validation accuracy")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8, loc="lower right")
        titles(fig, panel_axes, groups, f"{dataset}: validation accuracy vs "
               f"{xlabel.split(' (')[0]}\nM={workers} workers, {of}")
        save(fig, out / f"{dataset_slug(dataset)}_{name}.png", written)


def speedup_plot(loaded: Loaded, dataset: str, net: Network | None, out: Path, written: list) -> None:
    """Left: per-epoch speedup over exact at the same M (docs/methods.md section 7). Right: over
    exact at M=1. A row per group of methods (render.panels)."""
    sub = Loaded([r for r in loaded.records if r.dataset == dataset], [dataset], loaded.labels)
    et = epoch_time(run_frame(sub, net), net)
    one = et[(et.method == "exact") & (et.workers == 1)]
    methods = methods_of(loaded)
    groups = panels(list(dict.fromkeys(et.method)), methods)
    fig, axes = grid(len(groups), 2, 6, 4.8)
    # modeled: the measured line's style, thin, pale and hollow (line styles tell variants apart)
    pale = {"lw": 0.9, "alpha": 0.55, "mfc": "white"}
    kinds = [("epoch_ms", "measured", {})] + ([(f"{net.column} epoch_ms", net.column, pale)]
                                              if net else [])
    names = ["per-epoch speedup over exact at the same M", "per-epoch speedup over exact at M=1"]
    for row, panel in zip(axes, groups):
        for label in panel.labels:
            part = et[et.method == label].sort_values("workers")
            st = style(label, panel.labels, methods)
            for column, kind, look in kinds:  # the legend names the measured lines only
                same_m = part[column.replace("epoch_ms", "speedup_vs_exact")]
                name = label if kind == "measured" else "_nolegend_"
                row[0].plot(part.workers, same_m, label=name, **{**st, **look})
                if len(one):
                    row[1].plot(part.workers, one[column].iloc[0] / part[column], label=name,
                                **{**st, **look})
        for ax, title in zip(row, names):
            ax.axhline(1.0, color="grey", lw=0.8)
            ax.set_xticks(sorted(set(et.workers)))
            ax.set_xlabel("workers M")
            ax.set_ylabel("speedup (x)")
            title = title if ax is row[0] or len(one) else title + " (no M=1 run)"
            ax.set_title(title + (f": {panel.title}" if len(groups) > 1 else ""), fontsize=10)
            ax.grid(alpha=0.3)
        row[0].legend(fontsize=7)
    fig.suptitle(f"{dataset}: speedup vs worker count "
                 f"({'measured; pale = ' + net.column if net else 'measured'})")
    save(fig, out / f"{dataset_slug(dataset)}_speedup_vs_workers.png", written)


def bytes_plot(loaded: Loaded, dataset: str, out: Path, written: list) -> None:
    frame = run_frame(Loaded([r for r in loaded.records if r.dataset == dataset], [dataset], loaded.labels))
    cats = [c for c in CATEGORIES if c in frame.columns]
    frame = frame.fillna({c: 0 for c in cats})  # a category some runs lack: 0 bytes there
    mean = frame.groupby(["method", "workers"], sort=False)[cats].mean() / MiB
    ms = sorted(w for w in set(frame.workers) if w > 1) or sorted(set(frame.workers))
    fig, axes = pyplot().subplots(1, len(ms), figsize=(4 + 3 * len(ms), 4.5), sharey=True,
                                  squeeze=False)
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
    save(fig, out / f"{dataset_slug(dataset)}_bytes_per_epoch.png", written)


def stale_error_plot(loaded: Loaded, dataset: str, out: Path, written: list) -> None:
    """Relative error of the stale halo rows each layer used, at each store sync, over training:
    every method whose metrics have ``stale_err_l{l}`` columns, at the largest worker count among
    them, mean over seeds (and over the workers, as metrics.csv holds it); a column of panels per
    layer, a row per group of methods. Nothing without them."""
    recs = [r for r in loaded.records if r.dataset == dataset
            and any(c.startswith("stale_err_l") for c in r.metrics.columns)]
    if not recs:
        return
    workers = max(r.workers for r in recs)
    recs = [r for r in recs if r.workers == workers]
    labels = [label for label in loaded.labels if any(r.label == label for r in recs)]
    named, of = seed_labels(loaded, dataset, workers, labels)
    cols = sorted({c for r in recs for c in r.metrics.columns if c.startswith("stale_err_l")},
                  key=lambda c: int(c[len("stale_err_l"):]))
    methods = methods_of(loaded)
    groups = panels(labels, methods)
    fig, axes = grid(len(groups), len(cols), 6.2, 4.4)
    for row, panel in zip(axes, groups):
        for ax, col in zip(row, cols):
            for k, label in enumerate(panel.labels):
                m = pd.concat([r.metrics for r in recs if r.label == label])
                if col not in m.columns:
                    continue
                curve = m[["epoch", col]].dropna().groupby("epoch")[col].mean()
                if len(curve):  # a marker at each of up to 20 syncs, then spread out
                    ax.plot(curve.index, curve.to_numpy(), lw=1.2, ms=4, label=named[label],
                            markevery=markevery(len(curve), k, len(panel.labels), 20),
                            **style(label, panel.labels, methods))
            ax.set_yscale("log")
            ax.set_xlabel("epoch of the store sync")
            ax.set_ylabel("||stale - fresh|| / ||fresh|| of the halo rows used")
            layer = f"h^{col[len('stale_err_l'):]} halo rows"
            ax.set_title(layer + (f": {panel.title}" if len(groups) > 1 else ""), fontsize=10)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle(f"{dataset}: staleness as error at each store sync\nM={workers} workers, {of}")
    save(fig, out / f"{dataset_slug(dataset)}_stale_error.png", written)


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
        pareto_render.plot(loaded, dataset, out, written)
        if cluster.emulated(loaded):  # --emulate-network sweep: speedup vs bandwidth, val vs time
            cluster.plots(loaded, dataset, out, written)
    print(f"plots: {len(written)} PNGs -> {out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())

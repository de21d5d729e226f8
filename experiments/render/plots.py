"""The figures of ``python -m experiments.plots``, per dataset: validation accuracy against epoch,
time and bytes; per-epoch speedup against the worker count; bytes per epoch by category; the stale
halo rows' error; then the Pareto and emulated-cluster figures (experiments/render/pareto.py,
experiments/render/cluster.py): ``draw`` draws every one a suite's runs give."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from digest.training import record

from ..analysis.cluster import emulated
from ..analysis.curves import curves, stale_errors
from ..analysis.tables import CATEGORIES, MiB, bytes_by_category, epoch_time, run_frame
from ..analysis.costmodel import Network
from ..suites.load import Loaded
from ..suites.suite import dataset_slug
from . import cluster, pareto
from .figures import (grid, markevery, methods_of, panel_grid, panels, pyplot, save, seed_labels,
                      style, titles)


def draw(loaded: Loaded, out: Path, net: Network | None = None) -> list:
    """Every figure of ``loaded``'s runs into ``out``; the paths written."""
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
        if emulated(loaded):  # --emulate-network sweep: speedup vs bandwidth, val vs time
            cluster.plots(loaded, dataset, out, written)
    return written


def convergence(loaded: Loaded, dataset: str, out: Path, written: list) -> None:
    """Validation accuracy vs epoch, vs measured time, vs bytes: one figure each, at the largest
    worker count, mean over seeds; small multiples of at most figures.MAX_SERIES methods."""
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
    exact at M=1. A row per group of methods (figures.panels)."""
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
    mean = bytes_by_category(run_frame(Loaded([r for r in loaded.records if r.dataset == dataset],
                                              [dataset], loaded.labels)))
    cats = list(mean.columns)
    workers = set(mean.index.get_level_values("workers"))
    ms = sorted(w for w in workers if w > 1) or sorted(workers)
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
    found = stale_errors(loaded, dataset)
    if found is None:
        return
    workers, cols, by_label = found
    labels = list(by_label)
    named, of = seed_labels(loaded, dataset, workers, labels)
    methods = methods_of(loaded)
    groups = panels(labels, methods)
    fig, axes = grid(len(groups), len(cols), 6.2, 4.4)
    for row, panel in zip(axes, groups):
        for ax, col in zip(row, cols):
            for k, label in enumerate(panel.labels):
                curve = by_label[label].get(col)
                if curve is not None and len(curve):  # a marker at each of up to 20 syncs, then spread out
                    ax.plot(curve.index, curve.to_numpy(), lw=1.2, ms=4, label=named[label],
                            markevery=markevery(len(curve), k, len(panel.labels), 20),
                            **style(label, panel.labels, methods))
            ax.set_yscale("log")
            ax.set_xlabel("epoch of the store sync")
            ax.set_ylabel("||stale - fresh|| / ||fresh|| of the halo rows used")
            layer = f"h^{record.layer_of(col, record.ERRORS[0])} halo rows"
            ax.set_title(layer + (f": {panel.title}" if len(groups) > 1 else ""), fontsize=10)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle(f"{dataset}: staleness as error at each store sync\nM={workers} workers, {of}")
    save(fig, out / f"{dataset_slug(dataset)}_stale_error.png", written)


"""The Pareto summary rendered (its computation and its rules:
experiments/analysis/pareto.py): tables.md's section and
plots/<dataset>_pareto.png.

    plots/<dataset>_pareto.png   accuracy within budget vs budget (log x): a column per axis,
                                 a row per group of methods (figures.panels)
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis.pareto import RULES, MiB, axis_curves, fronts, groups, pareto_table
from ..suites.load import Loaded
from ..suites.suite import dataset_slug
from .figures import grid, methods_of, panels, save, style
from .markdown import md_table


def seeds_text(n: int) -> str:
    return f"{n} seed{'s' * (n > 1)}"


def show_budget(budget: float, unit: str, with_unit: bool = True) -> str:
    """A budget as the tables show it: MiB for bytes, s for time, 3 significant digits."""
    text = f"{budget / MiB:.3g}" if unit == "B" else f"{budget:.3g}"
    return text + (" MiB" if unit == "B" else " s") * with_unit


def reading(table: pd.DataFrame) -> list[str]:
    """One line per dataset and axis: each method on the front and at which budgets, e.g.
    ``CS, bytes: varco-fixed-32 at <= 1.2, 3.5 MiB; digest-I10 at <= 10.3, 30.1, 88 MiB``."""
    lines = []
    for dataset, axes in fronts(table).items():
        for axis, points in axes.items():
            who: dict = {}
            for budget, unit, methods in points:
                for m in methods:
                    who.setdefault(m, []).append(show_budget(budget, unit, with_unit=False))
            suffix = " MiB" if points[0][1] == "B" else " s"
            text = "; ".join(f"{m} at <= {', '.join(bs)}{suffix}" for m, bs in who.items())
            lines.append(f"{dataset}, {axis}: {text or 'no method evaluated within any budget'}")
    return lines


def pct(v) -> str:
    return "–" if v is None or v != v else f"{100 * v:.2f}"


def section(table: pd.DataFrame, number: int) -> str:
    """tables.md's Pareto section: the rules, then per dataset and axis, budgets down, methods
    across; the methods on the front in bold and listed."""
    out = [f"\n## {number}. Pareto: best test accuracy (%) within a budget of bytes or of time\n\n",
           RULES]
    if table.empty:
        return "".join(out) + "\nNo run to summarise.\n"
    for (dataset, w, axis), part in table.groupby(["dataset", "workers", "axis"], sort=False):
        methods = list(dict.fromkeys(part["method"]))
        unit = part["unit"].iloc[0]
        rows = []
        for budget, b in part.groupby("budget", sort=False):
            cells = {}
            for r in b.itertuples():
                c = pct(r.test_acc)
                if c == "–" and not str(r.seeds_in_budget).startswith("0/"):
                    c = f"– ({r.seeds_in_budget} seeds)"
                elif c != "–" and not r.ranked:
                    c = f"{c} ({seeds_text(r.seeds)})"
                cells[r.method] = f"**{c}**" if r.on_front else c
            front = [r.method for r in b.itertuples() if r.on_front]
            rows.append([f"<= {show_budget(budget, unit)}", *(cells.get(m, "") for m in methods),
                         ", ".join(front) or "–"])
        out.append(f"\n### {dataset}, M={w}: {axis}\n\n")
        out.append(md_table(["budget", *methods, "front"], rows))
    out.append("\nReading (which method is on the front at which budgets):\n\n")
    out += [f"- {line}\n" for line in reading(table)]
    return "".join(out)


def _log_budgets(ax, budgets: np.ndarray) -> None:
    """Log x with plain numbers; 2 and 5 x 10^k labelled too over < 2 decades."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log")
    fmt = FuncFormatter(lambda v, _: f"{v:.3g}")
    ax.xaxis.set_major_formatter(fmt)
    narrow = budgets[-1] < 100 * budgets[0]
    ax.xaxis.set_minor_locator(LogLocator(subs=(2, 5) if narrow else "auto"))
    ax.xaxis.set_minor_formatter(fmt if narrow else NullFormatter())


def plot(loaded: Loaded, dataset: str, out: Path, written: list, workers="max",
         time_column: str | None = None) -> None:
    """plots/<dataset>_pareto.png: accuracy within budget vs budget (log x), a column of panels
    per axis (bytes, measured time, emulated times), a row per group of methods; a step line per
    method, exact at every evaluated epoch's cumulative value (from the first evaluation of any
    run to the largest total); the table's budgets as the method's markers, filled and ringed in
    black where the method is on the front, hollow where not; the front (best of the ranked
    methods at every budget, all groups) as a grey band; a method with fewer seeds than the most
    (not ranked: RULES) thinner and paler."""
    sub = Loaded([r for r in loaded.records if r.dataset == dataset], [dataset], loaded.labels)
    gs = groups(sub, workers, time_column)
    if not gs:
        return
    table = pareto_table(sub, workers, time_column)
    methods = methods_of(loaded)
    rows = [panels(list(by_label), methods) for _, _, by_label in gs.values()]
    fig, axes = grid(max(map(len, rows)), len(gs), 6.2, 4.8)
    for j, (((_, w, axis), (column, unit, by_label)), ps) in enumerate(zip(gs.items(), rows)):
        curves = axis_curves(by_label, column)
        part = table[(table.workers == w) & (table.axis == axis)]
        for i, ax in enumerate(axes[:, j]):
            if i >= len(ps):
                ax.set_visible(False)
                continue
            _panel(ax, ps[i], len(ps) > 1, by_label, curves, part, MiB if unit == "B" else 1.0,
                   methods)
            ax.set_xlabel(f"budget: {axis} ({'MiB' if unit == 'B' else 's'}, log scale)")
            ax.set_title(f"{axis}, M={w}" + (f": {ps[i].title}" if len(ps) > 1 else ""),
                         fontsize=10)
    fig.suptitle(f"{dataset}: best test accuracy within a budget (mean over seeds; markers: the "
                 "table's budgets, filled = on the front)", fontsize=10)
    save(fig, out / f"{dataset_slug(dataset)}_pareto.png", written)


def _panel(ax, panel, many: bool, by_label: dict, curves: tuple, part: pd.DataFrame,
           scale: float, methods: dict) -> None:
    """One panel: each of the panel's methods' step line, the front's band, the table's budgets
    as markers (filled and ringed where on the front), the legend."""
    from matplotlib.lines import Line2D

    budgets, ranked, ys, envelope = curves
    handles = []
    for label in panel.labels:
        st = style(label, panel.labels, methods)
        name = label if label in ranked else \
            f"{label} ({seeds_text(len(by_label[label]))}, not ranked)"
        line = {"color": st["color"], "ls": st["ls"], "lw": 1.3 if label in ranked else 1.0,
                "alpha": 1.0 if label in ranked else 0.6}
        ax.plot(budgets / scale, 100 * ys[label], drawstyle="steps-post", **line)
        handles.append(Line2D([], [], **{**st, **line}, label=name))
    ax.plot(budgets / scale, 100 * envelope, drawstyle="steps-post", lw=6, color="grey",
            alpha=0.25, zorder=0)
    band = "front (best of the ranked" + (", every panel's)" if many else ")")
    handles.append(Line2D([], [], lw=6, color="grey", alpha=0.25, label=band))
    for r in part[part.method.isin(panel.labels)].itertuples():
        if r.test_acc == r.test_acc:
            st = style(r.method, panel.labels, methods)
            ax.plot(r.budget / scale, 100 * r.test_acc, st["marker"],
                    ms=8 if r.on_front else 6,
                    mfc=st["color"] if r.on_front else "none",
                    mec="black" if r.on_front else st["color"], mew=1.5, zorder=3)
    if (budgets > 0).all():
        _log_budgets(ax, budgets)
    ax.set_ylabel("test accuracy (%) at best val within budget")
    ax.grid(alpha=0.3, which="both")
    ax.legend(handles=handles, fontsize=7, loc="lower right")

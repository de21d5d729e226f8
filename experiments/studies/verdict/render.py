"""The verdict's table, sentence and figure (the numbers: experiments/studies/verdict/analysis.py): per graph, one
row a method (accuracy with its difference from exact, epochs to target, bytes per epoch, speedup
to accuracy over exact at each bandwidth with its interval, pairs and verdict), one generated
sentence naming the fastest method within CLOSE points of exact at each clean bandwidth whose
interval clears the A/A interval (none at a point that is not clean), and one figure of speedup
to accuracy against bandwidth (log axis, intervals drawn, at most MAX_SERIES series a panel)."""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from experiments.render.figures import panel_grid, panels, save, style, titles
from experiments.render.markdown import md_table
from experiments.analysis.paired import AA_BAND, MIN_PAIRS, NOT_CLEAN, few_pairs
from experiments.analysis.convergence import CONVERGED, FALLBACK, Q
from .analysis import (CLOSE, GraphVerdict, clean_at, fastest, rivals, winner)
from .screen import check_lines, points_lines, q_of

RIVALS = 3  # close rivals named in a sentence; the rest counted


def _iv(row) -> str:
    """A speedup cell: '1.73x [1.56, 1.99], faster; 3 pairs (< 6)' (an asynchronous method's
    '(end to end)' after the interval); 'reference' on exact's row; at a point that is not clean,
    'A/A not clean: no verdict' in place of the verdict; the note where there is no speedup."""
    if row.method == "exact":
        return "reference"
    if math.isnan(row.speedup):
        return row.note + ("" if row.clean else " (A/A not clean)")
    text = (f"{row.speedup:.2f}x [{row.lo:.2f}, {row.hi:.2f}]"
            + (f" ({row.note})" if row.note else ""))
    few = few_pairs(row.pairs, short=True)
    return f"{text}, {row.verdict}" + (f"; {few}" if few else "")


def _acc(r) -> str:
    std = "" if math.isnan(r.test_std) else f" ± {r.test_std:.2f}"
    if r.method == "exact":
        return f"{r.test_mean:.2f}{std}", "reference"
    return f"{r.test_mean:.2f}{std}", f"{r.delta:+.2f} [{r.delta_lo:+.2f}, {r.delta_hi:+.2f}]"


def _label(r) -> str:
    """The method's cell; SAT's says how often its gate let the prediction through, and where
    never, that the row is DIGEST's training plus the predictor's cost."""
    if r.predicted is None or (isinstance(r.predicted, float) and math.isnan(r.predicted)):
        return r.method
    if r.predicted == 0:
        return (f"{r.method} (prediction read at 0% of steps: DIGEST's training plus the "
                "predictor's cost)")
    return f"{r.method} (prediction read at {r.predicted:.0%} of steps)"


def table(acc: pd.DataFrame, speed: pd.DataFrame, bandwidths: list) -> str:
    """The graph's table: one row a method."""
    rows = []
    for r in acc.itertuples():
        a, d = _acc(r)
        cells = [_iv(x) for x in speed[speed.method == r.method].set_index("bandwidth")
                 .reindex(bandwidths).reset_index().itertuples()]
        epochs = "not reached" if math.isnan(r.epochs) else f"{r.epochs:.1f}"
        rows.append([_label(r), a, d, f"{epochs} ({r.reached})", f"{r.mib:.2f}", *cells])
    return md_table(["method", "test acc. %", "Δ vs exact [95%]",
                     f"epochs to {q_of(acc):g} (reached)",
                     "MiB/epoch", *[f"speedup to accuracy @ {bw} [95%]" for bw in bandwidths]],
                    rows)


def sentence(graph: str, acc: pd.DataFrame, speed: pd.DataFrame, bandwidths: list) -> str:
    """One generated sentence: at each bandwidth, the fastest method to the target among those
    within CLOSE points of exact's accuracy whose interval clears the A/A interval (``winner``),
    its speedup over exact with the interval, and the close methods whose intervals reach its
    lower end (``rivals``); where none clears it, the fastest point estimate, said not to be a
    measured gain; at a point that is not clean, no name at all; and, where the named intervals
    rest on fewer than MIN_PAIRS pairs, that too."""
    parts, few = [], set()
    for bw in bandwidths:
        ref = speed[(speed.method == "exact") & (speed.bandwidth == bw)]
        if not clean_at(speed, bw):
            aa = ref.iloc[0] if len(ref) else None
            floor = ("" if aa is None or math.isnan(aa.aa_lo) else
                     f" [{aa.aa_lo:.2f}, {aa.aa_hi:.2f}]")
            parts.append(f"at {bw}, no winner named (A/A interval{floor} not inside "
                         f"[{AA_BAND[0]:g}, {AA_BAND[1]:g}])")
            continue
        best = winner(acc, speed, bw) or fastest(acc, speed, bw)
        if best is None:
            parts.append(f"at {bw}, none")
            continue
        r = speed[(speed.method == best) & (speed.bandwidth == bw)].iloc[0]
        gain = f"{r.speedup:.2f}x" + ("" if math.isnan(r.lo) else f" [{r.lo:.2f}, {r.hi:.2f}]")
        if r.verdict != "faster":
            parts.append(f"at {bw}, none measurably faster than exact (the fastest, {best}, "
                         f"{gain}, does not clear the A/A interval)")
            continue
        few |= {int(r.pairs)} if few_pairs(r.pairs) else set()
        near = rivals(acc, speed, bw, best)
        if len(near):
            gain += "; not measurably ahead of " + ", ".join(
                f"{x.method} ({x.speedup:.2f}x)" for x in near.head(RIVALS).itertuples()) + (
                f" and {len(near) - RIVALS} more" if len(near) > RIVALS else "")
        parts.append(f"at {bw}, {best} ({gain})")
    pairs = (f" The intervals named rest on {' or '.join(map(str, sorted(few)))} pairs, below "
             f"the {MIN_PAIRS} the protocol asks." if few else "")
    return (f"On {graph}, the first to {q_of(acc):g} of exact's best validation accuracy "
            f"among the methods within {CLOSE} points of exact's test accuracy, with its speedup "
            "over exact where its interval clears the A/A interval: " + "; ".join(parts) + "."
            + pairs)


def aa_line(speed: pd.DataFrame, bandwidths: list) -> str:
    """The noise floor of each bandwidth: exact's A/A twin over exact per epoch (mean over pairs,
    interval, pairs), at how many bandwidths the point is clean (its interval inside AA_BAND),
    and which are not (their cells say so and no winner is named there)."""
    ref = speed[speed.method == "exact"].set_index("bandwidth").reindex(bandwidths)
    dirty = [bw for bw, r in ref.iterrows() if not r.clean]
    pairs = sorted({int(p) for p in ref.aa_pairs})
    return (f"A/A check (exact's twin over exact per epoch, mean over "
            f"{' or '.join(map(str, pairs))} pairs [95%]): "
            + ", ".join(f"{bw} {r.aa:.2f}x [{r.aa_lo:.2f}, {r.aa_hi:.2f}]" for bw, r in ref.iterrows())
            + f"; clean (the interval inside [{AA_BAND[0]:g}, {AA_BAND[1]:g}]) at "
            f"{len(bandwidths) - len(dirty)} of {len(bandwidths)} bandwidths" + (
                f"; at {', '.join(dirty)} the two identical runs are not shown equivalent, so "
                f"that point's cells say \"{NOT_CLEAN}\" and no winner is named there."
                if dirty else ".")
            + (f" Fewer than the {MIN_PAIRS} pairs the protocol asks: these intervals hold "
               "less than 95%." if pairs and min(pairs) < MIN_PAIRS else ""))


def ceilings(speed: pd.DataFrame, bandwidths: list) -> str:
    """Per method and bandwidth, the per-epoch speedup as a fraction of the ceiling (exact over
    partition-based per epoch at that point, section 13)."""
    rows = []
    for method, part in speed.groupby("method", sort=False):
        part = part.set_index("bandwidth").reindex(bandwidths)
        rows.append([method, *(f"{p:.2f}x / {c:.2f}x = {p / c:.0%}" if not (math.isnan(p) or
                               math.isnan(c)) else "n/a" for p, c in zip(part.per_epoch, part.ceiling))])
    return md_table(["method", *[f"per epoch / ceiling @ {bw}" for bw in bandwidths]], rows)


def figure_panels(methods: list) -> list:
    """The figure's panels: ``methods`` (exact left out: it is the dotted line at 1) grouped as
    every plot groups them (figures.panels: at most MAX_SERIES a panel, no two families of one
    colour in a panel)."""
    return panels([m for m in methods if m != "exact"])


def figure(graph: str, speed: pd.DataFrame, points: pd.DataFrame, out: Path, written: list,
           q: float = Q) -> None:
    """Speedup to accuracy (target ``q`` x exact's) against what decides each point, exact's
    share of its epoch in collectives (``points``; the bandwidth a second label under it),
    intervals as error bars, the methods in panels (at most MAX_SERIES each, no two families of
    one colour) on one shared scale."""
    speed = speed[speed.speedup.notna()]
    groups = figure_panels(list(dict.fromkeys(speed.method)))
    if not groups:
        return
    share = points.set_index("bandwidth").exact_comm_share
    fig, axes = panel_grid(len(groups), width=6.0, height=4.2, cols=min(3, len(groups)),
                           share=True)
    for ax, panel in zip(axes, groups):
        for m in panel.labels:
            p = speed[speed.method == m].assign(x=lambda f: f.bandwidth.map(share))
            p = p.sort_values("x")
            ax.errorbar(p.x, p.speedup, yerr=[p.speedup - p.lo, p.hi - p.speedup],
                        capsize=3, label=m, **style(m, panel.labels))
        ax.axhline(1.0, color="#777777", lw=0.8, ls=":")
        ax.set_xscale("logit")  # shares near 100% spread out: the ratio comm / compute decides
        ax.set_xticks(share.values, [f"{100 * v:.0f}% ({bw})" for bw, v in share.items()],
                      fontsize=7, rotation=90)
        ax.minorticks_off()
        ax.set_xlabel("exact's share of its epoch in collectives (emulated bandwidth)")
        ax.set_ylabel(f"speedup to {q:g} x exact's accuracy")
        ax.legend(fontsize=7)
    titles(fig, axes, groups, f"{graph}: time to accuracy over exact's, by exact's "
                              "communication share")
    save(fig, out / figure_name(graph), written)


def figure_name(graph: str) -> str:
    return f"{graph}_speedup_to_accuracy.png"


def missing_section(graph: str, counts: list[str]) -> list[str]:
    """A graph whose suites are not complete yet: what ran so far."""
    return [f"## {graph}", "",
            "Not yet measured (complete runs so far: " + "; ".join(counts) + ").", ""]


def _converged(acc: pd.DataFrame) -> str:
    """Whether exact converged in the convergence runs (docs/methods.md section 12); where the
    target is not Q (exact itself misses it at some seed), why."""
    ex = acc[acc.method == "exact"].iloc[0]
    text = (f"Exact converged (best-validation epoch <= {CONVERGED} x the budget at every seed): "
            f"{'yes' if ex.converged else 'NO: a comparison of convergence speed'}.")
    if ex.q != Q:
        vals, mean = [100 * v for v in ex.best_val], 100 * sum(ex.best_val) / len(ex.best_val)
        text += (f" The target here is {ex.q:g}, not {Q:g}, x exact's mean best validation "
                 f"accuracy: exact itself misses {Q:g} x {mean:.2f} = {Q * mean:.2f}% at a seed "
                 f"(its best validation accuracy by seed: {', '.join(f'{v:.2f}' for v in vals)}"
                 "%), so no method's time to that target can be divided by exact's.")
    return text


def partial_section(graph: str, acc: pd.DataFrame, speed_count: str) -> list[str]:
    """A graph whose convergence runs are complete and whose speed runs are not: its accuracy,
    epochs to target and bytes, and what the speedups still wait for."""
    return [f"## {graph}", "",
            f"Speedups to accuracy not yet measured (complete speed runs so far: {speed_count}); "
            "accuracy, epochs to target and bytes from the complete convergence runs:", "",
            _converged(acc), "", table(acc, pd.DataFrame(columns=["method", "bandwidth"]), []), ""]


def graph_section(graph: str, v: GraphVerdict, e2e: str | None,
                  waiting: list | None = None, to_target: str | None = None) -> list[str]:
    """The markdown lines of one graph: the sentence, exact's convergence, the table, the
    speedups against their ceilings and, with end-to-end runs (suite ``e2e``), the check;
    ``waiting``: bandwidths whose speed runs are not complete yet (left out of every number)."""
    later = ([f"Speed runs not complete yet at {', '.join(waiting)}: those bandwidths are left "
              "out until their part is run.", ""] if waiting else [])
    lines = [f"## {graph}", "", *later, sentence(graph, v.acc, v.speed, v.bandwidths), "",
             _converged(v.acc),
             "", table(v.acc, v.speed, v.bandwidths), "",
             *points_lines(v.points),
             aa_line(v.speed, v.bandwidths), "",
             "Per-epoch speedup as a fraction of its ceiling (exact over partition-based per "
             "epoch, section 13):", "", ceilings(v.speed, v.bandwidths)]
    if v.error is not None:
        lines += ["", *decomposition(v.error, e2e)]
    if v.check is not None:
        lines += ["", *check_lines(v.check, to_target or "")]
    return lines + [""]


def decomposition(error: pd.DataFrame, e2e: str) -> list[str]:
    """The decomposition against end-to-end runs (suite ``e2e``): per run, the time to target
    measured on the training clock and the decomposition's, their error, and the largest."""
    if error.empty:
        return [f"The decomposition against end-to-end runs ({e2e}): no run yet at a method and "
                "bandwidth timed here."]
    worst = error.error_pct.abs().max()
    return [f"The decomposition against end-to-end runs ({e2e}): time to target measured on the "
            "training clock of a run behind the link, against (its seed's epochs to target from "
            "the convergence runs) x (per-epoch time from the speed runs); largest error "
            f"{worst:.1f}% over {len(error)} runs at {error.bandwidth.nunique()} bandwidth(s).", "",
            md_table(["method", "bandwidth", "seed", "epochs to target (end to end / convergence)",
                      "measured s", "decomposition s", "error"],
                     [[r.method, r.bandwidth, r.seed, f"{r.epochs} / {r.epochs_converge}",
                       f"{r.measured_s:.1f}", f"{r.predicted_s:.1f}", f"{r.error_pct:+.1f}%"]
                      for r in error.itertuples()])]


def page(sections: list[str]) -> str:
    """results/verdict/README.md: what it is, then each graph's section."""
    lines = ["# verdict: which method reaches exact's accuracy first, on which network", "",
             "*Generated by `python -m experiments.studies.verdict` from the benchmark's committed "
             "runs (docs/methods.md section 12; do not edit).* Speedup to accuracy = exact's time "
             f"to {Q:g} x its mean best validation accuracy (on a graph where exact itself misses "
             f"that at a seed, {FALLBACK[0]:g} x, as its section says) / the method's, by the "
             "decomposition (epochs to target from the convergence runs x per-epoch time at the "
             "bandwidth, a mean over whole periods, from the speed runs; an asynchronous method's "
             "own time measured end to end behind the link, marked so); the per-epoch part is a "
             "mean over pairs (a pair: one round at one seed); 95% interval: seeds and pairs "
             "resampled, its percentiles widened for few of either (docs/methods.md section 11), "
             f"and a cell from fewer than {MIN_PAIRS} pairs says so ('3 pairs (< {MIN_PAIRS})': "
             "its interval holds less than 95%). Each cell is judged against "
             "exact's A/A twin at its bandwidth: 'faster' / 'slower' where its interval lies "
             "wholly above / below the A/A interval, none where that point is not clean (its A/A "
             f"interval not inside [{AA_BAND[0]:g}, {AA_BAND[1]:g}]). The benchmark's suites "
             "(bench_converge_*, bench_speed_*; docs/reproducing.md) run in parts; a graph without complete runs says what is "
             "missing. The third graph, synthetic-h07, is a draw of the generator (20,000 nodes, 4 "
             "classes, edge homophily 0.7, feature signal 0.1; METIS cuts 29% of its edges at 4 "
             "parts) on which partition-based training loses 2.29 points once exact has converged "
             "(results/partition_loss_converged); on the embedded synthetic default, the earlier "
             "candidate, it does not at 200 epochs (results/bench_converge_synthetic), and the "
             "calibrated arxiv-like graph needs more than 500 epochs to converge at 3.9 s an "
             "epoch here.", ""]
    return "\n".join(lines + sections).rstrip("\n") + "\n"
